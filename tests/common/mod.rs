//! Helpers for the end-to-end tests: run the release binary, make scratch folders, read runs.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const EMBER: &str = env!("CARGO_BIN_EXE_ember");

/// The ember binary under test: `EMBER_BIN` where set (a packed binary on a GPU machine, which
/// has no cargo), else the one cargo built.
pub fn bin() -> PathBuf {
    std::env::var_os("EMBER_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(EMBER))
}

/// The folder holding `configs/` and `datasets/`: `EMBER_ROOT`, else the source tree.
pub fn root() -> PathBuf {
    std::env::var_os("EMBER_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

/// A fresh scratch folder for one test (under `EMBER_SCRATCH` where set).
pub fn scratch(name: &str) -> PathBuf {
    let base = std::env::var_os("EMBER_SCRATCH")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")));
    let dir = base.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs ember with `args` in the project root, on the CPU.
pub fn ember(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .current_dir(root())
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("ember runs")
}

/// `ember train CFG` on the CPU with two threads, quietly, into `out`, with `extra` arguments.
pub fn train_on_cpu(cfg: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "train",
        path_str(cfg),
        "--device",
        "cpu",
        "--threads",
        "2",
        "--out",
        path_str(out),
        "--quiet",
    ];
    args.extend_from_slice(extra);
    ember(&args)
}

/// `ember train --resume RUN` on the CPU, quietly: a killed or stopped run finishing.
pub fn resume_on_cpu(run: &Path) -> Output {
    ember(&["train", "--resume", path_str(run), "-q", "--device", "cpu"])
}

/// Starts ember with `args` in the project root, in the background, its output piped.
pub fn spawn(args: &[&str]) -> Child {
    Command::new(bin())
        .args(args)
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ember starts")
}

/// The rows of FashionMNIST a small test job trains and validates on, on the CPU.
pub const SLICE: [&str; 6] = [
    "--device",
    "cpu",
    "--max-train-rows",
    "6000",
    "--max-valid-rows",
    "1000",
];

/// `ember train` of `cfg` into `out` on [`SLICE`], quietly, with a checkpoint after every
/// epoch (the default is at most one per 10 s).
pub fn train_each_epoch_checkpointed<'a>(cfg: &'a str, out: &'a str) -> Vec<&'a str> {
    let mut a = vec!["train", cfg, "--out", out, "-q", "--checkpoint-every", "0"];
    a.extend_from_slice(&SLICE);
    a
}

/// SIGKILLs `child`, training into `run`, `settle` after its checkpoint of `epoch` appeared
/// (within `limit`): in the middle of the next epoch. Fails if the run had already finished.
pub fn kill_mid_epoch(
    mut child: Child,
    run: &Path,
    epoch: usize,
    limit: Duration,
    settle: Duration,
) {
    wait_for(&run.join(format!("checkpoint/epoch-{epoch}.json")), limit);
    std::thread::sleep(settle);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !run.join("summary.json").exists(),
        "the run finished before the kill"
    );
}

/// SIGKILLs `child`, training into `run`, half an epoch after its checkpoint of `epoch` (2 or
/// more) appeared, an epoch being the time from the checkpoint of `epoch - 1` to that of `epoch`:
/// mid-epoch on a device of any speed, where a fixed delay is not (on an H200 the GPU tests'
/// epochs take 30 to 60 ms, and 200 ms landed after the run's last epoch). Choose an `epoch`
/// past the first two, which compile kernels on a GPU and take longer than the rest. Fails if
/// the run had checkpointed `last_epoch`, its final one, before the kill.
pub fn kill_half_an_epoch_after(
    mut child: Child,
    run: &Path,
    (epoch, last_epoch): (usize, usize),
    limit: Duration,
) {
    assert!(
        (2..last_epoch).contains(&epoch),
        "needs the checkpoints of two epochs to time one, and one after them"
    );
    let checkpoint = |e: usize| run.join(format!("checkpoint/epoch-{e}.json"));
    // Only the newest checkpoint is kept: `epoch - 1`'s may be gone by the first look.
    let (deadline, mut previous_seen) = (Instant::now() + limit, None);
    while !checkpoint(epoch).exists() {
        assert!(
            Instant::now() < deadline,
            "no checkpoint of epoch {epoch} in {limit:?}"
        );
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the run ended ({status}) before its checkpoint of epoch {epoch}");
        }
        if previous_seen.is_none() && checkpoint(epoch - 1).exists() {
            previous_seen = Some(Instant::now());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(previous_seen.map_or(Duration::ZERO, |t| t.elapsed() / 2));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !checkpoint(last_epoch).exists() && !run.join("summary.json").exists(),
        "the run had finished its last epoch, {last_epoch}, before the kill"
    );
}

/// Waits until `path` exists; fails the test after `limit`.
pub fn wait_for(path: &Path, limit: Duration) {
    let start = Instant::now();
    while !path.exists() {
        assert!(start.elapsed() < limit, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts a successful run, printing its output otherwise.
pub fn ok(o: &Output) {
    assert!(
        o.status.success(),
        "ember failed ({:?})\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        stdout(o),
        stderr(o)
    );
}

/// Asserts exit code 2 with one `error:` line on stderr that contains `needle`, and no panic.
pub fn bad_input(o: &Output, needle: &str) {
    let err = stderr(o);
    assert_eq!(
        o.status.code(),
        Some(2),
        "stderr:\n{err}\nstdout:\n{}",
        stdout(o)
    );
    assert!(!err.contains("panicked"), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line, got:\n{err}");
    assert!(lines[0].starts_with("error: "), "{err}");
    assert!(lines[0].contains(needle), "{needle:?} not in {err}");
}

/// Writes a config file into `dir` and returns its path.
pub fn config(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// The job `ember init` drafts for `csv` and `label`, with `epochs` set, written to `dir/name`;
/// and `init`'s stderr.
pub fn drafted_as(
    dir: &Path,
    name: &str,
    csv: &Path,
    label: &str,
    epochs: usize,
) -> (PathBuf, String) {
    let out = ember(&["init", "--csv", path_str(csv), "--label", label]);
    ok(&out);
    let job = with_epochs(&stdout(&out), epochs);
    (config(dir, name, &job), stderr(&out))
}

/// A drafted job file with its `epochs = N` line set to `epochs` (which it must have).
pub fn with_epochs(job: &str, epochs: usize) -> String {
    let line = (job.lines())
        .find(|l| l.starts_with("epochs = "))
        .unwrap_or_else(|| panic!("no epochs line in the drafted job:\n{job}"));
    job.replacen(line, &format!("epochs = {epochs}"), 1)
}

/// The (train loss, valid loss, valid accuracy) rows of a run's metrics.csv.
pub fn losses(run: &Path) -> Vec<(f64, f64, Option<f64>)> {
    let text = std::fs::read_to_string(run.join("metrics.csv")).unwrap();
    let rows: Vec<Vec<String>> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    rows.chunks(2)
        .map(|pair| {
            let train: f64 = pair[0][2].parse().unwrap();
            let valid: f64 = pair[1][2].parse().unwrap();
            let acc = pair[1][3].parse().ok();
            (train, valid, acc)
        })
        .collect()
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A small deterministic generator (64-bit LCG), uniform in [0, 1).
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// `column` of the last row of a run's metrics.csv whose cells `pick` accepts.
pub fn metric(run: &Path, column: &str, pick: impl Fn(&[&str]) -> bool) -> f64 {
    let text = std::fs::read_to_string(run.join("metrics.csv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let at = header.iter().position(|h| *h == column).unwrap();
    let rows = lines.map(|l| l.split(',').collect::<Vec<_>>());
    let row = rows.filter(|r| pick(r)).last().unwrap();
    row[at].parse().unwrap()
}

/// The last validation row's `column` in a run's metrics.csv.
pub fn last_valid(run: &Path, column: &str) -> f64 {
    metric(run, column, |row| row[1] == "valid")
}

/// A run's `summary.json`.
pub fn summary(run: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(run.join("summary.json")).unwrap()).unwrap()
}

/// The validation row's `column` in a run's metrics.csv of the epoch whose weights the run's
/// model holds (`summary.json`'s `model_epoch`: the best where early stopping restores it).
pub fn model_valid(run: &Path, column: &str) -> f64 {
    let epoch = summary(run)["model_epoch"]
        .as_u64()
        .expect("a model_epoch")
        .to_string();
    metric(run, column, |row| row[1] == "valid" && row[0] == epoch)
}

/// Says that `what` cannot run here, and `why`: under `CI=true` a failure, since CI must run
/// every check (`.ci/run` installs what they need); elsewhere a line saying what was skipped.
pub fn cannot_run(what: &str, why: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true, but {what} cannot run: {why}"
    );
    eprintln!("skipped {what}: {why}");
}

/// The Python that `EMBER_TEST_PYTHON` names, checked to import `modules` (a Python named but
/// lacking them is a broken setup, not a reason to skip). Unset, `None` and a skip line for
/// `what`; under `CI=true` unset is a failure, since CI must run every check.
pub fn test_python(modules: &[&str], what: &str) -> Option<String> {
    let list = modules.join(", ");
    let Ok(python) = std::env::var("EMBER_TEST_PYTHON") else {
        let why = format!(
            "EMBER_TEST_PYTHON is not set: it needs a Python with {list} (.ci/run makes one)"
        );
        cannot_run(what, &why);
        return None;
    };
    let probe = Command::new(&python)
        .args(["-c", &format!("import {list}")])
        .output();
    assert!(
        probe.as_ref().is_ok_and(|o| o.status.success()),
        "EMBER_TEST_PYTHON={python} cannot import {list} (pip install {}): {}",
        modules.join(" "),
        match &probe {
            Ok(o) => stderr(o),
            Err(e) => e.to_string(),
        }
    );
    Some(python)
}

/// A small tmpfs mounted for one test, unmounted when dropped: a disk that can be filled.
pub struct Tmpfs {
    pub path: PathBuf,
}

impl Tmpfs {
    /// A tmpfs of `megabytes` at `dir/disk`. Mounting needs root: where it fails, `None` and
    /// a skip line, but under `CI=true` (which runs as root) a failure.
    pub fn mount(dir: &Path, megabytes: usize) -> Option<Tmpfs> {
        let path = dir.join("disk");
        std::fs::create_dir_all(&path).unwrap();
        let size = format!("size={megabytes}m");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &size, "tmpfs", path_str(&path)])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !mounted {
            cannot_run(
                &format!("a full-disk test in {}", dir.display()),
                "cannot mount a small tmpfs here (needs root and mount rights)",
            );
            return None;
        }
        Some(Tmpfs { path })
    }

    /// Bytes free on the file system.
    pub fn free(&self) -> u64 {
        let out = Command::new("stat")
            .args(["-f", "-c", "%a %S", path_str(&self.path)])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut it = text.split_whitespace().map(|w| w.parse::<u64>().unwrap());
        it.next().unwrap() * it.next().unwrap()
    }

    /// Fills the file system until at most `leave` bytes are free (`0`: full), with a file
    /// of its own that [`Tmpfs::release`] removes.
    pub fn fill(&self, leave: u64) {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path.join("filler"))
            .unwrap();
        let chunk = vec![0x5au8; 64 * 1024];
        loop {
            let free = self.free();
            if free <= leave {
                break;
            }
            let n = (free - leave).min(chunk.len() as u64) as usize;
            if file.write_all(&chunk[..n]).is_err() {
                break;
            }
        }
        file.sync_all().ok();
    }

    /// Removes the filler: the space it held is free again.
    pub fn release(&self) {
        std::fs::remove_file(self.path.join("filler")).ok();
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        Command::new("umount")
            .arg(&self.path)
            .stderr(Stdio::null())
            .status()
            .ok();
    }
}

/// Asserts that ember failed with `code` and one `error:` line containing each of `needles`,
/// warnings aside, and no panic.
pub fn failed_with(o: &Output, code: i32, needles: &[&str]) {
    let err = stderr(o);
    assert_eq!(
        o.status.code(),
        Some(code),
        "stderr:\n{err}\nstdout:\n{}",
        stdout(o)
    );
    assert!(!err.contains("panicked"), "{err}");
    let lines: Vec<&str> = (err.lines())
        .filter(|l| !l.trim().is_empty() && !l.starts_with("warning: "))
        .collect();
    assert_eq!(lines.len(), 1, "expected one line, got:\n{err}");
    assert!(lines[0].starts_with("error: "), "{err}");
    for needle in needles {
        assert!(lines[0].contains(needle), "{needle:?} not in {err}");
    }
}
