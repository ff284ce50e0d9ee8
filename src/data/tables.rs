//! A table job's data: the CSV file (or the preset's built-in table), its validation split (a
//! seeded share of the rows, or a file of its own), an optional test file, and standardisation.
//! Every file after the training one is read with the training file's columns and classes.

use super::columns::{self, Encoding};
use super::table::InputColumns;
use super::{HostData, HostSplit, Labels, class_count_fits, column_stats, split, synthetic, table};
use crate::config::{Fold, JobConfig, Preset, Standardization, TableSpec, Task};
use crate::error::{EmberError, Result};
use crate::input_err;
use std::path::Path;

/// The training table as read, before the validation split.
struct Training {
    all: HostSplit,
    source: String,
    classes: Option<Vec<String>>,
    features: Option<Vec<String>>,
    /// The typed columns' encodings, fitted on this file (with `[data.columns]`).
    encoding: Option<Vec<Encoding>>,
    /// Rows left out because their label was missing (typed columns only).
    dropped: usize,
    /// When the rows are already in [`split`]'s order, its training rows first: how many of
    /// them there are.
    split_at: Option<usize>,
    /// The statistics that standardised `all` as it was encoded (its training rows').
    stats: Option<Standardization>,
}

impl Training {
    fn inputs<'a>(&'a self, missing: &'a columns::Missing) -> InputColumns<'a> {
        match (&self.encoding, &self.features) {
            (Some(e), _) => InputColumns::Encoded(e, missing),
            (None, Some(f)) => InputColumns::Numbers(f),
            (None, None) => unreachable!("only a CSV training table takes another file"),
        }
    }
}

/// The training file's rows split for cross-validation; every fold needs a row.
fn folds_of(all: HostSplit, source: &str, fold: Fold, seed: u64) -> Result<(HostSplit, HostSplit)> {
    let rows = all.rows();
    if rows < fold.count {
        return Err(input_err!(
            "{source}: {rows} data rows cannot make data.folds = {} folds",
            fold.count
        ));
    }
    Ok(super::fold_split(all, fold, seed))
}

/// Loads a table job's splits and applies its preprocessing.
pub fn load(config: &JobConfig, spec: &TableSpec) -> Result<HostData> {
    let mut training = read_training(config, spec)?;
    let other = |path: &Path| read_other(path, config, spec, &training);
    let valid = spec.valid_csv.as_deref().map(other).transpose()?;
    let test = spec.test_csv.as_deref().map(other).transpose()?;
    let (valid_file, fitted_stats) = (valid.is_some(), training.stats.take());
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
            match (spec.fold, training.split_at) {
                (Some(fold), _) => {
                    folds_of(training.all, &training.source, fold, config.split_seed())?
                }
                (None, Some(train_rows)) => training.all.cut(train_rows),
                (None, None) => split(training.all, spec.valid_fraction, config.split_seed()),
            }
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
        encoding: training.encoding,
        dropped_labels: training.dropped,
        target_stats: None,
        image_size: None,
    };
    warn_constant_columns(&data);
    match fitted_stats {
        // The training file's rows were standardised as they were encoded; any other file not.
        Some(stats) => {
            let valid = valid_file.then_some(&mut data.valid);
            for s in valid.into_iter().chain(data.test.as_mut()) {
                super::apply_stats(s, &stats);
            }
            data.stats = Some(stats);
        }
        None if spec.standardize => standardize(&mut data, spec)?,
        None => {}
    }
    if spec.standardize_target {
        let stats = spec
            .target_stats
            .unwrap_or_else(|| target_stats(&data.train));
        for s in [&mut data.train, &mut data.valid]
            .into_iter()
            .chain(data.test.as_mut())
        {
            scale_target(s, stats);
        }
        data.target_stats = Some(stats);
    }
    Ok(data)
}

