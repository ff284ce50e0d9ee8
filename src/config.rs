//! The job file: a TOML document read with unknown keys rejected ([`RawConfig`]), then checked
//! once into a [`JobConfig`] that the rest of ember can trust.
//!
//! The resolved config (every default written out, and the standardisation statistics once they
//! are computed) is saved with each run as `config.toml`, so a run can be resumed, evaluated and
//! exported from its folder alone.

use crate::error::{EmberError, Result};
use crate::input_err;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The three jobs ember knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    FashionMlp,
    TabularMlp,
    LinearScalar,
}

impl JobKind {
    pub const ALL: [JobKind; 3] = [
        JobKind::FashionMlp,
        JobKind::TabularMlp,
        JobKind::LinearScalar,
    ];

    pub fn name(self) -> &'static str {
        match self {
            JobKind::FashionMlp => "fashion-mlp",
            JobKind::TabularMlp => "tabular-mlp",
            JobKind::LinearScalar => "linear-scalar",
        }
    }

    /// Whether the job reports an accuracy (the two classifiers do).
    pub fn is_classifier(self) -> bool {
        !matches!(self, JobKind::LinearScalar)
    }

    fn parse(name: &str) -> Result<Self> {
        JobKind::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| {
                input_err!("job = \"{name}\" is not a job ember knows; use fashion-mlp, tabular-mlp or linear-scalar")
            })
    }
}

/// The job file exactly as written. Every field but `job` is optional; `check` fills defaults.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    pub job: String,
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
    #[serde(default, skip_serializing_if = "RawData::is_empty")]
    pub data: RawData,
    #[serde(default, skip_serializing_if = "RawModel::is_empty")]
    pub model: RawModel,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sgd: Option<RawSgd>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adam: Option<RawAdam>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawData {
    /// fashion-mlp: folder holding the four IDX files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
    /// fashion-mlp: "unit" (pixels / 255) or "raw" (0..255).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_scale: Option<String>,
    /// tabular-mlp, linear-scalar: a CSV file with a header row; absent = the built-in table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub csv: Option<PathBuf>,
    /// tabular-mlp: the 0/1 label column. linear-scalar: the target column.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_column: Option<String>,
    /// linear-scalar: the column multiplied by the learned scalar p.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scalar_column: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub valid_fraction: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub standardize: Option<bool>,
    /// Column means and standard deviations of the inputs, written by ember once computed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feature_mean: Option<Vec<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feature_std: Option<Vec<f64>>,
}

impl RawData {
    fn is_empty(&self) -> bool {
        *self == RawData::default()
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawModel {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init: Option<String>,
    /// Input columns of the first layer (table jobs); written by ember from the data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inputs: Option<usize>,
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
}

/// How FashionMNIST pixels reach the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputScale {
    /// Pixels / 255, as torchvision's `ToTensor` (the PyTorch recipe).
    Unit,
    /// Pixels as 0..255 floats, as the Keras code fed them.
    Raw,
}

/// How weights start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Init {
    /// PyTorch's `nn.Linear`: weights and biases uniform in ±1/sqrt(fan_in).
    Torch,
    /// Keras' `Dense`: Glorot-uniform weights, zero biases.
    Keras,
}

#[derive(Debug, Clone, PartialEq)]
pub enum OptimizerSpec {
    Sgd {
        lr: f64,
        momentum: f64,
    },
    Adam {
        lr: f64,
        beta1: f64,
        beta2: f64,
        epsilon: f64,
    },
}

impl OptimizerSpec {
    pub fn lr(&self) -> f64 {
        match self {
            OptimizerSpec::Sgd { lr, .. } | OptimizerSpec::Adam { lr, .. } => *lr,
        }
    }
}

/// Column statistics used to standardise inputs: `(x - mean) / std`.
#[derive(Debug, Clone, PartialEq)]
pub struct Standardization {
    pub mean: Vec<f64>,
    pub std: Vec<f64>,
}

/// Where a job's data comes from, checked.
#[derive(Debug, Clone, PartialEq)]
pub enum DataSpec {
    Fashion {
        /// Explicit folder; `None` searches `datasets/fashion-mnist` then the Debian location.
        dir: Option<PathBuf>,
        input_scale: InputScale,
    },
    Table {
        /// `None` = the job's built-in table.
        csv: Option<PathBuf>,
        label_column: String,
        /// linear-scalar only.
        scalar_column: Option<String>,
        valid_fraction: f64,
        standardize: bool,
        /// Known statistics (from a resolved config); computed from the train split otherwise.
        stats: Option<Standardization>,
    },
}

/// A checked job: every value here has passed validation.
#[derive(Debug, Clone, PartialEq)]
pub struct JobConfig {
    pub job: JobKind,
    pub seed: u64,
    pub epochs: usize,
    pub batch_size: usize,
    pub shuffle: bool,
    pub drop_last: bool,
    pub max_train_rows: Option<usize>,
    pub max_valid_rows: Option<usize>,
    pub data: DataSpec,
    pub init: Init,
    /// Input columns of the table jobs' first layer, once known from the data.
    pub inputs: Option<usize>,
    pub optimizer: OptimizerSpec,
}

