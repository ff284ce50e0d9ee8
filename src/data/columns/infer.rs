//! `ember init`'s guess of each column's type, from the training file alone, with the reason a
//! user reads on stderr. A column is ignored only for a stated reason: every cell missing, one
//! value in every row, an ID (unique per row), free text, or text nearly unique per row.

use super::{
    ColumnKind, MAX_EMBEDDED_LEVELS, MAX_LEVELS, MIN_LEVEL_ROWS, Missing, Scaling, dates,
    embed_width,
};
use crate::data::table::TextCsv;
use crate::data::text_csv::{CellParser, read_parsing};
use crate::error::Result;
use rayon::prelude::*;
use rustc_hash::FxHashSet;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// One column as `init` sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Inferred {
    pub name: String,
    pub kind: ColumnKind,
    /// Missing cells in the training file.
    pub missing: usize,
    /// Its range (numbers, dates) or levels (categories), short.
    pub values: String,
    /// Why this type, when it is not plain: a reason to ignore, or what made it a category.
    pub why: String,
    /// A category with more than [`MAX_LEVELS`] frequent levels: the width of its embedding.
    pub embed: Option<usize>,
    /// A numeric column with a heavy tail: how many interquartile ranges from its median its
    /// furthest value lies (see [`heavy_tail`]).
    pub tail: Option<f64>,
    /// A numeric column of whole numbers only: how many distinct values it holds.
    pub whole: Option<usize>,
    /// How its values reach the model (`[data.scaling]`): `init` decides, from the tail, the
    /// whole numbers and the task.
    pub scaling: Scaling,
}

/// Below this many rows, a column unique per row is not taken for an ID.
const MIN_ID_ROWS: usize = 20;

/// Text cells averaging at least this many words, nearly all different, are free text.
const FREE_TEXT_WORDS: f64 = 4.0;

/// The spellings of a yes/no column (any letter case).
const BOOLEANS: [[&str; 2]; 4] = [["yes", "no"], ["true", "false"], ["y", "n"], ["t", "f"]];

/// The training file as `init` reads it: the columns that its first records show to hold
/// numbers or dates are parsed as they are read, so that their text is never copied; every
/// other column is text.
pub struct Training {
    pub csv: TextCsv,
    /// Each column parsed as read: the kind it was parsed as, and its first present cell.
    parsed: Vec<Option<(ColumnKind, String)>>,
    /// The columns the user made categories (`init --category`), kept as text.
    categories: Vec<String>,
}

/// The bytes of the file's first records, read as text to guess which columns to parse.
const SAMPLE_BYTES: u64 = 256 << 10;

/// Reads the training file at `path` for [`infer`]; `label` and the `categories` the user
/// named stay text.
pub fn read(
    path: &Path,
    label: &str,
    missing: &Missing,
    categories: &[String],
) -> Result<Training> {
    read_sampling(path, label, missing, categories, SAMPLE_BYTES)
}

/// [`read`], guessing from the records in the file's first `sample` bytes. A column parsed as
/// a number or a date that holds a cell of another kind further on (the guess was wrong) is
/// read again as text with the file, so that its type is inferred from its text as for any
/// column: the same types as from the text alone.
pub fn read_sampling(
    path: &Path,
    label: &str,
    missing: &Missing,
    categories: &[String],
    sample: u64,
) -> Result<Training> {
    let head = crate::data::text_csv::read_head(path, sample)?;
    // A file without the label column, or without a column named a category, says so before
    // the whole file is read.
    head.column(label, "--label")?;
    for name in categories {
        head.column(name, "--category")?;
    }
    let text = |name: &String| name == label || categories.contains(name);
    let mut guesses: BTreeMap<String, Guess> = (0..head.header.len())
        .filter(|&c| !text(&head.header[c]))
        .filter_map(|c| Some((head.header[c].clone(), guess(&head, c, missing)?)))
        .collect();
    loop {
        let mut parsers: BTreeMap<&str, Parser> = BTreeMap::new();
        for (name, g) in &guesses {
            parsers.insert(name, Box::new(|t: &str| g.parse(t, missing)));
        }
        let csv = read_parsing(path, &|name| parsers.get(name).map(|p| &**p as CellParser))?;
        drop(parsers);
        let wrong: Vec<String> = (guesses.iter())
            .filter(|(_, g)| g.wrong.load(Ordering::Relaxed))
            .map(|(name, _)| name.clone())
            .collect();
        if wrong.is_empty() {
            let parsed = (csv.header.iter())
                .map(|h| guesses.get(h).map(|g| (g.kind, g.first.clone())))
                .collect();
            let categories = categories.to_vec();
            return Ok(Training {
                csv,
                parsed,
                categories,
            });
        }
        drop(csv);
        wrong.iter().for_each(|name| drop(guesses.remove(name)));
    }
}

