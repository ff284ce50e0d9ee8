//! The columns of a real table, typed by `[data.columns]`: each is `numeric`, a `category`, a
//! `date`, or `ignore`. The training file alone fits each input's [`Encoding`] (its median, its
//! levels, whether it had missing cells); ember writes the encodings into the run's
//! `config.toml` (`[[data.encoding]]`), and every later file (validation, test, `eval --data`,
//! `predict`) is encoded with them, so a row becomes the same inputs wherever it is read.
//!
//! A row's inputs, column by column in the training file's order:
//! - numeric: the value, or the training median where the cell is missing; then, when the
//!   training file had missing cells in the column, a 0/1 input saying the cell was missing;
//! - category: one 0/1 input per level seen at least [`MIN_LEVEL_ROWS`] times in training (at
//!   most [`MAX_LEVELS`], the most frequent), one for a missing cell, and one for any other
//!   level (rare in training, or never seen);
//! - an embedded category (`[data.embed]`): one input holding the level's index (its levels,
//!   at most [`MAX_EMBEDDED_LEVELS`], then "(missing)" and "(other)"), which the model looks up
//!   in a table of learned vectors (`model::embed`);
//! - date: year, month, day, weekday and day of the year ([`dates::PARTS`]), the training
//!   median date where the cell is missing, and the same missing input as a numeric column.

pub mod dates;
pub mod infer;
mod scaling;
pub use scaling::{PIECEWISE_BINS, ROBUST_CLIP};

use super::Matrix;
use super::table::TextCsv;
use super::text_csv::{CellParser, read_parsing};
use crate::config::Standardization;
pub use crate::config::columns::{
    ColumnKind, DEFAULT_MISSING, Embed, Encoding, Missing, Robust, Scaling, Scalings,
};
use crate::error::Result;
use rayon::prelude::*;
use rustc_hash::FxHashMap;

/// A level needs this many training rows to get an input of its own; rarer levels share the
/// "other" input with levels never seen. One row is too few to learn a weight from.
pub const MIN_LEVEL_ROWS: usize = 3;

/// At most this many levels of a column get inputs of their own (the most frequent). A column
/// with more levels than this is mostly rare levels: one-hot inputs would be mostly zeros.
pub const MAX_LEVELS: usize = 64;

/// At most this many levels of an embedded column get a vector of their own (the most
/// frequent); the table holds this many rows (and two more) times its width.
pub const MAX_EMBEDDED_LEVELS: usize = 100_000;

/// The width `ember init` proposes for an embedded column of `vocabulary` rows (its levels,
/// "(missing)" and "(other)") in a training file of `rows` rows: fastai's rule, min(600,
/// round(1.6 n^0.56)), which AutoGluon uses too, but at most one value of the table per two
/// training rows. `None` below 2 wide: too few rows per level to learn vectors from, and
/// one-hot keeps the commonest levels. (docs/tables.md, embeddings, has the measurements: on a
/// table of 8 rows per level, fastai's width overfit.)
pub fn embed_width(vocabulary: usize, rows: usize) -> Option<usize> {
    let fastai = (1.6 * (vocabulary as f64).powf(0.56))
        .round()
        .clamp(1.0, 600.0) as usize;
    let width = fastai.min(rows / (2 * vocabulary));
    (width >= 2).then_some(width)
}

impl Encoding {
    /// The names of this column's inputs, and whether standardisation leaves each as it is: a
    /// 0/1 input, or an embedded column's index (which must reach the model exact).
    pub fn inputs(&self) -> Vec<(String, bool)> {
        let c = &self.column;
        let mut inputs: Vec<(String, bool)> = match self.kind {
            ColumnKind::Numeric => match &self.bins {
                Some(edges) => (edges.windows(2))
                    .map(|w| (format!("{c}[{},{}]", w[0], w[1]), false))
                    .collect(),
                None => vec![(c.clone(), false)],
            },
            ColumnKind::Date => dates::PARTS
                .iter()
                .map(|p| (format!("{c}.{p}"), false))
                .collect(),
            ColumnKind::Category if self.embed.is_some() => {
                return vec![(format!("{c}=(index)"), true)];
            }
            ColumnKind::Category => {
                let levels = self.levels.as_deref().unwrap_or_default();
                let mut v: Vec<(String, bool)> =
                    levels.iter().map(|l| (format!("{c}={l}"), true)).collect();
                v.push((format!("{c}=(missing)"), true));
                v.push((format!("{c}=(other)"), true));
                return v;
            }
            ColumnKind::Ignore => Vec::new(),
        };
        if self.indicator {
            inputs.push((format!("{c}.missing"), true));
        }
        inputs
    }
}

