//! Data on the host: the readers (IDX, CSV), the built-in tables, the validation split and the
//! standardisation, ending in one [`HostData`] per run; then [`loader`] uploads it to the device
//! once and cuts batches there.

pub mod columns;
mod csv_scan;
pub mod fashion;
pub mod idx;
pub mod images;
pub mod loader;
pub mod number;
pub mod synthetic;
pub mod table;
pub mod tables;
pub mod text_csv;

use crate::config::{DataSpec, JobConfig, Standardization};
use crate::error::Result;

/// A row-major matrix of f32.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub values: Vec<f32>,
}

impl Matrix {
    pub fn row(&self, i: usize) -> &[f32] {
        &self.values[i * self.cols..(i + 1) * self.cols]
    }

    /// The rows at `indices`, in that order.
    pub fn take(&self, indices: &[usize]) -> Matrix {
        use rayon::prelude::*;
        const BLOCK: usize = 4096;
        let width = self.cols.max(1);
        let mut values = vec![0.0; indices.len() * self.cols];
        // Blocks of rows in parallel (a validation split of a large table is large too).
        (values
            .par_chunks_mut(BLOCK * width)
            .zip(indices.par_chunks(BLOCK)))
        .for_each(|(block, rows)| {
            for (to, &from) in block.chunks_exact_mut(width).zip(rows) {
                to.copy_from_slice(self.row(from));
            }
        });
        Matrix {
            rows: indices.len(),
            cols: self.cols,
            values,
        }
    }

    /// Keeps the first `n` rows and returns the others.
    fn cut(&mut self, n: usize) -> Matrix {
        let rest = Matrix {
            rows: self.rows - n,
            cols: self.cols,
            values: self.values.split_off(n * self.cols),
        };
        self.rows = n;
        rest
    }

    /// Keeps the rows at `keep` (ascending), in place: row `keep[i]` becomes row `i`. A split
    /// so costs no second copy of a table's inputs.
    fn keep_rows(&mut self, keep: &[usize]) {
        keep_rows(&mut self.values, self.cols, keep);
        self.rows = keep.len();
    }
}

/// Keeps the rows (of `width` values each) at `keep` (ascending) of `values`, in place. Each
/// row moves down or stays, so no row is overwritten before it has moved.
fn keep_rows<T: Copy>(values: &mut Vec<T>, width: usize, keep: &[usize]) {
    for (to, &from) in keep.iter().enumerate() {
        debug_assert!(from >= to, "the rows to keep ascend");
        if from != to {
            values.copy_within(from * width..(from + 1) * width, to * width);
        }
    }
    values.truncate(keep.len() * width);
}

/// What the model predicts for each row.
#[derive(Debug, Clone, PartialEq)]
pub enum Labels {
    /// Class indices (fashion-mlp).
    Classes(Vec<i64>),
    /// 0 or 1 (tabular-mlp).
    Binary(Vec<i64>),
    /// Real targets, one column per target (regression).
    Values(Matrix),
}

impl Default for Labels {
    fn default() -> Labels {
        Labels::Classes(Vec::new())
    }
}

impl Labels {
    pub fn len(&self) -> usize {
        match self {
            Labels::Classes(v) | Labels::Binary(v) => v.len(),
            Labels::Values(m) => m.rows,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn take(&self, indices: &[usize]) -> Labels {
        match self {
            Labels::Classes(v) => Labels::Classes(indices.iter().map(|&i| v[i]).collect()),
            Labels::Binary(v) => Labels::Binary(indices.iter().map(|&i| v[i]).collect()),
            Labels::Values(m) => Labels::Values(m.take(indices)),
        }
    }

    fn keep_rows(&mut self, keep: &[usize]) {
        match self {
            Labels::Classes(v) | Labels::Binary(v) => keep_rows(v, 1, keep),
            Labels::Values(m) => m.keep_rows(keep),
        }
    }
}

/// One split of a data set on the host.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HostSplit {
    /// The model's inputs (images flattened to 784 columns, table features).
    pub features: Matrix,
    /// linear-scalar's `f`, the column multiplied by the learned scalar.
    pub scalar: Option<Vec<f32>>,
    pub labels: Labels,
}

impl HostSplit {
    pub fn rows(&self) -> usize {
        self.features.rows
    }