/// A guessed column's [`Guess::parse`], as the reader takes it.
type Parser<'a> = Box<dyn Fn(&str) -> Option<f64> + Sync + 'a>;

/// A column guessed to hold numbers or dates (its first present cell `first`), as it is parsed
/// while the file is read.
struct Guess {
    kind: ColumnKind,
    first: String,
    /// Whether a cell of another kind was met: the guess was wrong.
    wrong: AtomicBool,
}

impl Guess {
    /// A cell's value, NaN where it is missing; a cell of another kind marks the guess wrong
    /// and reads as missing, so that no text is kept for a column that will be read again.
    fn parse(&self, cell: &str, missing: &Missing) -> Option<f64> {
        let value = super::cell_value(self.kind, cell, missing);
        if value.is_none() {
            self.wrong.store(true, Ordering::Relaxed);
        }
        Some(value.unwrap_or(f64::NAN))
    }
}

/// Column `c`'s [`Guess`] when its present cells in `head` are all numbers or all dates (at
/// least one).
fn guess(head: &TextCsv, c: usize, missing: &Missing) -> Option<Guess> {
    let mut present = head
        .texts(c)
        .map(|(t, _)| t)
        .filter(|t| !missing.is(t))
        .peekable();
    let first = (*present.peek()?).to_string();
    let cells: Vec<&str> = present.collect();
    // Numbers first, as `kind_of` tries them.
    let kind = [ColumnKind::Numeric, ColumnKind::Date]
        .into_iter()
        .find(|&kind| cells.iter().all(|t| super::value_of(kind, t).is_some()))?;
    let wrong = AtomicBool::new(false);
    Some(Guess { kind, first, wrong })
}

/// The type of every column of the training file but `label`, in the file's order.
pub fn infer(training: &Training, label: usize, missing: &Missing) -> Vec<Inferred> {
    let csv = &training.csv;
    // Column by column, in parallel: each is read on its own.
    (0..csv.header.len())
        .into_par_iter()
        .filter(|&c| c != label)
        .map(|c| {
            if let Some((kind, first)) = &training.parsed[c] {
                return parsed_kind(csv, c, *kind, first);
            }
            let cells: Vec<&str> = csv
                .texts(c)
                .map(|(t, _)| t)
                .filter(|t| !missing.is(t))
                .collect();
            let named = training.categories.contains(&csv.header[c]);
            let (kind, values, mut why) = match named {
                true if !cells.is_empty() => named_category(&cells),
                _ => kind_of(&csv.header[c], &cells, csv.rows()),
            };
            let many = (kind == ColumnKind::Category)
                .then(|| many_levels(&cells, csv.rows()))
                .flatten();
            let embed = many.and_then(|(_, width)| width);
            if let Some((levels, width)) = many {
                let count = format!("{levels} levels in {MIN_LEVEL_ROWS}+ rows");
                why += &match width {
                    Some(w) => format!("; {count}, over one-hot's {MAX_LEVELS}: embedded, {w} wide"),
                    None => format!("; {count}: one-hot keeps the {MAX_LEVELS} commonest (too few rows per level to embed)"),
                };
            }
            let column = Inferred {
                name: csv.header[c].clone(),
                kind,
                missing: csv.rows() - cells.len(),
                values,
                why,
                embed,
                tail: None,
                whole: None,
                scaling: Scaling::Standard,
            };
            match kind {
                ColumnKind::Numeric => with_number_traits(column, &numbers(&cells)),
                _ => column,
            }
        })
        .collect()
}

/// For a category with more than [`MAX_LEVELS`] levels in [`MIN_LEVEL_ROWS`] rows or more
/// (one-hot would keep only the commonest): those levels' count, and the embedding's width
/// when the file's `rows` are enough to learn vectors from ([`embed_width`]).
fn many_levels(cells: &[&str], rows: usize) -> Option<(usize, Option<usize>)> {
    // The levels an embedded column's fit would keep (`columns::levels_of`, as training counts them).
    let levels = super::levels_of(cells.iter().copied(), MAX_EMBEDDED_LEVELS).len();
    (levels > MAX_LEVELS).then(|| (levels, embed_width(levels + 2, rows)))
}

