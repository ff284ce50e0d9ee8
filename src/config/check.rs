//! The check of a [`RawConfig`] into a [`JobConfig`]: the preset's defaults fill what the file
//! leaves out, every value is range-checked, and fields that do not apply are errors.

use super::{
    Activation, Channels, ClassWeight, DataSpec, EarlyStopping, Fold, ImageSpec, Init, InputScale,
    JobConfig, ModelKind, ModelSpec, Monitor, OptimizerSpec, Pooling, Preset, RawAdam, RawConfig,
    RawModel, RawSchedule, RawSgd, ScheduleKind, ScheduleSpec, Source, Standardization, TableSpec,
    Task,
};
use crate::config::columns::{ColumnKind, Encoding, Scaling, Scalings};
use crate::error::Result;
use crate::input_err;

/// The widest embedding `data.embed` may ask for (fastai's rule stops at 600).
pub const MAX_EMBED_WIDTH: usize = 1024;

/// What a preset (or the general job, `None`) fills in when the file is silent.
struct Defaults {
    epochs: usize,
    batch_size: usize,
    task: Option<Task>,
    hidden: Option<&'static [usize]>,
    activation: Activation,
    source: Option<Source>,
    label: Option<&'static str>,
}

impl Defaults {
    fn of(preset: Option<Preset>) -> Self {
        let general = Defaults {
            epochs: 10,
            batch_size: 64,
            task: None,
            hidden: None,
            activation: Activation::Relu,
            source: None,
            label: None,
        };
        match preset {
            None => general,
            Some(Preset::FashionMlp) => Defaults {
                epochs: 20,
                task: Some(Task::Classification),
                hidden: Some(&[512, 512]),
                source: Some(Source::Idx),
                ..general
            },
            Some(Preset::TabularMlp) => Defaults {
                epochs: 200,
                batch_size: 2048,
                task: Some(Task::Binary),
                hidden: Some(&[20, 10]),
                activation: Activation::Tanh,
                source: Some(Source::Synthetic),
                label: Some("label"),
            },
            Some(Preset::LinearScalar) => Defaults {
                epochs: 300,
                batch_size: 128,
                task: Some(Task::Regression),
                activation: Activation::Identity,
                source: Some(Source::Synthetic),
                label: Some("y"),
                ..general
            },
        }
    }
}

fn positive(name: &str, value: f64) -> Result<f64> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(input_err!(
            "{name} = {value} must be a number greater than 0"
        ))
    }
}

fn at_least_one(name: &str, value: usize) -> Result<usize> {
    if value == 0 {
        Err(input_err!("{name} = 0 must be at least 1"))
    } else {
        Ok(value)
    }
}

fn positive_rows(name: &str, value: Option<usize>) -> Result<Option<usize>> {
    value.map(|v| at_least_one(name, v)).transpose()
}

fn unit_interval(name: &str, value: f64) -> Result<f64> {
    if (0.0..1.0).contains(&value) {
        Ok(value)
    } else {
        Err(input_err!("{name} = {value} must be in [0, 1)"))
    }
}

/// An error for a field that the job does not use.
fn reject(field: &str, given: bool, why: &str) -> Result<()> {
    if given {
        Err(input_err!("{field} is not used {why}; remove it"))
    } else {
        Ok(())
    }
}

/// linear-scalar's fixed model: the keys of other networks are refused.
fn linear_scalar_model(
    m: &RawModel,
    init: Init,
    inputs: Option<usize>,
    outputs: Option<usize>,
) -> Result<ModelSpec> {
    let why = "by the linear-scalar job (its model is fixed)";
    reject("model.hidden", m.hidden.is_some(), why)?;
    reject("model.activation", m.activation.is_some(), why)?;
    reject("model.dropout", m.dropout.is_some(), why)?;
    reject("model.conv", m.conv.is_some(), why)?;
    reject("model.augment", m.augment.is_some(), why)?;
    Ok(ModelSpec {
        kind: ModelKind::LinearScalar,
        hidden: Vec::new(),
        activation: Activation::Identity,
        dropout: 0.0,
        init,
        inputs,
        outputs,
        conv: Vec::new(),
        pooling: Pooling::Flatten,
        image: None,
        augment: None,
    })
}

fn non_negative(name: &str, value: f64) -> Result<f64> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(input_err!(
            "{name} = {value} must be a number of at least 0"
        ))
    }
}

