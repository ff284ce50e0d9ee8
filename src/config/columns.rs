//! The column types a table job names (`[data.columns]`, `[data.embed]`, missing cells) and
//! the encodings fitted on its training file (`[[data.encoding]]`): the config's side of
//! `data::columns`, which fits and applies them.

use serde::{Deserialize, Serialize};

/// A column's type in `[data.columns]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ColumnKind {
    Numeric,
    Category,
    Date,
    Ignore,
}

impl ColumnKind {
    pub fn name(self) -> &'static str {
        match self {
            ColumnKind::Numeric => "numeric",
            ColumnKind::Category => "category",
            ColumnKind::Date => "date",
            ColumnKind::Ignore => "ignore",
        }
    }
}

/// The cells that mean "missing" when `data.missing_values` is not given (any letter case).
pub const DEFAULT_MISSING: [&str; 5] = ["", "NA", "NaN", "null", "?"];

/// The spellings of a missing cell.
#[derive(Debug, Clone, PartialEq)]
pub struct Missing {
    spellings: Vec<String>,
    /// Which bytes begin a spelling, in lower case: most cells (numbers) are told apart by
    /// their first byte without a comparison.
    first_bytes: [bool; 256],
}

impl Missing {
    pub fn new(spellings: &[String]) -> Missing {
        let mut first_bytes = [false; 256];
        for first in spellings.iter().filter_map(|s| s.bytes().next()) {
            first_bytes[usize::from(first.to_ascii_lowercase())] = true;
        }
        Missing {
            spellings: spellings.to_vec(),
            first_bytes,
        }
    }

    pub fn is(&self, cell: &str) -> bool {
        let first = cell.bytes().next().map(|b| b.to_ascii_lowercase());
        first.is_none_or(|b| self.first_bytes[usize::from(b)])
            && self.spellings.iter().any(|m| m.eq_ignore_ascii_case(cell))
    }

    /// The spellings as configured (matched in any ASCII letter case).
    pub fn spellings(&self) -> &[String] {
        &self.spellings
    }
}

impl Default for Missing {
    fn default() -> Missing {
        Missing::new(&DEFAULT_MISSING.map(String::from))
    }
}

/// One input column's encoding, fitted on the training file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Encoding {
    pub column: String,
    pub kind: ColumnKind,
    /// numeric: the training median, put in missing cells. date: the median date, as days since
    /// 1970-01-01.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fill: Option<f64>,
    /// numeric, date: an input saying the cell was missing (the training file had some).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub indicator: bool,
    /// category: the levels with an input of their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels: Option<Vec<String>>,
    /// category: the width of the level's learned vector, when the column is embedded (its
    /// one input is then the level's index: `levels`, then "(missing)", then "(other)").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embed: Option<usize>,
    /// numeric, scaled robustly (`[data.scaling]`): the training median and spread that the
    /// value is centred on and divided by before its tails are clipped smoothly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub robust: Option<Robust>,
    /// numeric, encoded piecewise-linearly (`[data.scaling]`): the edges of its bins, the
    /// training values' quantiles, increasing. The value reaches the model as one input per
    /// bin: 0 below the bin, 1 above it, the fraction of the way through it inside.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bins: Option<Vec<f64>>,
}

/// How a numeric column's values reach the model (`[data.scaling]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scaling {
    /// As they are (then standardised with the other inputs when `data.standardize` is on).
    Standard,
    /// Centred on the training median, divided by the spread of its middle half, and clipped
    /// smoothly to about ±3: for heavy tails, whose few far values would otherwise squeeze
    /// the rest into a sliver of the input's range.
    Robust,
    /// One input per quantile bin, each 0 below its bin, 1 above it and linear inside
    /// (Gorishniy et al., "On embeddings for numerical features in tabular deep learning",
    /// 2022): the first layer can then give each stretch of the values its own slope, as a
    /// tree's splits do, for codes and calendar numbers whose effect is not a line.
    #[serde(rename = "piecewise-linear")]
    PiecewiseLinear,
}

/// Each numeric column's [`Scaling`], where it is not standard (`[data.scaling]`).
pub type Scalings = std::collections::BTreeMap<String, Scaling>;

/// A robust scaling's fit on the training file: the value `v` reaches the model as
/// `z / sqrt(1 + (z / 3)^2)` with `z = (v - center) / scale`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Robust {
    /// The training median.
    pub center: f64,
    /// The interquartile range; where the middle half is one value, the middle 80 %'s spread,
    /// else half the range, else 1.
    pub scale: f64,
}

/// The width of each embedded column's vectors (`[data.embed]`).
pub type Embed = std::collections::BTreeMap<String, usize>;
