//! `ember sweep run`: the sweep's trials (or one unit's, with `--unit`) as `ember train`
//! processes, `--parallel N` at a time, sharing the cores. Each writes an ordinary run folder
//! under the sweep folder. Re-running skips the trials that ended, resumes those with a
//! checkpoint, and leaves alone those another process holds (the run lock), so a Slurm task that
//! lands on the same folder twice is safe. A trial that fails is recorded, and the sweep goes on.

use super::folder::{BASE, SweepDir, TrialState};
use super::plan::Trial;
use crate::console::{Console, duration};
use crate::device::DeviceRequest;
use crate::error::{EmberError, Result};
use crate::fs::describe_io;
use crate::input_err;
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
}

/// How the trials of this invocation ended.
#[derive(Default)]
struct Tally {
    complete: usize,
    failed: usize,
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
    // The unit is checked before the folder is made.
    super::plan(sweep, &args.set)?.select(args.unit)?;
    let (dir, plan) = SweepDir::prepare(sweep, args.out.as_deref(), &args.set)?;
    let selected = plan.select(args.unit)?;
    let mut tally = Tally::default();
    let mut queue = VecDeque::new();
    for trial in selected {
        match dir.state(trial.index) {
            TrialState::Ended(_) => tally.already += 1,
            TrialState::Busy => {
                console.line(&format!(
                    "trial {:03}: another process is running it; left alone",
                    trial.index
                ));
                tally.busy += 1;
            }
            state => queue.push_back((trial, state)),
        }
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = threads.unwrap_or((cores / args.parallel).max(1));
    console.line(&format!(
        "sweep {}: {} to run{}, {} at a time, {threads} thread(s) each -> {}",
        plan.name,
        queue.len(),
        args.unit.map_or(String::new(), |u| format!(" in unit {u}")),
        args.parallel,
        dir.path.display()
    ));
    let started = queue.len();
    Pool {
        dir: &dir,
        args,
        threads,
        console,
    }
    .drain(queue, &mut tally)?;
    finish(&dir, &plan.name, started, &tally)
}

/// The closing line, or an error when every trial started here failed.
fn finish(dir: &SweepDir, name: &str, started: usize, tally: &Tally) -> Result<String> {
    let line = format!(
        "sweep {name}: {} complete, {} failed, {} ended before, {} running elsewhere -> {}\nreport: ember sweep report {}",
        tally.complete,
        tally.failed,
        tally.already,
        tally.busy,
        dir.path.display(),
        dir.path.display()
    );
    if started > 0 && tally.complete == 0 {
        return Err(EmberError::Runtime(format!(
            "sweep {name}: every trial run failed; see {}",
            dir.path.join(super::folder::LOGS).display()
        )));
    }
    Ok(line)
}

/// The trials' processes, at most `--parallel` at once.
struct Pool<'a> {
    dir: &'a SweepDir,
    args: &'a RunArgs,
    threads: usize,
    console: &'a Console,
}

struct Running<'a> {
    trial: &'a Trial,
    child: Child,
    started: Instant,
}

impl<'a> Pool<'a> {
    fn drain(&self, mut queue: VecDeque<(&'a Trial, TrialState)>, tally: &mut Tally) -> Result<()> {
        let mut running: Vec<Running> = Vec::new();
        while !queue.is_empty() || !running.is_empty() {
            while running.len() < self.args.parallel
                && let Some((trial, state)) = queue.pop_front()
            {
                let child = self.spawn(trial, &state)?;
                running.push(Running {
                    trial,
                    child,
                    started: Instant::now(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
            let mut i = 0;
            while i < running.len() {
                match running[i].child.try_wait() {
                    Ok(Some(status)) => {
                        let done = running.swap_remove(i);
                        self.ended(&done, status.code(), tally)?;
                    }
                    Ok(None) => i += 1,
                    Err(e) => return Err(EmberError::Runtime(format!("waiting for a trial: {e}"))),
                }
            }
        }
        Ok(())
    }

    /// Starts `ember train` for the trial: fresh, or resumed from its checkpoint. Its output
    /// goes to the trial's log.
    fn spawn(&self, trial: &Trial, state: &TrialState) -> Result<Child> {
        let run_dir = self.dir.trial(trial.index);
        if matches!(state, TrialState::Lost) {
            // Stopped before its first checkpoint: nothing to keep.
            std::fs::remove_dir_all(&run_dir).map_err(|e| EmberError::write(&run_dir, e))?;
        }
        let exe = std::env::current_exe()
            .map_err(|e| EmberError::Runtime(format!("cannot find the ember binary: {e}")))?;
        let mut cmd = Command::new(exe);
        cmd.args(["--threads", &self.threads.to_string(), "train"]);
        if matches!(state, TrialState::Unfinished) {
            cmd.arg("--resume").arg(&run_dir);
        } else {
            cmd.arg(self.dir.file(BASE)).arg("--out").arg(&run_dir);
            for set in trial.overrides.iter().chain(&self.args.set) {
                cmd.args(["--set", set]);
            }
        }
        cmd.args(["--device", &self.args.device.to_string()]);
        let (log, exit) = self.dir.log(trial.index);
        std::fs::remove_file(&exit).ok();
        let mut out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| EmberError::write(&log, describe_io(&e)))?;
        writeln!(out, "# {} {cmd:?}", chrono::Local::now().to_rfc3339())
            .map_err(|e| EmberError::write(&log, e))?;
        let err = out.try_clone().map_err(|e| EmberError::write(&log, e))?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        cmd.spawn()
            .map_err(|e| EmberError::Runtime(format!("cannot start trial {}: {e}", trial.index)))
    }

    /// Records the trial's exit code and prints its line.
    fn ended(&self, done: &Running, code: Option<i32>, tally: &mut Tally) -> Result<()> {
        let index = done.trial.index;
        let (_, exit) = self.dir.log(index);
        // A process killed by a signal has no code: recorded as -1.
        crate::fs::write_atomic(&exit, code.unwrap_or(-1).to_string().as_bytes())?;
        let outcome = match self.dir.state(index) {
            TrialState::Ended(s) if s.status == "complete" => {
                tally.complete += 1;
                metrics_text(&s)
            }
            TrialState::Ended(s) => {
                tally.failed += 1;
                format!("{} (exit {})", s.status, code.unwrap_or(-1))
            }
            _ => {
                tally.failed += 1;
                format!(
                    "failed (exit {}), see {}",
                    code.map_or("by a signal".into(), |c| c.to_string()),
                    self.dir.log(index).0.display()
                )
            }
        };
        self.console.line(&format!(
            "trial {index:03}: {outcome} [{}]  {}",
            duration(done.started.elapsed().as_secs_f64()),
            done.trial.label()
        ));
        Ok(())
    }
}

/// `complete, valid loss 0.4123, accuracy 85.21%`.
fn metrics_text(s: &crate::run::summary::Summary) -> String {
    match &s.final_metrics {
        Some(m) => {
            let acc = m.valid_accuracy.map_or(String::new(), |a| {
                format!(", valid accuracy {:.2} %", 100.0 * a)
            });
            format!("complete, valid loss {:.4}{acc}", m.valid_loss)
        }
        None => "complete".to_string(),
    }
}