fn check_sgd(sgd: &RawSgd) -> Result<OptimizerSpec> {
    let momentum = unit_interval("sgd.momentum", sgd.momentum.unwrap_or(0.0))?;
    let dampening = unit_interval("sgd.dampening", sgd.dampening.unwrap_or(0.0))?;
    let nesterov = sgd.nesterov.unwrap_or(false);
    if nesterov && (momentum == 0.0 || dampening != 0.0) {
        return Err(input_err!(
            "sgd.nesterov = true needs sgd.momentum > 0 and sgd.dampening = 0 (as PyTorch's SGD)"
        ));
    }
    Ok(OptimizerSpec::Sgd {
        lr: positive("sgd.lr", sgd.lr)?,
        momentum,
        dampening,
        nesterov,
        weight_decay: non_negative("sgd.weight_decay", sgd.weight_decay.unwrap_or(0.0))?,
    })
}

fn check_adam(section: &str, adam: &RawAdam, decay: f64, decoupled: bool) -> Result<OptimizerSpec> {
    let field = |name: &str| format!("{section}.{name}");
    Ok(OptimizerSpec::Adam {
        lr: positive(&field("lr"), adam.lr)?,
        beta1: unit_interval(&field("beta1"), adam.beta1.unwrap_or(0.9))?,
        beta2: unit_interval(&field("beta2"), adam.beta2.unwrap_or(0.999))?,
        epsilon: positive(&field("epsilon"), adam.epsilon.unwrap_or(1e-8))?,
        weight_decay: non_negative(&field("weight_decay"), adam.weight_decay.unwrap_or(decay))?,
        decoupled,
    })
}

fn check_schedule(s: &RawSchedule) -> Result<ScheduleSpec> {
    let (allowed, spec): (&[&str], ScheduleSpec) = match s.kind {
        ScheduleKind::Constant => (&[], ScheduleSpec::Constant),
        ScheduleKind::Step => (
            &["step_epochs", "gamma"],
            ScheduleSpec::Step {
                every: positive(
                    "schedule.step_epochs",
                    s.step_epochs.ok_or_else(|| {
                        input_err!("schedule kind = \"step\" needs step_epochs, the epochs between two decays")
                    })?,
                )?,
                gamma: positive("schedule.gamma", s.gamma.unwrap_or(0.1))?,
            },
        ),
        ScheduleKind::Cosine | ScheduleKind::WarmupCosine => {
            let warmup = match (s.kind, s.warmup_epochs) {
                (ScheduleKind::WarmupCosine, Some(w)) => positive("schedule.warmup_epochs", w)?,
                (ScheduleKind::WarmupCosine, None) => {
                    return Err(input_err!(
                        "schedule kind = \"warmup-cosine\" needs warmup_epochs"
                    ));
                }
                _ => 0.0,
            };
            let epochs = s.epochs.map(|e| positive("schedule.epochs", e)).transpose()?;
            if let Some(e) = epochs
                && warmup >= e
            {
                return Err(input_err!(
                    "schedule.warmup_epochs = {warmup} must be shorter than schedule.epochs = {e}"
                ));
            }
            let min_lr = non_negative("schedule.min_lr", s.min_lr.unwrap_or(0.0))?;
            let fields: &[&str] = if s.kind == ScheduleKind::Cosine {
                &["epochs", "min_lr"]
            } else {
                &["warmup_epochs", "epochs", "min_lr"]
            };
            (fields, ScheduleSpec::Cosine { warmup, epochs, min_lr })
        }
    };
    for (field, is_given) in [
        ("step_epochs", s.step_epochs.is_some()),
        ("gamma", s.gamma.is_some()),
        ("warmup_epochs", s.warmup_epochs.is_some()),
        ("epochs", s.epochs.is_some()),
        ("min_lr", s.min_lr.is_some()),
    ] {
        if is_given && !allowed.contains(&field) {
            let kind = match s.kind {
                ScheduleKind::Constant => "constant",
                ScheduleKind::Step => "step",
                ScheduleKind::Cosine => "cosine",
                ScheduleKind::WarmupCosine => "warmup-cosine",
            };
            return Err(input_err!(
                "schedule.{field} is not used by kind = \"{kind}\"; remove it"
            ));
        }
    }
    Ok(spec)
}