/// Reads and checks a job file.
pub fn load(path: &Path) -> Result<JobConfig> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| EmberError::file(path, crate::fs::describe_io(&e)))?;
    let raw = parse(path, &text)?;
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

fn positive(name: &str, value: f64) -> Result<f64> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(input_err!(
            "{name} = {value} must be a number greater than 0"
        ))
    }
}

fn positive_rows(name: &str, value: Option<usize>) -> Result<Option<usize>> {
    match value {
        Some(0) => Err(input_err!("{name} = 0 must be at least 1")),
        v => Ok(v),
    }
}

fn unit_interval(name: &str, value: f64) -> Result<f64> {
    if (0.0..1.0).contains(&value) {
        Ok(value)
    } else {
        Err(input_err!("{name} = {value} must be in [0, 1)"))
    }
}

impl RawConfig {
    /// Validates every field against the job and fills the defaults.
    pub fn check(&self) -> Result<JobConfig> {
        let job = JobKind::parse(&self.job)?;
        let epochs = self.epochs.unwrap_or(match job {
            JobKind::FashionMlp => 20,
            JobKind::TabularMlp => 200,
            JobKind::LinearScalar => 300,
        });
        if epochs == 0 {
            return Err(input_err!("epochs = 0 must be at least 1"));
        }
        let batch_size = self.batch_size.unwrap_or(match job {
            JobKind::FashionMlp => 64,
            JobKind::TabularMlp => 2048,
            JobKind::LinearScalar => 128,
        });
        if batch_size == 0 {
            return Err(input_err!("batch_size = 0 must be at least 1"));
        }

        let optimizer = match (&self.sgd, &self.adam) {
            (Some(sgd), None) => OptimizerSpec::Sgd {
                lr: positive("sgd.lr", sgd.lr)?,
                momentum: unit_interval("sgd.momentum", sgd.momentum.unwrap_or(0.0))?,
            },
            (None, Some(adam)) => OptimizerSpec::Adam {
                lr: positive("adam.lr", adam.lr)?,
                beta1: unit_interval("adam.beta1", adam.beta1.unwrap_or(0.9))?,
                beta2: unit_interval("adam.beta2", adam.beta2.unwrap_or(0.999))?,
                epsilon: positive("adam.epsilon", adam.epsilon.unwrap_or(1e-8))?,
            },
            (Some(_), Some(_)) => {
                return Err(input_err!(
                    "both [sgd] and [adam] are given; keep the one optimizer the job uses"
                ));
            }
            (None, None) => {
                return Err(input_err!(
                    "no optimizer: add an [sgd] section (lr, momentum) or an [adam] section (lr, beta1, beta2, epsilon)"
                ));
            }
        };

        let init = match self.model.init.as_deref().unwrap_or("torch") {
            "torch" => Init::Torch,
            "keras" => Init::Keras,
            other => {
                return Err(input_err!(
                    "model.init = \"{other}\" must be \"torch\" or \"keras\""
                ));
            }
        };

        let data = self.check_data(job)?;
        let inputs = match (job, self.model.inputs) {
            (JobKind::FashionMlp, Some(_)) => {
                return Err(input_err!(
                    "model.inputs is not used by the fashion-mlp job (it takes 28x28 images)"
                ));
            }
            (_, Some(0)) => return Err(input_err!("model.inputs = 0 must be at least 1")),
            (_, inputs) => inputs,
        };

        Ok(JobConfig {
            job,
            seed: self.seed.unwrap_or(42),
            epochs,
            batch_size,
            shuffle: self.shuffle.unwrap_or(false),
            drop_last: self.drop_last.unwrap_or(false),
            max_train_rows: positive_rows("max_train_rows", self.max_train_rows)?,
            max_valid_rows: positive_rows("max_valid_rows", self.max_valid_rows)?,
            data,
            init,
            inputs,
            optimizer,
        })
    }

