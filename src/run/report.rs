//! What a finished (or stopped) run reports, and the files made from it once training is over:
//! `summary.json` and `curves.png`.

use crate::config::JobConfig;
use crate::device::Device;
use crate::error::{EmberError, Result};
use crate::run::folder;
use crate::run::history::EpochRecord;
use crate::run::summary::Summary;
use crate::tracking::mlflow::{Outcome, Status, Tracker};
use std::path::PathBuf;
use std::sync::Arc;

/// What a finished (or stopped) run reports.
pub struct RunReport {
    pub run_dir: PathBuf,
    pub config: JobConfig,
    pub device: Device,
    /// The device's hardware name (see `device::hardware`).
    pub adapter: String,
    pub history: Vec<EpochRecord>,
    pub wall_seconds: f64,
    pub failure: Option<EmberError>,
    pub data_source: String,
    /// Training rows left out because their label was missing.
    pub rows_without_label: usize,
    pub params: usize,
    /// Device-to-host reads of this process.
    pub host_reads: usize,
    /// The run's MLflow tracker, finished with the run's files once they are written.
    pub tracker: Option<Arc<Tracker>>,
    /// Kernel launches per training step, where they were counted (`device::launches`).
    pub launches_per_step: Option<f64>,
}

impl RunReport {
    /// Writes `curves.png` (when an epoch finished) and `summary.json` into the run folder,
    /// finishing the MLflow run in between (so that it gets the curves and the summary its
    /// outcome), and returns the summary line to print.
    pub fn write_summary_and_curves(&self) -> Result<String> {
        self.draw_curves();
        let mut summary = Summary::from_report(self);
        summary.mlflow = self.finish_tracking();
        summary.write(&self.run_dir.join(folder::SUMMARY))?;
        Ok(summary.line(&self.run_dir))
    }

    /// Uploads the run's files to MLflow and sets its status; what happened, for the summary.
    fn finish_tracking(&self) -> Option<Outcome> {
        let status = match &self.failure {
            None => Status::Finished,
            Some(EmberError::Interrupted(_)) => Status::Killed,
            Some(_) => Status::Failed,
        };
        let files = [
            folder::CONFIG,
            folder::MODEL_SAFETENSORS,
            folder::MODEL_ONNX,
            folder::CURVES,
        ];
        let files = files.iter().map(|f| self.run_dir.join(f)).collect();
        Some(self.tracker.as_ref()?.finish(status, files))
    }

    /// `curves.png`, which a run can do without: where it cannot be drawn, one warning.
    fn draw_curves(&self) {
        if self.history.is_empty() {
            return;
        }
        let curve = crate::plot::Curve {
            label: self.run_dir.display().to_string(),
            history: self.history.clone(),
        };
        let title = format!("{} ({})", self.config.name(), self.run_dir.display());
        let path = self.run_dir.join(folder::CURVES);
        if let Err(e) = crate::plot::draw(&[curve], &title, &path) {
            crate::console::warn_once("curves", &format!("{e}; the chart is skipped"));
        }
    }
}