impl RawConfig {
    /// Validates every field against the job and fills the defaults.
    pub fn check(&self) -> Result<JobConfig> {
        let defaults = Defaults::of(self.job);
        let task = self.task.or(defaults.task).ok_or_else(|| {
            input_err!("task is required: \"classification\", \"binary\" or \"regression\"")
        })?;
        if self.job == Some(Preset::LinearScalar) && task != Task::Regression {
            return Err(input_err!(
                "task = \"{}\": the linear-scalar job is a regression",
                format!("{task:?}").to_lowercase()
            ));
        }
        // Checked in the order a reader fixes them: the model, then the data.
        let model = self.check_model(&defaults)?;
        let data = self.check_data(&defaults, task)?;
        let classes = self.check_classes(task)?;
        let (class_weight, class_weights) = self.check_class_weight(task, classes.as_deref())?;
        Ok(JobConfig {
            preset: self.job,
            task,
            seed: self.seed.unwrap_or(42),
            epochs: at_least_one("epochs", self.epochs.unwrap_or(defaults.epochs))?,
            batch_size: at_least_one("batch_size", self.batch_size.unwrap_or(defaults.batch_size))?,
            shuffle: self.shuffle.unwrap_or(false),
            drop_last: self.drop_last.unwrap_or(false),
            max_train_rows: positive_rows("max_train_rows", self.max_train_rows)?,
            max_valid_rows: positive_rows("max_valid_rows", self.max_valid_rows)?,
            data,
            classes,
            class_weight,
            class_weights,
            model,
            optimizer: self.check_optimizer()?,
            schedule: self
                .schedule
                .as_ref()
                .map_or(Ok(ScheduleSpec::Constant), check_schedule)?,
            clip_grad_norm: self
                .clip_grad_norm
                .map(|c| positive("clip_grad_norm", c))
                .transpose()?,
            early_stopping: self.check_early_stopping(task)?,
            tensorboard: self.tensorboard.unwrap_or(true),
            overrides: self.overrides.clone(),
            split_seed: self.data.split_seed,
        })
    }

    fn check_optimizer(&self) -> Result<OptimizerSpec> {
        match (&self.sgd, &self.adam, &self.adamw) {
            (Some(sgd), None, None) => check_sgd(sgd),
            (None, Some(adam), None) => check_adam("adam", adam, 0.0, false),
            // PyTorch's AdamW decays by 0.01 unless told otherwise.
            (None, None, Some(adamw)) => check_adam("adamw", adamw, 0.01, true),
            (None, None, None) => Err(input_err!(
                "no optimizer: add an [sgd] section (lr, momentum, ...), an [adam] or an [adamw] section (lr, beta1, beta2, epsilon, weight_decay)"
            )),
            _ => Err(input_err!(
                "more than one of [sgd], [adam] and [adamw] is given; keep the one optimizer the job uses"
            )),
        }
    }

    fn check_model(&self, defaults: &Defaults) -> Result<ModelSpec> {
        let m = &self.model;
        let init = m.init.unwrap_or(Init::Torch);
        let inputs = positive_rows("model.inputs", m.inputs)?;
        let outputs = positive_rows("model.outputs", m.outputs)?;
        if self.job == Some(Preset::LinearScalar) {
            return linear_scalar_model(m, init, inputs, outputs);
        }
        let hidden = match (&m.hidden, defaults.hidden) {
            (Some(h), _) => h.clone(),
            (None, Some(h)) => h.to_vec(),
            (None, None) => {
                return Err(input_err!(
                    "model.hidden is required: the widths of the hidden layers, e.g. [64, 64] ([] for none)"
                ));
            }
        };
        if hidden.contains(&0) {
            return Err(input_err!(
                "model.hidden = {hidden:?} holds a width of 0; every width must be at least 1"
            ));
        }
        let conv = (m.conv.iter().flatten().enumerate())
            .map(|(i, b)| b.check(i))
            .collect::<Result<Vec<_>>>()?;
        if conv.is_empty() {
            let why = "without [[model.conv]] blocks";
            reject("model.pooling", m.pooling.is_some(), why)?;
            reject("model.image", m.image.is_some(), why)?;
            reject("model.augment", m.augment.is_some(), why)?;
        }
        let augment = m.augment.as_ref().map(|a| a.check()).transpose()?;
        if let Some(image) = m.image
            && image.contains(&0)
        {
            return Err(input_err!(
                "model.image = {image:?} must be [channels, height, width], each at least 1"
            ));
        }
        if let Some(preset) = self.job.filter(|_| !conv.is_empty()) {
            return Err(input_err!(
                "model.conv is not used by the {} job (its network is an MLP); leave out `job` for a convolutional network",
                preset.name()
            ));
        }
        if let (Some(n), false) = (inputs, conv.is_empty()) {
            super::conv::check_image(m.image, n, &conv)?;
        }
        if let (Some(a), Some(image)) = (augment, m.image) {
            a.check_fits(image)?;
        }
        Ok(ModelSpec {
            kind: if conv.is_empty() {
                ModelKind::Mlp
            } else {
                ModelKind::Cnn
            },
            hidden,
            activation: m.activation.unwrap_or(defaults.activation),
            dropout: unit_interval("model.dropout", m.dropout.unwrap_or(0.0))?,
            init,
            inputs,
            outputs,
            conv,
            pooling: m.pooling.unwrap_or(Pooling::Flatten),
            image: m.image,
            augment,
        })
    }