    pub fn take(&self, indices: &[usize]) -> HostSplit {
        HostSplit {
            features: self.features.take(indices),
            scalar: self
                .scalar
                .as_ref()
                .map(|s| indices.iter().map(|&i| s[i]).collect()),
            labels: self.labels.take(indices),
        }
    }

    /// This split with only the rows at `keep` (ascending), moved down in place.
    fn keep_rows(mut self, keep: &[usize]) -> HostSplit {
        self.features.keep_rows(keep);
        if let Some(s) = &mut self.scalar {
            keep_rows(s, 1, keep);
        }
        self.labels.keep_rows(keep);
        self
    }

    /// A copy of rows `start..start + len`.
    pub fn range(&self, start: usize, len: usize) -> HostSplit {
        self.take(&(start..start + len).collect::<Vec<_>>())
    }

    /// Bytes of one row of the widest tensor a model makes of this split (its f32 inputs).
    pub fn row_bytes(&self) -> usize {
        self.features.cols.max(1) * std::mem::size_of::<f32>()
    }

    /// The split with its scalar column `f` appended to the inputs, as the last one: so
    /// linear-scalar's `x · w + p · f` is one linear layer over `[x | f]` (replicas train it so).
    pub fn scalar_as_last_input(self) -> HostSplit {
        let Some(f) = self.scalar else {
            return self;
        };
        let Matrix { rows, cols, values } = self.features;
        debug_assert_eq!(f.len(), rows, "one scalar per row");
        let mut wide = Vec::with_capacity(rows * (cols + 1));
        for (i, f) in f.iter().enumerate() {
            wide.extend_from_slice(&values[i * cols..(i + 1) * cols]);
            wide.push(*f);
        }
        HostSplit {
            features: Matrix {
                rows,
                cols: cols + 1,
                values: wide,
            },
            scalar: None,
            labels: self.labels,
        }
    }

    /// Its first `n` rows and the others, as two splits; the others are copied out, so a
    /// table that is encoded in split order is never held twice.
    pub fn cut(mut self, n: usize) -> (HostSplit, HostSplit) {
        let rest = HostSplit {
            features: self.features.cut(n),
            scalar: self.scalar.as_mut().map(|s| s.split_off(n)),
            labels: match &mut self.labels {
                Labels::Classes(v) => Labels::Classes(v.split_off(n)),
                Labels::Binary(v) => Labels::Binary(v.split_off(n)),
                Labels::Values(m) => Labels::Values(m.cut(n)),
            },
        };
        (self, rest)
    }

    /// The rows of `parts`, one after another (folds as replicas: each fold's split in one
    /// upload). The parts share their columns and their kind of labels.
    pub fn concat(parts: &[&HostSplit]) -> HostSplit {
        let mut all = HostSplit {
            features: Matrix {
                rows: 0,
                cols: parts.first().map_or(0, |p| p.features.cols),
                values: Vec::new(),
            },
            scalar: None,
            labels: match parts.first().map(|p| &p.labels) {
                Some(Labels::Binary(_)) => Labels::Binary(Vec::new()),
                Some(Labels::Values(m)) => Labels::Values(Matrix {
                    rows: 0,
                    cols: m.cols,
                    values: Vec::new(),
                }),
                _ => Labels::Classes(Vec::new()),
            },
        };
        for part in parts {
            debug_assert_eq!(part.features.cols, all.features.cols, "parts share columns");
            debug_assert!(
                part.scalar.is_none(),
                "folds as replicas have no scalar column"
            );
            all.features.values.extend_from_slice(&part.features.values);
            all.features.rows += part.rows();
            match (&mut all.labels, &part.labels) {
                (Labels::Classes(a), Labels::Classes(b))
                | (Labels::Binary(a), Labels::Binary(b)) => a.extend_from_slice(b),
                (Labels::Values(a), Labels::Values(b)) => {
                    a.values.extend_from_slice(&b.values);
                    a.rows += b.rows;
                }
                _ => unreachable!("the parts share their kind of labels"),
            }
        }
        all
    }