impl Encoding {
    /// Whether the fields fit the kind (a hand-edited encoding may not).
    pub fn check(&self) -> std::result::Result<(), String> {
        let c = &self.column;
        if let Some(levels) = &self.levels {
            let distinct: std::collections::HashSet<&String> = levels.iter().collect();
            if distinct.len() < levels.len() {
                return Err(format!("\"{c}\" lists a level twice"));
            }
        }
        if self.embed.is_some() && self.kind != ColumnKind::Category {
            return Err(format!(
                "\"{c}\" ({}) has embed; only a category is embedded",
                self.kind.name()
            ));
        }
        if let Some(Robust { center, scale }) = self.robust {
            if self.kind != ColumnKind::Numeric {
                return Err(format!(
                    "\"{c}\" ({}) has robust; only a numeric column is scaled robustly",
                    self.kind.name()
                ));
            }
            if !(center.is_finite() && scale.is_finite() && scale > 0.0) {
                return Err(format!(
                    "\"{c}\" has robust center {center} and scale {scale}; both must be finite, the scale above 0"
                ));
            }
        }
        if let Some(edges) = &self.bins {
            self.check_bins(edges)?;
        }
        let fits = match self.kind {
            ColumnKind::Numeric => self.levels.is_none() && self.fill.is_some_and(f64::is_finite),
            ColumnKind::Date => {
                let day = |f: f64| f.fract() == 0.0 && dates::date_of(f as i64).is_some();
                self.levels.is_none() && self.fill.is_some_and(day)
            }
            ColumnKind::Category => {
                self.levels.is_some()
                    && self.fill.is_none()
                    && !self.indicator
                    && self.embed != Some(0)
            }
            ColumnKind::Ignore => false,
        };
        match fits {
            true => Ok(()),
            false => Err(format!(
                "\"{c}\" ({}) needs {}",
                self.kind.name(),
                match self.kind {
                    ColumnKind::Category =>
                        "levels, no fill or indicator, and a width above 0 if embedded",
                    ColumnKind::Date => "a fill that is a whole day of the calendar, and no levels",
                    ColumnKind::Ignore => "no encoding",
                    _ => "a finite fill, and no levels",
                }
            )),
        }
    }

    /// Bins only for a numeric column that is not also scaled robustly, with finite edges
    /// that increase.
    fn check_bins(&self, edges: &[f64]) -> std::result::Result<(), String> {
        let c = &self.column;
        if self.kind != ColumnKind::Numeric || self.robust.is_some() {
            return Err(format!(
                "\"{c}\" ({}) has bins; only a numeric column without robust is encoded piecewise-linearly",
                self.kind.name()
            ));
        }
        let increasing = edges.windows(2).all(|w| w[0] < w[1]);
        if edges.len() < 2 || !increasing || !edges.iter().all(|e| e.is_finite()) {
            return Err(format!(
                "\"{c}\" has bins {edges:?}; they must be at least 2 finite edges, each above the one before"
            ));
        }
        Ok(())
    }
}

/// Which inputs of `encodings` standardisation leaves as they are: the 0/1 ones (one-hot
/// levels and missing indicators), and an embedded column's index.
pub fn unscaled_inputs(encodings: &[Encoding]) -> Vec<bool> {
    encodings
        .iter()
        .flat_map(|e| e.inputs().into_iter().map(|(_, b)| b))
        .collect()
}