    fn check_early_stopping(&self, task: Task) -> Result<Option<EarlyStopping>> {
        let Some(e) = &self.early_stopping else {
            return Ok(None);
        };
        let metric = e.metric.unwrap_or(Monitor::ValidLoss);
        let fits = match metric {
            Monitor::ValidLoss => true,
            Monitor::ValidAccuracy => task.is_classifier(),
            Monitor::ValidMae | Monitor::ValidR2 => !task.is_classifier(),
        };
        if !fits {
            let name = toml::Value::try_from(metric)
                .map_or_else(|_| format!("{metric:?}"), |v| v.to_string());
            return Err(input_err!(
                "early_stopping.metric = {name} is not reported by a {} task",
                toml::Value::try_from(task).map_or_else(|_| format!("{task:?}"), |v| v.to_string())
            ));
        }
        Ok(Some(EarlyStopping {
            metric,
            patience: at_least_one("early_stopping.patience", e.patience)?,
            min_delta: non_negative("early_stopping.min_delta", e.min_delta.unwrap_or(0.0))?,
            restore_best: e.restore_best.unwrap_or(false),
        }))
    }

    fn check_classes(&self, task: Task) -> Result<Option<Vec<String>>> {
        let Some(classes) = &self.data.classes else {
            return Ok(None);
        };
        if task == Task::Regression {
            return Err(input_err!(
                "data.classes is not used by a regression; remove it"
            ));
        }
        let mut sorted = classes.clone();
        sorted.sort();
        sorted.dedup();
        if sorted.len() != classes.len() || classes.is_empty() {
            return Err(input_err!(
                "data.classes = {classes:?} must list distinct class names"
            ));
        }
        if task == Task::Binary && classes.len() != 2 {
            return Err(input_err!(
                "data.classes = {classes:?}: a binary task has exactly two classes"
            ));
        }
        Ok(Some(classes.clone()))
    }

    /// `class_weight` (classifiers only) and the per-class weights ember wrote with it, one per
    /// class.
    fn check_class_weight(
        &self,
        task: Task,
        classes: Option<&[String]>,
    ) -> Result<(Option<ClassWeight>, Option<Vec<f64>>)> {
        let resolved = &self.data.class_weights;
        let Some(given) = &self.class_weight else {
            reject(
                "data.class_weights",
                resolved.is_some(),
                "without class_weight (ember writes it from class_weight)",
            )?;
            return Ok((None, None));
        };
        if task == Task::Regression {
            return Err(input_err!(
                "class_weight is for classification and binary tasks, not a regression; remove it"
            ));
        }
        given.check()?;
        if let Some(weights) = resolved {
            // A binary task without class names weighs its labels "0" and "1".
            let unnamed = if task == Task::Binary { 2 } else { 0 };
            let expected = classes.map_or(unnamed, <[String]>::len);
            if weights.len() != expected || !weights.iter().all(|w| super::is_weight(*w)) {
                return Err(input_err!(
                    "data.class_weights = {weights:?} must hold one number above 0 per class of data.classes"
                ));
            }
        }
        Ok((Some(given.clone()), resolved.clone()))
    }

