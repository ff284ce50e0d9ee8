//! `ember sweep run`: the sweep's trials (or one unit's, with `--unit`) as `ember train`
//! processes, `--parallel N` at a time, sharing the cores; a unit whose trials differ only in
//! seed and learning rate trains as one process of replicas (`ember sweep unit`). Each trial
//! writes an ordinary run folder under the sweep folder. Re-running skips the trials that ended, resumes those with a
//! checkpoint, and leaves alone those another process holds (the run lock), so a Slurm task that
//! lands on the same folder twice is safe. A trial that fails is recorded, and the sweep goes on.

use super::folder::{BASE, SweepDir, TrialState};
use super::plan::{Plan, Trial};
use crate::console::{Console, duration};
use crate::device::DeviceRequest;
use crate::error::{EmberError, Result};
use crate::fs::describe_io;
use crate::input_err;
use crate::train::signals::StopSignal;
use std::collections::VecDeque;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The options of `ember sweep run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// The sweep folder (default: runs/<sweep>-<timestamp>); give the same one to resume.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Run only this unit (0..U-1, as `ember sweep plan` lists them): one Slurm array task.
    #[arg(long, value_name = "N")]
    pub unit: Option<usize>,
    /// Trials trained at once, as separate processes.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub parallel: usize,
    /// auto, cpu, cuda[:N] or wgpu[:N], for every trial (see ember info).
    #[arg(long, default_value = "auto")]
    pub device: DeviceRequest,
    /// Override a field of every trial (KEY=VALUE, repeatable), e.g. `--set epochs=3`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Train every trial as its own process, even where a unit's trials could train as
    /// replicas of one batched model.
    #[arg(long)]
    pub processes: bool,
    /// Also log every trial to the MLflow tracking server at this URI, as a run of the
    /// experiment named after the sweep.
    #[arg(long, value_name = "URI", env = "MLFLOW_TRACKING_URI")]
    pub mlflow: Option<String>,
    /// The MLflow experiment of the trials (default: the sweep's name).
    #[arg(long, value_name = "NAME", env = "MLFLOW_EXPERIMENT_NAME")]
    pub experiment: Option<String>,
}

/// What the pool starts: one trial as its own `ember train`, or a unit's trials as replicas
/// in one `ember sweep unit`.
enum Job<'a> {
    Trial(&'a Trial),
    Unit(usize, Vec<&'a Trial>),
}

/// The sweep's work: each unit whose trials can train as replicas as one job (unless
/// `processes`), every other trial as a job of its own.
fn jobs<'a>(plan: &Plan, trials: Vec<&'a Trial>, processes: bool) -> Result<Vec<Job<'a>>> {
    let mut jobs = Vec::new();
    // Each unit once, in the order of its first trial (a unit's trials need not be adjacent).
    let mut seen = std::collections::HashSet::new();
    let units: Vec<usize> = trials
        .iter()
        .map(|t| t.unit)
        .filter(|u| seen.insert(*u))
        .collect();
    for unit in units {
        let members: Vec<&Trial> = trials.iter().copied().filter(|t| t.unit == unit).collect();
        if !processes && plan.why_not_replicas(&members)?.is_none() {
            jobs.push(Job::Unit(unit, members));
        } else {
            jobs.extend(members.into_iter().map(Job::Trial));
        }
    }
    Ok(jobs)
}

/// How the trials of this invocation ended.
#[derive(Default)]
struct Tally {
    complete: usize,
    failed: usize,
    interrupted: usize,
    already: usize,
    busy: usize,
}

/// Runs the sweep; `threads` is each trial's CPU thread count (default: the cores shared out).
pub fn run(
    sweep: &Path,
    args: &RunArgs,
    threads: Option<usize>,
    console: &Console,
) -> Result<String> {
    if args.parallel == 0 {
        return Err(input_err!("--parallel 0 must be at least 1"));
    }
    let given = super::plan(sweep, &args.set)?;
    // The unit is checked before the folder is made.
    given.select(args.unit)?;
    let (dir, plan) = SweepDir::prepare(sweep, given, args.out.as_deref(), &args.set)?;
    let trials = plan.select(args.unit)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = threads.unwrap_or((cores / args.parallel).max(1));
    console.line(&format!(
        "sweep {}: {} trials{}, {} at a time, {threads} thread(s) each -> {}",
        plan.name,
        trials.len(),
        args.unit.map_or(String::new(), |u| format!(" of unit {u}")),
        args.parallel,
        dir.path.display()
    ));
    let mut pool = Pool {
        dir: &dir,
        name: &plan.name,
        args,
        set: &plan.set,
        threads,
        console,
        stop: StopSignal::install(),
        forwarded: false,
        running: Vec::new(),
        tally: Tally::default(),
    };
    pool.drain(jobs(&plan, trials, args.processes)?);
    finish(&dir, &plan.name, &pool.tally, pool.stop.requested())
}

/// The closing line, or an error when the sweep was stopped or every trial it ran failed.
fn finish(dir: &SweepDir, name: &str, t: &Tally, stopped: bool) -> Result<String> {
    let line = format!(
        "sweep {name}: {} complete, {} failed, {} interrupted, {} ended before, {} running elsewhere -> {}",
        t.complete,
        t.failed,
        t.interrupted,
        t.already,
        t.busy,
        dir.path.display()
    );
    if stopped {
        return Err(EmberError::Interrupted(format!(
            "{line}; stopped: run the same command again to go on"
        )));
    }
    if t.failed > 0 && t.complete == 0 {
        return Err(EmberError::Runtime(format!(
            "{line}; every trial run failed: see {}",
            dir.path.join(super::folder::LOGS).display()
        )));
    }
    Ok(format!(
        "{line}\nreport: ember sweep report {}",
        dir.path.display()
    ))
}

/// The trials' processes, at most `--parallel` at once.
struct Pool<'a> {
    dir: &'a SweepDir,
    /// The sweep's name.
    name: &'a str,
    args: &'a RunArgs,
    /// The overrides of every trial (the sweep's recorded `set`).
    set: &'a [String],
    threads: usize,
    console: &'a Console,
    stop: StopSignal,
    /// Whether the stop has been passed on to the running trials.
    forwarded: bool,
    running: Vec<Running<'a>>,
    tally: Tally,
}

struct Running<'a> {
    job: Job<'a>,
    child: Child,
    started: Instant,
}

impl<'a> Pool<'a> {
    /// Starts the trials as places free up, until all have ended. On Ctrl-C (or the SIGINT that
    /// Slurm sends before a time limit), no new trial starts and each running one is asked,
    /// once, to stop after its epoch's checkpoint.
    fn drain(&mut self, jobs: Vec<Job<'a>>) {
        let mut queue: VecDeque<Job> = jobs.into();
        while !queue.is_empty() || !self.running.is_empty() {
            if self.stop.requested() && !self.forwarded {
                queue.clear();
                self.forwarded = true;
                for r in &self.running {
                    // SAFETY: kill(2) on a child's pid, which stays ours until it is waited for.
                    unsafe { libc::kill(r.child.id() as libc::pid_t, libc::SIGINT) };
                }
            }
            while self.running.len() < self.args.parallel
                && let Some(job) = queue.pop_front()
            {
                match job {
                    Job::Trial(trial) => self.start(trial),
                    Job::Unit(unit, trials) => {
                        let alone = self.start_unit(unit, trials);
                        alone
                            .into_iter()
                            .rev()
                            .for_each(|t| queue.push_front(Job::Trial(t)));
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(50));
            self.reap();
        }
    }

    /// Starts the trial unless it ended or another process runs it. Its state is read now, not
    /// when the sweep began: another Slurm task may have taken it since.
    fn start(&mut self, trial: &'a Trial) {
        match self.dir.state(trial.index) {
            TrialState::Ended(_) => self.tally.already += 1,
            TrialState::Busy => {
                self.tally.busy += 1;
                self.console.line(&format!(
                    "trial {:03}: another process is running it; left alone",
                    trial.index
                ));
            }
            state => match self.spawn(trial, &state) {
                Ok(child) => self.running.push(Running {
                    job: Job::Trial(trial),
                    child,
                    started: Instant::now(),
                }),
                Err(e) => {
                    self.tally.failed += 1;
                    self.console
                        .line(&format!("trial {:03}: cannot start: {e}", trial.index));
                }
            },
        }
    }

    /// Records the trials whose process has ended.
    fn reap(&mut self) {
        let mut i = 0;
        while i < self.running.len() {
            match self.running[i].child.try_wait() {
                Ok(None) => i += 1,
                Ok(Some(status)) => {
                    let done = self.running.swap_remove(i);
                    self.ended(&done, status.code());
                }
                Err(e) => {
                    let done = self.running.swap_remove(i);
                    for trial in done.job.trials() {
                        self.console.line(&format!(
                            "trial {:03}: cannot wait for it: {e}",
                            trial.index
                        ));
                        self.tally.failed += 1;
                    }
                }
            }
        }
    }

    /// Starts `ember train` for the trial: fresh, or resumed from its checkpoint. It runs in its
    /// own process group, so that a Ctrl-C reaches it once, through `drain`. Its output goes
    /// to the trial's log.
    fn spawn(&self, trial: &Trial, state: &TrialState) -> Result<Child> {
        let run_dir = self.dir.trial(trial.index);
        if matches!(state, TrialState::Lost) {
            // Stopped before its first checkpoint: nothing to keep.
            std::fs::remove_dir_all(&run_dir).map_err(|e| EmberError::write(&run_dir, e))?;
        }
        let mut cmd = Command::new(crate::fs::ember_binary()?);
        cmd.args(["--threads", &self.threads.to_string(), "train"]);
        if matches!(state, TrialState::Unfinished) {
            cmd.arg("--resume").arg(&run_dir);
        } else {
            cmd.arg(self.dir.file(BASE)).arg("--out").arg(&run_dir);
            for set in trial.overrides.iter().chain(self.set) {
                cmd.args(["--set", set]);
            }
        }
        cmd.args(["--device", &self.args.device.to_string()]);
        self.launch(cmd, self.dir.log(trial.index))
            .map_err(|e| EmberError::Runtime(format!("cannot start trial {}: {e}", trial.index)))
    }

    /// Starts `cmd` in its own process group (so that a Ctrl-C reaches it once, through
    /// `drain`), its output appended to `log`; `exit` is cleared until it ends.
    fn launch(&self, mut cmd: Command, (log, exit): (PathBuf, PathBuf)) -> Result<Child> {
        // What the trial's MLflow run needs (`tracking::mlflow::start_run`).
        cmd.env(super::SWEEP_NAME_ENV, self.name);
        let mlflow = [
            ("MLFLOW_TRACKING_URI", &self.args.mlflow),
            ("MLFLOW_EXPERIMENT_NAME", &self.args.experiment),
        ];
        for (key, value) in mlflow {
            if let Some(v) = value {
                cmd.env(key, v);
            }
        }
        use std::os::unix::process::CommandExt;
        std::fs::remove_file(&exit).ok();
        let mut out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| EmberError::write(&log, describe_io(&e)))?;
        writeln!(out, "# {} {cmd:?}", chrono::Local::now().to_rfc3339())
            .map_err(|e| EmberError::write(&log, e))?;
        let err = out.try_clone().map_err(|e| EmberError::write(&log, e))?;
        cmd.stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0);
        cmd.spawn().map_err(|e| EmberError::Runtime(e.to_string()))
    }

    /// Starts a unit's trials that have not ended as replicas in one `ember sweep unit`
    /// process, unless another process holds the unit. Returns the trials to run alone
    /// instead: those with a checkpoint of their own (a run started as a process), and a last
    /// trial left without a partner.
    fn start_unit(&mut self, unit: usize, trials: Vec<&'a Trial>) -> Vec<&'a Trial> {
        let (mut group, mut alone) = (Vec::new(), Vec::new());
        for t in trials {
            match self.dir.state(t.index) {
                TrialState::Ended(_) => self.tally.already += 1,
                TrialState::Unfinished => alone.push(t),
                _ => group.push(t),
            }
        }
        // A last trial trains as a process, unless it is a unit's group to resume (folds of
        // another batch count train as a later group of their unit, and may be one).
        let checkpoints = self.dir.unit(unit).join(crate::run::folder::CHECKPOINTS);
        let lone_to_resume =
            group.len() == 1 && crate::run::checkpoint::latest(&checkpoints).is_ok();
        if group.len() < 2 && !lone_to_resume {
            alone.extend(group);
            return alone;
        }
        if crate::run::folder::in_use(&self.dir.unit(unit)) {
            self.tally.busy += group.len();
            self.console.line(&format!(
                "unit {unit}: another process is running it; left alone"
            ));
            return alone;
        }
        let trials = group;
        let spawned = crate::fs::ember_binary().and_then(|ember| {
            let mut cmd = Command::new(ember);
            cmd.args(["--threads", &self.threads.to_string(), "sweep", "unit"]);
            cmd.arg(&self.dir.path).args(["--unit", &unit.to_string()]);
            cmd.args(["--device", &self.args.device.to_string()]);
            self.launch(cmd, self.dir.unit_log(unit))
        });
        match spawned {
            Ok(child) => self.running.push(Running {
                job: Job::Unit(unit, trials),
                child,
                started: Instant::now(),
            }),
            Err(e) => {
                self.tally.failed += trials.len();
                self.console
                    .line(&format!("unit {unit}: cannot start: {e}"));
            }
        }
        alone
    }

    /// Records the job's exit code and prints a line per trial.
    fn ended(&mut self, done: &Running, code: Option<i32>) {
        let (log, exit) = match &done.job {
            Job::Trial(t) => self.dir.log(t.index),
            Job::Unit(u, _) => self.dir.unit_log(*u),
        };
        // A process killed by a signal has no code: recorded as -1.
        let code = code.unwrap_or(-1);
        if let Err(e) = crate::fs::write_atomic(&exit, code.to_string().as_bytes()) {
            self.console.line(&format!("{}: {e}", exit.display()));
        }
        for trial in done.job.trials() {
            self.trial_ended(trial, code, &log, done.started);
        }
    }

    /// Counts and prints how trial `trial` stands after its process ended with `code`.
    fn trial_ended(&mut self, trial: &Trial, code: i32, log: &Path, started: Instant) {
        let index = trial.index;
        let state = match self.dir.state(index) {
            // A replica stopped by Ctrl-C: its checkpoint is its unit's.
            TrialState::Lost if code == 130 => TrialState::Unfinished,
            state => state,
        };
        let t = &mut self.tally;
        let outcome = match state {
            TrialState::Ended(s) if s.status == "complete" => {
                t.complete += 1;
                format!("complete, {}", s.metrics_text())
            }
            TrialState::Ended(s) => {
                t.failed += 1;
                format!("{} (exit {code})", s.status)
            }
            TrialState::Unfinished => {
                t.interrupted += 1;
                "interrupted after a checkpoint; run the sweep again to resume it".to_string()
            }
            TrialState::Busy => {
                t.busy += 1;
                "another process is running it".to_string()
            }
            // A unit's later group that Ctrl-C stopped before it began.
            TrialState::New if code == 130 => {
                t.interrupted += 1;
                "not started: interrupted; run the sweep again to train it".to_string()
            }
            TrialState::New | TrialState::Lost => {
                t.failed += 1;
                format!("failed (exit {code}), see {}", log.display())
            }
        };
        self.console.line(&format!(
            "trial {index:03}: {outcome} [{}]  {}",
            duration(started.elapsed().as_secs_f64()),
            trial.label()
        ));
    }
}

impl Job<'_> {
    fn trials(&self) -> Vec<&Trial> {
        match self {
            Job::Trial(t) => vec![t],
            Job::Unit(_, trials) => trials.clone(),
        }
    }
}