/// The columns of `csv` that are inputs under `columns` (`[data.columns]`), in the file's
/// order, with their kinds. Every column but the label (and `skip`) must have a type.
pub fn typed_inputs(
    csv: &TextCsv,
    columns: &std::collections::BTreeMap<String, ColumnKind>,
    skip: &[String],
) -> Result<Vec<(usize, ColumnKind)>> {
    for name in columns.keys() {
        csv.column(name, "data.columns")?;
        if skip.contains(name) {
            return Err(csv.fail(format!(
                "data.columns gives a type to \"{name}\", the label; it is not an input"
            )));
        }
    }
    let mut inputs = Vec::new();
    for (c, name) in csv.header.iter().enumerate() {
        if skip.contains(name) {
            continue;
        }
        match columns.get(name) {
            Some(ColumnKind::Ignore) => {}
            Some(kind) => inputs.push((c, *kind)),
            None => {
                return Err(csv.fail(format!(
                    "column \"{name}\" has no type in data.columns; give it \"numeric\", \"category\", \"date\" or \"ignore\""
                )));
            }
        }
    }
    if inputs.is_empty() {
        return Err(csv.fail("data.columns leaves no input column".to_string()));
    }
    Ok(inputs)
}

/// How [`fit_and_encode`] lays out the rows it encodes, and whether it standardises them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Layout<'a> {
    /// The file's row `order[i]` as the matrix's row `i`; `None` keeps the file's order.
    pub order: Option<&'a [usize]>,
    /// Standardise every row's numeric and date inputs with the statistics of the matrix's
    /// first `n` rows: the training rows.
    pub standardize_on_first: Option<usize>,
}

/// What [`fit_and_encode`] fits and encodes.
#[derive(Debug)]
pub struct Fitted {
    pub encodings: Vec<Encoding>,
    pub matrix: Matrix,
    pub unseen: Unseen,
    /// The statistics that standardised the rows, where the layout asked for it.
    pub stats: Option<Standardization>,
}

/// The encodings of `inputs`, fitted on the rows of `csv` (the training file), and those rows
/// encoded with them, laid out (and standardised) as `layout` says: each cell is parsed once,
/// for both.
pub fn fit_and_encode(
    csv: &TextCsv,
    inputs: &[(usize, ColumnKind)],
    missing: &Missing,
    embed: &Embed,
    scaling: &Scalings,
    layout: Layout,
) -> Result<Fitted> {
    let in_file_order: Vec<usize>;
    let order = match layout.order {
        Some(order) => order,
        None => {
            in_file_order = (0..csv.rows()).collect();
            &in_file_order
        }
    };
    // The training rows: the file's rows that the matrix's first rows hold, in that order.
    let train = layout.standardize_on_first.map(|n| &order[..n]);
    // Each column in parallel; the error reported is the file's first bad cell.
    let fitted: Vec<std::result::Result<_, BadCell>> = inputs
        .par_iter()
        .map(|&(c, kind)| {
            let name = &csv.header[c];
            fit_column(csv, c, kind, missing, embed.get(name), scaling.get(name))
        })
        .collect();
    let fitted = first_bad_cell(fitted)?;
    // Without standardisation, no column has scales.
    let fitted: Vec<Fit> = match train {
        Some(rows) => scaling::fit(fitted, rows),
        None => (fitted.into_iter())
            .map(|(e, p)| (e, p, Vec::new()))
            .collect(),
    };
    let views = fitted.iter().map(|(e, p, s)| (e, p, s.as_slice()));
    let (matrix, unseen) = interleave(views, order);
    let stats = train.map(|_| {
        let scales = fitted.iter().flat_map(|(_, _, s)| s);
        let (mean, std) = scales.copied().unzip();
        Standardization { mean, std }
    });
    let encodings = fitted.into_iter().map(|(e, _, _)| e).collect();
    Ok(Fitted {
        encodings,
        matrix,
        unseen,
        stats,
    })
}

/// A column's encoding, its parsed cells, and its inputs' scales (none where the rows are not
/// standardised as they are encoded).
type Fit = (Encoding, Parsed, Vec<scaling::Scale>);

/// One column's cells, parsed once for its fit and its encoding.
enum Parsed {
    /// numeric: each cell's value as the model takes it (f32 of the f64 parse), NaN where the
    /// cell is missing (a finite parse never gives NaN).
    Numbers(Vec<f32>),
    /// date: each cell's day since 1970-01-01, NaN where the cell is missing.
    Days(Vec<f64>),
    /// category: each cell's slot among the column's inputs (see [`Slots`]).
    Slots(Vec<u32>),
}

