//! `ember sweep report`: the sweep's configurations ranked by a validation metric (each one's
//! mean ± std over its seeds, failed trials marked), written as a table, `sweep.json` and
//! `sweep.png`.

use super::folder::{REPORT_JSON, REPORT_PNG, SweepDir, TrialState};
use super::legible;
use super::plan::Trial;
use crate::error::Result;
use crate::input_err;
use crate::run::summary::Summary;
use serde::Serialize;
use std::path::Path;

/// What the trials are ranked by: the best validation value each reached.
#[derive(Debug, Clone, Copy, PartialEq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RankBy {
    /// Best valid accuracy, higher first (classifiers).
    Accuracy,
    /// Best valid loss, lower first.
    Loss,
}

/// One trial's result.
#[derive(Debug, Serialize)]
pub struct TrialResult {
    pub index: usize,
    pub unit: usize,
    /// The swept values but the seed, as printed (`overrides` has every digit).
    pub configuration: String,
    /// The same, every digit kept: what groups the trials of one configuration.
    #[serde(skip)]
    key: String,
    pub overrides: Vec<String>,
    /// complete, diverged, failed, crashed, incomplete, running or not run.
    pub status: String,
    /// The ranking metric's best value (complete trials only).
    pub value: Option<f64>,
    pub epochs_done: usize,
    pub run: String,
}

