//! A run's artifact folder: created only once the inputs are known to be good, checked for room
//! and write access before training starts, and locked so that two ember processes never write
//! into the same folder.

use crate::error::{EmberError, Result};
use crate::fs::{describe_io, human_bytes};
use crate::input_err;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The files of a run, by name.
pub const CONFIG: &str = "config.toml";
/// The job `ember train --csv` drafted, as `ember init` writes it (comments and all).
pub const DRAFTED_JOB: &str = "job.toml";
pub const METRICS: &str = "metrics.csv";
pub const SUMMARY: &str = "summary.json";
pub const CURVES: &str = "curves.png";
pub const MODEL_BURN: &str = "model.mpk";
pub const MODEL_SAFETENSORS: &str = "model.safetensors";
/// The model as ONNX, with its preprocessing (`ember export --format onnx`, `train --export onnx`).
pub const MODEL_ONNX: &str = "model.onnx";
/// The best epoch's model, kept when early stopping is on.
pub const MODEL_BEST_BURN: &str = "model-best.mpk";
pub const MODEL_BEST_SAFETENSORS: &str = "model-best.safetensors";
pub const CHECKPOINTS: &str = "checkpoint";
/// A sweep's folder holds its sweep file under this name, beside its trials' run folders
/// (`ember runs` lists those in their numbered order).
pub const SWEEP: &str = "sweep.toml";
const LOCK: &str = ".ember.lock";

/// An open, locked run folder. The lock is released when this is dropped or the process ends.
pub struct RunDir {
    pub path: PathBuf,
    _lock: File,
}

impl RunDir {
    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Creates a new run folder (`--out`, or `runs/<job>-<timestamp>`), refusing one that already
    /// holds a run or that another process is using.
    pub fn create(out: Option<&Path>, job: &str, needed_bytes: u64) -> Result<RunDir> {
        let path = match out {
            Some(p) => p.to_path_buf(),
            None => fresh_default(job),
        };
        std::fs::create_dir_all(&path).map_err(|e| {
            input_err!(
                "--out {}: cannot create the folder ({})",
                path.display(),
                describe_io(&e)
            )
        })?;
        let run = Self::lock(&path)?;
        if path.join(CONFIG).exists() {
            return Err(input_err!(
                "--out {}: already holds a run; choose another folder or continue it with --resume {}",
                path.display(),
                path.display()
            ));
        }
        run.check_room(needed_bytes)?;
        Ok(run)
    }

    /// Opens an existing run folder to continue it.
    pub fn open(path: &Path, needed_bytes: u64) -> Result<RunDir> {
        if !path.join(CONFIG).is_file() {
            return Err(no_run(path));
        }
        let run = Self::lock(path)?;
        run.check_room(needed_bytes)?;
        Ok(run)
    }

    fn lock(path: &Path) -> Result<RunDir> {
        let lock_path = path.join(LOCK);
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&lock_path)
            .map_err(|e| {
                input_err!(
                    "{}: cannot write into the run folder ({})",
                    path.display(),
                    describe_io(&e)
                )
            })?;
        match try_lock_briefly(&file) {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let owner = std::fs::read_to_string(&lock_path).unwrap_or_default();
                return Err(input_err!(
                    "{}: another ember process{} is writing to this folder",
                    path.display(),
                    match owner.trim() {
                        "" => String::new(),
                        pid => format!(" (pid {pid})"),
                    }
                ));
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(input_err!(
                    "{}: cannot lock the run folder ({})",
                    path.display(),
                    describe_io(&e)
                ));
            }
        }
        file.set_len(0).ok();
        let _ = write!(file, "{}", std::process::id());
        Ok(RunDir {
            path: path.to_path_buf(),
            _lock: file,
        })
    }

    /// Fails early when the folder cannot take the run's files.
    fn check_room(&self, needed_bytes: u64) -> Result<()> {
        // A real write, not just a permission check: read-only mounts and full disks show here.
        let probe = self.path.join(".ember-write-test");
        let written = std::fs::write(&probe, vec![0u8; 4096]);
        std::fs::remove_file(&probe).ok();
        if let Err(e) = written {
            return Err(input_err!(
                "{}: cannot write into the run folder ({})",
                self.path.display(),
                describe_io(&e)
            ));
        }
        let free = fs4::available_space(&self.path).unwrap_or(u64::MAX);
        if free < needed_bytes {
            return Err(EmberError::DiskFull(format!(
                "disk full: {} has only {} free, the run needs about {} for checkpoints and the final model",
                self.path.display(),
                human_bytes(free),
                human_bytes(needed_bytes)
            )));
        }
        Ok(())
    }
}

/// `--resume DIR` of a folder without `config.toml`: it holds no run (or one killed before it
/// wrote its config), and `--out DIR` may start one there.
pub fn no_run(dir: &Path) -> EmberError {
    input_err!(
        "--resume {}: holds no run (no {CONFIG}); start one there with: ember train JOB.toml --out {}",
        dir.display(),
        dir.display()
    )
}

/// Takes the lock, waiting up to a second for a holder that only looks (`in_use`, from a sweep
/// or a report) to let go.
fn try_lock_briefly(file: &File) -> std::result::Result<(), std::fs::TryLockError> {
    let mut tries = 0;
    loop {
        match file.try_lock() {
            Err(std::fs::TryLockError::WouldBlock) if tries < 20 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

/// Whether another process holds the run lock of the folder at `path`. It takes the lock for a
/// moment to find out; `RunDir::lock` waits that moment out.
pub fn in_use(path: &Path) -> bool {
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path.join(LOCK))
    else {
        return false;
    };
    matches!(file.try_lock(), Err(std::fs::TryLockError::WouldBlock))
}

/// `runs/<job>-<YYYYmmdd-HHMMSS>`, with a suffix when two runs start in the same second.
pub fn fresh_default(job: &str) -> PathBuf {
    let stamp = chrono::Local::now().format("%Y%m%d-%H%M%S");
    let base = PathBuf::from("runs").join(format!("{job}-{stamp}"));
    let mut path = base.clone();
    let mut n = 2;
    while path.exists() {
        path = PathBuf::from(format!("{}-{n}", base.display()));
        n += 1;
    }
    path
}
