//! The job file: a TOML document read with unknown keys rejected ([`RawConfig`], `raw.rs`),
//! then checked once into a [`JobConfig`] that the rest of ember can trust (`check.rs`).
//!
//! A job is one general MLP (any hidden widths and activation; a classification, binary or
//! regression task) on one data source (IDX files, a CSV file, a built-in table), or the
//! linear-scalar model. The three seed jobs are presets: `job = "fashion-mlp"` fills the
//! defaults of the first seed's network and data, and anything the file sets wins.
//!
//! The resolved config (every default written out, and what ember learns from the data: input
//! width, class names, standardisation statistics) is saved with each run as `config.toml`, so
//! a run can be resumed, evaluated and exported from its folder alone.

pub mod augment;
mod check;
mod class_weight;
pub mod columns;
pub mod conv;
mod overrides;
mod raw;

pub use augment::Augment;
pub use class_weight::{ClassWeight, class_counts, is_weight};
pub use conv::{ConvSpec, Pooling};
pub use raw::{RawAdam, RawConfig, RawData, RawEarlyStopping, RawModel, RawSchedule, RawSgd};

use crate::config::columns::{ColumnKind, Encoding, Missing};
use crate::error::{EmberError, Result};
use crate::input_err;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The seed jobs, as presets of the general model (linear-scalar keeps its own model).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    FashionMlp,
    TabularMlp,
    LinearScalar,
}

impl Preset {
    pub fn name(self) -> &'static str {
        match self {
            Preset::FashionMlp => "fashion-mlp",
            Preset::TabularMlp => "tabular-mlp",
            Preset::LinearScalar => "linear-scalar",
        }
    }
}

/// What the last layer predicts, and so its width, loss and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Task {
    /// K classes: softmax cross-entropy, accuracy.
    Classification,
    /// Two classes: one logit, binary cross-entropy on logits, accuracy at logit 0.
    Binary,
    /// One or more real targets: mean squared error, with MAE and R².
    Regression,
}

impl Task {
    pub fn is_classifier(self) -> bool {
        self != Task::Regression
    }
}

/// The activation after each hidden layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Activation {
    Relu,
    Tanh,
    Gelu,
    Sigmoid,
    Identity,
}

/// Where a job's rows come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// FashionMNIST/MNIST-format IDX files.
    Idx,
    /// A CSV file with a header row.
    Csv,
    /// A folder of class subfolders of PNG and JPEG files.
    Images,
    /// The built-in table of the preset: tabular-mlp's synthetic table, linear-scalar's arange.
    Synthetic,
}

/// How IDX pixels reach the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputScale {
    /// Pixels / 255, as torchvision's `ToTensor` (the PyTorch recipe).
    Unit,
    /// Pixels as 0..255 floats, as the Keras code fed them.
    Raw,
}

impl InputScale {
    /// What each pixel byte is multiplied by, in f32 (the data sources and the ONNX graph
    /// alike, so that both give the same floats).
    pub fn factor(self) -> f32 {
        match self {
            InputScale::Unit => 1.0 / 255.0,
            InputScale::Raw => 1.0,
        }
    }
}

/// The colour channels an image source reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Channels {
    /// One channel (luma).
    Grayscale,
    /// Three channels, interleaved per pixel (row-major height x width x 3).
    Rgb,
}

impl Channels {
    pub fn count(self) -> usize {
        match self {
            Channels::Grayscale => 1,
            Channels::Rgb => 3,
        }
    }
}

/// How weights start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Init {
    /// PyTorch's `nn.Linear`: weights and biases uniform in ±1/sqrt(fan_in).
    Torch,
    /// Keras' `Dense`: Glorot-uniform weights, zero biases.
    Keras,
}

/// The optimizer, with PyTorch's defaults for what the file leaves out.
#[derive(Debug, Clone, PartialEq)]
pub enum OptimizerSpec {
    Sgd {
        lr: f64,
        momentum: f64,
        dampening: f64,
        nesterov: bool,
        /// L2 penalty added to the gradient.
        weight_decay: f64,
    },
    Adam {
        lr: f64,
        beta1: f64,
        beta2: f64,
        epsilon: f64,
        /// L2 penalty added to the gradient (`[adam]`), or decoupled decay (`[adamw]`).
        weight_decay: f64,
        /// `[adamw]`: the weights shrink by `lr * weight_decay` apart from the Adam step.
        decoupled: bool,
    },
}