/// A category's slots: its levels' (in order), then "(missing)", then "(other)" (a level
/// without an input of its own); an embedded column's index is its slot.
struct Slots<'a> {
    index: FxHashMap<&'a str, u32>,
    missing: u32,
}

impl<'a> Slots<'a> {
    fn new(levels: &'a [String]) -> Slots<'a> {
        let index = (levels.iter().enumerate())
            .map(|(i, l)| (l.as_str(), i as u32))
            .collect();
        let missing = levels.len() as u32;
        Slots { index, missing }
    }

    /// The slot of a level of `levels` levels without an input of its own: [`Column::encode`]
    /// counts its cells.
    fn other(levels: usize) -> u32 {
        levels as u32 + 1
    }

    /// A cell's slot: a missing cell's, even where a (hand-edited) level has its spelling.
    fn of(&self, cell: &str, missing: &Missing) -> u32 {
        match self.index.get(cell) {
            _ if missing.is(cell) => self.missing,
            Some(&slot) => slot,
            None => Slots::other(self.missing as usize),
        }
    }
}

/// The slots of column `c`'s cells under `levels`.
fn slots(csv: &TextCsv, c: usize, levels: &[String], missing: &Missing) -> Parsed {
    let slots = Slots::new(levels);
    Parsed::Slots(csv.texts(c).map(|(t, _)| slots.of(t, missing)).collect())
}

/// A column's parse failed at this row with this error.
type BadCell = (usize, crate::error::EmberError);

/// Reads `path` as [`read_text`](super::table::read_text) does, but parses each numeric or
/// date column of `kinds` as the file is read, so that its text is never kept: the same
/// values, and the same errors (when the column is fitted or encoded), as [`parse_column`].
pub fn read_typed(
    path: &std::path::Path,
    kinds: &std::collections::BTreeMap<String, ColumnKind>,
    missing: &Missing,
) -> Result<TextCsv> {
    let number = |t: &str| cell_value(ColumnKind::Numeric, t, missing);
    let date = |t: &str| cell_value(ColumnKind::Date, t, missing);
    read_parsing(path, &|name| -> Option<CellParser> {
        match kinds.get(name)? {
            ColumnKind::Numeric => Some(&number),
            ColumnKind::Date => Some(&date),
            _ => None,
        }
    })
}

/// Column `c`'s values as `kind` (NaN where missing), handed to `use_parts` in the parts they
/// are held in: as the file was read (one part per reader), or parsed from its text now; an
/// error names the column's first cell that did not parse.
fn with_values<R>(
    csv: &TextCsv,
    c: usize,
    kind: ColumnKind,
    missing: &Missing,
    use_parts: impl FnOnce(&[&[f64]]) -> R,
) -> std::result::Result<R, BadCell> {
    if !csv.is_parsed(c) {
        return Ok(use_parts(&[&parse_column(csv, c, kind, missing)?]));
    }
    if let Some((r, cell)) = csv.first_unreadable(c) {
        let name = &csv.header[c];
        let line = csv.line(r);
        let error = scalar(csv, name, kind, cell, line).err();
        let error = error.unwrap_or_else(|| {
            csv.fail(format!("line {line}: column \"{name}\" holds \"{cell}\""))
        });
        return Err((r, error));
    }
    Ok(use_parts(&csv.value_halves(c)))
}

/// The cells of column `c` parsed as `kind`; an error names the first bad cell's line.
fn parse_column(
    csv: &TextCsv,
    c: usize,
    kind: ColumnKind,
    missing: &Missing,
) -> std::result::Result<Vec<f64>, BadCell> {
    let name = &csv.header[c];
    let mut values = Vec::with_capacity(csv.rows());
    for (r, (t, line)) in csv.texts(c).enumerate() {
        values.push(match missing.is(t) {
            true => f64::NAN,
            false => scalar(csv, name, kind, t, line).map_err(|e| (r, e))?,
        });
    }
    Ok(values)
}

/// Each column's result, or the error of the file's first bad cell (by row, then column), as
/// reading row by row would meet it.
fn first_bad_cell<T>(results: Vec<std::result::Result<T, BadCell>>) -> Result<Vec<T>> {
    let mut first: Option<BadCell> = None;
    let mut oks = Vec::with_capacity(results.len());
    for result in results {
        match result {
            Ok(t) => oks.push(t),
            Err(bad) if first.as_ref().is_none_or(|f| bad.0 < f.0) => first = Some(bad),
            Err(_) => {}
        }
    }
    first.map_or(Ok(oks), |(_, e)| Err(e))
}

/// Column `c`'s cells, given as the `parts` of its values, as [`Parsed`]: the numbers narrowed
/// to f32 once fitted. (A loop over each part, not an iterator over both: the narrowing then
/// runs at the machine's vector width.)
fn parsed(kind: ColumnKind, parts: &[&[f64]]) -> Parsed {
    let rows = parts.iter().map(|p| p.len()).sum();
    match kind {
        ColumnKind::Numeric => {
            let mut numbers = Vec::with_capacity(rows);
            for part in parts {
                numbers.extend(part.iter().map(|v| *v as f32));
            }
            Parsed::Numbers(numbers)
        }
        ColumnKind::Date => Parsed::Days(parts.concat()),
        _ => unreachable!("only numbers and dates have values"),
    }
}

/// [`parsed`], and the values that are not missing (for the median).
fn parsed_and_present(kind: ColumnKind, parts: &[&[f64]]) -> (Parsed, Vec<f64>) {
    (parsed(kind, parts), present_values(parts))
}

/// The values of a column's `parts` that are not missing (NaN), in order.
fn present_values(parts: &[&[f64]]) -> Vec<f64> {
    let mut present = Vec::with_capacity(parts.iter().map(|p| p.len()).sum());
    for part in parts {
        present.extend(part.iter().filter(|v| !v.is_nan()));
    }
    present
}

fn fit_column(
    csv: &TextCsv,
    c: usize,
    kind: ColumnKind,
    missing: &Missing,
    embed: Option<&usize>,
    scaling: Option<&Scaling>,
) -> std::result::Result<(Encoding, Parsed), BadCell> {
    let name = &csv.header[c];
    let mut enc = Encoding {
        column: name.clone(),
        kind,
        fill: None,
        indicator: false,
        levels: None,
        embed: None,
        robust: None,
        bins: None,
    };
    match kind {
        ColumnKind::Numeric | ColumnKind::Date => {
            let (cells, mut present) = with_values(csv, c, kind, missing, |parts| {
                parsed_and_present(kind, parts)
            })?;
            if present.is_empty() {
                return Err((csv.rows(), csv.fail(format!(
                    "column \"{name}\" ({}) has no value in any row; mark it \"ignore\" in data.columns",
                    kind.name()
                ))));
            }
            enc.indicator = present.len() < csv.rows();
            let fill = median(&mut present, kind);
            enc.fill = Some(fill);
            match scaling {
                Some(Scaling::Robust) => enc.robust = Some(scaling::fit_robust(&mut present, fill)),
                Some(Scaling::PiecewiseLinear) => enc.bins = Some(scaling::fit_bins(&mut present)),
                Some(Scaling::Standard) | None => {}
            }
            Ok((enc, cells))
        }
        ColumnKind::Category => {
            let most = if embed.is_some() {
                MAX_EMBEDDED_LEVELS
            } else {
                MAX_LEVELS
            };
            let (levels, slots) = levels_and_slots(csv, c, missing, most);
            enc.levels = Some(levels);
            enc.embed = embed.copied();
            Ok((enc, slots))
        }
        ColumnKind::Ignore => unreachable!("ignored columns have no encoding"),
    }
}

/// The median of `values` (the lower middle value for a date, which must stay a whole day),
/// found by selection rather than a sort.
fn median(values: &mut [f64], kind: ColumnKind) -> f64 {
    let n = values.len();
    let (_, low, above) = values.select_nth_unstable_by((n - 1) / 2, f64::total_cmp);
    match (n % 2, kind) {
        (1, _) | (_, ColumnKind::Date) => *low,
        // The upper middle value: the smallest of the values above the lower one.
        _ => {
            let high = above.iter().copied().min_by(f64::total_cmp);
            (*low + high.expect("an even count has an upper half")) / 2.0
        }
    }
}

/// Column `c`'s levels with inputs of their own (see [`levels`]), and each cell's slot among
/// them. Each cell is looked up once: as one of the column's distinct cells, whose slot is
/// known once the levels are.
fn levels_and_slots(
    csv: &TextCsv,
    c: usize,
    missing: &Missing,
    most: usize,
) -> (Vec<String>, Parsed) {
    let mut ids: FxHashMap<&str, u32> = FxHashMap::default();
    let mut distinct: Vec<(&str, usize)> = Vec::new();
    let mut cells: Vec<u32> = Vec::with_capacity(csv.rows());
    for (cell, _) in csv.texts(c) {
        let id = *ids.entry(cell).or_insert_with(|| {
            distinct.push((cell, 0));
            distinct.len() as u32 - 1
        });
        distinct[id as usize].1 += 1;
        cells.push(id);
    }
    let present = distinct.iter().filter(|(cell, _)| !missing.is(cell));
    let levels = levels(present.copied(), most);
    let slots = Slots::new(&levels);
    let slot_of: Vec<u32> = (distinct.iter())
        .map(|(cell, _)| slots.of(cell, missing))
        .collect();
    cells.iter_mut().for_each(|id| *id = slot_of[*id as usize]);
    (levels, Parsed::Slots(cells))
}

/// [`levels`] of these (present) `cells`.
fn levels_of<'a>(cells: impl Iterator<Item = &'a str>, most: usize) -> Vec<String> {
    let mut counts: FxHashMap<&str, usize> = FxHashMap::default();
    for cell in cells {
        *counts.entry(cell).or_default() += 1;
    }
    levels(counts.into_iter(), most)
}

