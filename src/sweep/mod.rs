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
pub mod unit;

pub use plan::{Plan, Trial, plan};

pub use crate::tracking::mlflow::SWEEP_NAME_ENV;
