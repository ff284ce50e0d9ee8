//! `ember runs`: the runs under a folder as a table, from each run's `summary.json` (or, for a
//! run still going or killed, its `metrics.csv`).

use crate::error::Result;
use crate::run::folder;
use crate::run::history;
use crate::run::summary::Summary;
use std::path::{Path, PathBuf};

/// One row of the table.
pub struct RunRow {
    pub path: PathBuf,
    pub job: String,
    pub status: String,
    pub epochs: String,
    pub valid_loss: Option<f64>,
    pub valid_accuracy: Option<f64>,
    pub train_seconds: Option<f64>,
    pub steps_per_s: Option<f64>,
    pub device: String,
    pub finished: String,
}

fn row(path: &Path) -> Option<RunRow> {
    if let Ok(s) = Summary::read(&path.join(folder::SUMMARY)) {
        let m = s.final_metrics.as_ref();
        return Some(RunRow {
            path: path.to_path_buf(),
            job: s.job.clone(),
            status: s.status.clone(),
            epochs: format!("{}/{}", s.epochs_done, s.epochs_total),
            valid_loss: m.map(|m| m.valid_loss),
            valid_accuracy: m.and_then(|m| m.valid_accuracy),
            train_seconds: Some(s.train_seconds),
            steps_per_s: Some(s.steps_per_s),
            device: s.device.clone(),
            finished: s
                .finished_at
                .get(..16)
                .unwrap_or_default()
                .replace('T', " "),
        });
    }
    // No summary: a run in progress, or one that was killed.
    let config = crate::config::load(&path.join(folder::CONFIG)).ok()?;
    let h = history::read_csv(&path.join(folder::METRICS)).unwrap_or_default();
    let last = h.last();
    Some(RunRow {
        path: path.to_path_buf(),
        job: config.name().to_string(),
        status: "incomplete".to_string(),
        epochs: format!("{}/{}", last.map_or(0, |e| e.epoch), config.epochs),
        valid_loss: last.map(|e| e.valid.loss),
        valid_accuracy: last.and_then(|e| e.valid.accuracy),
        train_seconds: None,
        steps_per_s: None,
        device: String::new(),
        finished: String::new(),
    })
}

/// The runs directly under `dir` (or `dir` itself, if it is a run), oldest first.
pub fn list(dir: &Path) -> Result<Vec<RunRow>> {
    if dir.join(folder::CONFIG).is_file() {
        return Ok(row(dir).into_iter().collect());
    }
    let entries = std::fs::read_dir(dir)
        .map_err(|e| crate::error::EmberError::file(dir, crate::fs::describe_io(&e)))?;
    let mut rows: Vec<(std::time::SystemTime, RunRow)> = entries
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| {
            let modified = e.metadata().and_then(|m| m.modified()).ok()?;
            Some((modified, row(&e.path())?))
        })
        .collect();
    // A sweep's trials in their numbered order, other runs in the order they were made.
    if dir.join(folder::SWEEP).is_file() {
        rows.sort_by(|a, b| a.1.path.cmp(&b.1.path));
    } else {
        rows.sort_by_key(|(t, _)| *t);
    }
    Ok(rows.into_iter().map(|(_, r)| r).collect())
}

/// The table as text, columns aligned.
pub fn table(rows: &[RunRow]) -> String {
    let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map(f).unwrap_or_else(|| "-".into());
    let mut cells = vec![
        [
            "run",
            "job",
            "status",
            "epochs",
            "valid loss",
            "valid acc",
            "train s",
            "steps/s",
            "device",
            "finished",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for r in rows {
        cells.push(vec![
            r.path.display().to_string(),
            r.job.clone(),
            r.status.clone(),
            r.epochs.clone(),
            opt(r.valid_loss, &|v| format!("{v:.4}")),
            opt(r.valid_accuracy, &|v| format!("{:.2} %", 100.0 * v)),
            opt(r.train_seconds, &|v| format!("{v:.1}")),
            opt(r.steps_per_s, &|v| format!("{v:.0}")),
            r.device.clone(),
            r.finished.clone(),
        ]);
    }
    let widths: Vec<usize> = (0..cells[0].len())
        .map(|c| {
            cells
                .iter()
                .map(|row| row[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    cells
        .iter()
        .map(|row| {
            row.iter()
                .zip(&widths)
                .map(|(cell, w)| format!("{cell:<w$}"))
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `ember runs`: the table of the runs under `dir`, or a line saying there are none.
pub fn report(dir: &Path) -> Result<String> {
    let rows = list(dir)?;
    Ok(if rows.is_empty() {
        format!("no runs in {}", dir.display())
    } else {
        table(&rows)
    })
}