/// Column `c` of `csv`, parsed as read as `kind` (its every present cell one, the first
/// `first`), as [`kind_of`] would type its text.
fn parsed_kind(csv: &TextCsv, c: usize, kind: ColumnKind, first: &str) -> Inferred {
    let present = super::present_values(&csv.value_halves(c));
    let name = &csv.header[c];
    let (kind, values, why) = match kind {
        // Only where the file changed after its first records were read.
        _ if present.is_empty() => kind_of(name, &[], csv.rows()),
        ColumnKind::Date => date_kind(
            first,
            &present.iter().map(|d| *d as i64).collect::<Vec<_>>(),
        ),
        _ => numeric_kind(name, first, &present),
    };
    let column = Inferred {
        name: name.clone(),
        kind,
        missing: csv.rows() - present.len(),
        values,
        why,
        embed: None,
        tail: None,
        whole: None,
        scaling: Scaling::Standard,
    };
    with_number_traits(column, &present)
}

/// A column reaching further than this many spreads (interquartile ranges) from its median has
/// a heavy tail: standardised, its few far values squeeze the rest into a sliver of the input's
/// range. (A normal sample of 10,000 reaches about 3 spreads, an exponential one about 8;
/// incomes and counts reach tens to thousands.)
pub const HEAVY_TAIL_SPREADS: f64 = 10.0;

/// How many spreads (the interquartile range, as robust scaling fits it) from their median
/// the furthest of `numbers` lies, where that is more than [`HEAVY_TAIL_SPREADS`].
pub fn heavy_tail(numbers: &[f64]) -> Option<f64> {
    if numbers.is_empty() {
        return None;
    }
    let mut values = numbers.to_vec();
    let center = super::median(&mut values, ColumnKind::Numeric);
    let fit = super::scaling::fit_robust(&mut values, center);
    let (lo, hi) = (values.iter().copied())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
            (l.min(v), h.max(v))
        });
    let reach = (hi - center).max(center - lo) / fit.scale;
    (reach > HEAVY_TAIL_SPREADS).then_some(reach)
}

/// `column` with the [`heavy_tail`] of its present values `numbers`, and their count of
/// distinct values where all are whole numbers, where it is numeric.
fn with_number_traits(mut column: Inferred, numbers: &[f64]) -> Inferred {
    if column.kind == ColumnKind::Numeric {
        column.tail = heavy_tail(numbers);
        column.whole = whole_numbers(numbers);
    }
    column
}

/// How many distinct values `numbers` hold, where every one is a whole number.
fn whole_numbers(numbers: &[f64]) -> Option<usize> {
    if !numbers.iter().all(|v| v.fract() == 0.0) {
        return None;
    }
    let distinct: FxHashSet<u64> = numbers.iter().map(|v| (v + 0.0).to_bits()).collect();
    Some(distinct.len())
}

/// The values of cells that all hold numbers.
pub fn numbers(cells: &[&str]) -> Vec<f64> {
    (cells.iter())
        .filter_map(|c| crate::data::number::finite(c))
        .collect()
}

/// A column the user made a category (`init --category`), with its levels summarised.
fn named_category(cells: &[&str]) -> (ColumnKind, String, String) {
    let distinct: FxHashSet<&str> = cells.iter().copied().collect();
    let why = "a category by --category".into();
    (ColumnKind::Category, summary_of_levels(&distinct), why)
}

/// A column's type from its present cells (of the file's `rows`), with its values summarised
/// and the reason.
fn kind_of(name: &str, cells: &[&str], rows: usize) -> (ColumnKind, String, String) {
    if cells.is_empty() {
        let why = "every cell is missing".into();
        return (ColumnKind::Ignore, String::new(), why);
    }
    if let Some(numbers) = cells
        .iter()
        .map(|c| crate::data::number::finite(c))
        .collect::<Option<Vec<f64>>>()
    {
        return numeric_kind(name, cells[0], &numbers);
    }
    if let Some(days) = cells
        .iter()
        .map(|c| dates::parse(c))
        .collect::<Option<Vec<i64>>>()
    {
        return date_kind(cells[0], &days);
    }
    text_kind(name, cells, rows)
}

