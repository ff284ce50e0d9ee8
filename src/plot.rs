//! Learning curves as PNG with plotters: loss (and accuracy for classifiers, R² for
//! regressions, and the learning rate when a schedule moves it) against epoch, train dashed and
//! validation solid, one colour per run. The font is embedded (DejaVu Sans),
//! so no system font library is needed.

use crate::error::{EmberError, Result};
use crate::record::EpochRecord;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::FontStyle;
use std::path::Path;
use std::sync::Once;

/// One run's curves and its legend label.
pub struct Curve {
    pub label: String,
    pub history: Vec<EpochRecord>,
}

pub(crate) const COLORS: [RGBColor; 6] = [
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
    EmberError::Runtime(format!("cannot draw the chart: {e}"))
}

/// Writes `curves` to `out` as a PNG (atomically): a panel per metric, and under them one
/// legend for all, where it covers no curve.
pub fn draw(curves: &[Curve], title: &str, out: &Path) -> Result<()> {
    let metrics = metrics_of(curves);
    let width = (700 * metrics.len()).max(800) as u32;
    let legend = Legend::of(curves, width);
    let size = (width, 540 + legend.height());
    write_png(out, size, title, |root| {
        let height = root.dim_in_pixel().1;
        let (charts, strip) = root.split_vertically(height - legend.height());
        let panels = charts.split_evenly((1, metrics.len()));
        for (area, metric) in panels.iter().zip(&metrics) {
            panel(area, curves, *metric)?;
        }
        legend.draw(&strip, curves)
    })
}

/// The legend strip under the panels: what dashed and solid mean, then each run's colour and
/// name (with more than one run), in as many columns as the width holds.
struct Legend {
    entries: usize,
    columns: usize,
    column_width: i32,
}

impl Legend {
    const ROW: i32 = 24;
    /// Run names longer than this are cut (with `…`).
    const LABEL_CHARS: usize = 60;

    fn of(curves: &[Curve], width: u32) -> Legend {
        let names = if curves.len() > 1 { curves.len() } else { 0 };
        let longest = curves
            .iter()
            .map(|c| c.label.chars().count().min(Self::LABEL_CHARS))
            .max()
            .unwrap_or(0)
            .max(16);
        // About 9 px a character at 15 px DejaVu Sans, after a 40 px mark.
        let column_width = 60 + 9 * longest as i32;
        let columns = ((width as i32 - 40) / column_width).max(1) as usize;
        Legend {
            entries: 1 + names,
            columns,
            column_width,
        }
    }

    fn height(&self) -> u32 {
        (self.entries.div_ceil(self.columns) as i32 * Self::ROW + 16) as u32
    }

    fn draw(&self, area: &Area, curves: &[Curve]) -> DrawResult {
        let font = ("sans-serif", 15).into_font();
        let at = |i: usize| {
            let (row, col) = (i / self.columns, i % self.columns);
            (
                40 + col as i32 * self.column_width,
                4 + row as i32 * Self::ROW,
            )
        };
        // The key: dashed is train, solid is valid (in the run's colour when there is one run).
        let key = match curves {
            [_] => COLORS[0],
            _ => RGBColor(90, 90, 90),
        };
        let (x, y) = at(0);
        dashed_mark(area, (x, y + 9), key)?;
        area.draw(&Text::new("train", (x + 30, y), font.clone()))?;
        solid_mark(area, (x + 80, y + 9), key)?;
        area.draw(&Text::new("valid", (x + 110, y), font.clone()))?;
        if curves.len() > 1 {
            for (i, c) in curves.iter().enumerate() {
                let (x, y) = at(i + 1);
                let color = COLORS[i % COLORS.len()];
                solid_mark(area, (x, y + 9), color)?;
                let name = shortened(&c.label, Self::LABEL_CHARS);
                area.draw(&Text::new(name, (x + 30, y), font.clone()))?;
            }
        }
        Ok(())
    }
}

/// `text` cut to `max` characters, the last one `…` when cut.
fn shortened(text: &str, max: usize) -> String {
    match text.chars().count() > max {
        true => text.chars().take(max - 1).chain(['…']).collect(),
        false => text.to_string(),
    }
}

/// A train curve's legend mark from `(x, y)`: two dashes.
fn dashed_mark(area: &Area, (x, y): (i32, i32), color: RGBColor) -> DrawResult {
    for (from, to) in [(0, 9), (15, 24)] {
        area.draw(&PathElement::new(
            vec![(x + from, y), (x + to, y)],
            color.stroke_width(2),
        ))?;
    }
    Ok(())
}

/// A valid curve's legend mark from `(x, y)`: a solid line with a dot.
fn solid_mark(area: &Area, (x, y): (i32, i32), color: RGBColor) -> DrawResult {
    area.draw(&PathElement::new(
        vec![(x, y), (x + 24, y)],
        color.stroke_width(3),
    ))?;
    area.draw(&Circle::new((x + 12, y), 3, color.filled()))?;
    Ok(())
}

/// The drawing area of a PNG under its title.
pub(crate) type Area<'a> = DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>;

