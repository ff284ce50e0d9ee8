//! The graph's inputs and everything between them and the network: what `ember predict` does
//! to a row before the first layer, as ONNX operators.
//!
//! - A table typed by `[data.columns]`: one input per column, named as in the CSV, `[n, 1]`.
//!   A category column takes the cells as strings (the same text as the CSV; a missing cell is
//!   any of the run's missing spellings, in any letter case); a numeric column takes float32
//!   with NaN for a missing cell; a date column takes float32 days since 1970-01-01, NaN when
//!   missing. Then each column's inputs (`data::columns::Encoding::inputs`), concatenated.
//! - A table of numbers only: `x`, `[n, inputs]` float32, the columns in the run's order (and
//!   `f`, `[n, 1]`, linear-scalar's scalar column).
//! - Images: `pixels`, float32 0..255 before scaling, `[n, height, width]` (grayscale) or
//!   `[n, height, width, 3]` (RGB); IDX images `[n, height, width]`.
//!
//! Standardisation runs in double precision, as ember's own (`data::apply_stats`).

use super::graph::{Attr, Graph, ML};
use super::proto::elem;
use super::proto::{Dimension, TensorShapeProto, TensorTypeProto, TypeProto, ValueInfoProto};
use crate::config::{Channels, DataSpec, InputScale, JobConfig, Standardization};
use crate::data::columns::{ColumnKind, Encoding, Missing, ROBUST_CLIP, Robust};
use crate::error::Result;
use crate::input_err;
use std::collections::BTreeSet;

/// The graph's inputs, and the values the network reads: the features `[n, width]` (float32,
/// preprocessed) and linear-scalar's scalar column `[n, 1]`.
pub struct Inputs {
    pub infos: Vec<ValueInfoProto>,
    pub features: String,
    pub scalar: Option<String>,
}

/// A dimension of a value's shape: the batch (dynamic), another named one, or a fixed size.
pub enum Dim {
    Batch,
    Named(&'static str),
    Fixed(usize),
}

/// The declaration of a graph input or output.
pub fn value_info(name: &str, elem_type: i32, dims: &[Dim], doc: &str) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| match d {
            Dim::Batch => Dimension {
                dim_param: Some("batch".into()),
                ..Default::default()
            },
            Dim::Named(n) => Dimension {
                dim_param: Some((*n).into()),
                ..Default::default()
            },
            Dim::Fixed(v) => Dimension {
                dim_value: Some(*v as i64),
                ..Default::default()
            },
        })
        .collect();
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            tensor_type: Some(TensorTypeProto {
                elem_type,
                shape: Some(TensorShapeProto { dim }),
            }),
        }),
        doc_string: doc.into(),
    }
}

/// The inputs of `config`'s model and their preprocessing.
pub fn build(g: &mut Graph, config: &JobConfig) -> Result<Inputs> {
    let width = config.model.inputs.unwrap_or_default();
    let mut inputs = match &config.data {
        DataSpec::Table(t) => match &t.encoding {
            Some(encodings) => columns(g, encodings, &t.missing())?,
            None => numbers(width, t.scalar_column.is_some()),
        },
        DataSpec::Idx { input_scale, .. } => {
            let dims = [Dim::Batch, Dim::Named("height"), Dim::Named("width")];
            pixels(g, &dims, *input_scale)
        }
        DataSpec::Images(spec) => {
            let [h, w] = spec.size.unwrap_or([0, 0]);
            let mut dims = vec![Dim::Batch, Dim::Fixed(h), Dim::Fixed(w)];
            if spec.channels == Channels::Rgb {
                dims.push(Dim::Fixed(3));
            }
            pixels(g, &dims, spec.input_scale)
        }
    };
    if let Some(stats) = config.table().and_then(|t| t.stats.as_ref()) {
        standardize(g, &mut inputs, stats, width);
    }
    Ok(inputs)
}

/// `x` (and linear-scalar's `f`) as given.
fn numbers(width: usize, scalar: bool) -> Inputs {
    let x = value_info(
        "x",
        elem::FLOAT,
        &[Dim::Batch, Dim::Fixed(width)],
        "the input columns",
    );
    let mut infos = vec![x];
    if scalar {
        let f = value_info(
            "f",
            elem::FLOAT,
            &[Dim::Batch, Dim::Fixed(1)],
            "the scalar column",
        );
        infos.push(f);
    }
    Inputs {
        infos,
        features: "x".into(),
        scalar: scalar.then(|| "f".into()),
    }
}