impl OptimizerSpec {
    pub fn lr(&self) -> f64 {
        match self {
            OptimizerSpec::Sgd { lr, .. } | OptimizerSpec::Adam { lr, .. } => *lr,
        }
    }
}

/// The schedule kinds of `[schedule] kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScheduleKind {
    Constant,
    Step,
    Cosine,
    WarmupCosine,
}

/// The learning-rate schedule, checked; lengths in epochs.
#[derive(Debug, Clone, PartialEq)]
pub enum ScheduleSpec {
    Constant,
    /// The rate times `gamma` every `every` epochs.
    Step {
        every: f64,
        gamma: f64,
    },
    /// Linear warm-up over `warmup` epochs (0: none), then a half cosine down to `min_lr` at
    /// epoch `epochs` (unset until the run starts: then its `epochs`).
    Cosine {
        warmup: f64,
        epochs: Option<f64>,
        min_lr: f64,
    },
}

/// The validation metric that early stopping watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Monitor {
    ValidLoss,
    ValidAccuracy,
    ValidMae,
    ValidR2,
}

impl Monitor {
    pub fn higher_is_better(self) -> bool {
        matches!(self, Monitor::ValidAccuracy | Monitor::ValidR2)
    }
}

/// Early stopping, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct EarlyStopping {
    pub metric: Monitor,
    pub patience: usize,
    pub min_delta: f64,
    /// The run's final model (`model.*`) is the best epoch's, not the last one's.
    pub restore_best: bool,
}

/// Column statistics used to standardise inputs: `(x - mean) / std`.
#[derive(Debug, Clone, PartialEq)]
pub struct Standardization {
    pub mean: Vec<f64>,
    pub std: Vec<f64>,
}

/// Where a job's data comes from, checked.
#[derive(Debug, Clone, PartialEq)]
// One per job, never in a collection: the table's size (its typed columns and encodings) costs
// nothing, and a box would only add a deref to every match.
#[allow(clippy::large_enum_variant)]
pub enum DataSpec {
    Idx {
        /// Explicit folder; `None` searches `datasets/fashion-mnist` then the Debian location.
        dir: Option<PathBuf>,
        input_scale: InputScale,
        /// 0: validate on the test files. Otherwise this share of the training images is held
        /// out for validation, and the test files are the test split.
        valid_fraction: f64,
    },
    Table(TableSpec),
    Images(ImageSpec),
}

/// A folder of class subfolders of images, decoded, resized and scaled by ember.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageSpec {
    pub dir: PathBuf,
    pub valid_dir: Option<PathBuf>,
    pub test_dir: Option<PathBuf>,
    /// `[height, width]`; `None` until the first image is read.
    pub size: Option<[usize; 2]>,
    pub channels: Channels,
    pub input_scale: InputScale,
    /// Share held out for validation; 0 when `valid_dir` is given.
    pub valid_fraction: f64,
}

/// A table: a CSV file or a built-in one.
#[derive(Debug, Clone, PartialEq)]
pub struct TableSpec {
    /// `None` = the preset's built-in table.
    pub csv: Option<PathBuf>,
    /// The label column (classification, binary) or the target columns (regression).
    pub targets: Vec<String>,
    /// The input columns in order; `None` until read: every column but targets and `ignore`.
    pub features: Option<Vec<String>>,
    pub ignore: Vec<String>,
    /// `[data.columns]`: every column's type; `None` for a table of numbers only.
    pub columns: Option<BTreeMap<String, ColumnKind>>,
    /// `data.missing_values`, when given.
    pub missing_values: Option<Vec<String>>,
    /// `[data.embed]`: the embedded category columns and their vectors' widths.
    pub embed: columns::Embed,
    /// `[data.scaling]`: the numeric columns scaled robustly.
    pub scaling: columns::Scalings,
    /// The inputs' encodings, once fitted on the training file (with `columns`).
    pub encoding: Option<Vec<Encoding>>,
    /// linear-scalar only.
    pub scalar_column: Option<String>,
    /// Share held out for validation; 0 when `valid_csv` or `fold` is given.
    pub valid_fraction: f64,
    /// Cross-validation: the fold of the training rows held out to validate on.
    pub fold: Option<Fold>,
    pub valid_csv: Option<PathBuf>,
    pub test_csv: Option<PathBuf>,
    pub standardize: bool,
    /// Train on the standardised target (one regression target).
    pub standardize_target: bool,
    /// The target's (mean, standard deviation): known from a resolved config, or computed.
    pub target_stats: Option<(f64, f64)>,
    /// Known statistics (from a resolved config); computed from the train split otherwise.
    pub stats: Option<Standardization>,
}