/// The levels with inputs of their own, of the distinct cells `counts` (each with its count of
/// rows): those in at least [`MIN_LEVEL_ROWS`] rows, the `most` most frequent of them, sorted
/// by name.
fn levels<'a>(counts: impl Iterator<Item = (&'a str, usize)>, most: usize) -> Vec<String> {
    let mut frequent: Vec<(&str, usize)> = counts.filter(|&(_, n)| n >= MIN_LEVEL_ROWS).collect();
    frequent.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    frequent.truncate(most);
    let mut names: Vec<String> = frequent.into_iter().map(|(l, _)| l.to_string()).collect();
    names.sort();
    names
}

/// A numeric cell's value, or a date cell's day; an error names the line, column and cell.
fn scalar(csv: &TextCsv, name: &str, kind: ColumnKind, cell: &str, line: u64) -> Result<f64> {
    value_of(kind, cell).ok_or_else(|| {
        let hint = match kind {
            ColumnKind::Date => format!("not a date ({})", dates::SPELLINGS),
            _ => "not a number; if it means a missing cell, add it to data.missing_values".into(),
        };
        csv.fail(format!(
            "line {line}: column \"{name}\" ({}) holds \"{cell}\", {hint}",
            kind.name()
        ))
    })
}

/// A cell's value as `kind` as it is read: NaN for a missing cell, `None` for a cell that is
/// neither missing nor of the kind.
fn cell_value(kind: ColumnKind, cell: &str, missing: &Missing) -> Option<f64> {
    match missing.is(cell) {
        true => Some(f64::NAN),
        false => value_of(kind, cell),
    }
}

