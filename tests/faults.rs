//! Faults injected, not imagined: a disk that fills up at chosen moments (a real tmpfs), kills at
//! any instant (SIGKILL by time, and inside writes through ember's fault switch,
//! `EMBER_FAULTS`), failing and lying writes, and files damaged on disk. After each, nothing
//! that was committed is lost: the exit code and one line say what happened, the last complete
//! checkpoint loads, and the command the line names ends with the uninterrupted run's model,
//! bit for bit.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// fashion-mlp with Adam and shuffled batches: a resume must restore the data order and the
/// optimizer's moments. Its checkpoint is about 8 MB.
const JOB: &str = "job = \"fashion-mlp\"\nepochs = 6\nbatch_size = 64\nshuffle = true\n\
                   [adam]\nlr = 1e-3\n";

/// `ember train` of the job into `out` on 640 rows, on 2 CPU threads.
fn train_args(cfg: &Path, out: &Path, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "--threads",
        "2",
        "train",
        path_str(cfg),
        "--out",
        path_str(out),
        "--device",
        "cpu",
        "--max-train-rows",
        "640",
        "--max-valid-rows",
        "200",
    ]
    .map(String::from)
    .to_vec();
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

/// `ember train --resume RUN` on 2 CPU threads.
fn resume(run: &Path) -> Output {
    ember(&[
        "--threads",
        "2",
        "train",
        "--resume",
        path_str(run),
        "--device",
        "cpu",
    ])
}

/// ember with `args` in the background, with `env` set, its output piped.
fn spawn_with(args: &[String], env: &[(&str, &str)]) -> Child {
    let mut cmd = Command::new(bin());
    cmd.args(args)
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("ember starts")
}

/// ember with `args` and `env`, to the end.
fn run_with(args: &[String], env: &[(&str, &str)]) -> Output {
    spawn_with(args, env).wait_with_output().unwrap()
}

/// The uninterrupted run: its folder (model files, metrics, checkpoint) and the job file.
struct Reference {
    cfg: PathBuf,
    run: PathBuf,
}

fn reference() -> &'static Reference {
    static REF: OnceLock<Reference> = OnceLock::new();
    REF.get_or_init(|| {
        let dir = scratch("faults-reference");
        let cfg = config(&dir, "job.toml", JOB);
        let run = dir.join("run");
        ok(&run_with(&train_args(&cfg, &run, &[]), &[]));
        Reference { cfg, run }
    })
}

impl Reference {
    /// The bytes of a checkpoint: the newest epoch's files.
    fn checkpoint_bytes(&self) -> u64 {
        let dir = self.run.join("checkpoint");
        let files = std::fs::read_dir(dir).unwrap().flatten();
        files.map(|f| f.metadata().unwrap().len()).sum()
    }
}

/// Asserts that `run` ended as the uninterrupted run: the same model file, bit for bit, and
/// the same losses in `metrics.csv`.
fn assert_same_as_reference(run: &Path) {
    let r = reference();
    for file in ["model.safetensors", "model.mpk"] {
        let (got, want) = (run.join(file), r.run.join(file));
        assert!(
            std::fs::read(&got).ok() == std::fs::read(&want).ok(),
            "{} differs from the uninterrupted run's",
            got.display()
        );
    }
    assert_eq!(losses(run), losses(&r.run), "{}", run.display());
    let summary = std::fs::read_to_string(run.join("summary.json")).unwrap();
    assert!(summary.contains("\"status\": \"complete\""), "{summary}");
}