/// Fold `index` of `count` (`data.folds`, `data.fold`): a stratified part of the training
/// rows, held out to validate on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fold {
    pub count: usize,
    pub index: usize,
}

impl JobConfig {
    /// The standard deviation a regression's target was divided by for training, if it was:
    /// losses and MAE are reported multiplied back (`run::history`).
    pub fn target_std(&self) -> Option<f64> {
        match &self.data {
            DataSpec::Table(t) => t.target_stats.map(|s| s.1),
            _ => None,
        }
    }
}

impl TableSpec {
    /// The spellings of a missing cell: `data.missing_values`, or the defaults.
    pub fn missing(&self) -> Missing {
        self.missing_values
            .as_deref()
            .map_or_else(Missing::default, Missing::new)
    }
}

/// Which network: the general MLP, a convolutional network before such an MLP, or
/// linear-scalar's own model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelKind {
    Mlp,
    Cnn,
    LinearScalar,
}

/// The network, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpec {
    pub kind: ModelKind,
    pub hidden: Vec<usize>,
    pub activation: Activation,
    pub dropout: f64,
    pub init: Init,
    /// Input width, once known from the data.
    pub inputs: Option<usize>,
    /// Output width, once known from the task and the data.
    pub outputs: Option<usize>,
    /// A convolutional network's blocks (`Cnn` only; empty otherwise).
    pub conv: Vec<ConvSpec>,
    pub pooling: Pooling,
    /// A convolutional network's `[channels, height, width]` input, once known from the data.
    pub image: Option<[usize; 3]>,
    /// A convolutional network's train-time augmentation.
    pub augment: Option<Augment>,
}

impl ModelSpec {
    /// Whether a training step draws from the step's seed (dropout masks, augmentation).
    pub fn draws_per_step(&self) -> bool {
        self.dropout > 0.0 || self.augment.is_some()
    }
}

/// A checked job: every value here has passed validation.
#[derive(Debug, Clone, PartialEq)]
pub struct JobConfig {
    pub preset: Option<Preset>,
    pub task: Task,
    pub seed: u64,
    pub epochs: usize,
    pub batch_size: usize,
    pub shuffle: bool,
    pub drop_last: bool,
    pub max_train_rows: Option<usize>,
    pub max_valid_rows: Option<usize>,
    pub data: DataSpec,
    /// Class names in output order (classification, binary), once read from the labels.
    pub classes: Option<Vec<String>>,
    /// `class_weight` as the job file gives it (classifiers).
    pub class_weight: Option<ClassWeight>,
    /// Each class's weight in the training loss, in `classes` order, once resolved.
    pub class_weights: Option<Vec<f64>>,
    pub model: ModelSpec,
    pub optimizer: OptimizerSpec,
    pub schedule: ScheduleSpec,
    pub clip_grad_norm: Option<f64>,
    pub early_stopping: Option<EarlyStopping>,
    /// Write TensorBoard event files in the run folder.
    pub tensorboard: bool,
    /// The `--set` overrides the config was made with, as given (already applied).
    pub overrides: Vec<String>,
    /// `data.split_seed`: the validation split's own seed, when it is not `seed`.
    pub split_seed: Option<u64>,
}

/// Reads and checks a job file.
pub fn load(path: &Path) -> Result<JobConfig> {
    load_with(path, &[])
}

/// Reads a job file, applies `--set KEY=VALUE` overrides, and checks the result.
pub fn load_with(path: &Path, overrides: &[String]) -> Result<JobConfig> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| EmberError::file(path, crate::fs::describe_io(&e)))?;
    parse_with(path, &text, overrides)
}