    /// The first `n` rows (or all of them).
    pub fn truncate(self, n: usize) -> HostSplit {
        match n < self.rows() {
            true => self.keep_rows(&(0..n).collect::<Vec<_>>()),
            false => self,
        }
    }
}

/// A run's data: the split it trains on, the split it validates on, and the test split when
/// the source has one.
#[derive(Debug, Clone)]
pub struct HostData {
    pub train: HostSplit,
    pub valid: HostSplit,
    pub test: Option<HostSplit>,
    /// Class names in output order (classifiers).
    pub classes: Option<Vec<String>>,
    /// The input columns of a CSV table of numbers, in order.
    pub features: Option<Vec<String>>,
    /// The encodings of a CSV table's typed columns (`[data.columns]`).
    pub encoding: Option<Vec<columns::Encoding>>,
    /// Training rows left out because their label was missing.
    pub dropped_labels: usize,
    /// A standardised regression target's (mean, standard deviation).
    pub target_stats: Option<(f64, f64)>,
    /// The `[height, width]` every image was resized to (images source).
    pub image_size: Option<[usize; 2]>,
    /// Where the data came from, for the log line and the run summary.
    pub source: String,
    /// The statistics applied to the inputs, when the job standardises them.
    pub stats: Option<Standardization>,
}

impl HostData {
    /// Every split with its scalar column appended to the inputs
    /// ([`HostSplit::scalar_as_last_input`]).
    pub fn scalar_as_last_input(self) -> HostData {
        HostData {
            train: self.train.scalar_as_last_input(),
            valid: self.valid.scalar_as_last_input(),
            test: self.test.map(HostSplit::scalar_as_last_input),
            ..self
        }
    }
}

/// Which split `ember eval` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SplitName {
    Train,
    Valid,
    Test,
}

/// Loads a job's data and applies its preprocessing.
pub fn load(config: &JobConfig) -> Result<HostData> {
    load_showing(config, &indicatif::ProgressBar::hidden())
}

/// [`load`], ticking `progress` as images are decoded.
pub fn load_showing(config: &JobConfig, progress: &indicatif::ProgressBar) -> Result<HostData> {
    match &config.data {
        DataSpec::Images(spec) => images::load(config, spec, progress),
        DataSpec::Idx {
            dir,
            input_scale,
            valid_fraction,
        } => {
            let data = fashion::load(dir.as_deref(), *input_scale, config.classes.as_deref())?;
            let mut data = for_task(data, config.task)?;
            if *valid_fraction > 0.0 {
                let (train, valid) = split(data.train, *valid_fraction, config.split_seed());
                data.train = train;
                data.test = Some(std::mem::replace(&mut data.valid, valid));
            }
            Ok(data)
        }
        DataSpec::Table(spec) => tables::load(config, spec),
    }
}

/// Whether `classes` suit `task`: a binary task needs exactly two, a classification at least
/// two. The error says how many there are and what the task needs.
pub fn class_count_fits(
    classes: &[String],
    task: crate::config::Task,
) -> std::result::Result<(), String> {
    let binary = task == crate::config::Task::Binary;
    if (binary && classes.len() == 2) || (!binary && classes.len() >= 2) {
        return Ok(());
    }
    let (kind, need) = if binary {
        ("binary", "exactly two")
    } else {
        ("classification", "at least two")
    };
    Err(format!(
        "{} classes ({}); a {kind} task needs {need}",
        classes.len(),
        shorten(classes)
    ))
}

/// At most eight names, then a count.
fn shorten(names: &[String]) -> String {
    match names.len() {
        0..=8 => names.join(", "),
        n => format!("{}, … {} more", names[..8].join(", "), n - 8),
    }
}

