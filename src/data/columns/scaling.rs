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
            let width = enc.bins.as_ref().map_or(1, |e| e.len() - 1);
            let mut inputs = vec![Vec::with_capacity(train.len()); width];
            let mut row = vec![0.0; width];
            for &r in train {
                let v = if values[r].is_nan() {
                    fill as f32
                } else {
                    values[r]
                };
                write_numeric(enc, v, &mut row);
                inputs
                    .iter_mut()
                    .zip(&row)
                    .for_each(|(input, v)| input.push(*v));
            }
            inputs
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

/// Writes the inputs of a numeric cell's value `v` (or the fill) into `out`, as the model
/// takes them before standardisation: the value, scaled robustly where the column is, or one
/// per bin where it is encoded piecewise-linearly; returns how many.
pub fn write_numeric(enc: &Encoding, v: f32, out: &mut [f32]) -> usize {
    match (&enc.bins, enc.robust) {
        (Some(edges), _) => {
            for (o, w) in out.iter_mut().zip(edges.windows(2)) {
                *o = piecewise(f64::from(v), w[0], w[1] - w[0]) as f32;
            }
            edges.len() - 1
        }
        (None, Some(r)) => {
            out[0] = robust(f64::from(v), r) as f32;
            1
        }
        (None, None) => {
            out[0] = v;
            1
        }
    }
}

/// How far through the bin from `low`, `width` wide, `v` lies: 0 below it, 1 above it, in
/// double precision (the ONNX export's nodes do the same operations in the same order).
pub fn piecewise(v: f64, low: f64, width: f64) -> f64 {
    ((v - low) / width).clamp(0.0, 1.0)
}

/// The bins that a piecewise-linear encoding cuts a column into, at most this many: the
/// paper's tuned counts run from 8 to 128; 16 won ember's table benchmark where 32 and 8 did
/// not (docs/tables.md, piecewise-linear numbers).
pub const PIECEWISE_BINS: usize = 16;

/// The edges of a piecewise-linear encoding of a column's present training values (in any
/// order; sorted): the values at the [`rank`]s of 0, 1/16, ..., 1 ([`PIECEWISE_BINS`]), each
/// taken once, so that a value held by many rows is one edge. One value in every row gets one
/// bin from it to one above.
pub fn fit_bins(present: &mut [f64]) -> Vec<f64> {
    present.sort_unstable_by(f64::total_cmp);
    let n = present.len();
    let mut edges: Vec<f64> = (0..=PIECEWISE_BINS)
        .map(|i| present[rank(n, i as f64 / PIECEWISE_BINS as f64)])
        .collect();
    edges.dedup();
    if edges.len() == 1 {
        edges.push(edges[0] + 1.0);
    }
    edges
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

/// The rank, from 0, of the `q` quantile of `n` values in order: (n - 1) × q, rounded.
fn rank(n: usize, q: f64) -> usize {
    ((n - 1) as f64 * q).round() as usize
}

/// The robust fit of a column's present training values (in any order; reordered): its
/// median `center`, and the spread of its middle half. Where the middle half is one value (a
/// count that is mostly 0), the spread of the middle 80 %, then half the range, then 1 where
/// every value is the same.
pub fn fit_robust(present: &mut [f64], center: f64) -> Robust {
    let n = present.len();
    let mut quantile = |q: f64| *present.select_nth_unstable_by(rank(n, q), f64::total_cmp).1;
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