/// A numeric cell's value, or a date cell's day; `None` when the cell is neither.
fn value_of(kind: ColumnKind, cell: &str) -> Option<f64> {
    match kind {
        ColumnKind::Date => dates::parse(cell).map(|d| d as f64),
        _ => crate::data::number::finite(cell),
    }
}

/// What [`encode`] met that training had not: per column, how many cells had a level never
/// seen (or too rare) in training.
#[derive(Debug, Default, PartialEq)]
pub struct Unseen(pub Vec<(String, usize)>);

impl Unseen {
    /// One line for stderr, or `None` when every level was known.
    pub fn line(&self, path: &std::path::Path) -> Option<String> {
        if self.0.is_empty() {
            return None;
        }
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(c, n)| format!("{n} in \"{c}\""))
            .collect();
        Some(format!(
            "{}: cells with a category level training had not (or rarely) seen, encoded as (other): {}",
            path.display(),
            parts.join(", ")
        ))
    }
}

/// The bytes of the rows one task of [`interleave`] encodes: each column writes its inputs into
/// every row of the block in turn, so the block should stay in a core's L2 cache (2 MB on the
/// Xeon measured) for all of them. Blocks of 16,384 rows of 55 inputs (3.6 MB) made the
/// data phase of a 2,000,000-row table 0.1 s slower than 2,048 rows
/// (docs/benchmarks/reading-a-large-table.md).
const ENCODE_BLOCK_BYTES: usize = 512 * 1024;