/// The class labels of an idx source as `task` takes them: a binary task needs exactly two
/// classes (0/1 labels, the second class positive), a classification at least two.
fn for_task(mut data: HostData, task: crate::config::Task) -> Result<HostData> {
    let classes = data.classes.clone().unwrap_or_default();
    let binary = task == crate::config::Task::Binary;
    if let Err(why) = class_count_fits(&classes, task) {
        return Err(crate::input_err!("{}: the labels give {why}", data.source));
    }
    if binary {
        for split in [&mut data.train, &mut data.valid] {
            if let Labels::Classes(l) = &split.labels {
                split.labels = Labels::Binary(l.clone());
            }
        }
    }
    Ok(data)
}

/// Loads a job's data and keeps the rows the config allows (`max_train_rows`, `max_valid_rows`).
pub fn load_limited(config: &JobConfig, progress: &indicatif::ProgressBar) -> Result<HostData> {
    let mut data = load_showing(config, progress)?;
    if let Some(n) = config.max_train_rows {
        data.train = data.train.truncate(n);
    }
    if let Some(n) = config.max_valid_rows {
        data.valid = data.valid.truncate(n);
    }
    Ok(data)
}

/// Class names in output order: numerically when every name is an integer, otherwise as text;
/// each name once.
pub fn class_order(mut names: Vec<String>) -> Vec<String> {
    if names.iter().all(|n| n.parse::<i64>().is_ok()) {
        names.sort_by_key(|n| n.parse::<i64>().expect("checked just above"));
    } else {
        names.sort();
    }
    names.dedup();
    names
}

/// A seeded split: a random `fraction` of the rows is held out for validation; both parts keep
/// the file's row order, so an unshuffled run sees rows as the file has them.
pub fn split(all: HostSplit, fraction: f64, seed: u64) -> (HostSplit, HostSplit) {
    let (train, valid) = split_rows(all.rows(), fraction, seed);
    apart(all, &train, &valid)
}

/// [`split`]'s rows of a table of `n`: those that train and those held out, each ascending.
pub fn split_rows(n: usize, fraction: f64, seed: u64) -> (Vec<usize>, Vec<usize>) {
    let n_valid = ((n as f64) * fraction).round() as usize;
    let n_valid = n_valid.clamp(usize::from(n > 1), n.saturating_sub(1));
    let perm = crate::rng::permutation(&mut crate::rng::stream(seed, "split", 0), n);
    // Marking the held-out rows lists both parts in ascending order without sorting them.
    let mut held_out = vec![false; n];
    for &row in &perm[..n_valid] {
        held_out[row] = true;
    }
    let (valid, train): (Vec<usize>, Vec<usize>) = (0..n).partition(|&row| held_out[row]);
    (train, valid)
}

/// The rows at `train` and at `valid` (each ascending) of `all` as two splits: the validation
/// rows copied out, the training rows moved down in place, so a table is never held twice.
fn apart(all: HostSplit, train: &[usize], valid: &[usize]) -> (HostSplit, HostSplit) {
    let valid = all.take(valid);
    (all.keep_rows(train), valid)
}

/// Cross-validation's split: fold `fold.index` of `fold.count` validates, the others train.
/// Stratified for classes as scikit-learn's `StratifiedKFold`: the rows in a seeded order,
/// sorted by class (stably), are dealt to the folds in turn, so each fold holds about a
/// `count`-th of every class. Both parts keep the file's row order, as [`split`]'s do.
pub fn fold_split(all: HostSplit, fold: crate::config::Fold, seed: u64) -> (HostSplit, HostSplit) {
    let n = all.rows();
    let mut order = crate::rng::permutation(&mut crate::rng::stream(seed, "folds", 0), n);
    if let Labels::Classes(l) | Labels::Binary(l) = &all.labels {
        order.sort_by_key(|&row| l[row]);
    }
    let (mut valid, mut train) = (Vec::new(), Vec::new());
    for (dealt, row) in order.into_iter().enumerate() {
        match dealt % fold.count == fold.index {
            true => valid.push(row),
            false => train.push(row),
        }
    }
    valid.sort_unstable();
    train.sort_unstable();
    apart(all, &train, &valid)
}

