//! A table job's data: the CSV file (or the preset's built-in table), its validation split (a
//! seeded share of the rows, or a file of its own), an optional test file, and standardisation.
//! Every file after the training one is read with the training file's columns and classes.

use super::{HostData, HostSplit, Labels, class_count_fits, column_stats, split, synthetic, table};
use crate::config::{JobConfig, Preset, TableSpec, Task};
use crate::error::{EmberError, Result};
use crate::input_err;
use std::path::Path;

/// The training table as read, before the validation split.
struct Training {
    all: HostSplit,
    source: String,
    classes: Option<Vec<String>>,
    features: Option<Vec<String>>,
}

/// Loads a table job's splits and applies its preprocessing.
pub fn load(config: &JobConfig, spec: &TableSpec) -> Result<HostData> {
    let training = read_training(config, spec)?;
    let other = |path: &Path| read_other(path, config, spec, &training);
    let valid = spec.valid_csv.as_deref().map(other).transpose()?;
    let test = spec.test_csv.as_deref().map(other).transpose()?;
    let (train, valid) = match valid {
        Some(valid) => (training.all, valid),
        None => {
            if training.all.rows() < 2 {
                return Err(input_err!(
                    "{}: {} data rows; at least 2 are needed (one to train, one to validate)",
                    training.source,
                    training.all.rows()
                ));
            }
            split(training.all, spec.valid_fraction, config.split_seed())
        }
    };
    let mut data = HostData {
        train,
        valid,
        test,
        source: training.source,
        stats: None,
        classes: training.classes,
        features: training.features,
        image_size: None,
    };
    if spec.standardize {
        standardize(&mut data, spec)?;
    }
    Ok(data)
}

fn read_training(config: &JobConfig, spec: &TableSpec) -> Result<Training> {
    let Some(path) = &spec.csv else {
        return built_in(config);
    };
    let csv = table::read_text(path)?;
    let features = table::feature_names(&csv, spec)?;
    let classes = match (config.task, &config.classes) {
        (Task::Regression, _) => None,
        (_, Some(known)) => Some(known.clone()),
        (task, None) => Some(training_classes(&csv, &spec.targets[0], task)?),
    };
    let all = table::to_split(&csv, spec, &features, config.task, classes.as_deref())?;
    Ok(Training {
        all,
        source: path.display().to_string(),
        classes,
        features: Some(features),
    })
}

/// The classes of the training labels; a binary task needs exactly two, a classification at
/// least two.
fn training_classes(csv: &table::TextCsv, label: &str, task: Task) -> Result<Vec<String>> {
    let classes = table::classes_of(csv, label)?;
    class_count_fits(&classes, task).map_err(|why| {
        EmberError::file(&csv.path, format!("label column \"{label}\" gives {why}"))
    })?;
    Ok(classes)
}

/// The preset's built-in table: tabular-mlp's synthetic 0/1 table, linear-scalar's arange.
fn built_in(config: &JobConfig) -> Result<Training> {
    let (all, source, classes) = match config.preset {
        Some(Preset::TabularMlp) => (
            synthetic::tabular(),
            "built-in synthetic table (200,000 x 61, MT19937 seed 0)",
            Some(vec!["0".to_string(), "1".to_string()]),
        ),
        Some(Preset::LinearScalar) => (
            synthetic::linear_scalar(),
            "built-in arange table (38,400 x 40)",
            None,
        ),
        _ => unreachable!("the config check allows the built-in table to these presets only"),
    };
    let all = match (config.task, all.labels) {
        (Task::Classification, Labels::Binary(l)) => HostSplit {
            labels: Labels::Classes(l),
            ..all
        },
        (Task::Regression, Labels::Binary(_)) => {
            return Err(input_err!(
                "task = \"regression\": the built-in table has 0/1 labels; give data.csv"
            ));
        }
        (_, labels) => HostSplit { labels, ..all },
    };
    Ok(Training {
        all,
        source: source.to_string(),
        classes,
        features: None,
    })
}

/// Another file of a run's table (`ember eval --data`): all its rows, with the run's columns,
/// classes and statistics.
pub fn read_file(config: &JobConfig, spec: &TableSpec, path: &Path) -> Result<HostSplit> {
    let csv = table::read_text(path)?;
    let features = match &spec.features {
        Some(f) => f.clone(),
        None => table::feature_names(&csv, spec)?,
    };
    let mut split = table::to_split(
        &csv,
        spec,
        &features,
        config.task,
        config.classes.as_deref(),
    )?;
    if let Some(stats) = &spec.stats {
        super::apply_stats(&mut split, stats);
    }
    Ok(split)
}

/// A validation or test file, read with the training file's columns and classes.
fn read_other(
    path: &Path,
    config: &JobConfig,
    spec: &TableSpec,
    training: &Training,
) -> Result<HostSplit> {
    let csv = table::read_text(path)?;
    let features = training
        .features
        .as_deref()
        .expect("only a CSV training table takes a validation or test file");
    table::to_split(
        &csv,
        spec,
        features,
        config.task,
        training.classes.as_deref(),
    )
}

/// Standardises every split with the statistics of the training split (or the resolved
/// config's, when a run is resumed or evaluated).
fn standardize(data: &mut HostData, spec: &TableSpec) -> Result<()> {
    let stats = spec
        .stats
        .clone()
        .unwrap_or_else(|| column_stats(&data.train));
    let expected = data.train.features.cols + usize::from(data.train.scalar.is_some());
    if stats.mean.len() != expected {
        return Err(input_err!(
            "data.feature_mean has {} values but the data has {expected} input columns",
            stats.mean.len()
        ));
    }
    for s in [&mut data.train, &mut data.valid]
        .into_iter()
        .chain(data.test.as_mut())
    {
        super::apply_stats(s, &stats);
    }
    data.stats = Some(stats);
    Ok(())
}
