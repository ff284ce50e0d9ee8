//! Standardisation fitted with a table's encodings: each input's mean and deviation over the
//! training rows, computed from its column's parsed values, and applied as the rows are
//! encoded. The encoded matrix is then never passed over for its statistics nor scaled in
//! place; the inputs scaled (numbers and date parts) hold a third of its values on the read
//! benchmark's table, the one-hot levels the rest. The sums add the training rows in the order
//! the matrix holds them, and the scaling is `data::apply_stats`' arithmetic, so the statistics
//! and the inputs are the bits that standardising the encoded matrix gives (a test compares).

use super::{Encoding, Fit, Parsed, Robust, date_at, dates};
use crate::data::stats_in_row_order;
use rayon::prelude::*;

/// One input's training `(mean, std)`.
pub type Scale = (f64, f64);

/// The scale of a 0/1 input (one-hot level, missing indicator) and of an embedded column's
/// index: standardisation leaves them as they are.
const UNSCALED: Scale = (0.0, 1.0);

/// The training values of the inputs of a column that standardisation scales (its number, or
/// its date's parts), as the model takes them (the fill where a cell is missing): a vector per
/// input, of the file's rows `train` in that order. None for a category. (Summed from these
/// vectors, the statistics took 0.1 s less of the read benchmark's data phase than read from
/// the parsed cells through the rows' indices, for 120 MB more at its peak, within 3 times the
/// encoded matrix.)
pub fn training_values(enc: &Encoding, cells: &Parsed, train: &[usize]) -> Vec<Vec<f32>> {
    let fill = enc.fill.unwrap_or_default();
    match cells {
        Parsed::Numbers(values) => {
            let value = |&r: &usize| match values[r] {
                v if v.is_nan() => number(enc, fill as f32),
                v => number(enc, v),
            };
            vec![train.iter().map(value).collect()]
        }
        Parsed::Days(days) => {
            let mut parts = vec![Vec::with_capacity(train.len()); dates::PARTS.len()];
            for &r in train {
                let date = dates::parts(date_at(days, r, fill));
                parts.iter_mut().zip(date).for_each(|(p, v)| p.push(v));
            }
            parts
        }
        Parsed::Slots(_) => Vec::new(),
    }
}

/// Each column's fit with its inputs' scales: the statistics of its [`training_values`] at the
/// file's rows `train`, then [`UNSCALED`] for its other inputs. The inputs' sums run side by
/// side, in one group of inputs per thread of the pool; each input's sums stay on one thread,
/// so the bits do not depend on the thread count.
pub fn fit(columns: Vec<(Encoding, Parsed)>, train: &[usize]) -> Vec<Fit> {
    let values: Vec<Vec<Vec<f32>>> = (columns.par_iter())
        .map(|(enc, cells)| training_values(enc, cells, train))
        .collect();
    let inputs: Vec<&[f32]> = values.iter().flatten().map(Vec::as_slice).collect();
    let group = inputs.len().div_ceil(rayon::current_num_threads()).max(1);
    let stats: Vec<Scale> = (inputs.par_chunks(group))
        .flat_map_iter(|g| stats_in_row_order(g.len(), train.len(), |r, c| g[c][r]))
        .collect();
    let mut stats = stats.into_iter();
    let counts: Vec<usize> = values.iter().map(Vec::len).collect();
    drop(values);
    (columns.into_iter().zip(counts))
        .map(|((enc, cells), count)| {
            let mut scales: Vec<Scale> = stats.by_ref().take(count).collect();
            scales.resize(enc.inputs().len(), UNSCALED);
            (enc, cells, scales)
        })
        .collect()
}

/// `(v - mean) / std`, as `data::apply_stats` computes it.
pub fn apply(v: f32, (mean, std): Scale) -> f32 {
    ((f64::from(v) - mean) / std) as f32
}

/// A numeric cell's value `v` (or the fill) as the model takes it before standardisation:
/// scaled robustly where the column is.
pub fn number(enc: &Encoding, v: f32) -> f32 {
    match enc.robust {
        Some(r) => robust(f64::from(v), r) as f32,
        None => v,
    }
}

/// How far a robustly scaled value's tail reaches, in spreads: `z / sqrt(1 + (z / 3)^2)`
/// stays within ±3 and is nearly `z` in the middle.
pub const ROBUST_CLIP: f64 = 3.0;

/// `v` centred, divided by the spread and clipped smoothly, in double precision (the ONNX
/// export's nodes do the same operations in the same order).
pub fn robust(v: f64, Robust { center, scale }: Robust) -> f64 {
    let z = (v - center) / scale;
    let t = z / ROBUST_CLIP;
    z / (1.0 + t * t).sqrt()
}

/// The robust fit of a column's present training values (in any order; reordered): its
/// median `center`, and the spread of its middle half. Where the middle half is one value (a
/// count that is mostly 0), the spread of the middle 80 %, then half the range, then 1 where
/// every value is the same.
pub fn fit_robust(present: &mut [f64], center: f64) -> Robust {
    let n = present.len();
    let mut quantile = |q: f64| {
        let at = ((n - 1) as f64 * q).round() as usize;
        *present.select_nth_unstable_by(at, f64::total_cmp).1
    };
    // (low quantile, high quantile, factor), tried in turn: the later only where the earlier
    // spread is 0, so that a column with an interquartile range selects just its quartiles.
    let spreads = [(0.25, 0.75, 1.0), (0.1, 0.9, 1.0), (0.0, 1.0, 0.5)];
    let scale = (spreads.into_iter())
        .map(|(low, high, factor)| (quantile(high) - quantile(low)) * factor)
        .chain([1.0])
        .find(|s| *s > 0.0 && s.is_finite())
        .expect("1 is positive");
    Robust { center, scale }
}
