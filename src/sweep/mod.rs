//! `ember sweep`: many trials of one job. A sweep file names a base job file and the axes to
//! vary; `plan` expands it into numbered trials grouped into units, `run` trains them into one
//! sweep folder (on this machine, or one unit per Slurm array task through the script that
//! `slurm` writes), and `report` ranks them.

mod chart;
pub mod folder;
pub mod legible;
pub mod plan;
pub mod report;
pub mod run;
pub mod slurm;

pub use plan::{Plan, Trial, plan};

/// Set by `ember sweep run` for its trials' processes: the sweep's name, which an MLflow run
/// takes as its experiment (unless `--experiment` says otherwise) and as a tag.
pub const SWEEP_NAME_ENV: &str = "EMBER_SWEEP";

/// This ember binary's absolute path: what the trials and the Slurm tasks run.
pub(crate) fn ember_binary() -> crate::error::Result<std::path::PathBuf> {
    std::env::current_exe().map_err(|e| {
        crate::error::EmberError::Runtime(format!("cannot find the ember binary: {e}"))
    })
}