    /// The source the file names, or the one its fields imply, or the preset's.
    fn source(&self, defaults: &Defaults) -> Result<Source> {
        let d = &self.data;
        let implied = if d.dir.is_some() {
            Some(Source::Idx)
        } else if d.csv.is_some() {
            Some(Source::Csv)
        } else {
            None
        };
        let source = d.source.or(implied).or(defaults.source).ok_or_else(|| {
            input_err!(
                "data.source is required: \"idx\" (with data.dir) or \"csv\" (with data.csv)"
            )
        })?;
        let built_in = matches!(self.job, Some(Preset::TabularMlp | Preset::LinearScalar));
        if source == Source::Synthetic && !built_in {
            return Err(input_err!(
                "data.source = \"synthetic\" is the built-in table of the tabular-mlp and linear-scalar jobs; this job has none"
            ));
        }
        Ok(source)
    }

    fn check_data(&self, defaults: &Defaults, task: Task) -> Result<DataSpec> {
        match self.source(defaults)? {
            Source::Idx => self.check_idx(task),
            Source::Images => self.check_images(task).map(DataSpec::Images),
            source => self
                .check_table(defaults, task, source)
                .map(DataSpec::Table),
        }
    }

    /// Fields of the table sources, which the IDX and image sources reject.
    fn reject_table_fields(&self, why: &str) -> Result<()> {
        let d = &self.data;
        for (field, given) in [
            ("data.csv", d.csv.is_some()),
            ("data.label", d.label.is_some() || d.label_column.is_some()),
            ("data.targets", d.targets.is_some()),
            ("data.features", d.features.is_some()),
            ("data.ignore", d.ignore.is_some()),
            ("data.columns", d.columns.is_some()),
            ("data.missing_values", d.missing_values.is_some()),
            ("data.embed", d.embed.is_some()),
            ("data.scaling", d.scaling.is_some()),
            ("data.encoding", d.encoding.is_some()),
            ("data.scalar_column", d.scalar_column.is_some()),
            ("data.valid_csv", d.valid_csv.is_some()),
            ("data.test_csv", d.test_csv.is_some()),
            ("data.folds", d.folds.is_some()),
            ("data.fold", d.fold.is_some()),
            ("data.standardize", d.standardize.is_some()),
            ("data.feature_mean", d.feature_mean.is_some()),
            ("data.feature_std", d.feature_std.is_some()),
            ("data.standardize_target", d.standardize_target.is_some()),
            ("data.target_mean", d.target_mean.is_some()),
            ("data.target_std", d.target_std.is_some()),
        ] {
            reject(field, given, why)?;
        }
        Ok(())
    }

    fn check_idx(&self, task: Task) -> Result<DataSpec> {
        let d = &self.data;
        let why = "by an idx source";
        if task == Task::Regression {
            return Err(input_err!(
                "task = \"regression\": an idx source gives classes (its label file)"
            ));
        }
        self.reject_table_fields(why)?;
        reject("data.valid_dir", d.valid_dir.is_some(), why)?;
        reject("data.test_dir", d.test_dir.is_some(), why)?;
        reject("data.image_size", d.image_size.is_some(), why)?;
        reject("data.channels", d.channels.is_some(), why)?;
        Ok(DataSpec::Idx {
            dir: d.dir.clone(),
            input_scale: d.input_scale.unwrap_or(InputScale::Unit),
            valid_fraction: unit_interval("data.valid_fraction", d.valid_fraction.unwrap_or(0.0))?,
        })
    }

    fn check_images(&self, task: Task) -> Result<ImageSpec> {
        let d = &self.data;
        self.reject_table_fields("by an images source")?;
        if task == Task::Regression {
            return Err(input_err!(
                "task = \"regression\": an images source gives classes (its folder names)"
            ));
        }
        let dir = d.dir.clone().ok_or_else(|| {
            input_err!("data.source = \"images\" needs data.dir, the folder of class subfolders")
        })?;
        if let Some(size) = d.image_size
            && size.contains(&0)
        {
            return Err(input_err!(
                "data.image_size = {size:?} must be [height, width], each at least 1"
            ));
        }
        Ok(ImageSpec {
            dir,
            valid_dir: d.valid_dir.clone(),
            test_dir: d.test_dir.clone(),
            size: d.image_size,
            channels: d.channels.unwrap_or(Channels::Grayscale),
            input_scale: d.input_scale.unwrap_or(InputScale::Unit),
            valid_fraction: self.held_out_fraction("data.valid_dir", d.valid_dir.is_some())?,
        })
    }

