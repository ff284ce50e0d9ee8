//! What a finished (or stopped) run reports, and the files made from it once training is over:
//! `summary.json` and `curves.png`.

use crate::config::JobConfig;
use crate::device::Device;
use crate::error::{EmberError, Result};
use crate::run::folder;
use crate::run::history::EpochRecord;
use crate::run::summary::Summary;
use std::path::PathBuf;

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
}

impl RunReport {
    /// Writes `summary.json` and (when an epoch finished) `curves.png` into the run folder, and
    /// returns the summary line to print.
    pub fn write_summary_and_curves(&self) -> Result<String> {
        let summary = Summary::from_report(self);
        summary.write(&self.run_dir.join(folder::SUMMARY))?;
        if !self.history.is_empty() {
            let curve = crate::plot::Curve {
                label: self.run_dir.display().to_string(),
                history: self.history.clone(),
            };
            let title = format!("{} ({})", self.config.name(), self.run_dir.display());
            crate::plot::draw(&[curve], &title, &self.run_dir.join(folder::CURVES))?;
        }
        Ok(summary.line(&self.run_dir))
    }
}