/// Says on stderr which input columns hold one value in every training row (a column can become
/// constant only after the split): the model learns nothing from them. They are kept, since
/// later files may vary, and training goes on.
fn warn_constant_columns(data: &HostData) {
    let constant = constant_columns(&data.train.features, &input_columns(data));
    if !constant.is_empty() {
        eprintln!(
            "warning: {}: {} the same inputs in all {} training rows (one value, or only \
             rare levels), so the model learns nothing from {}",
            data.source,
            match constant.as_slice() {
                [one] => format!("column \"{one}\" gives"),
                many => format!("columns \"{}\" give", many.join("\", \"")),
            },
            data.train.rows(),
            if constant.len() == 1 { "it" } else { "them" }
        );
    }
}

/// Each input column's name and the number of model inputs it makes, in input order; empty for
/// a built-in table.
fn input_columns(data: &HostData) -> Vec<(String, usize)> {
    match (&data.encoding, &data.features) {
        (Some(encoding), _) => encoding
            .iter()
            .map(|e| (e.column.clone(), e.inputs().len()))
            .collect(),
        (None, Some(features)) => features.iter().map(|f| (f.clone(), 1)).collect(),
        (None, None) => Vec::new(),
    }
}

/// The columns of `columns` whose every input holds one value in all rows of `features`.
fn constant_columns(features: &super::Matrix, columns: &[(String, usize)]) -> Vec<String> {
    let width: usize = columns.iter().map(|(_, n)| n).sum();
    if features.rows < 2 || width != features.cols {
        return Vec::new();
    }
    let cols = features.cols;
    let same = |c: usize| {
        let first = features.values[c];
        (1..features.rows).all(|r| features.values[r * cols + c] == first)
    };
    let mut at = 0;
    let mut constant = Vec::new();
    for (name, n) in columns {
        if (at..at + n).all(same) {
            constant.push(name.clone());
        }
        at += n;
    }
    constant
}

/// The mean and (population) standard deviation of the training split's one target; a
/// constant target gets a deviation of 1.
fn target_stats(train: &HostSplit) -> (f64, f64) {
    let Labels::Values(m) = &train.labels else {
        unreachable!("the config check allows standardize_target for regressions only")
    };
    let values: Vec<f64> = m.values.iter().map(|v| f64::from(*v)).collect();
    super::mean_and_std(&values)
}

/// `(y - mean) / std` on a split's targets.
pub fn scale_target(split: &mut HostSplit, (mean, std): (f64, f64)) {
    if let Labels::Values(m) = &mut split.labels {
        for v in &mut m.values {
            *v = ((f64::from(*v) - mean) / std) as f32;
        }
    }
}

fn read_training(config: &JobConfig, spec: &TableSpec) -> Result<Training> {
    let Some(path) = &spec.csv else {
        return built_in(config);
    };
    // Typed columns (and only they) are parsed as read: with the run's encoding when it is
    // resumed, else with [data.columns] as they are fitted.
    let kinds = (spec.columns.as_ref()).map(|typed| match &spec.encoding {
        Some(encoding) => kinds_of(encoding),
        None => typed.clone(),
    });
    let mut csv = read_table(path, spec, kinds)?;
    let missing = spec.missing();
    // Inputs fitted here are encoded in the same pass, each cell parsed once, in split order,
    // and standardised.
    let (mut fitted, mut split_at, mut stats) = (None, None, None);
    let (features, encoding, dropped) = match &spec.columns {
        None => (Some(table::feature_names(&csv, spec)?), None, 0),
        Some(typed) => {
            let dropped = csv.drop_missing_labels(&spec.targets, &missing)?;
            let encoding = match &spec.encoding {
                Some(known) => known.clone(),
                None => {
                    let inputs = columns::typed_inputs(&csv, typed, &spec.targets)?;
                    let (order, train_rows) = split_order(config, spec, csv.rows()).unzip();
                    let layout = columns::Layout {
                        order: order.as_deref(),
                        standardize_on_first: standardized_rows(spec, csv.rows(), train_rows),
                    };
                    let (embed, scaling) = (&spec.embed, &spec.scaling);
                    let f =
                        columns::fit_and_encode(&csv, &inputs, &missing, embed, scaling, layout)?;
                    fitted = Some(InputColumns::Ready(f.matrix, f.unseen, order));
                    (split_at, stats) = (train_rows, f.stats);
                    f.encodings
                }
            };
            (None, Some(encoding), dropped)
        }
    };
    let classes = match (config.task, &config.classes) {
        (Task::Regression, _) => None,
        (_, Some(known)) => Some(known.clone()),
        (task, None) => Some(training_classes(&csv, &spec.targets[0], task)?),
    };
    let mut training = Training {
        all: HostSplit::default(),
        source: path.display().to_string(),
        classes,
        features,
        encoding,
        dropped,
        split_at,
        stats,
    };
    let inputs = fitted.unwrap_or_else(|| training.inputs(&missing));
    let classes = training.classes.as_deref();
    training.all = table::to_split(&csv, spec, inputs, config.task, classes)?.0;
    Ok(training)
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
        encoding: None,
        dropped: 0,
        split_at: None,
        stats: None,
    })
}

