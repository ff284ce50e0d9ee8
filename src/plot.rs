//! Learning curves as PNG with plotters: loss (and accuracy, for classifiers) against epoch,
//! train dashed and validation solid, one colour per run. The font is embedded (DejaVu Sans),
//! so no system font library is needed.

use crate::error::{EmberError, Result};
use crate::train::history::EpochRecord;
use plotters::prelude::*;
use plotters::style::FontStyle;
use std::path::Path;
use std::sync::Once;

/// One run's curves and its legend label.
pub struct Curve {
    pub label: String,
    pub history: Vec<EpochRecord>,
}

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for style in [FontStyle::Normal, FontStyle::Bold] {
            let bytes = match style {
                FontStyle::Bold => dejavu::sans::bold(),
                _ => dejavu::sans::regular(),
            };
            plotters::style::register_font("sans-serif", style, bytes)
                .unwrap_or_else(|_| unreachable!("the embedded DejaVu font is valid"));
        }
    });
}

fn plot_err(e: impl std::fmt::Display) -> EmberError {
    EmberError::Runtime(format!("cannot draw the curves: {e}"))
}

/// Writes `curves` to `out` as a PNG (atomically).
pub fn draw(curves: &[Curve], title: &str, out: &Path) -> Result<()> {
    register_font();
    let with_accuracy = curves
        .iter()
        .any(|c| c.history.iter().any(|e| e.valid.accuracy.is_some()));
    let size = if with_accuracy {
        (1400, 560)
    } else {
        (800, 560)
    };
    let dir = out.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp-{}.png",
        out.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        std::process::id()
    ));
    let result = (|| -> std::result::Result<(), Box<dyn std::error::Error>> {
        let root = BitMapBackend::new(&tmp, size).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(title, ("sans-serif", 26).into_font().style(FontStyle::Bold))?;
        let panels = if with_accuracy {
            root.split_evenly((1, 2))
        } else {
            vec![root.clone()]
        };
        panel(&panels[0], curves, Metric::Loss)?;
        if with_accuracy {
            panel(&panels[1], curves, Metric::Accuracy)?;
        }
        root.present()?;
        Ok(())
    })();
    if let Err(e) = result {
        std::fs::remove_file(&tmp).ok();
        return Err(plot_err(e));
    }
    std::fs::rename(&tmp, out).map_err(|e| EmberError::write(out, e))
}

#[derive(Clone, Copy, PartialEq)]
enum Metric {
    Loss,
    Accuracy,
}

fn values(e: &EpochRecord, metric: Metric, valid: bool) -> Option<f64> {
    let split = if valid { &e.valid } else { &e.train };
    match metric {
        Metric::Loss => Some(split.loss).filter(|v| v.is_finite()),
        Metric::Accuracy => split.accuracy.map(|a| 100.0 * a),
    }
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    curves: &[Curve],
    metric: Metric,
) -> std::result::Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let points: Vec<f64> = curves
        .iter()
        .flat_map(|c| c.history.iter())
        .flat_map(|e| [values(e, metric, false), values(e, metric, true)])
        .flatten()
        .collect();
    let max_epoch = curves
        .iter()
        .flat_map(|c| c.history.last().map(|e| e.epoch))
        .max()
        .unwrap_or(1)
        .max(2);
    let (lo, hi) = points
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(*v), b.max(*v))
        });
    let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
    // Losses that span decades (the linear-scalar job's do) are drawn on a log axis.
    let log = metric == Metric::Loss && lo > 0.0 && hi / lo > 100.0;
    let (y_label, caption) = match metric {
        Metric::Loss => (if log { "loss (log scale)" } else { "loss" }, "Loss"),
        Metric::Accuracy => ("accuracy (%)", "Accuracy"),
    };
    let pad = ((hi - lo) * 0.05).max(1e-6);
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(caption, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(78);

    macro_rules! draw_series {
        ($chart:ident) => {{
            $chart
                .configure_mesh()
                .x_desc("epoch")
                .y_desc(y_label)
                .x_label_formatter(&|x| format!("{x:.0}"))
                .x_labels(max_epoch.min(12))
                .label_style(("sans-serif", 15))
                .axis_desc_style(("sans-serif", 17))
                .light_line_style(WHITE.mix(0.0))
                .draw()?;
            for (i, c) in curves.iter().enumerate() {
                let color = COLORS[i % COLORS.len()];
                let name = |split: &str| {
                    if curves.len() == 1 {
                        split.to_string()
                    } else {
                        format!("{} {split}", c.label)
                    }
                };
                let train: Vec<(f64, f64)> = c
                    .history
                    .iter()
                    .filter_map(|e| values(e, metric, false).map(|v| (e.epoch as f64, v)))
                    .collect();
                let valid: Vec<(f64, f64)> = c
                    .history
                    .iter()
                    .filter_map(|e| values(e, metric, true).map(|v| (e.epoch as f64, v)))
                    .collect();
                $chart
                    .draw_series(DashedLineSeries::new(train, 8, 5, color.stroke_width(2)))?
                    .label(name("train"))
                    .legend(move |(x, y)| {
                        EmptyElement::at((x, y))
                            + PathElement::new(vec![(0, 0), (9, 0)], color.stroke_width(2))
                            + PathElement::new(vec![(15, 0), (24, 0)], color.stroke_width(2))
                    });
                $chart
                    .draw_series(LineSeries::new(valid.clone(), color.stroke_width(3)))?
                    .label(name("valid"))
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3))
                    });
                $chart.draw_series(valid.iter().map(|p| Circle::new(*p, 3, color.filled())))?;
            }
            $chart
                .configure_series_labels()
                .position(if metric == Metric::Loss {
                    SeriesLabelPosition::UpperRight
                } else {
                    SeriesLabelPosition::LowerRight
                })
                .label_font(("sans-serif", 15))
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.4))
                .draw()?;
        }};
    }

    let x = 1f64..max_epoch as f64;
    if log {
        let mut chart = builder.build_cartesian_2d(x, (lo * 0.8..hi * 1.25).log_scale())?;
        draw_series!(chart);
    } else {
        let bottom = if metric == Metric::Accuracy {
            (lo - pad).max(0.0)
        } else {
            lo - pad
        };
        let mut chart = builder.build_cartesian_2d(x, bottom..hi + pad)?;
        draw_series!(chart);
    }
    Ok(())
}