/// A column of dates (days since 1970-01-01; the first spelled `first`): a date, unless
/// constant.
fn date_kind(first: &str, days: &[i64]) -> (ColumnKind, String, String) {
    let (lo, hi) = (days.iter().min().unwrap(), days.iter().max().unwrap());
    if lo == hi {
        return constant(first);
    }
    let range = format!("{} to {}", dates::format(*lo), dates::format(*hi));
    (ColumnKind::Date, range, "ISO 8601 dates".into())
}

/// The same value in every row: nothing to learn from.
fn constant(cell: &str) -> (ColumnKind, String, String) {
    let why = "the same value in every row".into();
    (ColumnKind::Ignore, format!("\"{cell}\""), why)
}

/// A column of numbers (the first spelled `first`): numeric, unless constant or an ID.
fn numeric_kind(name: &str, first: &str, numbers: &[f64]) -> (ColumnKind, String, String) {
    let (lo, hi) = numbers
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
            (l.min(*v), h.max(*v))
        });
    if lo == hi {
        return constant(first);
    }
    let range = format!("{} to {}", short(lo), short(hi));
    if numbers.len() >= MIN_ID_ROWS
        && looks_like_id(name, numbers, lo, hi)
        && all_different(numbers)
    {
        let why = "an ID: a different integer in every row".into();
        return (ColumnKind::Ignore, range, why);
    }
    let why = code_levels(name, first, numbers)
        .map(|levels| format!("integer codes? {levels} different values, named or spelled like codes: `ember init --category {}` makes it a category", crate::shell::word(name)))
        .unwrap_or_default();
    (ColumnKind::Numeric, range, why)
}

/// At least this many different integers make a column named or spelled like a code (see
/// [`code_levels`]) worth a note: fewer, and a number's order may well mean something.
const MIN_CODE_LEVELS: usize = 20;

/// The count of different values of a column of integers that looks like codes of people,
/// products or places rather than a measurement: named like an ID or a code (`user_id`,
/// `zip`, `product_code`), or spelled with a leading zero (`0417`); `None` otherwise. Their
/// numeric order means nothing, so a category (embedded, when there are many) may fit them
/// better, which `init` says and leaves to the user.
fn code_levels(name: &str, first: &str, numbers: &[f64]) -> Option<usize> {
    let lower = name.to_ascii_lowercase();
    let named = named_like_id(name) || ["code", "zip", "postal"].iter().any(|w| lower.contains(w));
    let spelled =
        first.len() > 1 && first.starts_with('0') && first.bytes().all(|b| b.is_ascii_digit());
    if !(named || spelled) || numbers.iter().any(|v| v.fract() != 0.0) {
        return None;
    }
    let levels = distinct(numbers);
    (levels >= MIN_CODE_LEVELS).then_some(levels)
}

fn all_different(numbers: &[f64]) -> bool {
    distinct(numbers) == numbers.len()
}

/// How many different values `numbers` holds.
fn distinct(numbers: &[f64]) -> usize {
    let mut sorted = numbers.to_vec();
    sorted.sort_unstable_by(f64::total_cmp);
    sorted.dedup();
    sorted.len()
}

/// A column of text: a category, unless constant, an ID or free text.
fn text_kind(name: &str, cells: &[&str], rows: usize) -> (ColumnKind, String, String) {
    let distinct: FxHashSet<&str> = cells.iter().copied().collect();
    if distinct.len() == 1 {
        return constant(cells[0]);
    }
    let unique = distinct.len() == cells.len() && cells.len() >= MIN_ID_ROWS;
    let levels = summary_of_levels(&distinct);
    let words = cells
        .iter()
        .map(|c| c.split_whitespace().count())
        .sum::<usize>() as f64;
    if words / cells.len() as f64 >= FREE_TEXT_WORDS && distinct.len() * 2 > cells.len() {
        return (
            ColumnKind::Ignore,
            levels,
            "free text: many words, nearly all different".into(),
        );
    }
    if unique {
        return (
            ColumnKind::Ignore,
            levels,
            "an ID or a name: different text in every row".into(),
        );
    }
    if named_like_id(name) && distinct.len() * 2 > cells.len() {
        let why = "an ID: named so, and mostly different in every row";
        return (ColumnKind::Ignore, levels, why.into());
    }
    if let Some(why) = nearly_unique(cells, distinct.len(), rows) {
        return (ColumnKind::Ignore, levels, why);
    }
    let lower: FxHashSet<String> = distinct.iter().map(|d| d.to_ascii_lowercase()).collect();
    let why = if BOOLEANS
        .iter()
        .any(|pair| lower.iter().all(|l| pair.contains(&l.as_str())))
    {
        "yes/no values"
    } else {
        "text"
    };
    (ColumnKind::Category, levels, why.into())
}

