//! What one epoch of a run measured, split by split: the record that `metrics.csv`, the
//! trackers, `curves.png`, `summary.json`, early stopping and the checkpoint manifests are made
//! from.

use serde::{Deserialize, Serialize};

/// One split of one epoch.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct SplitRecord {
    pub loss: f64,
    pub accuracy: Option<f64>,
    pub seconds: f64,
    pub steps: usize,
    /// A regression's mean absolute error and R² (validation passes).
    #[serde(default)]
    pub mae: Option<f64>,
    #[serde(default)]
    pub r2: Option<f64>,
    /// The learning rate at the end of a training pass.
    #[serde(default)]
    pub lr: Option<f64>,
}

impl SplitRecord {
    /// This record in a standardised target's own units: the loss (a mean squared error)
    /// times `std`², the MAE times `std`; R² is the same in both.
    pub fn in_target_units(self, std: f64) -> SplitRecord {
        SplitRecord {
            loss: self.loss * std * std,
            mae: self.mae.map(|m| m * std),
            ..self
        }
    }

    pub fn steps_per_s(&self) -> f64 {
        if self.seconds > 0.0 {
            self.steps as f64 / self.seconds
        } else {
            0.0
        }
    }
}

/// One epoch: training then validation.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct EpochRecord {
    pub epoch: usize,
    pub train: SplitRecord,
    pub valid: SplitRecord,
}