    fn check_table(&self, defaults: &Defaults, task: Task, source: Source) -> Result<TableSpec> {
        let d = &self.data;
        let why = "by a table source";
        reject("data.dir", d.dir.is_some(), why)?;
        reject("data.input_scale", d.input_scale.is_some(), why)?;
        reject("data.valid_dir", d.valid_dir.is_some(), why)?;
        reject("data.test_dir", d.test_dir.is_some(), why)?;
        reject("data.image_size", d.image_size.is_some(), why)?;
        reject("data.channels", d.channels.is_some(), why)?;
        if self.model.conv.as_ref().is_some_and(|c| !c.is_empty()) {
            return Err(input_err!(
                "model.conv: convolutions need images (data.source = \"idx\" or \"images\"); a table's columns have no neighbours to convolve"
            ));
        }
        match source {
            Source::Csv if d.csv.is_none() => {
                return Err(input_err!(
                    "data.source = \"csv\" needs data.csv, the file to read"
                ));
            }
            Source::Synthetic => {
                let why = "by the built-in table (it has no named columns); use source = \"csv\"";
                reject("data.csv", d.csv.is_some(), why)?;
                reject("data.features", d.features.is_some(), why)?;
                reject("data.ignore", d.ignore.is_some(), why)?;
                reject("data.columns", d.columns.is_some(), why)?;
                reject("data.valid_csv", d.valid_csv.is_some(), why)?;
                reject("data.test_csv", d.test_csv.is_some(), why)?;
            }
            _ => {}
        }
        let linear_scalar = self.job == Some(Preset::LinearScalar);
        if linear_scalar && d.targets.as_ref().is_some_and(|t| t.len() != 1) {
            return Err(input_err!(
                "data.targets: the linear-scalar job predicts one target; name it in data.label"
            ));
        }
        if !linear_scalar {
            reject(
                "data.scalar_column",
                d.scalar_column.is_some(),
                "by this job",
            )?;
        }
        if d.features.as_ref().is_some_and(Vec::is_empty) {
            return Err(input_err!("data.features = [] names no input column"));
        }
        self.check_columns(linear_scalar)?;
        let fold = self.check_fold()?;
        Ok(TableSpec {
            csv: d.csv.clone(),
            targets: self.targets(defaults, task)?,
            features: d.features.clone(),
            ignore: d.ignore.clone().unwrap_or_default(),
            columns: d.columns.clone(),
            missing_values: d.missing_values.clone(),
            embed: d.embed.clone().unwrap_or_default(),
            scaling: d.scaling.clone().unwrap_or_default(),
            encoding: d.encoding.clone(),
            scalar_column: linear_scalar
                .then(|| d.scalar_column.clone().unwrap_or_else(|| "f".to_string())),
            valid_fraction: match fold {
                Some(_) => 0.0,
                None => self.held_out_fraction("data.valid_csv", d.valid_csv.is_some())?,
            },
            fold,
            valid_csv: d.valid_csv.clone(),
            test_csv: d.test_csv.clone(),
            standardize: d.standardize.unwrap_or(false),
            standardize_target: d.standardize_target.unwrap_or(false),
            target_stats: self.target_stats(task)?,
            stats: self.stats()?,
        })
    }

    /// `[data.columns]` types every column, so it replaces `features` and `ignore`; the fields
    /// that refine it (`missing_values`, ember's `encoding`) need it.
    fn check_columns(&self, linear_scalar: bool) -> Result<()> {
        let d = &self.data;
        if d.columns.is_none() {
            let why = "without data.columns (they apply to typed columns)";
            reject("data.missing_values", d.missing_values.is_some(), why)?;
            reject("data.embed", d.embed.is_some(), why)?;
            reject("data.scaling", d.scaling.is_some(), why)?;
            return reject("data.encoding", d.encoding.is_some(), why);
        }
        self.check_embed()?;
        self.check_scaling()?;
        let why = "with data.columns, which gives every column's type (\"ignore\" leaves one out)";
        reject("data.features", d.features.is_some(), why)?;
        reject("data.ignore", d.ignore.is_some(), why)?;
        reject(
            "data.columns",
            linear_scalar,
            "by the linear-scalar job, whose inputs are numbers",
        )?;
        if let Some(enc) = &d.encoding {
            let typed = d.columns.as_ref().expect("checked above");
            for e in enc {
                e.check()
                    .map_err(|why| input_err!("data.encoding: {why}"))?;
                let embed = d.embed.as_ref().and_then(|m| m.get(&e.column));
                if e.embed.as_ref() != embed {
                    let width =
                        |w: Option<&usize>| w.map_or("one-hot".into(), |w| format!("{w} wide"));
                    return Err(input_err!(
                        "data.encoding has \"{}\" {}, but data.embed {}; delete data.encoding to fit it again",
                        e.column,
                        width(e.embed.as_ref()),
                        embed.map_or("does not name it".into(), |w| format!("gives it {w} wide"))
                    ));
                }
                encoding_matches_scaling(e, d.scaling.as_ref())?;
                if typed.get(&e.column) != Some(&e.kind) || e.kind == ColumnKind::Ignore {
                    return Err(input_err!(
                        "data.encoding has \"{}\" as {}, but data.columns does not; delete data.encoding to fit it again",
                        e.column,
                        e.kind.name()
                    ));
                }
            }
        }
        Ok(())
    }

