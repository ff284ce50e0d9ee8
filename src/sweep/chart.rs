//! `sweep.png`: the ranking metric against each swept axis (one point per complete trial), and
//! every complete trial's validation curve overlaid, coloured by its configuration's rank.

use super::folder::SweepDir;
use super::plan::{Plan, number};
use super::report::{RankBy, SweepReport};
use crate::error::Result;
use crate::plot::{Area, COLORS, DrawResult, write_png};
use plotters::prelude::*;
use std::path::Path;
use toml::Value;

/// Draws the report's chart into `out`.
pub fn draw(dir: &SweepDir, plan: &Plan, report: &SweepReport, out: &Path) -> Result<()> {
    let panels = plan.axes.len() + 1;
    let cols = panels.min(3);
    let rows = panels.div_ceil(cols);
    let size = (600 * cols as u32, 460 * rows as u32 + 40);
    let title = format!("sweep {}: {}", plan.name, metric_name(report.metric));
    write_png(out, size, &title, |root| {
        let areas = root.split_evenly((rows, cols));
        for (area, axis) in areas.iter().zip(&plan.axes) {
            axis_panel(area, axis, plan, report)?;
        }
        curves_panel(&areas[plan.axes.len()], dir, report)
    })
}

fn metric_name(metric: RankBy) -> &'static str {
    match metric {
        RankBy::Accuracy => "best valid accuracy (%)",
        RankBy::Loss => "best valid loss",
    }
}

/// Accuracy in percent, loss as it is.
fn scaled(metric: RankBy, v: f64) -> f64 {
    match metric {
        RankBy::Accuracy => 100.0 * v,
        RankBy::Loss => v,
    }
}

/// How an axis's values lie along x: numbers (on a log scale when they span a decade or more
/// and are all positive), or categories in the order they first appear.
enum XScale {
    Linear,
    Log10,
    Categories(Vec<String>),
}

impl XScale {
    fn of(values: &[&Value]) -> XScale {
        let numbers: Option<Vec<f64>> = values.iter().map(|v| number(v)).collect();
        match numbers {
            Some(n) if !n.is_empty() => {
                let (lo, hi) = bounds(n.iter().copied());
                if lo > 0.0 && hi / lo >= 10.0 {
                    XScale::Log10
                } else {
                    XScale::Linear
                }
            }
            _ => {
                let mut cats: Vec<String> = Vec::new();
                for v in values {
                    if !cats.contains(&v.to_string()) {
                        cats.push(v.to_string());
                    }
                }
                XScale::Categories(cats)
            }
        }
    }

    fn x(&self, v: &Value) -> f64 {
        match self {
            XScale::Linear => number(v).unwrap_or(0.0),
            XScale::Log10 => number(v).unwrap_or(1.0).log10(),
            XScale::Categories(c) => c.iter().position(|s| *s == v.to_string()).unwrap_or(0) as f64,
        }
    }

    fn label(&self, x: f64) -> String {
        match self {
            XScale::Linear => {
                let text = format!("{x:.3}");
                text.trim_end_matches('0').trim_end_matches('.').to_string()
            }
            XScale::Log10 => format!("{:.1e}", 10f64.powf(x)),
            XScale::Categories(c) => {
                let i = x.round();
                match (i - x).abs() < 1e-6 && i >= 0.0 {
                    true => c.get(i as usize).cloned().unwrap_or_default(),
                    false => String::new(),
                }
            }
        }
    }
}

/// The smallest and largest of `values` (0..1 when there are none).
fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) }
}

/// `lo..hi` widened by 5 % on each side (and to a unit span when flat).
fn padded((lo, hi): (f64, f64)) -> std::ops::Range<f64> {
    let pad = if hi > lo { 0.05 * (hi - lo) } else { 0.5 };
    lo - pad..hi + pad
}