/// `pixels`, flattened row-major (as ember reads an image) and scaled.
fn pixels(g: &mut Graph, dims: &[Dim], scale: InputScale) -> Inputs {
    let doc = "pixel values 0..255 as float32, row-major (height, width, channel)";
    let info = value_info("pixels", elem::FLOAT, dims, doc);
    let mut flat = g.op("Flatten", &["pixels"], vec![Attr::Int("axis", 1)]);
    if scale == InputScale::Unit {
        // The factor ember's data sources multiply by, in f32.
        let factor = g.floats("scale", &[], &[scale.factor()]);
        flat = g.bin("Mul", &flat, &factor);
    }
    Inputs {
        infos: vec![info],
        features: flat,
        scalar: None,
    }
}

/// `(x - mean) / std` in double precision, rounded to float32, as `data::apply_stats`.
fn standardize(g: &mut Graph, inputs: &mut Inputs, stats: &Standardization, width: usize) {
    let scaled = |g: &mut Graph, x: &str, from: usize, len: usize| {
        let mean = g.doubles("mean", &[1, len], &stats.mean[from..from + len]);
        let std = g.doubles("std", &[1, len], &stats.std[from..from + len]);
        let x = g.cast(x, elem::DOUBLE);
        let centred = g.bin("Sub", &x, &mean);
        let z = g.bin("Div", &centred, &std);
        g.cast(&z, elem::FLOAT)
    };
    inputs.features = scaled(g, &inputs.features, 0, width);
    if let Some(s) = inputs.scalar.take() {
        inputs.scalar = Some(scaled(g, &s, width, 1));
    }
}

/// One input per typed column, encoded as in training, concatenated.
fn columns(g: &mut Graph, encodings: &[Encoding], missing: &Missing) -> Result<Inputs> {
    let mut infos = Vec::new();
    let mut parts = Vec::new();
    for enc in encodings {
        let name = enc.column.as_str();
        let shape = [Dim::Batch, Dim::Fixed(1)];
        match enc.kind {
            ColumnKind::Category => {
                let doc = "category: the cell's text";
                infos.push(value_info(name, elem::STRING, &shape, doc));
                let slot = slot(g, enc, missing)?;
                parts.push(match enc.embed {
                    // The index, which the network looks up in the column's table.
                    Some(_) => g.cast(&slot, elem::FLOAT),
                    None => one_hot(g, enc, &slot),
                });
            }
            ColumnKind::Numeric | ColumnKind::Date => {
                let doc = match enc.kind {
                    ColumnKind::Date => "date: days since 1970-01-01 as float32, NaN when missing",
                    _ => "numeric: float32, NaN when missing",
                };
                infos.push(value_info(name, elem::FLOAT, &shape, doc));
                parts.extend(filled(g, enc));
            }
            ColumnKind::Ignore => {}
        }
    }
    let refs: Vec<&str> = parts.iter().map(String::as_str).collect();
    let features = g.op("Concat", &refs, vec![Attr::Int("axis", 1)]);
    Ok(Inputs {
        infos,
        features,
        scalar: None,
    })
}

/// A numeric or date column: the value (or a date's parts) with the training fill where the
/// cell is NaN, then the missing-cell indicator when training had one.
fn filled(g: &mut Graph, enc: &Encoding) -> Vec<String> {
    let fill = enc.fill.expect("numeric and date encodings have a fill") as f32;
    let x = enc.column.as_str();
    let absent = g.op("IsNaN", &[x], vec![]);
    let fill = g.floats("fill", &[], &[fill]);
    let value = g.op("Where", &[&absent, &fill, x], vec![]);
    let mut out = vec![match enc.kind {
        ColumnKind::Date => {
            let days = g.cast(&value, elem::DOUBLE);
            let parts = super::calendar::parts(g, &days);
            g.cast(&parts, elem::FLOAT)
        }
        _ => match (&enc.bins, enc.robust) {
            (Some(edges), _) => piecewise(g, &value, edges),
            (None, Some(r)) => robust(g, &value, r),
            (None, None) => value,
        },
    }];
    if enc.indicator {
        out.push(g.cast(&absent, elem::FLOAT));
    }
    out
}

/// `z / sqrt(1 + (z / 3)^2)` with `z = (x - center) / scale`, in double precision, rounded to
/// float32: `data::columns::scaling::robust`'s operations in its order.
fn robust(g: &mut Graph, x: &str, r: Robust) -> String {
    let x = g.cast(x, elem::DOUBLE);
    let center = g.doubles("center", &[], &[r.center]);
    let scale = g.doubles("scale", &[], &[r.scale]);
    let clip = g.doubles("clip", &[], &[ROBUST_CLIP]);
    let one = g.doubles("one", &[], &[1.0]);
    let centred = g.bin("Sub", &x, &center);
    let z = g.bin("Div", &centred, &scale);
    let t = g.bin("Div", &z, &clip);
    let squared = g.bin("Mul", &t, &t);
    let sum = g.bin("Add", &one, &squared);
    let root = g.op("Sqrt", &[&sum], vec![]);
    let clipped = g.bin("Div", &z, &root);
    g.cast(&clipped, elem::FLOAT)
}