/// Mean and (population) standard deviation of each input column, `f` last; a constant column
/// gets a deviation of 1 so it passes through centred.
pub fn column_stats(split: &HostSplit) -> Standardization {
    let (mut mean, mut std) = row_wise_stats(&split.features);
    if let Some(s) = &split.scalar {
        let (m, d) = mean_and_std(&s.iter().map(|v| f64::from(*v)).collect::<Vec<_>>());
        mean.push(m);
        std.push(d);
    }
    Standardization { mean, std }
}

/// [`mean_and_std`] of every column of `m`, bit for bit, reading the rows in order: each
/// column's sums add its values in row order, as the column alone would, without a copy of
/// the matrix as columns of f64. Groups of columns go to the pool's threads; each column's sums
/// are still one thread's, in row order, so the bits do not depend on the thread count.
fn row_wise_stats(m: &Matrix) -> (Vec<f64>, Vec<f64>) {
    use rayon::prelude::*;
    let group = m.cols.div_ceil(rayon::current_num_threads()).max(1);
    let groups: Vec<(Vec<f64>, Vec<f64>)> = (0..m.cols)
        .step_by(group)
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|first| columns_stats(m, first..(first + group).min(m.cols)))
        .collect();
    groups
        .into_iter()
        .fold((Vec::new(), Vec::new()), |(mut mean, mut std), (m, s)| {
            mean.extend(m);
            std.extend(s);
            (mean, std)
        })
}

/// [`row_wise_stats`] of the columns `cols` of `m`.
fn columns_stats(m: &Matrix, cols: std::ops::Range<usize>) -> (Vec<f64>, Vec<f64>) {
    let at = |r: usize, c: usize| m.values[r * m.cols + cols.start + c];
    stats_in_row_order(cols.len(), m.rows, at)
        .into_iter()
        .unzip()
}

/// The mean and (population) standard deviation of `columns` columns of `rows` rows, whose
/// value at row `r` and column `c` is `at(r, c)`: each column's sums add its values in row
/// order, as [`mean_and_std`] of the column alone would, bit for bit; the columns' sums are
/// interleaved, so that they run side by side rather than each waiting on its last addition.
/// A constant column gets a deviation of 1.
pub fn stats_in_row_order(
    columns: usize,
    rows: usize,
    at: impl Fn(usize, usize) -> f32,
) -> Vec<(f64, f64)> {
    // The starting value of f64's `Sum`, so that even an all -0.0 column sums the same.
    let zero: f64 = std::iter::empty::<f64>().sum();
    let n = rows.max(1) as f64;
    let mut sums = vec![zero; columns];
    for r in 0..rows {
        for (c, s) in sums.iter_mut().enumerate() {
            *s += f64::from(at(r, c));
        }
    }
    let mean: Vec<f64> = sums.iter().map(|s| s / n).collect();
    let mut squares = vec![zero; columns];
    for r in 0..rows {
        for (c, (s, m)) in squares.iter_mut().zip(&mean).enumerate() {
            *s += (f64::from(at(r, c)) - m) * (f64::from(at(r, c)) - m);
        }
    }
    let std = squares.iter().map(|s| s / n);
    let std = std.map(|var| if var > 0.0 { var.sqrt() } else { 1.0 });
    mean.iter().copied().zip(std).collect()
}

/// The mean and (population) standard deviation of `values`; 1 for a constant column, so it
/// passes through standardisation centred.
pub fn mean_and_std(values: &[f64]) -> (f64, f64) {
    let n = values.len().max(1) as f64;
    let m = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / n;
    (m, if var > 0.0 { var.sqrt() } else { 1.0 })
}