    fn check_data(&self, job: JobKind) -> Result<DataSpec> {
        let d = &self.data;
        let reject = |field: &str, value_given: bool| -> Result<()> {
            if value_given {
                Err(input_err!(
                    "data.{field} is not used by the {} job; remove it",
                    job.name()
                ))
            } else {
                Ok(())
            }
        };
        match job {
            JobKind::FashionMlp => {
                reject("csv", d.csv.is_some())?;
                reject("label_column", d.label_column.is_some())?;
                reject("scalar_column", d.scalar_column.is_some())?;
                reject("valid_fraction", d.valid_fraction.is_some())?;
                reject("standardize", d.standardize.is_some())?;
                reject("feature_mean", d.feature_mean.is_some())?;
                reject("feature_std", d.feature_std.is_some())?;
                let input_scale = match d.input_scale.as_deref().unwrap_or("unit") {
                    "unit" => InputScale::Unit,
                    "raw" => InputScale::Raw,
                    other => {
                        return Err(input_err!(
                            "data.input_scale = \"{other}\" must be \"unit\" or \"raw\""
                        ));
                    }
                };
                Ok(DataSpec::Fashion {
                    dir: d.dir.clone(),
                    input_scale,
                })
            }
            JobKind::TabularMlp | JobKind::LinearScalar => {
                reject("dir", d.dir.is_some())?;
                reject("input_scale", d.input_scale.is_some())?;
                if job == JobKind::TabularMlp {
                    reject("scalar_column", d.scalar_column.is_some())?;
                }
                let valid_fraction = d.valid_fraction.unwrap_or(0.1);
                if !(valid_fraction > 0.0 && valid_fraction < 1.0) {
                    return Err(input_err!(
                        "data.valid_fraction = {valid_fraction} must be between 0 and 1 (exclusive)"
                    ));
                }
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
                let standardize = d.standardize.unwrap_or(false);
                if stats.is_some() && !standardize {
                    return Err(input_err!(
                        "data.feature_mean/feature_std are given but data.standardize is false"
                    ));
                }
                let default_label = if job == JobKind::TabularMlp {
                    "label"
                } else {
                    "y"
                };
                Ok(DataSpec::Table {
                    csv: d.csv.clone(),
                    label_column: d
                        .label_column
                        .clone()
                        .unwrap_or_else(|| default_label.to_string()),
                    scalar_column: (job == JobKind::LinearScalar)
                        .then(|| d.scalar_column.clone().unwrap_or_else(|| "f".to_string())),
                    valid_fraction,
                    standardize,
                    stats,
                })
            }
        }
    }
}

impl JobConfig {
    /// The resolved config with every default written out, as saved with a run.
    pub fn to_raw(&self) -> RawConfig {
        let mut data = RawData::default();
        match &self.data {
            DataSpec::Fashion { dir, input_scale } => {
                data.dir = dir.clone();
                data.input_scale = Some(
                    match input_scale {
                        InputScale::Unit => "unit",
                        InputScale::Raw => "raw",
                    }
                    .to_string(),
                );
            }
            DataSpec::Table {
                csv,
                label_column,
                scalar_column,
                valid_fraction,
                standardize,
                stats,
            } => {
                data.csv = csv.clone();
                data.label_column = Some(label_column.clone());
                data.scalar_column = scalar_column.clone();
                data.valid_fraction = Some(*valid_fraction);
                data.standardize = Some(*standardize);
                data.feature_mean = stats.as_ref().map(|s| s.mean.clone());
                data.feature_std = stats.as_ref().map(|s| s.std.clone());
            }
        }
        let (sgd, adam) = match &self.optimizer {
            OptimizerSpec::Sgd { lr, momentum } => (
                Some(RawSgd {
                    lr: *lr,
                    momentum: Some(*momentum),
                }),
                None,
            ),
            OptimizerSpec::Adam {
                lr,
                beta1,
                beta2,
                epsilon,
            } => (
                None,
                Some(RawAdam {
                    lr: *lr,
                    beta1: Some(*beta1),
                    beta2: Some(*beta2),
                    epsilon: Some(*epsilon),
                }),
            ),
        };
        RawConfig {
            job: self.job.name().to_string(),
            seed: Some(self.seed),
            epochs: Some(self.epochs),
            batch_size: Some(self.batch_size),
            shuffle: Some(self.shuffle),
            drop_last: Some(self.drop_last),
            max_train_rows: self.max_train_rows,
            max_valid_rows: self.max_valid_rows,
            data,
            model: RawModel {
                init: Some(
                    match self.init {
                        Init::Torch => "torch",
                        Init::Keras => "keras",
                    }
                    .to_string(),
                ),
                inputs: self.inputs,
            },
            sgd,
            adam,
        }
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
        let recipe = JobConfig {
            epochs: 0,
            ..self.clone()
        };
        let digest = Sha256::digest(recipe.to_toml().as_bytes());
        digest.iter().take(6).map(|b| format!("{b:02x}")).collect()
    }

    /// The standardisation statistics in use, if any.
    pub fn standardization(&self) -> Option<&Standardization> {
        match &self.data {
            DataSpec::Table { stats, .. } => stats.as_ref(),
            DataSpec::Fashion { .. } => None,
        }
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
                epsilon: 1e-8
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
    fn field_of_another_job_is_rejected() {
        let err =
            check("job = \"fashion-mlp\"\n[data]\ncsv = \"a.csv\"\n[sgd]\nlr = 0.1\n").unwrap_err();
        assert!(
            err.to_string()
                .contains("data.csv is not used by the fashion-mlp job")
        );
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