/// A job file's `text`, read from `path` (which errors name), with `--set KEY=VALUE`
/// overrides applied, checked.
pub fn parse_with(path: &Path, text: &str, overrides: &[String]) -> Result<JobConfig> {
    let raw = parse(path, text)?;
    let raw = match overrides {
        [] => raw,
        _ => overrides::apply(text, overrides)?,
    };
    raw.check().map_err(|e| match e {
        EmberError::Input(msg) => EmberError::Input(format!("{}: {msg}", path.display())),
        other => other,
    })
}

/// Parses TOML text into a [`RawConfig`], turning serde's multi-line report into one line
/// `FILE:LINE: message`.
pub fn parse(path: &Path, text: &str) -> Result<RawConfig> {
    toml::from_str::<RawConfig>(text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
        let message = e.message().trim().replace('\n', " ");
        match line {
            Some(line) => input_err!("{}:{line}: {message}", path.display()),
            None => input_err!("{}: {message}", path.display()),
        }
    })
}

impl JobConfig {
    /// The job's name in logs, run folders and summaries: the preset's, or "mlp" or "cnn".
    pub fn name(&self) -> &'static str {
        match (self.preset, self.model.kind) {
            (Some(preset), _) => preset.name(),
            (None, ModelKind::Cnn) => "cnn",
            (None, _) => "mlp",
        }
    }

    /// The seed that draws the validation split (and orders image files).
    pub fn split_seed(&self) -> u64 {
        self.split_seed.unwrap_or(self.seed)
    }

    /// The table spec, for table sources.
    pub fn table(&self) -> Option<&TableSpec> {
        match &self.data {
            DataSpec::Table(t) => Some(t),
            _ => None,
        }
    }

    /// The standardisation statistics in use, if any.
    pub fn standardization(&self) -> Option<&Standardization> {
        self.table().and_then(|t| t.stats.as_ref())
    }

    /// How the model's layers are named in PyTorch: the seed modules' own names for the
    /// presets (`linear_relu_stack.0`, `fc.0`), `net.N` of an `nn.Sequential` otherwise. (Not
    /// Burn's own `layers`: the renaming `layers.1` → `layers.2` would then chain.)
    pub fn torch_stack(&self) -> &'static str {
        match self.preset {
            Some(Preset::FashionMlp) => "linear_relu_stack",
            Some(Preset::TabularMlp) => "fc",
            _ => "net",
        }
    }

    /// The resolved config with every default written out, as saved with a run.
    pub fn to_raw(&self) -> RawConfig {
        let (sgd, adam, adamw) = self.raw_optimizer();
        let m = &self.model;
        let mlp = m.kind != ModelKind::LinearScalar;
        let cnn = m.kind == ModelKind::Cnn;
        RawConfig {
            job: self.preset,
            task: Some(self.task),
            seed: Some(self.seed),
            epochs: Some(self.epochs),
            batch_size: Some(self.batch_size),
            shuffle: Some(self.shuffle),
            drop_last: Some(self.drop_last),
            max_train_rows: self.max_train_rows,
            max_valid_rows: self.max_valid_rows,
            data: self.raw_data(),
            model: RawModel {
                hidden: mlp.then(|| m.hidden.clone()),
                activation: mlp.then_some(m.activation),
                dropout: mlp.then_some(m.dropout),
                init: Some(m.init),
                inputs: m.inputs,
                outputs: m.outputs,
                pooling: cnn.then_some(m.pooling),
                image: m.image,
                augment: m.augment.map(Augment::to_raw),
                conv: cnn.then(|| m.conv.iter().map(|b| b.to_raw()).collect()),
            },
            sgd,
            adam,
            adamw,
            schedule: self.raw_schedule(),
            clip_grad_norm: self.clip_grad_norm,
            class_weight: self.class_weight.clone(),
            overrides: self.overrides.clone(),
            // Written only when off: the default leaves resolved configs (and hashes) as before.
            tensorboard: (!self.tensorboard).then_some(false),
            early_stopping: self.early_stopping.as_ref().map(|e| RawEarlyStopping {
                metric: Some(e.metric),
                patience: e.patience,
                min_delta: Some(e.min_delta),
                // Written only when on: configs without it keep their hashes.
                restore_best: e.restore_best.then_some(true),
            }),
        }
    }

    fn raw_schedule(&self) -> Option<RawSchedule> {
        let blank = |kind| RawSchedule {
            kind,
            step_epochs: None,
            gamma: None,
            warmup_epochs: None,
            epochs: None,
            min_lr: None,
        };
        match self.schedule {
            ScheduleSpec::Constant => None,
            ScheduleSpec::Step { every, gamma } => Some(RawSchedule {
                step_epochs: Some(every),
                gamma: Some(gamma),
                ..blank(ScheduleKind::Step)
            }),
            ScheduleSpec::Cosine {
                warmup,
                epochs,
                min_lr,
            } => Some(RawSchedule {
                warmup_epochs: (warmup > 0.0).then_some(warmup),
                epochs,
                min_lr: Some(min_lr),
                ..blank(if warmup > 0.0 {
                    ScheduleKind::WarmupCosine
                } else {
                    ScheduleKind::Cosine
                })
            }),
        }
    }

    /// Fixes a cosine schedule's length at this run's epochs (a resumed run keeps its own); the
    /// warm-up must end before it.
    pub fn fix_schedule_length(&mut self) -> Result<()> {
        if let ScheduleSpec::Cosine { epochs, warmup, .. } = &mut self.schedule {
            let length = *epochs.get_or_insert(self.epochs as f64);
            if *warmup >= length {
                return Err(input_err!(
                    "schedule.warmup_epochs = {warmup} must be shorter than the schedule ({length} epochs; schedule.epochs or the run's epochs)"
                ));
            }
        }
        Ok(())
    }

    /// This config with what a run learned from its data taken from `resolved` (class names,
    /// widths, columns, statistics, image size, schedule length): to compare a job file with the
    /// `config.toml` of a run made from it.
    pub fn with_data_of(&self, resolved: &JobConfig) -> JobConfig {
        let mut c = self.clone();
        c.epochs = resolved.epochs;
        c.classes = resolved.classes.clone();
        c.class_weights = resolved.class_weights.clone();
        c.model.inputs = resolved.model.inputs;
        c.model.outputs = resolved.model.outputs;
        c.model.image = resolved.model.image;
        if let (ScheduleSpec::Cosine { epochs, .. }, ScheduleSpec::Cosine { epochs: e, .. }) =
            (&mut c.schedule, &resolved.schedule)
            && epochs.is_none()
        {
            *epochs = *e;
        }
        match (&mut c.data, &resolved.data) {
            (DataSpec::Table(t), DataSpec::Table(r)) => {
                t.features = t.features.clone().or_else(|| r.features.clone());
                t.stats = t.stats.clone().or_else(|| r.stats.clone());
                t.encoding = t.encoding.clone().or_else(|| r.encoding.clone());
                t.target_stats = t.target_stats.or(r.target_stats);
            }
            (DataSpec::Images(i), DataSpec::Images(r)) => i.size = i.size.or(r.size),
            _ => {}
        }
        c
    }

    fn raw_optimizer(&self) -> (Option<RawSgd>, Option<RawAdam>, Option<RawAdam>) {
        match self.optimizer {
            OptimizerSpec::Sgd {
                lr,
                momentum,
                dampening,
                nesterov,
                weight_decay,
            } => {
                let sgd = RawSgd {
                    lr,
                    momentum: Some(momentum),
                    dampening: Some(dampening),
                    nesterov: Some(nesterov),
                    weight_decay: Some(weight_decay),
                };
                (Some(sgd), None, None)
            }
            OptimizerSpec::Adam {
                lr,
                beta1,
                beta2,
                epsilon,
                weight_decay,
                decoupled,
            } => {
                let adam = RawAdam {
                    lr,
                    beta1: Some(beta1),
                    beta2: Some(beta2),
                    epsilon: Some(epsilon),
                    weight_decay: Some(weight_decay),
                };
                if decoupled {
                    (None, None, Some(adam))
                } else {
                    (None, Some(adam), None)
                }
            }
        }
    }

    fn raw_data(&self) -> RawData {
        let mut data = RawData {
            classes: self.classes.clone(),
            class_weights: self.class_weights.clone(),
            split_seed: self.split_seed,
            ..RawData::default()
        };
        match &self.data {
            DataSpec::Idx {
                dir,
                input_scale,
                valid_fraction,
            } => {
                data.source = Some(Source::Idx);
                data.dir = dir.clone();
                data.input_scale = Some(*input_scale);
                data.valid_fraction = Some(*valid_fraction);
            }
            DataSpec::Images(i) => {
                data.source = Some(Source::Images);
                data.dir = Some(i.dir.clone());
                data.valid_dir = i.valid_dir.clone();
                data.test_dir = i.test_dir.clone();
                data.image_size = i.size;
                data.channels = Some(i.channels);
                data.input_scale = Some(i.input_scale);
                data.valid_fraction = Some(i.valid_fraction);
            }
            DataSpec::Table(t) => {
                data.source = Some(if t.csv.is_some() {
                    Source::Csv
                } else {
                    Source::Synthetic
                });
                data.csv = t.csv.clone();
                match t.targets.as_slice() {
                    [one] => data.label = Some(one.clone()),
                    many => data.targets = Some(many.to_vec()),
                }
                data.features = t.features.clone();
                data.ignore = (!t.ignore.is_empty()).then(|| t.ignore.clone());
                data.columns = t.columns.clone();
                data.missing_values = t.missing_values.clone();
                data.embed = (!t.embed.is_empty()).then(|| t.embed.clone());
                data.scaling = (!t.scaling.is_empty()).then(|| t.scaling.clone());
                data.encoding = t.encoding.clone();
                data.scalar_column = t.scalar_column.clone();
                data.valid_fraction = t.fold.is_none().then_some(t.valid_fraction);
                data.folds = t.fold.map(|f| f.count);
                data.fold = t.fold.map(|f| f.index);
                data.valid_csv = t.valid_csv.clone();
                data.test_csv = t.test_csv.clone();
                data.standardize = Some(t.standardize);
                data.standardize_target = t.standardize_target.then_some(true);
                data.target_mean = t.target_stats.map(|s| s.0);
                data.target_std = t.target_stats.map(|s| s.1);
                data.feature_mean = t.stats.as_ref().map(|s| s.mean.clone());
                data.feature_std = t.stats.as_ref().map(|s| s.std.clone());
            }
        }
        data
    }

    /// The resolved config as TOML text.
    pub fn to_toml(&self) -> String {
        let body = toml::to_string(&self.to_raw()).expect("a RawConfig always serialises");
        format!(
            "# Resolved by ember {} from the job file: every default written out.\n{body}",
            env!("CARGO_PKG_VERSION")
        )
    }

    /// A short hash of the resolved config, to tell runs of the same recipe apart. The epoch
    /// count is left out: a run continued for more epochs is still the same recipe.
    pub fn hash(&self) -> String {
        use sha2::{Digest, Sha256};
        // Nor are the overrides (the values they set are in the recipe already), nor whether
        // the run writes event files.
        let recipe = JobConfig {
            epochs: 0,
            tensorboard: true,
            overrides: Vec::new(),
            ..self.clone()
        };
        let digest = Sha256::digest(recipe.to_toml().as_bytes());
        digest.iter().take(6).map(|b| format!("{b:02x}")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Result<JobConfig> {
        parse(Path::new("t.toml"), text)?.check()
    }

    #[test]
    fn defaults_fill_a_minimal_file() {
        let c = check("job = \"tabular-mlp\"\n[adam]\nlr = 0.001\n").unwrap();
        assert_eq!(c.epochs, 200);
        assert_eq!(c.batch_size, 2048);
        assert_eq!(c.seed, 42);
        assert!(!c.shuffle);
        assert_eq!(
            c.optimizer,
            OptimizerSpec::Adam {
                lr: 0.001,
                beta1: 0.9,
                beta2: 0.999,
                epsilon: 1e-8,
                weight_decay: 0.0,
                decoupled: false,
            }
        );
    }

    #[test]
    fn unknown_key_names_line_and_field() {
        let err = check("job = \"fashion-mlp\"\nbatchsize = 3\n[sgd]\nlr = 0.1\n").unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with("t.toml:2: unknown field `batchsize`"),
            "{msg}"
        );
        assert!(!msg.contains('\n'));
    }

    #[test]
    fn zero_batch_and_bad_lr_are_rejected() {
        let err = check("job = \"fashion-mlp\"\nbatch_size = 0\n[sgd]\nlr = 0.1\n").unwrap_err();
        assert!(err.to_string().contains("batch_size = 0"));
        let err = check("job = \"fashion-mlp\"\n[sgd]\nlr = -1.0\n").unwrap_err();
        assert!(err.to_string().contains("sgd.lr = -1"));
    }

    #[test]
    fn field_of_another_source_is_rejected() {
        let err = check("job = \"fashion-mlp\"\n[data]\nscalar_column = \"f\"\n[sgd]\nlr = 0.1\n")
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("data.scalar_column is not used by an idx source"),
            "{err}"
        );
    }

    #[test]
    fn serde_owns_the_enum_spellings() {
        let err =
            check("job = \"fashion-mlp\"\n[model]\nactivation = \"swish\"\n[sgd]\nlr = 0.1\n")
                .unwrap_err()
                .to_string();
        assert!(
            err.starts_with("t.toml:3: unknown variant `swish`"),
            "{err}"
        );
        assert!(err.contains("`relu`"), "{err}");
        let err = check("job = \"resnet\"\n[sgd]\nlr = 0.1\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("t.toml:1: unknown variant `resnet`"),
            "{err}"
        );
    }

    #[test]
    fn a_hidden_width_of_zero_is_rejected() {
        let err = check("task = \"binary\"\n[data]\ncsv = \"a.csv\"\nlabel = \"y\"\n[model]\nhidden = [8, 0]\n[sgd]\nlr = 0.1\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("model.hidden = [8, 0] holds a width of 0"),
            "{err}"
        );
    }

    #[test]
    fn the_general_job_names_its_task_model_and_label() {
        let base = "[data]\ncsv = \"a.csv\"\n[adam]\nlr = 0.01\n";
        let err = check(base).unwrap_err().to_string();
        assert!(err.contains("task is required"), "{err}");
        let err = check(&format!("task = \"regression\"\n{base}"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("model.hidden is required"), "{err}");
        let text = format!("task = \"regression\"\n[model]\nhidden = []\n{base}");
        let err = check(&text).unwrap_err().to_string();
        assert!(err.contains("data.label is required"), "{err}");
        let text = "task = \"regression\"\n[model]\nhidden = [4]\n[data]\ncsv = \"a.csv\"\ntargets = [\"u\", \"v\"]\n[adam]\nlr = 0.01\n";
        let c = check(text).unwrap();
        assert_eq!(c.name(), "mlp");
        assert_eq!(c.table().unwrap().targets, ["u", "v"]);
        assert_eq!(c, check(&c.to_toml()).unwrap());
    }

    #[test]
    fn the_split_seed_defaults_to_the_seed() {
        let c = check("job = \"tabular-mlp\"\nseed = 7\n[adam]\nlr = 0.001\n").unwrap();
        assert_eq!(c.split_seed(), 7);
        let text = "job = \"tabular-mlp\"\nseed = 7\n[data]\nsplit_seed = 42\n[adam]\nlr = 0.001\n";
        let c = check(text).unwrap();
        assert_eq!(c.split_seed(), 42);
        assert_eq!(c, check(&c.to_toml()).unwrap());
    }

    #[test]
    fn presets_fill_the_seed_networks() {
        let c = check("job = \"fashion-mlp\"\n[sgd]\nlr = 0.1\n").unwrap();
        assert_eq!(
            (c.task, c.model.hidden.as_slice()),
            (Task::Classification, &[512, 512][..])
        );
        let c = check("job = \"tabular-mlp\"\n[sgd]\nlr = 0.1\n").unwrap();
        assert_eq!(c.model.activation, Activation::Tanh);
        assert_eq!(c.table().unwrap().targets, ["label"]);
        let c = check("job = \"tabular-mlp\"\n[data]\nlabel_column = \"y\"\n[sgd]\nlr = 0.1\n")
            .unwrap();
        assert_eq!(c.table().unwrap().targets, ["y"]);
    }

    #[test]
    fn resolved_config_reads_back_identically() {
        let c = check(
            "job = \"linear-scalar\"\n[data]\nstandardize = true\nfeature_mean = [1.0, 2.0]\nfeature_std = [0.5, 3.0]\n[adam]\nlr = 5e-4\n",
        )
        .unwrap();
        let again = check(&c.to_toml()).unwrap();
        assert_eq!(c, again);
    }
}
