//! A sweep's folder: copies of the sweep file and its base job (so the folder alone says what
//! ran, and Slurm tasks all read the same files), one run folder per trial, and a log per trial.
//!
//! ```text
//! SWEEP_DIR/sweep.toml       the sweep file, its `base` pointing at the copy beside it
//! SWEEP_DIR/base.toml        the base job file, as written
//! SWEEP_DIR/trial-NNN/       an ordinary run folder (config.toml, metrics.csv, model, ...)
//! SWEEP_DIR/unit-NNN/        a replica group's checkpoints, and the list of its trials
//! SWEEP_DIR/logs/trial-NNN.log   the trial's output; .exit holds its exit code once it ends
//! SWEEP_DIR/logs/unit-NNN.log    a replica group's output, and its .exit
//! SWEEP_DIR/sweep.json, sweep.png, sweep.sbatch   report and Slurm script
//! ```

use super::plan::{Plan, plan};
use crate::error::{EmberError, Result};
use crate::fs::describe_io;
use crate::input_err;
use crate::run::folder as run_folder;
use crate::run::summary::Summary;
use std::path::{Path, PathBuf};

pub use crate::run::folder::SWEEP;
pub const BASE: &str = "base.toml";
pub const LOGS: &str = "logs";
pub const REPORT_JSON: &str = "sweep.json";
pub const REPORT_PNG: &str = "sweep.png";
pub const SCRIPT: &str = "sweep.sbatch";

/// An open sweep folder.
pub struct SweepDir {
    pub path: PathBuf,
}

/// Where a trial stands, from its run folder.
#[derive(Debug)]
pub enum TrialState {
    /// Never started (or its folder holds no run yet).
    New,
    /// Started and stopped before the end, with a checkpoint to go on from.
    Unfinished,
    /// Started and stopped before its first checkpoint: it starts over.
    Lost,
    /// Another process holds its run lock.
    Busy,
    /// Ended: complete, diverged or failed, as its summary says (a trial the machine stopped,
    /// or Ctrl-C, has not ended: it goes on from its checkpoint).
    Ended(Box<Summary>),
}

impl SweepDir {
    /// Creates `out` (default `runs/<sweep>-<timestamp>`) with copies of the sweep file `sweep`
    /// (planned as `given`) and its base, or reopens it when it holds this same sweep. Returns
    /// the plan of the copy, with the `extra` overrides recorded in it.
    pub fn prepare(
        sweep: &Path,
        given: Plan,
        out: Option<&Path>,
        extra: &[String],
    ) -> Result<(SweepDir, Plan)> {
        let path = out.map_or_else(|| run_folder::fresh_default(&given.name), Path::to_path_buf);
        let dir = SweepDir { path };
        if dir.file(SWEEP).exists() {
            let held = plan(&dir.file(SWEEP), extra)?;
            let same_base = crate::fs::read_file(&held.base)? == crate::fs::read_file(&given.base)?;
            if held.trials != given.trials || !same_base {
                return Err(input_err!(
                    "--out {}: holds another sweep (its trials or base differ from {}); choose another folder",
                    dir.path.display(),
                    sweep.display()
                ));
            }
            dir.remove_temporaries();
            return Ok((dir, held));
        }
        if !dir.empty_or_started_only(&given.base)? {
            return Err(input_err!(
                "--out {}: is not empty and holds no sweep; choose a new folder",
                dir.path.display()
            ));
        }
        dir.copy_in(sweep, &given)?;
        let base = dir.file(BASE);
        Ok((dir, Plan { base, ..given }))
    }

    /// Opens an existing sweep folder (for the report).
    pub fn open(path: &Path) -> Result<(SweepDir, Plan)> {
        let dir = SweepDir {
            path: path.to_path_buf(),
        };
        if !dir.file(SWEEP).is_file() {
            return Err(input_err!(
                "{}: not an ember sweep folder (no {SWEEP})",
                path.display()
            ));
        }
        let plan = plan(&dir.file(SWEEP), &[])?;
        Ok((dir, plan))
    }