/// When `load` will split a table of `rows` rows with [`split`]: the order in which to encode
/// it, that split's training rows then its validation rows (the split then costs no move of the
/// encoded rows), and how many training rows there are. `None` keeps the file's order.
fn split_order(config: &JobConfig, spec: &TableSpec, rows: usize) -> Option<(Vec<usize>, usize)> {
    if spec.valid_csv.is_some() || spec.fold.is_some() || rows < 2 {
        return None;
    }
    let (mut order, valid) = super::split_rows(rows, spec.valid_fraction, config.split_seed());
    let train_rows = order.len();
    order.extend(valid);
    Some((order, train_rows))
}

/// When the training file's inputs are standardised as they are encoded: how many of its
/// rows (in the encoding's order) are the training rows whose statistics scale them. Its rows
/// are then all training rows (a validation file of their own), or the split's training rows
/// first, ascending. Not for folds, whose training rows are not the first encoded rows, nor where
/// the statistics are given (a resumed run), nor for a scalar column.
fn standardized_rows(spec: &TableSpec, rows: usize, train_rows: Option<usize>) -> Option<usize> {
    let fresh = spec.standardize && spec.stats.is_none() && spec.scalar_column.is_none();
    match (fresh, spec.fold, train_rows) {
        (true, None, Some(train)) => Some(train),
        (true, None, None) if spec.valid_csv.is_some() => Some(rows),
        _ => None,
    }
}