/// Rows of `width` inputs in one block of [`ENCODE_BLOCK_BYTES`], at least 64.
fn encode_rows(width: usize) -> usize {
    (ENCODE_BLOCK_BYTES / (4 * width.max(1))).max(64)
}

/// The inputs of every row of `csv` under `encodings`: a row-major matrix, and the count of
/// levels training had not seen. A column the file lacks is an error; extra columns are not.
pub fn encode(
    csv: &TextCsv,
    encodings: &[Encoding],
    missing: &Missing,
) -> Result<(Matrix, Unseen)> {
    let columns = (encodings.iter())
        .map(|enc| csv.column(&enc.column, "a column of the run's data.encoding"))
        .collect::<Result<Vec<usize>>>()?;
    // Each column parsed in parallel; the error reported is the file's first bad cell.
    let parsed: Vec<std::result::Result<Parsed, BadCell>> = (columns.par_iter().zip(encodings))
        .map(|(&c, enc)| match enc.kind {
            ColumnKind::Category => Ok(slots(
                csv,
                c,
                enc.levels.as_deref().unwrap_or_default(),
                missing,
            )),
            kind => with_values(csv, c, kind, missing, |parts| parsed(kind, parts)),
        })
        .collect();
    let parsed = first_bad_cell(parsed)?;
    let in_file_order: Vec<usize> = (0..csv.rows()).collect();
    let unscaled = (encodings.iter().zip(&parsed)).map(|(e, p)| (e, p, &[][..]));
    Ok(interleave(unscaled, &in_file_order))
}

/// Writes the inputs of each column (its encoding, its parsed cells, its inputs' scales) into
/// the rows of one matrix, the file's row `order[i]` as row `i`, blocks of rows in parallel.
fn interleave<'a>(
    columns: impl Iterator<Item = (&'a Encoding, &'a Parsed, &'a [scaling::Scale])>,
    order: &[usize],
) -> (Matrix, Unseen) {
    let mut width = 0;
    let mut encoded = Vec::new();
    for (enc, cells, scales) in columns {
        let offset = width;
        encoded.push(Column {
            enc,
            cells,
            scales,
            offset,
        });
        width += enc.inputs().len();
    }
    let rows = order.len();
    let mut values = vec![0.0f32; rows * width];
    let block_rows = encode_rows(width);
    let blocks: Vec<Vec<usize>> = (values.par_chunks_mut(block_rows * width.max(1)))
        .zip(order.par_chunks(block_rows))
        .map(|(block, rows)| {
            (encoded.iter())
                .map(|col| col.encode(rows, block, width))
                .collect()
        })
        .collect();
    let mut unseen = Unseen::default();
    let mut others = vec![0; encoded.len()];
    for block in blocks {
        others.iter_mut().zip(block).for_each(|(n, b)| *n += b);
    }
    for (col, n) in encoded.iter().zip(others).filter(|(_, n)| *n > 0) {
        unseen.0.push((col.enc.column.clone(), n));
    }
    let matrix = Matrix {
        rows,
        cols: width,
        values,
    };
    (matrix, unseen)
}

/// One encoded column: its encoding, its parsed cells, its inputs' scales (none: as they are),
/// and its first input.
struct Column<'a> {
    enc: &'a Encoding,
    cells: &'a Parsed,
    scales: &'a [scaling::Scale],
    offset: usize,
}