/// Draws a `size` PNG with a bold `title` through `draw`, and moves it to `out` only once it
/// is complete.
pub(crate) fn write_png(
    out: &Path,
    size: (u32, u32),
    title: &str,
    draw: impl FnOnce(&Area) -> DrawResult,
) -> Result<()> {
    register_font();
    // Drawn in memory and written by `fs::write_atomic`, so that a full disk reads as one.
    let mut pixels = vec![0u8; 3 * size.0 as usize * size.1 as usize];
    let drawn = (|| -> DrawResult {
        let root = BitMapBackend::with_buffer(&mut pixels, size).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(title, ("sans-serif", 26).into_font().style(FontStyle::Bold))?;
        draw(&root)?;
        root.present()?;
        Ok(())
    })();
    drawn.map_err(plot_err)?;
    let image = image::RgbImage::from_raw(size.0, size.1, pixels)
        .expect("the buffer holds the image's pixels");
    let mut png = std::io::Cursor::new(Vec::new());
    image
        .write_to(&mut png, image::ImageFormat::Png)
        .map_err(plot_err)?;
    crate::fs::write_atomic(out, png.get_ref())
}

#[derive(Clone, Copy, PartialEq)]
enum Metric {
    Loss,
    Accuracy,
    R2,
    LearningRate,
}

/// The panels the curves call for: loss, then accuracy or R² where reported, then the
/// learning rate where it moves.
fn metrics_of(curves: &[Curve]) -> Vec<Metric> {
    let records = || curves.iter().flat_map(|c| c.history.iter());
    let mut metrics = vec![Metric::Loss];
    if records().any(|e| e.valid.accuracy.is_some()) {
        metrics.push(Metric::Accuracy);
    }
    if records().any(|e| e.valid.r2.is_some()) {
        metrics.push(Metric::R2);
    }
    let rates: Vec<f64> = records().filter_map(|e| e.train.lr).collect();
    if rates.windows(2).any(|w| w[0] != w[1]) {
        metrics.push(Metric::LearningRate);
    }
    metrics
}

fn values(e: &EpochRecord, metric: Metric, valid: bool) -> Option<f64> {
    let split = if valid { &e.valid } else { &e.train };
    match metric {
        Metric::Loss => Some(split.loss).filter(|v| v.is_finite()),
        Metric::Accuracy => split.accuracy.map(|a| 100.0 * a),
        Metric::R2 => split.r2.filter(|v| v.is_finite()),
        Metric::LearningRate => split.lr,
    }
}

pub(crate) type DrawResult = std::result::Result<(), Box<dyn std::error::Error>>;

/// A chart with epochs along x and `Y` (linear or log) up the y axis.
type Chart<'a, DB, Y> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, Y>>;

/// The extent of one panel's axes and their labels.
struct Axes {
    max_epoch: usize,
    lo: f64,
    hi: f64,
    /// Losses that span decades (the linear-scalar job's do) are drawn on a log axis.
    log: bool,
    y_label: &'static str,
    caption: &'static str,
}

impl Axes {
    fn of(curves: &[Curve], metric: Metric) -> Axes {
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
        let log = metric == Metric::Loss && lo > 0.0 && hi / lo > 100.0;
        let (y_label, caption) = match metric {
            Metric::Loss => (if log { "loss (log scale)" } else { "loss" }, "Loss"),
            Metric::Accuracy => ("accuracy (%)", "Accuracy"),
            Metric::R2 => ("R²", "R²"),
            Metric::LearningRate => ("learning rate (end of epoch)", "Learning rate"),
        };
        Axes {
            max_epoch,
            lo,
            hi,
            log,
            y_label,
            caption,
        }
    }

    /// The y range of a linear axis: the values with 5 % padding, accuracy not below 0.
    fn linear_y(&self, metric: Metric) -> std::ops::Range<f64> {
        let pad = ((self.hi - self.lo) * 0.05).max(1e-6);
        let bottom = if matches!(metric, Metric::Accuracy | Metric::LearningRate) {
            (self.lo - pad).max(0.0)
        } else {
            self.lo - pad
        };
        bottom..self.hi + pad
    }
}

/// Draws one metric's panel: its axes and every run's train and valid curves.
fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    curves: &[Curve],
    metric: Metric,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let axes = Axes::of(curves, metric);
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(axes.caption, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(78);
    let x = 1f64..axes.max_epoch as f64;
    if axes.log {
        let y = (axes.lo * 0.8..axes.hi * 1.25).log_scale();
        let mut chart = builder.build_cartesian_2d(x, y)?;
        draw_chart(&mut chart, curves, metric, &axes)
    } else {
        let mut chart = builder.build_cartesian_2d(x, axes.linear_y(metric))?;
        draw_chart(&mut chart, curves, metric, &axes)
    }
}

/// Draws the mesh, then each run's curves in its colour: train dashed, valid solid with dots.
fn draw_chart<'a, DB, Y>(
    chart: &mut Chart<'a, DB, Y>,
    curves: &[Curve],
    metric: Metric,
    axes: &Axes,
) -> DrawResult
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    draw_mesh(chart, axes)?;
    for (i, c) in curves.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart.draw_series(DashedLineSeries::new(
            points(c, metric, false),
            8,
            5,
            color.stroke_width(2),
        ))?;
        let valid = points(c, metric, true);
        chart.draw_series(LineSeries::new(valid.clone(), color.stroke_width(3)))?;
        chart.draw_series(valid.iter().map(|p| Circle::new(*p, 3, color.filled())))?;
    }
    Ok(())
}

/// One run's `(epoch, value)` points of the train or valid split.
fn points(c: &Curve, metric: Metric, valid: bool) -> Vec<(f64, f64)> {
    c.history
        .iter()
        .filter_map(|e| values(e, metric, valid).map(|v| (e.epoch as f64, v)))
        .collect()
}

/// The axes, their descriptions and labels, without grid lines.
fn draw_mesh<'a, DB, Y>(chart: &mut Chart<'a, DB, Y>, axes: &Axes) -> DrawResult
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_desc("epoch")
        .y_desc(axes.y_label)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .x_labels(axes.max_epoch.min(12))
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    Ok(())
}