/// Why a text column is nearly unique per row (titles, names, free text), when it is: most of
/// its rows hold a level seen fewer than [`MIN_LEVEL_ROWS`] times, which training would give no
/// input or vector of its own (they share "(other)"), so the column says little but which rows
/// are rare, and an embedding of its few repeated levels is fitted on few rows each.
/// The file's missing cells are a level of their own (training gives "(missing)" an input),
/// so a column mostly missing is not nearly unique; nor is one of fewer than [`MIN_ID_ROWS`]
/// rows, too few to tell.
fn nearly_unique(cells: &[&str], distinct: usize, rows: usize) -> Option<String> {
    if rows < MIN_ID_ROWS || distinct * 2 <= rows {
        return None;
    }
    let mut counts: rustc_hash::FxHashMap<&str, usize> = Default::default();
    for cell in cells {
        *counts.entry(cell).or_default() += 1;
    }
    let missing = rows - cells.len();
    let in_levels: usize = counts
        .values()
        .filter(|&&n| n >= MIN_LEVEL_ROWS)
        .sum::<usize>()
        + if missing >= MIN_LEVEL_ROWS {
            missing
        } else {
            0
        };
    (in_levels * 2 < rows).then(|| {
        let share = 100.0 * (rows - in_levels) as f64 / rows as f64;
        format!(
            "nearly unique: {distinct} levels in {rows} rows, {share:.0} % of them in a level seen under {MIN_LEVEL_ROWS} times (titles, names or free text)"
        )
    })
}

/// Integers, different in every row, that count up from some start (1, 2, 3, …) or sit in a
/// column whose name says it is an ID: a row number, not a measurement.
fn looks_like_id(name: &str, numbers: &[f64], lo: f64, hi: f64) -> bool {
    let integers = numbers.iter().all(|v| v.fract() == 0.0);
    let consecutive = hi - lo + 1.0 == numbers.len() as f64;
    integers && (consecutive || named_like_id(name))
}

/// `id`, `user_id`, `PassengerId`, `Individual ID`: a name that says the column is an ID.
fn named_like_id(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower == "id" || lower.ends_with("_id") || name.ends_with("Id") || name.ends_with("ID")
}

/// `n levels: a, b, c, …`, the first levels sorted by name.
fn summary_of_levels(distinct: &FxHashSet<&str>) -> String {
    let mut names: Vec<&str> = distinct.iter().copied().collect();
    names.sort_unstable();
    let shown: Vec<String> = names.iter().take(4).map(|n| clip(n, 16)).collect();
    let more = if names.len() > 4 { ", …" } else { "" };
    format!("{} levels: {}{more}", names.len(), shown.join(", "))
}

fn clip(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// A number with at most 4 decimals, or in scientific notation when it is tiny.
fn short(v: f64) -> String {
    if v != 0.0 && v.abs() < 1e-3 {
        return format!("{v:.3e}");
    }
    let s = format!("{v:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The table `init` prints on stderr: each column, its type, missing cells, values and why.
pub fn table(columns: &[Inferred]) -> String {
    let name_w = columns
        .iter()
        .map(|c| c.name.chars().count())
        .max()
        .unwrap_or(6)
        .clamp(6, 24);
    let values_w = columns
        .iter()
        .map(|c| c.values.chars().count())
        .max()
        .unwrap_or(6)
        .clamp(6, 40);
    let mut out = format!(
        "{:name_w$}  {:8}  {:>7}  {:values_w$}  why\n",
        "column", "type", "missing", "values"
    );
    for c in columns {
        let line = format!(
            "{:name_w$}  {:8}  {:>7}  {:values_w$}  {}",
            clip(&c.name, name_w),
            c.kind.name(),
            c.missing,
            clip(&c.values, values_w),
            c.why
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
