//! `summary.json`: one file per run that says what was trained, how it ended and how fast it
//! went; `ember runs` lists runs from these files.

use crate::error::{EmberError, Result};
use crate::fs::write_atomic;
use crate::run::folder;
use crate::run::history::EpochRecord;
use crate::run::report::RunReport;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Metrics {
    pub train_loss: f64,
    pub valid_loss: f64,
    pub valid_accuracy: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Best {
    pub valid_loss: f64,
    pub valid_loss_epoch: usize,
    pub valid_accuracy: Option<f64>,
    pub valid_accuracy_epoch: Option<usize>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub job: String,
    /// complete, diverged, interrupted or failed.
    pub status: String,
    pub message: Option<String>,
    pub config_hash: String,
    pub device: String,
    /// The hardware the device is: the GPU's or wgpu adapter's name, or `cpu`.
    pub adapter: String,
    pub data: String,
    /// Training rows left out because their label was missing (tables with typed columns).
    #[serde(default)]
    pub rows_without_label: usize,
    pub params: usize,
    pub epochs_done: usize,
    pub epochs_total: usize,
    pub batch_size: usize,
    /// The metrics of the epoch whose weights the final model holds (`model_epoch`).
    pub final_metrics: Option<Metrics>,
    /// The epoch whose weights `model.*` holds: the last, or the best where early stopping
    /// restores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_epoch: Option<usize>,
    pub best: Option<Best>,
    /// With early stopping: the epoch of `model-best.*` (the best by the watched metric).
    #[serde(default)]
    pub best_epoch: Option<usize>,
    /// Whether early stopping ended the run before its last epoch.
    #[serde(default)]
    pub stopped_early: bool,
    /// Time spent in training epochs (validation and start-up excluded).
    pub train_seconds: f64,
    /// From the start of the command to the end of the run.
    pub wall_seconds: f64,
    /// Training steps per second over all epochs of this process and earlier ones.
    pub steps_per_s: f64,
    /// Tensors this process read back from the device (ember's own reads; see
    /// `device::host_read`).
    pub host_reads: usize,
    /// The MLflow run, when one was asked for: its ids, or what failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlflow: Option<crate::tracking::mlflow::Outcome>,
    /// What decides how a CPU run rounds: the CPU's SIMD level, ember's kernels' and the gemm
    /// crate's (`ops::simd::numerics_key`). Absent from summaries written before it.
    #[serde(default)]
    pub cpu_numerics: Option<String>,
    /// Kernel launches per training step on a GPU device, where they were counted
    /// (`EMBER_LAUNCHES=1`, or `ember bench --launches`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launches_per_step: Option<f64>,
    /// The SHA-256 of each model file the run wrote, by name, so that a file damaged on disk
    /// is never loaded (`verify_model_file`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, String>,
    pub ember_version: String,
    pub burn_version: String,
    pub git_commit: Option<String>,
    pub finished_at: String,
}

impl Summary {
    pub fn from_report(r: &RunReport) -> Self {
        let h = &r.history;
        let (status, message) = match &r.failure {
            None => ("complete", None),
            Some(e @ EmberError::Diverged(_)) => ("diverged", Some(e.to_string())),
            Some(e @ EmberError::Interrupted(_)) => ("interrupted", Some(e.to_string())),
            // Stopped by the machine (a full disk, a failing write): `--resume` goes on.
            Some(e @ (EmberError::DiskFull(_) | EmberError::Runtime(_))) => {
                ("stopped", Some(e.to_string()))
            }
            Some(e) => ("failed", Some(e.to_string())),
        };
        // A fold from +0.0: `sum()` of no epochs is -0.0, printed as "-0.0 s".
        let train_seconds = h.iter().map(|e| e.train.seconds).fold(0.0, |a, b| a + b);
        let early = r
            .config
            .early_stopping
            .as_ref()
            .and_then(|rule| crate::run::early_stop::decide(h, rule));
        let steps: usize = h.iter().map(|e| e.train.steps).sum();
        let model_epoch = crate::run::early_stop::model_epoch(h, r.config.early_stopping.as_ref());
        let kept = h.iter().find(|e| Some(e.epoch) == model_epoch);
        Summary {
            job: r.config.name().to_string(),
            status: status.to_string(),
            message,
            config_hash: r.config.hash(),
            device: r.device.to_string(),
            adapter: r.adapter.clone(),
            data: r.data_source.clone(),
            rows_without_label: r.rows_without_label,
            params: r.params,
            epochs_done: h.last().map_or(0, |e| e.epoch),
            epochs_total: r.config.epochs,
            batch_size: r.config.batch_size,
            final_metrics: kept.map(|e| Metrics {
                train_loss: e.train.loss,
                valid_loss: e.valid.loss,
                valid_accuracy: e.valid.accuracy,
            }),
            model_epoch,
            best: best(h),
            best_epoch: early.map(|d| d.best_epoch),
            stopped_early: early.is_some_and(|d| d.stop)
                && r.failure.is_none()
                && h.last().is_some_and(|e| e.epoch < r.config.epochs),
            train_seconds,
            wall_seconds: r.wall_seconds,
            steps_per_s: if train_seconds > 0.0 {
                steps as f64 / train_seconds
            } else {
                0.0
            },
            host_reads: r.host_reads,
            mlflow: None,
            cpu_numerics: Some(crate::ops::simd::numerics_key()),
            files: model_hashes(&r.run_dir),
            launches_per_step: r.launches_per_step,
            ember_version: env!("CARGO_PKG_VERSION").to_string(),
            burn_version: crate::BURN_VERSION.to_string(),
            git_commit: option_env!("EMBER_GIT_COMMIT").map(str::to_string),
            finished_at: chrono::Local::now().to_rfc3339(),
        }
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_vec_pretty(self).expect("a summary always serialises");
        write_atomic(path, &text)
    }

    pub fn read(path: &Path) -> Result<Self> {
        let bytes = crate::fs::read_file(path)?;
        serde_json::from_slice(&bytes)
            .map_err(|e| EmberError::file(path, format!("not an ember summary ({e})")))
    }

    /// `valid loss 0.4123, valid accuracy 85.21 %` of the final model's epoch, which is named
    /// where it is not the last.
    pub fn metrics_text(&self) -> String {
        match &self.final_metrics {
            Some(m) => {
                let acc = m
                    .valid_accuracy
                    .map(|a| format!(", valid accuracy {:.2} %", 100.0 * a))
                    .unwrap_or_default();
                let restored = (self.model_epoch)
                    .filter(|&e| e != self.epochs_done)
                    .map(|e| format!(" (the model of epoch {e}, the best)"))
                    .unwrap_or_default();
                format!("valid loss {:.4}{acc}{restored}", m.valid_loss)
            }
            None => "no epoch finished".to_string(),
        }
    }

    /// The line printed at the end of `ember train`.
    pub fn line(&self, run_dir: &Path) -> String {
        let metrics = self.metrics_text();
        format!(
            "{} {} on {}: {}/{} epochs, {metrics}, train {:.1} s ({:.0} steps/s), wall {:.1} s -> {}",
            self.job,
            self.status,
            self.device,
            self.epochs_done,
            self.epochs_total,
            self.train_seconds,
            self.steps_per_s,
            self.wall_seconds,
            run_dir.display()
        )
    }
}

fn best(h: &[EpochRecord]) -> Option<Best> {
    let by_loss = h
        .iter()
        .filter(|e| e.valid.loss.is_finite())
        .min_by(|a, b| a.valid.loss.total_cmp(&b.valid.loss))?;
    let by_acc = h
        .iter()
        .filter_map(|e| e.valid.accuracy.map(|a| (e.epoch, a)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    Some(Best {
        valid_loss: by_loss.valid.loss,
        valid_loss_epoch: by_loss.epoch,
        valid_accuracy: by_acc.map(|(_, a)| a),
        valid_accuracy_epoch: by_acc.map(|(e, _)| e),
    })
}

/// The model files eval and predict load.
const MODEL_FILES: [&str; 4] = [
    folder::MODEL_BURN,
    folder::MODEL_SAFETENSORS,
    folder::MODEL_BEST_BURN,
    folder::MODEL_BEST_SAFETENSORS,
];

/// The SHA-256 of each model file in `run_dir`.
fn model_hashes(run_dir: &Path) -> BTreeMap<String, String> {
    (MODEL_FILES.iter())
        .filter_map(|name| {
            let bytes = std::fs::read(run_dir.join(name)).ok()?;
            Some((name.to_string(), crate::fs::sha256_hex(&bytes)))
        })
        .collect()
}

/// Fails where the `summary.json` beside a model file records another SHA-256 for it than its
/// bytes have now: the file was damaged (or replaced) after the run wrote it.
pub fn verify_model_file(path: &Path) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let Ok(summary) = Summary::read(&dir.join(folder::SUMMARY)) else {
        return Ok(());
    };
    let Some(recorded) = name.and_then(|n| summary.files.get(&n).cloned()) else {
        return Ok(());
    };
    if crate::fs::sha256_hex(&crate::fs::read_file(path)?) != recorded {
        return Err(EmberError::file(
            path,
            format!(
                "damaged model file: its SHA-256 is not the one {} recorded when the run wrote it",
                folder::SUMMARY
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Metrics;

    /// summary.json's numbers read back to the f64 that was written, bit for bit, as
    /// metrics.csv's do (serde_json without `float_roundtrip` read this loss one unit in the
    /// last place off).
    #[test]
    fn metrics_read_back_bit_for_bit() {
        let m = Metrics {
            train_loss: f64::from_bits(0x400268d2740da741),
            valid_loss: 2.3011826578776042,
            valid_accuracy: Some(0.1 + 0.2),
        };
        let text = serde_json::to_string(&m).unwrap();
        let back: Metrics = serde_json::from_str(&text).unwrap();
        assert_eq!(back.train_loss.to_bits(), 0x400268d2740da741, "{text}");
        assert_eq!(back.valid_loss.to_bits(), m.valid_loss.to_bits(), "{text}");
        assert_eq!(
            back.valid_accuracy.map(f64::to_bits),
            m.valid_accuracy.map(f64::to_bits)
        );
    }
}