/// The metric against one swept axis.
fn axis_panel(area: &Area, axis: &str, plan: &Plan, report: &SweepReport) -> DrawResult {
    let value_of = |index: usize| {
        plan.trials[index]
            .sets
            .iter()
            .find(|(k, _)| k == axis)
            .map(|(_, v)| v)
    };
    let all: Vec<&Value> = (0..plan.trials.len()).filter_map(value_of).collect();
    let scale = XScale::of(&all);
    let points: Vec<(f64, f64)> = report
        .trials
        .iter()
        .filter_map(|t| Some((scale.x(value_of(t.index)?), scaled(report.metric, t.value?))))
        .collect();
    let failed: Vec<f64> = report
        .trials
        .iter()
        .filter(|t| t.value.is_none())
        .filter_map(|t| Some(scale.x(value_of(t.index)?)))
        .collect();
    let xs = padded(bounds(all.iter().map(|v| scale.x(v))));
    let ys = padded(bounds(points.iter().map(|p| p.1)));
    let floor = ys.start;
    let ticks = match &scale {
        XScale::Categories(c) => c.len(),
        _ => 6,
    };
    let mut chart = ChartBuilder::on(area)
        .caption(axis, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d(xs, ys)?;
    chart
        .configure_mesh()
        .x_desc(axis)
        .y_desc(metric_name(report.metric))
        .x_labels(ticks.max(2))
        .x_label_formatter(&|x| scale.label(*x))
        .label_style(("sans-serif", 14))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    let color = COLORS[0];
    chart.draw_series(points.iter().map(|p| Circle::new(*p, 5, color.filled())))?;
    // Failed trials: a red cross on the x axis, at their value.
    let red = COLORS[1].stroke_width(2);
    chart.draw_series(failed.iter().map(|x| Cross::new((*x, floor), 6, red)))?;
    Ok(())
}

/// Every complete trial's validation curve, coloured by its configuration's rank (the best six
/// in colour, the rest grey).
fn curves_panel(area: &Area, dir: &SweepDir, report: &SweepReport) -> DrawResult {
    let mut lines: Vec<(usize, Vec<(f64, f64)>)> = Vec::new();
    let label = |rank: usize| {
        let c = &report.configurations[rank].configuration;
        let short: String = c.chars().take(48).collect();
        format!("#{} {short}", rank + 1)
    };
    for (rank, c) in report.configurations.iter().enumerate() {
        for t in report.trials.iter().filter(|t| c.trials.contains(&t.index)) {
            if t.value.is_none() {
                continue;
            }
            let path = dir.trial(t.index).join(crate::run::folder::METRICS);
            let history = crate::run::history::read_csv(&path).unwrap_or_default();
            let points = history
                .iter()
                .filter_map(|e| {
                    let v = match report.metric {
                        RankBy::Accuracy => e.valid.accuracy?,
                        RankBy::Loss => e.valid.loss,
                    };
                    v.is_finite()
                        .then(|| (e.epoch as f64, scaled(report.metric, v)))
                })
                .collect();
            lines.push((rank, points));
        }
    }
    let all = || lines.iter().flat_map(|(_, p)| p.iter());
    let epochs = bounds(all().map(|p| p.0));
    let ys = padded(bounds(all().map(|p| p.1)));
    let mut chart = ChartBuilder::on(area)
        .caption(
            "validation curves (colour: configuration rank)",
            ("sans-serif", 20),
        )
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(70)
        .build_cartesian_2d(epochs.0.min(1.0)..epochs.1.max(2.0), ys)?;
    chart
        .configure_mesh()
        .x_desc("epoch")
        .y_desc(metric_name(report.metric).replace("best ", ""))
        .x_label_formatter(&|x| format!("{x:.0}"))
        .label_style(("sans-serif", 14))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    // Grey first, so the best configurations are drawn on top; one legend entry per colour.
    lines.sort_by_key(|(rank, _)| std::cmp::Reverse(*rank));
    let mut labelled = Vec::new();
    for (rank, points) in lines {
        let style = match COLORS.get(rank) {
            Some(c) => c.stroke_width(2),
            None => RGBColor(170, 170, 170).stroke_width(1),
        };
        let series = chart.draw_series(LineSeries::new(points, style))?;
        if rank < COLORS.len() && !labelled.contains(&rank) {
            labelled.push(rank);
            series
                .label(label(rank))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        }
    }
    chart
        .configure_series_labels()
        .position(match report.metric {
            RankBy::Accuracy => SeriesLabelPosition::LowerRight,
            RankBy::Loss => SeriesLabelPosition::UpperRight,
        })
        .label_font(("sans-serif", 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .draw()?;
    Ok(())
}