/// The files of `run`'s checkpoint folder, sorted.
fn checkpoint_files(run: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(run.join("checkpoint"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// A gate for `wait@` faults: ember creates it and waits until the test removes it.
struct Gate(PathBuf);

impl Gate {
    fn new(dir: &Path) -> Gate {
        Gate(dir.join("gate"))
    }

    fn env(&self) -> (&'static str, &str) {
        ("EMBER_FAULTS_GATE", path_str(&self.0))
    }

    /// Waits until ember stands at the gate (fails if `child` ends first).
    fn reached(&self, child: &mut Child) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while !self.0.exists() {
            if let Some(status) = child.try_wait().unwrap() {
                panic!("ember ended ({status}) before the gate");
            }
            assert!(Instant::now() < deadline, "ember never reached the gate");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn open(&self) {
        std::fs::remove_file(&self.0).unwrap();
    }
}

/// Runs the job on a fresh 128 MB disk with `faults` and `extra` arguments; when ember stands
/// at the gate, fills the disk to `leave` free bytes and lets it go on. Returns the disk, the
/// run folder and ember's output.
fn fill_at_gate(
    name: &str,
    faults: &str,
    leave: u64,
    extra: &[&str],
) -> Option<(Tmpfs, PathBuf, Output)> {
    let dir = scratch(name);
    let disk = Tmpfs::mount(&dir, 128)?;
    let run = disk.path.join("run");
    let gate = Gate::new(&dir);
    let args = train_args(&reference().cfg, &run, extra);
    let mut child = spawn_with(&args, &[("EMBER_FAULTS", faults), gate.env()]);
    gate.reached(&mut child);
    disk.fill(leave);
    gate.open();
    let out = child.wait_with_output().unwrap();
    Some((disk, run, out))
}

#[test]
fn a_disk_full_before_the_first_checkpoint_stops_with_code_4_and_resume_starts_again() {
    // The first metrics.csv write (after epoch 1) meets a full disk; no checkpoint is due.
    let faults = "wait@metrics.csv:before";
    let extra = ["--checkpoint-every", "1000"];
    let Some((disk, run, o)) = fill_at_gate("fault-full-early", faults, 0, &extra) else {
        return;
    };
    failed_with(
        &o,
        4,
        &[
            "disk full: cannot write",
            "metrics.csv",
            "no checkpoint was written yet",
            "free some space, then run: ember train --resume",
        ],
    );
    assert!(checkpoint_files(&run).iter().all(|f| !f.ends_with(".json")));
    disk.release();
    let o = resume(&run);
    ok(&o);
    assert!(
        stdout(&o).contains("holds no complete checkpoint; training it again from epoch 1"),
        "{}",
        stdout(&o)
    );
    assert_same_as_reference(&run);
}

#[test]
fn a_disk_with_room_for_one_checkpoint_gets_one_at_once_and_keeps_it() {
    // After epoch 1 the disk keeps room for one and a half checkpoints: ember writes one at
    // once though none is due, and stops at the last epoch's, which does not fit.
    let room = reference().checkpoint_bytes() * 3 / 2;
    let extra = ["--checkpoint-every", "1000"];
    let faults = "wait@metrics.csv:before";
    let Some((disk, run, o)) = fill_at_gate("fault-short-room", faults, room, &extra) else {
        return;
    };
    failed_with(
        &o,
        4,
        &[
            "disk full: the checkpoint of epoch 6 needs about",
            "the last complete checkpoint is epoch 1",
        ],
    );
    assert!(run.join("checkpoint/epoch-1.json").is_file());
    disk.release();
    let o = resume(&run);
    ok(&o);
    assert!(stdout(&o).contains("after epoch 1/6"), "{}", stdout(&o));
    assert_same_as_reference(&run);
}

#[test]
fn a_disk_full_during_a_checkpoint_keeps_the_one_before() {
    let faults = "wait@optim-3.mpk:before";
    let extra = ["--checkpoint-every", "0"];
    let Some((disk, run, o)) = fill_at_gate("fault-full-checkpoint", faults, 0, &extra) else {
        return;
    };
    failed_with(
        &o,
        4,
        &["disk full", "the last complete checkpoint is epoch 2"],
    );
    assert!(run.join("checkpoint/epoch-2.json").is_file());
    assert!(!run.join("checkpoint/epoch-3.json").exists());
    disk.release();
    let o = resume(&run);
    ok(&o);
    assert!(stdout(&o).contains("after epoch 2/6"), "{}", stdout(&o));
    assert_same_as_reference(&run);
    // Nothing of the checkpoint that failed is left.
    let want = [
        "epoch-6.json",
        "model-6.mpk",
        "optim-6.mpk",
        "scheduler-6.mpk",
    ];
    assert_eq!(checkpoint_files(&run), want);
}

#[test]
fn a_disk_full_during_the_final_files_is_finished_by_resume() {
    let faults = "wait@model.safetensors:before";
    let Some((disk, run, o)) = fill_at_gate("fault-full-final", faults, 0, &[]) else {
        return;
    };
    failed_with(
        &o,
        4,
        &[
            "disk full: cannot write",
            "model.safetensors",
            "training is done (checkpoint of epoch 6)",
        ],
    );
    assert!(!run.join("model.safetensors").exists());
    disk.release();
    let o = resume(&run);
    ok(&o);
    assert!(
        stdout(&o).contains("writing its final files"),
        "{}",
        stdout(&o)
    );
    assert_same_as_reference(&run);
    // Done is done: another resume says so.
    bad_input(&resume(&run), "already trained all 6 epochs");
}

/// A sweep of two seeds trained as replicas of one batched model on a small disk, filled while
/// the group writes its first checkpoint; running the sweep again after space is freed ends as
/// the uninterrupted sweep.
#[test]
fn a_disk_full_during_a_sweep_is_resumed_by_running_it_again() {
    let dir = scratch("fault-full-sweep");
    let Some(disk) = Tmpfs::mount(&dir, 128) else {
        return;
    };
    let sweep = sweep_files(&dir, 30);
    let whole = dir.join("whole");
    ok(&ember_strings(&sweep_args(&sweep, &whole)));
    let out = disk.path.join("sweep");
    let gate = Gate::new(&dir);
    let faults = "wait@summary.json:before";
    let mut child = spawn_with(
        &sweep_args(&sweep, &out),
        &[("EMBER_FAULTS", faults), gate.env()],
    );
    gate.reached(&mut child);
    disk.fill(0);
    gate.open();
    let o = child.wait_with_output().unwrap();
    let log = std::fs::read_to_string(out.join("logs/unit-000.log")).unwrap_or_default();
    assert!(log.contains("disk full"), "{log}\n{}", stdout(&o));
    disk.release();
    let o = ember_strings(&sweep_args(&sweep, &out));
    ok(&o);
    assert!(stdout(&o).contains("2 complete"), "{}", stdout(&o));
    assert_same_sweep(&out, &whole, 2, &o);
}

/// A tabular-mlp base (built-in data, shuffled) with `epochs`, and a sweep of two seeds.
fn sweep_files(dir: &Path, epochs: usize) -> PathBuf {
    config(
        dir,
        "base.toml",
        &format!(
            "job = \"tabular-mlp\"\nepochs = {epochs}\nbatch_size = 256\nshuffle = true\n\
             max_train_rows = 4000\nmax_valid_rows = 1000\n[adam]\nlr = 1e-3\n"
        ),
    );
    config(dir, "sweep.toml", "base = \"base.toml\"\nseeds = [1, 2]\n")
}

fn sweep_args(sweep: &Path, out: &Path) -> Vec<String> {
    let args = ["--threads", "2", "sweep", "run", path_str(sweep), "--out"];
    let mut args: Vec<String> = args.map(String::from).to_vec();
    args.extend([path_str(out), "--device", "cpu"].map(String::from));
    args
}

fn ember_strings(args: &[String]) -> Output {
    ember(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Each of the `trials` of sweep `out` ended complete with the model of sweep `whole`; `o` is
/// the output of the sweep's last run, shown where they did not.
fn assert_same_sweep(out: &Path, whole: &Path, trials: usize, o: &Output) {
    let names = std::fs::read_dir(out).unwrap().flatten();
    let hidden: Vec<String> = names
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(hidden.is_empty(), "{}: left {hidden:?}", out.display());
    for i in 0..trials {
        let t = format!("trial-{i:03}");
        let model = |d: &Path| std::fs::read(d.join(&t).join("model.safetensors")).ok();
        let at = out.join(&t);
        let said = format!("{}\n{}", stdout(o), stderr(o));
        assert!(model(out).is_some(), "{}: no model\n{said}", at.display());
        assert!(
            model(out) == model(whole),
            "{}: another model\n{said}",
            at.display()
        );
        assert_eq!(losses(&at), losses(&whole.join(&t)), "{}", at.display());
    }
}

/// SIGKILL at 52 points of a run's life: 26 instants spread over its wall time, and 30 points
/// inside its writes (the config, each part and manifest of a checkpoint, metrics, the final
/// files, the summary), struck through the fault switch. After each, the command the folder
/// calls for (`--resume`, or `--out` again where the kill came before the config) ends with the
/// uninterrupted run's model.
#[test]
fn a_run_killed_at_any_of_50_points_resumes_to_the_same_model() {
    let r = reference();
    let dir = scratch("fault-kills");
    let started = Instant::now();
    ok(&run_with(&train_args(&r.cfg, &dir.join("timed"), &[]), &[]));
    let life = started.elapsed();
    let mut points: Vec<Kill> = (0..26).map(|i| Kill::After(life * i / 26)).collect();
    for phase in ["before", "partial", "written", "renamed"] {
        points.push(Kill::Inside(format!("kill@config.toml:{phase}")));
        points.push(Kill::Inside(format!("kill@epoch-2.json:{phase}")));
    }
    for file in [
        "model-3.mpk",
        "optim-3.mpk",
        "scheduler-3.mpk",
        "model.mpk",
        "model.safetensors",
    ] {
        for phase in ["partial", "written"] {
            points.push(Kill::Inside(format!("kill@{file}:{phase}")));
        }
    }
    for fault in [
        "kill@metrics.csv:partial",
        "kill@metrics.csv:written#2",
        "kill@epoch-6.json:renamed",
        "kill@summary.json:partial",
        "kill@summary.json:renamed",
        "kill@curves.png:partial",
    ] {
        points.push(Kill::Inside(fault.to_string()));
    }
    assert!(points.len() >= 50, "{} points", points.len());
    for (i, point) in points.iter().enumerate() {
        let run = dir.join(format!("run-{i:02}"));
        point.strike(&train_args(
            &r.cfg,
            &run,
            &["--checkpoint-every", "0", "-q"],
        ));
        go_on(&run);
        assert_same_as_reference(&run);
    }
}

/// Where a kill strikes.
enum Kill {
    /// This long after the start.
    After(Duration),
    /// At an injected fault (`EMBER_FAULTS`).
    Inside(String),
}

impl Kill {
    fn strike(&self, args: &[String]) {
        match self {
            Kill::After(delay) => {
                let mut child = spawn_with(args, &[]);
                std::thread::sleep(*delay);
                child.kill().ok();
                child.wait().unwrap();
            }
            Kill::Inside(fault) => {
                let o = run_with(args, &[("EMBER_FAULTS", fault)]);
                assert_eq!(
                    o.status.code(),
                    None,
                    "{fault} did not strike: {}",
                    stderr(&o)
                );
            }
        }
    }
}

/// What a user does after a kill: the same command with `--resume` for `--out` (which starts
/// the run where the kill came before its config), unless the run had completed.
fn go_on(run: &Path) {
    if std::fs::read_to_string(run.join("summary.json")).is_ok_and(|s| s.contains("\"complete\"")) {
        return;
    }
    let args = train_args(&reference().cfg, run, &["-q"]);
    let args: Vec<String> = args
        .into_iter()
        .map(|a| if a == "--out" { "--resume".into() } else { a })
        .collect();
    ok(&ember_strings(&args));
}

/// A sweep of two replicas killed (the `sweep run` process and every process under it) at 20
/// instants of its life and at 6 points inside the group's writes; running it again ends as
/// the uninterrupted sweep every time.
#[test]
fn a_replica_sweep_killed_at_any_instant_ends_as_the_uninterrupted_one() {
    let dir = scratch("fault-kill-sweep");
    let sweep = sweep_files(&dir, 30);
    let whole = dir.join("whole");
    let started = Instant::now();
    ok(&ember_strings(&sweep_args(&sweep, &whole)));
    let life = started.elapsed();
    let mut points: Vec<Kill> = (0..20).map(|i| Kill::After(life * i / 20)).collect();
    for fault in [
        // Killed while copying the sweep into its folder, before the sweep file is in place.
        "kill@base.toml:written",
        "kill@sweep.toml:partial",
        "kill@trials:written",
        "kill@config.toml:partial#2",
        "kill@model-30.mpk:written",
        "kill@epoch-30.json:renamed",
        "kill@model.safetensors:partial#2",
        "kill@summary.json:written",
    ] {
        points.push(Kill::Inside(fault.to_string()));
    }
    for (i, point) in points.iter().enumerate() {
        let out = dir.join(format!("out-{i:02}"));
        let args = sweep_args(&sweep, &out);
        match point {
            Kill::After(delay) => {
                let child = spawn_with(&args, &[]);
                std::thread::sleep(*delay);
                kill_sweep(child, &out);
            }
            Kill::Inside(fault) => {
                // The unit process kills itself; `sweep run` records the trials as crashed.
                run_with(&args, &[("EMBER_FAULTS", fault)]);
            }
        }
        let o = ember_strings(&args);
        ok(&o);
        assert_same_sweep(&out, &whole, 2, &o);
    }
}

/// SIGKILLs `child` and every process of the sweep in `out` at once, as a machine's crash
/// would: each is stopped first, so that none starts another or notices the others end. The
/// sweep's processes are found by the folder on their command line (`sweep run` starts each
/// unit in a process group of its own, and a unit outlives its parent).
fn kill_sweep(mut child: Child, out: &Path) {
    let marker = path_str(out).to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let pids = processes_mentioning(&marker);
        if pids.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "{pids:?} outlive SIGKILL");
        for signal in ["-STOP", "-KILL"] {
            for p in &pids {
                let _ = Command::new("kill").args([signal, &p.to_string()]).status();
            }
        }
        // Reaps the `sweep run` process (this test's child); init reaps the others.
        let _ = child.try_wait();
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait().unwrap();
}

/// The live (not zombie) processes whose command line holds `marker`.
fn processes_mentioning(marker: &str) -> Vec<u32> {
    let procs = std::fs::read_dir("/proc").unwrap().flatten();
    procs
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            cmdline.contains(marker) && alive(*p)
        })
        .collect()
}

/// Whether any thread of `pid` has yet to exit. A killed process's first thread turns zombie
/// while its other threads are still exiting, and those still hold its files, locks included:
/// a sweep run again at that instant finds its unit locked.
fn alive(pid: u32) -> bool {
    let Ok(threads) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    threads.flatten().any(|t| {
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(')')
            .map_or("", |(_, a)| a)
            .split_whitespace()
            .next();
        state.is_some_and(|s| s != "Z")
    })
}

#[test]
fn an_io_error_on_a_checkpoint_or_model_file_stops_the_run_with_its_checkpoint_kept() {
    let r = reference();
    let dir = scratch("fault-eio");
    for (fault, file, why, done) in [
        (
            "eio@optim-3.mpk",
            "checkpoint/optim-3.mpk",
            "Input/output error",
            "the last complete checkpoint is epoch 2",
        ),
        (
            "eio@model.mpk",
            "model.mpk",
            "Input/output error",
            "training is done (checkpoint of epoch 6)",
        ),
        // A disk that takes half the bytes and says it took them all.
        (
            "short@model-4.mpk",
            "checkpoint/model-4.mpk",
            "bytes reached the disk",
            "the last complete checkpoint is epoch 3",
        ),
        (
            "short@model.safetensors",
            "model.safetensors",
            "bytes reached the disk",
            "training is done",
        ),
    ] {
        let run = dir.join(fault.replace(['@', '.'], "-"));
        let args = train_args(&r.cfg, &run, &["--checkpoint-every", "0", "-q"]);
        let o = run_with(&args, &[("EMBER_FAULTS", fault)]);
        let path = run.join(file);
        failed_with(
            &o,
            1,
            &[&format!("cannot write {}", path.display()), why, done],
        );
        assert!(!path.exists(), "{fault}");
        let o = resume(&run);
        ok(&o);
        assert_same_as_reference(&run);
    }
}

/// Flips one bit in the middle of `path`.
fn flip_a_bit(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x10;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_damaged_checkpoint_is_passed_over_for_the_one_before_and_a_damaged_model_is_not_loaded() {
    let r = reference();
    let dir = scratch("fault-damaged");
    // Killed after epoch 3's manifest, before epoch 2's files are removed: two checkpoints.
    let run = dir.join("run");
    let args = train_args(&r.cfg, &run, &["--checkpoint-every", "0", "-q"]);
    let o = run_with(&args, &[("EMBER_FAULTS", "kill@epoch-3.json:renamed")]);
    assert_eq!(o.status.code(), None, "{}", stderr(&o));
    assert!(run.join("checkpoint/epoch-2.json").is_file());
    flip_a_bit(&run.join("checkpoint/model-3.mpk"));
    let o = resume(&run);
    ok(&o);
    let out = stdout(&o);
    assert!(
        out.contains("passed over the checkpoint of epoch 3"),
        "{out}"
    );
    assert!(out.contains("model-3.mpk: corrupt checkpoint"), "{out}");
    assert!(out.contains("after epoch 2/6"), "{out}");
    assert_same_as_reference(&run);

    // The final model files: eval names the damaged file and loads nothing.
    flip_a_bit(&run.join("model.mpk"));
    let o = ember(&["eval", path_str(&run), "--device", "cpu"]);
    bad_input(&o, "model.mpk: damaged model file");
    bad_input(&o, "loads with --epoch 6");
    let safetensors = run.join("model.safetensors");
    let bytes = std::fs::read(&safetensors).unwrap();
    std::fs::write(&safetensors, &bytes[..bytes.len() - 100]).unwrap();
    let o = ember(&["eval", path_str(&safetensors), "--device", "cpu"]);
    bad_input(&o, "model.safetensors: damaged model file");
    // The checkpoint of the last epoch still evaluates.
    ok(&ember(&[
        "eval",
        path_str(&run),
        "--epoch",
        "6",
        "--device",
        "cpu",
    ]));
}

#[test]
fn a_folder_killed_before_its_config_or_its_first_checkpoint_is_no_dead_end() {
    let r = reference();
    let dir = scratch("fault-dead-ends");
    // Killed before config.toml: --resume alone says the folder holds no run, and how to
    // start one; --out may use it; JOB --resume starts it.
    let run = dir.join("before-config");
    let args = train_args(&r.cfg, &run, &["-q"]);
    run_with(&args, &[("EMBER_FAULTS", "kill@config.toml:before")]);
    bad_input(
        &resume(&run),
        "holds no run (no config.toml); start one there with: ember train",
    );
    ok(&ember_strings(&args));
    assert_same_as_reference(&run);

    // Killed after config.toml, before a checkpoint: --out refuses (it holds a run), and
    // --resume trains it from epoch 1.
    let run = dir.join("before-checkpoint");
    let args = train_args(&r.cfg, &run, &["-q"]);
    run_with(&args, &[("EMBER_FAULTS", "kill@metrics.csv:before")]);
    bad_input(&ember_strings(&args), "already holds a run");
    let o = resume(&run);
    ok(&o);
    assert!(
        stdout(&o).contains("training it again from epoch 1"),
        "{}",
        stdout(&o)
    );
    assert_same_as_reference(&run);
}