/// Applies `(x - mean) / std` to the inputs in place.
pub fn apply_stats(split: &mut HostSplit, stats: &Standardization) {
    use rayon::prelude::*;
    let cols = split.features.cols;
    let scale = |row: &mut [f32]| {
        for ((v, m), s) in row.iter_mut().zip(&stats.mean).zip(&stats.std) {
            *v = ((f64::from(*v) - m) / s) as f32;
        }
    };
    // Blocks of rows in parallel: each value's arithmetic is its own, so the bits are the same.
    (split.features.values)
        .par_chunks_mut(cols.max(1) * 4096)
        .for_each(|block| block.chunks_exact_mut(cols.max(1)).for_each(scale));
    if let Some(s) = &mut split.scalar {
        for v in s.iter_mut() {
            *v = ((f64::from(*v) - stats.mean[cols]) / stats.std[cols]) as f32;
        }
    }
}

/// `bytes` written as file `name` in [`test_dir`]`(folder)`, for unit tests.
#[cfg(test)]
pub(crate) fn test_file(folder: &str, name: &str, bytes: impl AsRef<[u8]>) -> std::path::PathBuf {
    let path = test_dir(folder).join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// A folder for unit tests' files: `folder` in the temp folder `ember-unit-{pid}` (the tests of
/// one binary share its pid, so each names a folder of its own). The first call removes the
/// folders of earlier test processes that have ended, which nothing else would.
#[cfg(test)]
pub(crate) fn test_dir(folder: &str) -> std::path::PathBuf {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    let temp = std::env::temp_dir();
    SWEPT.call_once(|| {
        for entry in std::fs::read_dir(&temp).into_iter().flatten().flatten() {
            let name = entry.file_name();
            let pid = (name.to_str().and_then(|n| n.strip_prefix("ember-unit-")))
                .and_then(|p| p.parse::<libc::pid_t>().ok());
            // SAFETY: signal 0 sends nothing; it asks whether the process exists.
            let ended = pid.is_some_and(|p| unsafe { libc::kill(p, 0) } != 0
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH));
            if ended {
                std::fs::remove_dir_all(entry.path()).ok();
            }
        }
    });
    let dir = temp
        .join(format!("ember-unit-{}", std::process::id()))
        .join(folder);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toy(n: usize) -> HostSplit {
        HostSplit {
            features: Matrix {
                rows: n,
                cols: 2,
                values: (0..2 * n).map(|v| v as f32).collect(),
            },
            scalar: Some((0..n).map(|v| v as f32 * 3.0).collect()),
            labels: Labels::Values(Matrix {
                rows: n,
                cols: 1,
                values: (0..n).map(|v| v as f32).collect(),
            }),
        }
    }

    #[test]
    fn folds_cover_every_row_once_and_hold_each_class_evenly() {
        // 70 rows of class 0 and 30 of class 1, in 5 folds.
        let mut all = toy(100);
        all.labels = Labels::Classes((0..100).map(|i| i64::from(i % 10 >= 7)).collect());
        let mut seen = vec![0; 100];
        for index in 0..5 {
            let fold = crate::config::Fold { count: 5, index };
            let (train, valid) = fold_split(all.clone(), fold, 7);
            assert_eq!((train.rows(), valid.rows()), (80, 20));
            let Labels::Classes(l) = &valid.labels else {
                unreachable!()
            };
            assert_eq!(l.iter().filter(|c| **c == 1).count(), 6, "fold {index}");
            // Rows keep the file's order; each is validated in exactly one fold.
            let firsts: Vec<f32> = (0..valid.rows())
                .map(|r| valid.features.values[r * 2])
                .collect();
            assert!(firsts.windows(2).all(|w| w[0] < w[1]));
            firsts.iter().for_each(|v| seen[*v as usize / 2] += 1);
            assert_eq!(
                fold_split(all.clone(), fold, 7).1.features.values,
                valid.features.values
            );
        }
        assert!(seen.iter().all(|n| *n == 1), "{seen:?}");
        // Another split seed deals other rows to fold 0.
        let first = crate::config::Fold { count: 5, index: 0 };
        let other = fold_split(all.clone(), first, 8).1;
        assert_ne!(
            other.features.values,
            fold_split(all, first, 7).1.features.values
        );
    }

    #[test]
    fn concat_lays_the_parts_one_after_another() {
        let mut all = toy(10);
        all.scalar = None;
        let (a, b) = (all.range(0, 4), all.range(4, 6));
        assert_eq!(HostSplit::concat(&[&a, &b]), all);
        let twice = HostSplit::concat(&[&b, &b]);
        assert_eq!(twice.rows(), 12);
        assert_eq!(twice.take(&(6..12).collect::<Vec<_>>()), b);
    }

    #[test]
    fn split_is_seeded_disjoint_and_ordered() {
        let (t, v) = split(toy(100), 0.1, 5);
        assert_eq!((t.rows(), v.rows()), (90, 10));
        let Labels::Values(tv) = &t.labels else {
            unreachable!()
        };
        let Labels::Values(vv) = &v.labels else {
            unreachable!()
        };
        assert!(tv.values.windows(2).all(|w| w[0] < w[1]));
        let mut all: Vec<f32> = tv.values.iter().chain(&vv.values).copied().collect();
        all.sort_by(f32::total_cmp);
        assert_eq!(all, (0..100).map(|v| v as f32).collect::<Vec<_>>());
        let (_, v2) = split(toy(100), 0.1, 5);
        assert_eq!(v, v2);
        let (_, v3) = split(toy(100), 0.1, 6);
        assert_ne!(v, v3);
    }

    #[test]
    fn the_split_in_place_holds_the_rows_copies_would() {
        let all = toy(100);
        let (t, v) = split(all.clone(), 0.3, 5);
        let key = |m: &Matrix| (0..m.rows).map(|r| m.row(r)[0] as usize / 2).collect();
        let (train, valid): (Vec<usize>, Vec<usize>) = (key(&t.features), key(&v.features));
        assert_eq!((&t, &v), (&all.take(&train), &all.take(&valid)));
        // The same two parts from the rows put in split order first, then cut.
        let (mut order, held_out) = split_rows(100, 0.3, 5);
        order.extend(held_out);
        assert_eq!(all.take(&order).cut(70), (t, v));
        assert_eq!(
            all.clone().truncate(7),
            all.take(&(0..7).collect::<Vec<_>>())
        );
        assert_eq!(all.clone().truncate(500), all);
    }

    #[test]
    fn row_wise_statistics_are_each_columns_own_bit_for_bit() {
        // Values of many magnitudes, so that another order of the sums would round otherwise.
        let (rows, cols) = (1000, 5);
        let values = (0..rows * cols)
            .map(|i| ((i * 7919 % 1009) as f32 - 500.0) * 10f32.powi((i % 7) as i32 - 3))
            .collect();
        let m = Matrix { rows, cols, values };
        // On pools of 1 to 6 threads: groups of 5, 3, 2 and 1 columns, and more threads than
        // columns.
        for threads in 1..=6 {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build();
            let (mean, std) = pool.unwrap().install(|| row_wise_stats(&m));
            assert_eq!((mean.len(), std.len()), (cols, cols));
            for c in 0..cols {
                let column: Vec<f64> = (0..rows).map(|r| f64::from(m.row(r)[c])).collect();
                let (cm, cs) = mean_and_std(&column);
                assert_eq!(
                    (mean[c].to_bits(), std[c].to_bits()),
                    (cm.to_bits(), cs.to_bits()),
                    "{threads} threads, column {c}"
                );
            }
        }
        let zeros = Matrix {
            rows: 3,
            cols: 1,
            values: vec![-0.0; 3],
        };
        assert_eq!(
            row_wise_stats(&zeros).0[0].to_bits(),
            mean_and_std(&[-0.0; 3]).0.to_bits()
        );
    }

    #[test]
    fn standardised_columns_have_zero_mean_and_unit_deviation() {
        let mut s = toy(50);
        let stats = column_stats(&s);
        assert_eq!(stats.mean.len(), 3);
        apply_stats(&mut s, &stats);
        let again = column_stats(&s);
        for (m, d) in again.mean.iter().zip(&again.std) {
            assert!(m.abs() < 1e-5, "{m}");
            assert!((d - 1.0).abs() < 1e-5, "{d}");
        }
    }
}