    /// `[data.embed]`: category columns of `[data.columns]`, each with a width of 1 to
    /// [`MAX_EMBED_WIDTH`].
    fn check_embed(&self) -> Result<()> {
        let d = &self.data;
        let typed = d.columns.as_ref().expect("checked by the caller");
        for (name, &width) in d.embed.iter().flatten() {
            if typed.get(name) != Some(&ColumnKind::Category) {
                return Err(input_err!(
                    "data.embed names \"{name}\", which data.columns does not type \"category\"; only a category column is embedded"
                ));
            }
            if !(1..=MAX_EMBED_WIDTH).contains(&width) {
                return Err(input_err!(
                    "data.embed.{name} = {width}: an embedding is 1 to {MAX_EMBED_WIDTH} wide"
                ));
            }
        }
        Ok(())
    }

    /// `[data.scaling]`: numeric columns of `[data.columns]`.
    fn check_scaling(&self) -> Result<()> {
        let d = &self.data;
        let typed = d.columns.as_ref().expect("checked by the caller");
        for name in d.scaling.iter().flatten().map(|(name, _)| name) {
            if typed.get(name) != Some(&ColumnKind::Numeric) {
                return Err(input_err!(
                    "data.scaling names \"{name}\", which data.columns does not type \"numeric\"; only a numeric column is scaled"
                ));
            }
        }
        Ok(())
    }

    /// The label column, or the target columns of a regression.
    fn targets(&self, defaults: &Defaults, task: Task) -> Result<Vec<String>> {
        let d = &self.data;
        let label = match (&d.label, &d.label_column) {
            (Some(_), Some(_)) => {
                return Err(input_err!(
                    "data.label and data.label_column name the same thing; keep data.label"
                ));
            }
            (l, c) => l.clone().or_else(|| c.clone()),
        };
        match (label, &d.targets) {
            (Some(_), Some(_)) => Err(input_err!(
                "data.label and data.targets are both given; a regression takes data.targets, a classifier data.label"
            )),
            (None, Some(_)) if task != Task::Regression => Err(input_err!(
                "data.targets is for a regression; a classifier names its class column in data.label"
            )),
            (None, Some(t)) if t.is_empty() => {
                Err(input_err!("data.targets = [] names no target column"))
            }
            (None, Some(t)) => Ok(t.clone()),
            (Some(l), None) => Ok(vec![l]),
            (None, None) => defaults.label.map(|l| vec![l.to_string()]).ok_or_else(|| {
                input_err!(
                    "data.label is required: the column the model predicts (data.targets = [...] for several regression targets)"
                )
            }),
        }
    }

    /// `folds` and `fold`: at least 2 folds, the held-out one among them, and no other way to
    /// validate beside them.
    fn check_fold(&self) -> Result<Option<Fold>> {
        let d = &self.data;
        let Some(count) = d.folds else {
            reject(
                "data.fold",
                d.fold.is_some(),
                "without data.folds, the number of folds",
            )?;
            return Ok(None);
        };
        let why = "with data.folds, where a fold validates";
        reject(
            "data.valid_fraction",
            d.valid_fraction.is_some_and(|f| f != 0.0),
            why,
        )?;
        reject("data.valid_csv", d.valid_csv.is_some(), why)?;
        if count < 2 {
            return Err(input_err!("data.folds = {count} must be at least 2"));
        }
        let index = d.fold.unwrap_or(0);
        if index >= count {
            return Err(input_err!(
                "data.fold = {index} must be below data.folds = {count} (folds count from 0)"
            ));
        }
        Ok(Some(Fold { count, index }))
    }