impl Column<'_> {
    /// Input `i`'s value `v`, standardised where the column has scales.
    fn scaled(&self, i: usize, v: f32) -> f32 {
        match self.scales.get(i) {
            Some(&scale) => scaling::apply(v, scale),
            None => v,
        }
    }

    /// Writes this column's inputs for the file's `rows` into `block` (those rows in that
    /// order, `stride` apart); returns how many cells held a level without an input of its own.
    fn encode(&self, rows: &[usize], block: &mut [f32], stride: usize) -> usize {
        let enc = self.enc;
        let fill = enc.fill.unwrap_or_default();
        let other = Slots::other(enc.levels.as_ref().map_or(0, Vec::len));
        let mut others = 0;
        for (i, &r) in rows.iter().enumerate() {
            let row = &mut block[i * stride + self.offset..];
            let (width, absent) = match self.cells {
                Parsed::Slots(slots) => {
                    let slot = slots[r];
                    others += usize::from(slot == other);
                    match enc.embed {
                        Some(_) => row[0] = slot as f32,
                        None => row[slot as usize] = 1.0,
                    }
                    continue;
                }
                Parsed::Numbers(values) => {
                    let absent = values[r].is_nan();
                    let v = if absent { fill as f32 } else { values[r] };
                    let inputs = scaling::write_numeric(enc, v, row);
                    for (i, v) in row[..inputs].iter_mut().enumerate() {
                        *v = self.scaled(i, *v);
                    }
                    (inputs, absent)
                }
                Parsed::Days(days) => {
                    let parts = dates::parts(date_at(days, r, fill));
                    for (p, v) in parts.into_iter().enumerate() {
                        row[p] = self.scaled(p, v);
                    }
                    (parts.len(), days[r].is_nan())
                }
            };
            if enc.indicator {
                row[width] = f32::from(u8::from(absent));
            }
        }
        others
    }
}

/// The date of row `r` of a date column's `days`, or the `fill` (the training median) where
/// the cell is missing.
fn date_at(days: &[f64], r: usize, fill: f64) -> chrono::NaiveDate {
    let day = if days[r].is_nan() { fill } else { days[r] };
    dates::date_of(day as i64).expect("a parsed day or a checked fill")
}

/// An embedded column's rows of vectors: its levels, "(missing)" and "(other)".
pub fn vocabulary(enc: &Encoding) -> Option<usize> {
    enc.embed?;
    Some(enc.levels.as_ref().map_or(0, Vec::len) + 2)
}

/// The positions of the embedded columns' index inputs among all of `encodings`' inputs.
pub fn index_inputs(encodings: &[Encoding]) -> Vec<usize> {
    let mut at = 0;
    let mut out = Vec::new();
    for e in encodings {
        if e.embed.is_some() {
            out.push(at);
        }
        at += e.inputs().len();
    }
    out
}

/// One line on what the inputs are made of, for the training log.
pub fn describe(encodings: &[Encoding], ignored: usize) -> String {
    let mut parts = Vec::new();
    for kind in [ColumnKind::Numeric, ColumnKind::Category, ColumnKind::Date] {
        let of_kind: Vec<&Encoding> = encodings.iter().filter(|e| e.kind == kind).collect();
        if of_kind.is_empty() {
            continue;
        }
        let inputs: usize = of_kind.iter().map(|e| e.inputs().len()).sum();
        let indicators = of_kind.iter().filter(|e| e.indicator).count();
        let mut part = format!("{} {} -> {inputs}", of_kind.len(), kind.name());
        if indicators > 0 {
            part += &format!(" (missing cells in {indicators})");
        }
        let embedded: Vec<String> = (of_kind.iter())
            .filter_map(|e| {
                Some(format!(
                    "\"{}\" {} rows x {}",
                    e.column,
                    vocabulary(e)?,
                    e.embed?
                ))
            })
            .collect();
        if !embedded.is_empty() {
            part += &format!(" (embedded: {})", embedded.join(", "));
        }
        parts.push(part);
    }
    let total: usize = encodings.iter().map(|e| e.inputs().len()).sum();
    format!(
        "inputs: {} = {total} inputs; {ignored} columns ignored",
        parts.join(", ")
    )
}

#[cfg(test)]
mod tests;