/// One configuration: the trials that differ only in seed (and fold).
#[derive(Debug, Serialize)]
pub struct ConfigResult {
    /// The swept values but the seed, as printed.
    pub configuration: String,
    pub trials: Vec<usize>,
    /// Over the complete trials.
    pub mean: Option<f64>,
    pub std: Option<f64>,
    pub complete: usize,
    /// `trial N status` for each trial that did not complete.
    pub failed: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct SweepReport {
    pub sweep: String,
    pub metric: RankBy,
    pub axes: Vec<String>,
    /// Best first; configurations with no complete trial last.
    pub configurations: Vec<ConfigResult>,
    pub trials: Vec<TrialResult>,
}

/// Reads the sweep folder, writes `sweep.json` and `sweep.png` into it, and returns the table.
pub fn report(path: &Path, metric: Option<RankBy>) -> Result<String> {
    let (dir, plan) = SweepDir::open(path)?;
    let summaries: Vec<Option<Summary>> =
        plan.trials.iter().map(|t| dir.summary(t.index)).collect();
    let any_accuracy = summaries
        .iter()
        .flatten()
        .any(|s| s.best.as_ref().is_some_and(|b| b.valid_accuracy.is_some()));
    let metric = match (metric, any_accuracy) {
        (Some(RankBy::Accuracy), false) => {
            return Err(input_err!(
                "--metric accuracy: no trial of {} reports an accuracy; use --metric loss",
                path.display()
            ));
        }
        (Some(m), _) => m,
        (None, true) => RankBy::Accuracy,
        (None, false) => RankBy::Loss,
    };
    let trials: Vec<TrialResult> = plan
        .trials
        .iter()
        .zip(&summaries)
        .map(|(t, s)| trial_result(&dir, t, s.as_ref(), metric))
        .collect();
    let report = SweepReport {
        sweep: plan.name.clone(),
        metric,
        axes: plan.axes.clone(),
        configurations: rank(&trials, metric),
        trials,
    };
    let json = serde_json::to_vec_pretty(&report).expect("a report serialises");
    crate::fs::write_atomic(&dir.file(REPORT_JSON), &json)?;
    // The chart is not essential: where it cannot be drawn, one warning, and the table stands.
    let chart = match super::chart::draw(&dir, &plan, &report, &dir.file(REPORT_PNG)) {
        Ok(()) => format!(", {}", dir.file(REPORT_PNG).display()),
        Err(e) => {
            crate::console::warn_once(
                "sweep chart",
                &format!("{e}; the report goes on without it"),
            );
            String::new()
        }
    };
    Ok(format!(
        "{}\n-> {}{chart}",
        report.table(),
        dir.file(REPORT_JSON).display(),
    ))
}

fn trial_result(
    dir: &SweepDir,
    t: &Trial,
    summary: Option<&Summary>,
    metric: RankBy,
) -> TrialResult {
    let exit = dir.exit_code(t.index).filter(|c| *c != 0);
    let status = match dir.state_from(t.index, summary.cloned()) {
        TrialState::Ended(s) => s.status,
        TrialState::Busy => "running".to_string(),
        TrialState::Unfinished => "interrupted".to_string(),
        // No summary and no checkpoint: the process crashed or was killed.
        TrialState::New | TrialState::Lost => match exit {
            Some(code) => format!("crashed (exit {code})"),
            None if dir.trial(t.index).exists() => "incomplete".to_string(),
            None => "not run".to_string(),
        },
    };
    let best = summary.and_then(|s| s.best.as_ref());
    let value = best
        .and_then(|b| match metric {
            RankBy::Accuracy => b.valid_accuracy,
            RankBy::Loss => Some(b.valid_loss),
        })
        .filter(|v| status == "complete" && v.is_finite());
    TrialResult {
        index: t.index,
        unit: t.unit,
        configuration: t.configuration_label(),
        key: t.configuration(),
        overrides: t.overrides.clone(),
        status,
        value,
        epochs_done: summary.map_or(0, |s| s.epochs_done),
        run: dir.trial(t.index).display().to_string(),
    }
}

/// The configurations in the order of their first trial (the plan's), then sorted best first.
fn rank(trials: &[TrialResult], metric: RankBy) -> Vec<ConfigResult> {
    let mut firsts: Vec<&TrialResult> = Vec::new();
    for t in trials {
        if !firsts.iter().any(|f| f.key == t.key) {
            firsts.push(t);
        }
    }
    let mut configs: Vec<ConfigResult> = firsts
        .into_iter()
        .map(|first| {
            let mine: Vec<&TrialResult> = trials.iter().filter(|t| t.key == first.key).collect();
            let values: Vec<f64> = mine.iter().filter_map(|t| t.value).collect();
            let (mean, std) = mean_std(&values);
            ConfigResult {
                configuration: first.configuration.clone(),
                trials: mine.iter().map(|t| t.index).collect(),
                mean,
                std,
                complete: values.len(),
                failed: mine
                    .iter()
                    .filter(|t| t.value.is_none())
                    .map(|t| format!("trial {} {}", t.index, t.status))
                    .collect(),
            }
        })
        .collect();
    let key = |c: &ConfigResult| match (c.mean, metric) {
        (None, _) => f64::INFINITY,
        (Some(m), RankBy::Accuracy) => -m,
        (Some(m), RankBy::Loss) => m,
    };
    configs.sort_by(|a, b| key(a).total_cmp(&key(b)));
    configs
}

/// The mean and the sample standard deviation (none for fewer than two values).
fn mean_std(values: &[f64]) -> (Option<f64>, Option<f64>) {
    let n = values.len() as f64;
    if values.is_empty() {
        return (None, None);
    }
    let mean = values.iter().sum::<f64>() / n;
    let std = (values.len() > 1)
        .then(|| (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt());
    (Some(mean), std)
}

impl SweepReport {
    /// The ranking as a table.
    pub fn table(&self) -> String {
        let what = match self.metric {
            RankBy::Accuracy => "best valid accuracy",
            RankBy::Loss => "best valid loss",
        };
        let folds_set = format!("{}=", super::plan::FOLDS);
        let folds =
            (self.trials.iter()).any(|t| t.overrides.iter().any(|o| o.starts_with(&folds_set)));
        let (over, column) = match folds {
            true => ("seeds and folds", "runs "),
            false => ("seeds", "seeds"),
        };
        let mut out = format!(
            "sweep {}: {} trials, {} configurations, ranked by {what} (mean ± std over {over})\n\
             rank  {:<20}  {column}  configuration",
            self.sweep,
            self.trials.len(),
            self.configurations.len(),
            what
        );
        for (i, c) in self.configurations.iter().enumerate() {
            let value = c.mean.map_or("-".to_string(), |m| {
                legible::mean_std(self.metric, m, c.std)
            });
            let failed = match c.failed.is_empty() {
                true => String::new(),
                false => format!("  [failed: {}]", c.failed.join(", ")),
            };
            out.push_str(&format!(
                "\n{:>4}  {value:<20}  {:>2}/{:<2}  {}{failed}",
                i + 1,
                c.complete,
                c.trials.len(),
                c.configuration
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_sample_std() {
        assert_eq!(mean_std(&[]), (None, None));
        assert_eq!(mean_std(&[2.0]), (Some(2.0), None));
        let (m, s) = mean_std(&[1.0, 2.0, 3.0]);
        assert_eq!(m, Some(2.0));
        assert!((s.unwrap() - 1.0).abs() < 1e-12);
    }
}