/// Another file of a run's table (`ember eval --data`): all its rows, with the run's columns,
/// classes and statistics.
pub fn read_file(config: &JobConfig, spec: &TableSpec, path: &Path) -> Result<HostSplit> {
    let csv = read_labelled(path, spec, spec.encoding.as_deref())?;
    let missing = spec.missing();
    let features = match &spec.features {
        Some(f) => f.clone(),
        None if spec.encoding.is_some() => Vec::new(),
        None => table::feature_names(&csv, spec)?,
    };
    let inputs = match &spec.encoding {
        Some(encoding) => InputColumns::Encoded(encoding, &missing),
        None => InputColumns::Numbers(&features),
    };
    let classes = config.classes.as_deref();
    let mut split = to_split_noting(&csv, spec, inputs, config.task, classes)?;
    if let Some(stats) = &spec.stats {
        super::apply_stats(&mut split, stats);
    }
    if let Some(stats) = spec.target_stats {
        scale_target(&mut split, stats);
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
    let csv = read_labelled(path, spec, training.encoding.as_deref())?;
    let missing = spec.missing();
    let inputs = training.inputs(&missing);
    let classes = training.classes.as_deref();
    to_split_noting(&csv, spec, inputs, config.task, classes)
}

/// Each encoded column's kind.
fn kinds_of(encoding: &[Encoding]) -> Kinds {
    (encoding.iter())
        .map(|e| (e.column.clone(), e.kind))
        .collect()
}

type Kinds = std::collections::BTreeMap<String, columns::ColumnKind>;

/// A table file. With the `kinds` of a typed table's columns, its numeric and date inputs are
/// parsed as the file is read, and keep no text: only for a file read through the typed path
/// ([`columns::fit_and_encode`] or [`columns::encode`]), which takes their values.
fn read_table(path: &Path, spec: &TableSpec, kinds: Option<Kinds>) -> Result<table::TextCsv> {
    let Some(mut kinds) = kinds else {
        return table::read_text(path);
    };
    // Read as text wherever a config names them: the labels and the scalar column.
    for name in spec.targets.iter().chain(&spec.scalar_column) {
        kinds.remove(name);
    }
    columns::read_typed(path, &kinds, &spec.missing())
}

/// A file of a run with typed columns (`ember predict`'s input), read with the run's
/// `encoding`: its numeric and date inputs parsed as read.
pub(super) fn read_encoded(
    path: &Path,
    spec: &TableSpec,
    encoding: &[Encoding],
) -> Result<table::TextCsv> {
    read_table(path, spec, Some(kinds_of(encoding)))
}

/// A file read after the training one; with typed columns (their `encoding`), its rows without
/// a label are left out, and how many is said on stderr.
fn read_labelled(
    path: &Path,
    spec: &TableSpec,
    encoding: Option<&[Encoding]>,
) -> Result<table::TextCsv> {
    let mut csv = read_table(path, spec, encoding.map(kinds_of))?;
    if encoding.is_some() {
        let dropped = csv.drop_missing_labels(&spec.targets, &spec.missing())?;
        if dropped > 0 {
            eprintln!(
                "{}: {dropped} rows without a label left out",
                path.display()
            );
        }
    }
    Ok(csv)
}

/// [`table::to_split`], saying on stderr how many cells held levels training had not seen.
fn to_split_noting(
    csv: &table::TextCsv,
    spec: &TableSpec,
    inputs: InputColumns,
    task: Task,
    classes: Option<&[String]>,
) -> Result<HostSplit> {
    let (split, unseen) = table::to_split(csv, spec, inputs, task, classes)?;
    if let Some(line) = unseen.line(&csv.path) {
        eprintln!("{line}");
    }
    Ok(split)
}

/// Standardises every split with the statistics of the training split (or the resolved
/// config's, when a run is resumed or evaluated).
fn standardize(data: &mut HostData, spec: &TableSpec) -> Result<()> {
    let stats = spec.stats.clone().unwrap_or_else(|| {
        let mut stats = column_stats(&data.train);
        // One-hot levels and missing-cell indicators stay 0/1: a rare level scaled by its small
        // deviation would become a large input. An embedded column's index stays a row number.
        let binary = data.encoding.as_deref().map(columns::unscaled_inputs);
        for (c, _) in binary.iter().flatten().enumerate().filter(|(_, b)| **b) {
            (stats.mean[c], stats.std[c]) = (0.0, 1.0);
        }
        stats
    });
    let expected = data.train.features.cols + usize::from(data.train.scalar.is_some());
    if stats.mean.len() != expected {
        return Err(input_err!(
            "data.feature_mean has {} values but the data has {expected} input columns",
            stats.mean.len()
        ));
    }
    let indices = data.encoding.as_deref().map(columns::index_inputs);
    for i in indices.into_iter().flatten() {
        if (stats.mean[i], stats.std[i]) != (0.0, 1.0) {
            return Err(input_err!(
                "data.feature_mean[{i}] and data.feature_std[{i}] must be 0 and 1: input {i} is an embedded column's index, a row of its table"
            ));
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DataSpec;
    use crate::data::{Matrix, test_file};

    /// Every split of a typed table job whose `[data]` adds `extra` (where `FILE` stands for the
    /// training file, to be named again), and the job's split seed: 60 rows of a number with
    /// missing cells, a date, a category and a binary label. `STD` stands for
    /// `standardize = true`.
    fn loaded(folder: &str, extra: &str) -> (HostData, u64) {
        let mut table = String::from("x,d,c,y\n");
        for r in 0..60 {
            let x = if r % 7 == 3 {
                String::new()
            } else {
                format!("{}.25", r * r % 17)
            };
            let day = 1 + r % 28;
            let c = ["a", "b", "c"][r % 3];
            table.push_str(&format!("{x},2024-03-{day:02},{c},{}\n", r % 2));
        }
        let csv = test_file(folder, "t.csv", table);
        let job = test_file(
            folder,
            "job.toml",
            format!(
                "task = \"binary\"\nepochs = 1\nbatch_size = 8\n[model]\nhidden = []\n[sgd]\nlr = 0.1\n[data]\n\
                 csv = {csv:?}\nlabel = \"y\"\n{}\n\
                 [data.columns]\nx = \"numeric\"\nd = \"date\"\nc = \"category\"\n",
                extra
                    .replace("FILE", &format!("{csv:?}"))
                    .replace("STD", "standardize = true")
            ),
        );
        let config = crate::config::load(&job).unwrap();
        let DataSpec::Table(spec) = &config.data else {
            panic!("a table job")
        };
        (load(&config, spec).unwrap(), config.split_seed())
    }

    fn bits(m: &Matrix) -> Vec<u32> {
        m.values.iter().map(|v| v.to_bits()).collect()
    }

    #[test]
    fn the_training_file_standardised_as_encoded_matches_another_file_standardised_after() {
        // Split from the training file (standardised as encoded): its rows are the test
        // file's (the same file, standardised after encoding) in the split's order.
        let (split, seed) = loaded(
            "tables-split",
            "STD\nvalid_fraction = 0.25\ntest_csv = FILE",
        );
        let test = split.test.as_ref().unwrap();
        let (train, valid) = super::super::split_rows(60, 0.25, seed);
        let order: Vec<usize> = train.iter().chain(&valid).copied().collect();
        let encoded = [bits(&split.train.features), bits(&split.valid.features)].concat();
        assert_eq!(encoded, bits(&test.features.take(&order)));
        // The statistics are the training rows': their scaled inputs (x, then the date's five
        // parts, after x's missing indicator) have mean 0.
        let stats = column_stats(&split.train);
        let scaled = [0, 2, 3, 4, 5, 6].map(|i| stats.mean[i]);
        assert!(scaled.iter().all(|m| m.abs() < 1e-6), "{stats:?}");
        // A validation file of its own: the training file's rows are all training rows, and
        // the validation file (the same rows) is standardised with their statistics.
        let (files, _) = loaded("tables-files", "STD\nvalid_csv = FILE\ntest_csv = FILE");
        let test = bits(&files.test.as_ref().unwrap().features);
        assert_eq!(bits(&files.train.features), test);
        assert_eq!(bits(&files.valid.features), test);
    }

    #[test]
    fn standardised_as_encoded_is_the_encoded_rows_standardised() {
        let (fused, _) = loaded("tables-fused", "STD\nvalid_fraction = 0.25");
        let (raw, _) = loaded("tables-raw", "valid_fraction = 0.25");
        // As `standardize` fits and applies the statistics to the encoded rows.
        let mut expected = column_stats(&raw.train);
        let unscaled = columns::unscaled_inputs(raw.encoding.as_deref().unwrap());
        for (c, _) in unscaled.iter().enumerate().filter(|(_, u)| **u) {
            (expected.mean[c], expected.std[c]) = (0.0, 1.0);
        }
        let f64_bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let stats = fused.stats.as_ref().unwrap();
        assert_eq!(f64_bits(&stats.mean), f64_bits(&expected.mean));
        assert_eq!(f64_bits(&stats.std), f64_bits(&expected.std));
        let (mut train, mut valid) = (raw.train, raw.valid);
        super::super::apply_stats(&mut train, &expected);
        super::super::apply_stats(&mut valid, &expected);
        assert_eq!(bits(&fused.train.features), bits(&train.features));
        assert_eq!(bits(&fused.valid.features), bits(&valid.features));
    }
}