    /// Whether the folder is missing, empty, or holds only what [`Self::copy_in`] writes before
    /// the sweep file (the copy of `base` among it): a start killed that early is no dead end,
    /// it starts again.
    fn empty_or_started_only(&self, base: &Path) -> Result<bool> {
        let Ok(entries) = std::fs::read_dir(&self.path) else {
            return Ok(true);
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let is_empty = |p: &Path| std::fs::read_dir(p).is_ok_and(|mut d| d.next().is_none());
            let ours = match name.as_str() {
                LOGS => is_empty(&entry.path()),
                BASE => crate::fs::read_file(&entry.path())? == crate::fs::read_file(base)?,
                _ => Self::is_temporary(&name),
            };
            if !ours {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Writes the base and the sweep file (its `base` rewritten to the copy) into the folder.
    fn copy_in(&self, sweep: &Path, plan: &Plan) -> Result<()> {
        let base = &plan.base;
        std::fs::create_dir_all(self.path.join(LOGS)).map_err(|e| {
            input_err!(
                "--out {}: cannot create the folder ({})",
                self.path.display(),
                describe_io(&e)
            )
        })?;
        let text = String::from_utf8_lossy(&crate::fs::read_file(sweep)?).into_owned();
        let mut table: toml::Table =
            toml::from_str(&text).map_err(|e| EmberError::file(sweep, e.message().trim()))?;
        table.insert("base".into(), toml::Value::String(BASE.into()));
        table.insert("name".into(), toml::Value::String(plan.name.clone()));
        let set = plan.set.iter().cloned().map(toml::Value::String).collect();
        table.insert("set".into(), toml::Value::Array(set));
        let copy = format!(
            "# Copied by ember from {} (base: {}).\n{}",
            sweep.display(),
            base.display(),
            toml::to_string(&table).expect("a TOML table serialises")
        );
        // The sweep file last: a folder with it holds a whole sweep.
        crate::fs::write_atomic(&self.file(BASE), &crate::fs::read_file(base)?)?;
        crate::fs::write_atomic(&self.file(SWEEP), copy.as_bytes())?;
        self.remove_temporaries();
        Ok(())
    }

    /// Removes the temporary copies a start killed before its renames left behind.
    fn remove_temporaries(&self) {
        for entry in std::fs::read_dir(&self.path)
            .into_iter()
            .flatten()
            .flatten()
        {
            if Self::is_temporary(&entry.file_name().to_string_lossy()) {
                std::fs::remove_file(entry.path()).ok();
            }
        }
    }

    /// A temporary file of [`crate::fs::write_atomic`] writing the base or the sweep file.
    fn is_temporary(name: &str) -> bool {
        crate::fs::temporary_of(name).is_some_and(|f| f == BASE || f == SWEEP)
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// The run folder of trial `index`.
    pub fn trial(&self, index: usize) -> PathBuf {
        self.path.join(format!("trial-{index:03}"))
    }

    /// The folder of replica unit `unit`: the group's checkpoints and the list of its trials.
    pub fn unit(&self, unit: usize) -> PathBuf {
        self.path.join(format!("unit-{unit:03}"))
    }

    /// The log of trial `index`, and the file holding its exit code once it ended.
    pub fn log(&self, index: usize) -> (PathBuf, PathBuf) {
        self.log_of(&format!("trial-{index:03}"))
    }

    /// The log of replica unit `unit` (the trials' own logs stay empty), and its exit file.
    pub fn unit_log(&self, unit: usize) -> (PathBuf, PathBuf) {
        self.log_of(&format!("unit-{unit:03}"))
    }

    fn log_of(&self, name: &str) -> (PathBuf, PathBuf) {
        let stem = self.path.join(LOGS).join(name);
        (stem.with_extension("log"), stem.with_extension("exit"))
    }

    /// The exit code the trial's last process ended with, if any ended.
    pub fn exit_code(&self, index: usize) -> Option<i32> {
        let text = std::fs::read_to_string(self.log(index).1).ok()?;
        text.trim().parse().ok()
    }

    /// The trial's `summary.json`, where it has one that reads.
    pub fn summary(&self, index: usize) -> Option<Summary> {
        Summary::read(&self.trial(index).join(run_folder::SUMMARY)).ok()
    }

    /// Where trial `index` stands.
    pub fn state(&self, index: usize) -> TrialState {
        self.state_from(index, self.summary(index))
    }

    /// Where trial `index` stands, given its summary as already read.
    pub fn state_from(&self, index: usize, summary: Option<Summary>) -> TrialState {
        let dir = self.trial(index);
        if let Some(s) = summary
            && !matches!(s.status.as_str(), "interrupted" | "stopped")
        {
            return TrialState::Ended(Box::new(s));
        }
        if !dir.join(run_folder::CONFIG).is_file() {
            return TrialState::New;
        }
        if run_folder::in_use(&dir) {
            return TrialState::Busy;
        }
        match crate::run::checkpoint::latest(&dir.join(run_folder::CHECKPOINTS)) {
            Ok(_) => TrialState::Unfinished,
            Err(_) => TrialState::Lost,
        }
    }
}
