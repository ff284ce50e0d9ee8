//! The job file exactly as written: every field optional but checked by serde for its type and
//! spelling (unknown keys and unknown enum values are errors that name the line).

use super::augment::RawAugment;
use super::conv::{Pooling, RawConv};
use super::{
    Activation, Channels, ClassWeight, Init, InputScale, Monitor, Preset, ScheduleKind, Source,
    Task,
};
use crate::config::columns::{ColumnKind, Encoding, Scaling};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The job file. `job` names a preset (its defaults fill what the file leaves out); without
/// one the file describes its own model and data (`task`, `[model] hidden`, `[data] source`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<Preset>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<Task>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epochs: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch_size: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shuffle: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drop_last: Option<bool>,
    /// Train on the first N rows of the training split only (`--max-train-rows`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_train_rows: Option<usize>,
    /// Validate on the first N rows of the validation split only (`--max-valid-rows`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_valid_rows: Option<usize>,
    /// Scale the gradients so that their global L2 norm is at most this (PyTorch's
    /// `clip_grad_norm_`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clip_grad_norm: Option<f64>,
    /// classification, binary: "balanced", or a weight per class name (Keras' `class_weight`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class_weight: Option<ClassWeight>,
    #[serde(default, skip_serializing_if = "RawData::is_empty")]
    pub data: RawData,
    #[serde(default, skip_serializing_if = "RawModel::is_empty")]
    pub model: RawModel,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sgd: Option<RawSgd>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adam: Option<RawAdam>,
    /// Adam with decoupled weight decay (PyTorch's `AdamW`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adamw: Option<RawAdam>,
    /// The learning-rate schedule; absent, the rate is constant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<RawSchedule>,
    /// The `--set KEY=VALUE` overrides applied to the job file (recorded by ember).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<String>,
    /// Write TensorBoard event files in the run folder (default true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tensorboard: Option<bool>,
    /// Stop when a validation metric stops improving.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub early_stopping: Option<RawEarlyStopping>,
}

/// `[early_stopping]`: stop after `patience` epochs without an improvement of `metric` by
/// more than `min_delta`; with `restore_best`, the final model is the best epoch's.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawEarlyStopping {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric: Option<Monitor>,
    pub patience: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_delta: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restore_best: Option<bool>,
}

/// `[schedule]`: how the learning rate moves, in epochs; it steps every batch.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawSchedule {
    pub kind: ScheduleKind,
    /// step: epochs between two decays.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_epochs: Option<f64>,
    /// step: the factor of each decay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gamma: Option<f64>,
    /// warmup-cosine: epochs of linear warm-up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warmup_epochs: Option<f64>,
    /// cosine, warmup-cosine: the schedule's length; unset, the run's first `epochs`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epochs: Option<f64>,
    /// cosine, warmup-cosine: the rate at the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_lr: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawData {
    /// idx, csv or synthetic; unset, it follows from `dir`/`csv` or the preset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
    /// idx: the folder holding the four IDX files. images: the folder of class subfolders.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
    /// idx, images: "unit" (pixels / 255) or "raw" (0..255).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_scale: Option<InputScale>,
    /// images: class subfolders to validate on (instead of `valid_fraction`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid_dir: Option<PathBuf>,
    /// images: class subfolders to test on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test_dir: Option<PathBuf>,
    /// images: `[height, width]` every image is resized to; unset, the first image's size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_size: Option<[usize; 2]>,
    /// images: "grayscale" or "rgb".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channels: Option<Channels>,
    /// csv: a CSV file with a header row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub csv: Option<PathBuf>,
    /// csv: the label (or single target) column.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The older name of `label`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_column: Option<String>,
    /// csv, regression: the target columns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub targets: Option<Vec<String>>,
    /// csv: the input columns, in this order; unset, every column but the label and `ignore`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub features: Option<Vec<String>>,
    /// csv: columns that are neither inputs nor labels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignore: Option<Vec<String>>,
    /// csv: every column's type but the label's: "numeric", "category", "date" or "ignore"
    /// (`ember init` writes it). Given, missing cells are filled and text is encoded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub columns: Option<BTreeMap<String, ColumnKind>>,
    /// csv with columns: the cells that mean "missing" (default "", NA, NaN, null, ?; any case).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing_values: Option<Vec<String>>,
    /// csv with columns: category columns looked up in a table of learned vectors, each with
    /// the vectors' width, in place of one input per level.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embed: Option<BTreeMap<String, usize>>,
    /// csv with columns: numeric columns scaled otherwise than as they are ("robust": centred
    /// on the median, divided by the spread of the middle half, heavy tails clipped smoothly).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scaling: Option<BTreeMap<String, Scaling>>,
    /// csv with columns: each input column's encoding, fitted by ember on the training file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encoding: Option<Vec<Encoding>>,
    /// linear-scalar: the column multiplied by the learned scalar p.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scalar_column: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid_fraction: Option<f64>,
    /// csv, synthetic: cross-validation; the training rows in this many stratified folds, of
    /// which `fold` validates (instead of `valid_fraction`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub folds: Option<usize>,
    /// With `folds`: the held-out fold, from 0 (default 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fold: Option<usize>,
    /// The seed of the validation split (and of the image files' order); unset, `seed`. A
    /// sweep pins it, so that every trial holds out the same rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split_seed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid_csv: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test_csv: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standardize: Option<bool>,
    /// Column means and standard deviations of the inputs, written by ember once computed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feature_mean: Option<Vec<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feature_std: Option<Vec<f64>>,
    /// csv, regression with one target: train on the target scaled to zero mean and unit
    /// deviation (training split's statistics); losses, MAE and predictions stay in its units.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standardize_target: Option<bool>,
    /// The target's mean and standard deviation, written by ember once computed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_mean: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_std: Option<f64>,
    /// The class names in output order, written by ember from the training labels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub classes: Option<Vec<String>>,
    /// The training loss's weight of each class, in `classes` order, written by ember from
    /// `class_weight` and the training labels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class_weights: Option<Vec<f64>>,
}

impl RawData {
    fn is_empty(&self) -> bool {
        *self == RawData::default()
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawModel {
    /// Widths of the hidden layers, `[]` for none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hidden: Option<Vec<usize>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub activation: Option<Activation>,
    /// Probability of zeroing a hidden unit in training.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dropout: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init: Option<Init>,
    /// Input columns of the first layer; written by ember from the data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inputs: Option<usize>,
    /// Outputs of the last layer; written by ember from the task and the data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outputs: Option<usize>,
    /// What turns a convolutional network's last maps into the head's inputs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pooling: Option<Pooling>,
    /// A convolutional network's `[channels, height, width]` input; written by ember from the
    /// data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<[usize; 3]>,
    /// A convolutional network's train-time augmentation (`[model.augment]`; absent, none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub augment: Option<RawAugment>,
    /// Convolution blocks before the hidden layers (`[[model.conv]]`, last: TOML writes arrays
    /// of tables after the plain keys).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conv: Option<Vec<RawConv>>,
}

impl RawModel {
    fn is_empty(&self) -> bool {
        *self == RawModel::default()
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawSgd {
    pub lr: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub momentum: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dampening: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nesterov: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight_decay: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawAdam {
    pub lr: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub beta1: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub beta2: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epsilon: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight_decay: Option<f64>,
}
