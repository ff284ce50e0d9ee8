//! `ember plot`: the learning curves of one run or several, read from their `metrics.csv`.

use super::{folder, history};
use crate::error::Result;
use crate::plot;

/// `ember plot`: the curves of `runs` in one PNG (default: a single run's own `curves.png`, or
/// `curves.png` here). Returns the line to print.
pub fn draw_runs(runs: &[std::path::PathBuf], out: Option<std::path::PathBuf>) -> Result<String> {
    let mut curves = Vec::new();
    let mut jobs = Vec::new();
    for run in runs {
        let history = history::read_csv(&run.join(folder::METRICS))?;
        if let Ok(c) = crate::config::load(&run.join(folder::CONFIG)) {
            jobs.push(c.name());
        }
        let label = run
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| run.display().to_string());
        curves.push(plot::Curve { label, history });
    }
    jobs.dedup();
    let out = out.unwrap_or_else(|| match runs {
        [one] => one.join(folder::CURVES),
        _ => std::path::PathBuf::from(folder::CURVES),
    });
    plot::draw(&curves, &jobs.join(", "), &out)?;
    let what = match runs.len() {
        1 => "curves of 1 run".to_string(),
        n => format!("curves of {n} runs"),
    };
    Ok(format!("{what} -> {}", out.display()))
}