    /// The share held out for validation: 0 when `file_field` names a validation set of its
    /// own, else `valid_fraction` (0.1 by default), strictly between 0 and 1.
    fn held_out_fraction(&self, file_field: &str, has_file: bool) -> Result<f64> {
        let d = &self.data;
        if has_file {
            return match d.valid_fraction {
                Some(f) if f != 0.0 => Err(input_err!(
                    "data.valid_fraction = {f} and {file_field} are both given; keep one way to validate"
                )),
                _ => Ok(0.0),
            };
        }
        let f = d.valid_fraction.unwrap_or(0.1);
        if f > 0.0 && f < 1.0 {
            Ok(f)
        } else {
            Err(input_err!(
                "data.valid_fraction = {f} must be between 0 and 1 (exclusive), or give {file_field}"
            ))
        }
    }

    /// `standardize_target` suits one regression target; its statistics come together.
    fn target_stats(&self, task: Task) -> Result<Option<(f64, f64)>> {
        let d = &self.data;
        let on = d.standardize_target.unwrap_or(false);
        if on && task != Task::Regression {
            return Err(input_err!(
                "data.standardize_target applies to a regression; this task has classes"
            ));
        }
        if on && d.targets.as_ref().is_some_and(|t| t.len() != 1) {
            return Err(input_err!(
                "data.standardize_target takes one target; data.targets names several"
            ));
        }
        match (d.target_mean, d.target_std) {
            (None, None) => Ok(None),
            (Some(_), Some(_)) if !on => Err(input_err!(
                "data.target_mean/target_std are given but data.standardize_target is not true"
            )),
            (Some(m), Some(s)) if m.is_finite() && s.is_finite() && s > 0.0 => Ok(Some((m, s))),
            (Some(_), Some(s)) => Err(input_err!(
                "data.target_std = {s} (or its mean) is not a finite deviation above 0"
            )),
            _ => Err(input_err!(
                "data.target_mean and data.target_std must be given together"
            )),
        }
    }

    fn stats(&self) -> Result<Option<Standardization>> {
        let d = &self.data;
        let stats = match (&d.feature_mean, &d.feature_std) {
            (Some(mean), Some(std)) => {
                if mean.len() != std.len() {
                    return Err(input_err!(
                        "data.feature_mean has {} values but data.feature_std has {}",
                        mean.len(),
                        std.len()
                    ));
                }
                if let Some(s) = std.iter().find(|s| !(s.is_finite() && **s > 0.0)) {
                    return Err(input_err!(
                        "data.feature_std holds {s}; every value must be greater than 0"
                    ));
                }
                Some(Standardization {
                    mean: mean.clone(),
                    std: std.clone(),
                })
            }
            (None, None) => None,
            _ => {
                return Err(input_err!(
                    "data.feature_mean and data.feature_std must be given together"
                ));
            }
        };
        if stats.is_some() && !d.standardize.unwrap_or(false) {
            return Err(input_err!(
                "data.feature_mean/feature_std are given but data.standardize is false"
            ));
        }
        Ok(stats)
    }
}

/// An encoding fitted under the `[data.scaling]` its column has now: robust fits, bins or
/// neither.
fn encoding_matches_scaling(e: &Encoding, scaling: Option<&Scalings>) -> Result<()> {
    let asked = scaling.and_then(|m| m.get(&e.column)).copied();
    let asked = asked.unwrap_or(Scaling::Standard);
    let fitted = match (e.robust, &e.bins) {
        (Some(_), _) => Scaling::Robust,
        (None, Some(_)) => Scaling::PiecewiseLinear,
        (None, None) => Scaling::Standard,
    };
    if e.kind != ColumnKind::Numeric || asked == fitted {
        return Ok(());
    }
    let name =
        |s: Scaling| toml::Value::try_from(s).map_or_else(|_| format!("{s:?}"), |v| v.to_string());
    Err(input_err!(
        "data.encoding has \"{}\" fitted as {}, but data.scaling asks for {}; delete data.encoding to fit it again",
        e.column,
        name(fitted),
        name(asked)
    ))
}
