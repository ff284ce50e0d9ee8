//! `sweep.png`: the ranking metric against each swept axis (one point per complete trial), and
//! every complete trial's validation curve overlaid, coloured by its configuration's rank.

use super::folder::SweepDir;
use super::legible;
use super::plan::{Plan, number};
use super::report::{RankBy, SweepReport};
use crate::error::Result;
use crate::plot::{Area, COLORS, DrawResult, write_png};
use plotters::prelude::*;
use std::path::Path;
use toml::Value;

/// Draws the report's chart into `out`: a panel per axis, the curves, and their legend in a
/// panel of its own (so that it covers no curve and cuts no label).
pub fn draw(dir: &SweepDir, plan: &Plan, report: &SweepReport, out: &Path) -> Result<()> {
    let panels = plan.axes.len() + 2;
    let cols = panels.min(3);
    let rows = panels.div_ceil(cols);
    let size = (600 * cols as u32, 460 * rows as u32 + 40);
    let title = format!("sweep {}: {}", plan.name, metric_name(report.metric));
    write_png(out, size, &title, |root| {
        let areas = root.split_evenly((rows, cols));
        for (area, axis) in areas.iter().zip(&plan.axes) {
            axis_panel(area, axis, plan, report)?;
        }
        curves_panel(&areas[plan.axes.len()], dir, report)?;
        legend_panel(&areas[plan.axes.len() + 1], report)
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
                    if !cats.contains(&legible::value(v)) {
                        cats.push(legible::value(v));
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
            XScale::Categories(c) => {
                c.iter().position(|s| *s == legible::value(v)).unwrap_or(0) as f64
            }
        }
    }

    fn label(&self, x: f64) -> String {
        match self {
            // Three digits: ticks are round numbers, and tiny ones (1e-5) are not all "0"; a
            // zero tick may come out as float noise.
            XScale::Linear if x.abs() < 1e-12 => "0".to_string(),
            XScale::Linear => legible::significant(x, 3),
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
    // Grey first, so the best configurations are drawn on top.
    lines.sort_by_key(|(rank, _)| std::cmp::Reverse(*rank));
    for (rank, points) in lines {
        chart.draw_series(LineSeries::new(points, rank_style(rank)))?;
    }
    Ok(())
}

/// The line of the configuration ranked `rank` (from 0): the best six in colour, the rest grey.
fn rank_style(rank: usize) -> ShapeStyle {
    match COLORS.get(rank) {
        Some(c) => c.stroke_width(2),
        None => RGBColor(170, 170, 170).stroke_width(1),
    }
}

/// The curves' legend: each coloured configuration's rank, metric and swept values, wrapped
/// onto as many lines as they need (three at most), then a line for the grey ones.
fn legend_panel(area: &Area, report: &SweepReport) -> DrawResult {
    const WIDTH: usize = 60;
    const LINE: i32 = 18;
    const GAP: i32 = 6;
    let font = ("sans-serif", 14).into_font();
    let (x, mut y) = (24, 52);
    area.draw(&Text::new(
        "legend of the validation curves",
        (x, 16),
        ("sans-serif", 20).into_font(),
    ))?;
    let shown = report.configurations.len().min(COLORS.len());
    // The configuration's lines each entry may take, so that all of them and the grey line fit.
    let room = area.dim_in_pixel().1 as i32 - y - LINE - shown as i32 * (LINE + GAP);
    let lines = (room / LINE / shown.max(1) as i32).clamp(1, 3) as usize;
    for (rank, c) in report.configurations.iter().enumerate().take(shown) {
        let swatch = vec![(x, y + 8), (x + 28, y + 8)];
        area.draw(&PathElement::new(swatch, rank_style(rank)))?;
        let value = c.mean.map_or("no complete trial".to_string(), |m| {
            legible::mean_std(report.metric, m, c.std)
        });
        let head = format!("#{}  {value}", rank + 1);
        area.draw(&Text::new(head, (x + 40, y), font.clone()))?;
        for line in legible::wrap(&c.configuration, WIDTH, lines) {
            y += LINE;
            area.draw(&Text::new(line, (x + 56, y), font.clone()))?;
        }
        y += LINE + GAP;
    }
    let grey = report.configurations.len().saturating_sub(COLORS.len());
    if grey > 0 {
        let swatch = vec![(x, y + 8), (x + 28, y + 8)];
        area.draw(&PathElement::new(swatch, rank_style(COLORS.len())))?;
        let text = match grey {
            1 => format!("#{}", COLORS.len() + 1),
            _ => format!("#{} to #{}", COLORS.len() + 1, report.configurations.len()),
        };
        area.draw(&Text::new(text, (x + 40, y), font))?;
    }
    Ok(())
}