/// `[n, bins]`: each bin's `min(max((x - low) / width, 0), 1)` in double precision, rounded to
/// float32: `data::columns::scaling::piecewise`'s operations in its order.
fn piecewise(g: &mut Graph, x: &str, edges: &[f64]) -> String {
    let lows: Vec<f64> = edges[..edges.len() - 1].to_vec();
    let widths: Vec<f64> = edges.windows(2).map(|w| w[1] - w[0]).collect();
    let x = g.cast(x, elem::DOUBLE);
    let low = g.doubles("low", &[1, lows.len()], &lows);
    let width = g.doubles("width", &[1, widths.len()], &widths);
    let (zero, one) = (
        g.doubles("zero", &[], &[0.0]),
        g.doubles("one", &[], &[1.0]),
    );
    let shifted = g.bin("Sub", &x, &low);
    let through = g.bin("Div", &shifted, &width);
    let above = g.bin("Max", &through, &zero);
    let within = g.bin("Min", &above, &one);
    g.cast(&within, elem::FLOAT)
}

/// A category column's slot, int64 `[n, 1]`: its level's index, then "(missing)" and
/// "(other)".
fn slot(g: &mut Graph, enc: &Encoding, missing: &Missing) -> Result<String> {
    let levels = enc.levels.as_deref().unwrap_or_default();
    let (missing_slot, other_slot) = (levels.len() as i64, levels.len() as i64 + 1);
    // A missing spelling wins over a level of the same text, as in `columns::encode`.
    let mut keys: Vec<(String, i64)> = levels
        .iter()
        .enumerate()
        .filter(|(_, l)| !missing.is(l))
        .map(|(i, l)| (l.clone(), i as i64))
        .collect();
    for spelling in missing_spellings(missing, &enc.column)? {
        keys.push((spelling, missing_slot));
    }
    let (strings, ints): (Vec<String>, Vec<i64>) = keys.into_iter().unzip();
    let attrs = vec![
        Attr::Strs("cats_strings", strings),
        Attr::Ints("cats_int64s", ints),
        Attr::Int("default_int64", other_slot),
    ];
    Ok(g.op_in(ML, "CategoryMapper", &[&enc.column], attrs))
}

/// A category column one-hot: one 0/1 input per level, then "(missing)" and "(other)".
fn one_hot(g: &mut Graph, enc: &Encoding, slot: &str) -> String {
    let levels = enc.levels.as_deref().unwrap_or_default();
    let all: Vec<i64> = (0..levels.len() as i64 + 2).collect();
    let slots = g.int64s("slots", &[1, all.len()], &all);
    let hot = g.bin("Equal", slot, &slots);
    g.cast(&hot, elem::FLOAT)
}

/// Every letter case of every missing spelling: ONNX matches strings exactly, ember ignores
/// ASCII case. A spelling with more than [`MAX_CASED_LETTERS`] letters is an error.
fn missing_spellings(missing: &Missing, column: &str) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for spelling in missing.spellings() {
        let letters = spelling.chars().filter(char::is_ascii_alphabetic).count();
        if letters > MAX_CASED_LETTERS {
            return Err(input_err!(
                "data.missing_values: \"{spelling}\" has {letters} letters; ONNX export spells out every letter case of a missing spelling, for at most {MAX_CASED_LETTERS} letters (column \"{column}\")"
            ));
        }
        out.extend(case_variants(spelling));
    }
    Ok(out)
}

/// Letters a missing spelling may have for export (2^12 = 4096 spellings of it).
pub const MAX_CASED_LETTERS: usize = 12;

/// `s` in every combination of upper and lower case of its ASCII letters.
fn case_variants(s: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    for c in s.chars() {
        let cases = match c.is_ascii_alphabetic() {
            true => vec![c.to_ascii_lowercase(), c.to_ascii_uppercase()],
            false => vec![c],
        };
        out = out
            .iter()
            .flat_map(|p| cases.iter().map(move |c| format!("{p}{c}")))
            .collect();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_variants_spell_every_case_once() {
        let mut v = case_variants("Na?");
        v.sort();
        assert_eq!(v, ["NA?", "Na?", "nA?", "na?"]);
        assert_eq!(case_variants(""), [""]);
    }
}
