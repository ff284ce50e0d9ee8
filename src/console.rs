//! What ember prints. Lines go to stdout and never panic on a closed pipe (`ember ... | head`);
//! in a terminal a live progress bar on stderr shows the epoch, step, steps/s, ETA, the running
//! loss and the last validation accuracy. The bar is Burn `MetricsRenderer`, so the Learner feeds
//! it; Burn's own TUI is available with `--tui` (it redraws from a thread that spins on a core,
//! which costs about half the speed on a 2-core machine).

use burn::train::LearnerSummary;
use burn::train::metric::{MetricDefinition, MetricId};
use burn::train::renderer::{
    EvaluationName, EvaluationProgress, MetricState, MetricsRenderer, MetricsRendererEvaluation,
    MetricsRendererTraining, ProgressType, TrainingProgress,
};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verbosity {
    Quiet,
    Normal,
    Verbose,
}

/// Output of one command: plain lines, plus the live bar when stderr is a terminal.
#[derive(Clone)]
pub struct Console {
    pub verbosity: Verbosity,
    bar: ProgressBar,
}

impl Console {
    pub fn new(verbosity: Verbosity) -> Self {
        let live = verbosity > Verbosity::Quiet && std::io::stderr().is_terminal();
        let bar = if live {
            let bar = ProgressBar::with_draw_target(Some(1), ProgressDrawTarget::stderr_with_hz(8));
            bar.set_style(
                ProgressStyle::with_template("{prefix} [{bar:24}] {msg}")
                    .expect("the template is valid")
                    .progress_chars("=> "),
            );
            bar
        } else {
            ProgressBar::hidden()
        };
        Self { verbosity, bar }
    }

    /// A line on stdout (the epoch lines, results), kept above the live bar.
    pub fn line(&self, text: &str) {
        if self.verbosity == Verbosity::Quiet {
            return;
        }
        self.always(text);
    }

    /// A line printed even with `--quiet` (the final summary).
    pub fn always(&self, text: &str) {
        self.bar.suspend(|| {
            let mut out = std::io::stdout().lock();
            // A closed pipe is not an error worth stopping a training run for.
            let _ = writeln!(out, "{text}");
            let _ = out.flush();
        });
    }

    /// A line printed only with `--verbose`, on stderr.
    pub fn detail(&self, text: &str) {
        if self.verbosity == Verbosity::Verbose {
            self.bar.suspend(|| {
                let _ = writeln!(std::io::stderr(), "{text}");
            });
        }
    }

    /// A short status on the live bar (data loading, uploading).
    pub fn status(&self, text: &str) {
        if self.verbosity > Verbosity::Quiet && !self.bar.is_hidden() {
            self.bar.set_prefix(text.to_string());
            self.bar.set_message("");
            self.bar.tick();
        }
    }

    /// The live bar, as a counter of `prefix` work (decoding images); hidden when the bar is.
    pub fn counter(&self, prefix: &str) -> ProgressBar {
        if self.verbosity > Verbosity::Quiet && !self.bar.is_hidden() {
            self.bar.set_prefix(prefix.to_string());
            self.bar.set_position(0);
            self.bar.clone()
        } else {
            ProgressBar::hidden()
        }
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }

    /// The renderer that drives the live bar during training.
    pub fn renderer(&self, epochs: usize, steps_per_epoch: usize) -> BarRenderer {
        BarRenderer {
            bar: self.bar.clone(),
            names: HashMap::new(),
            train: HashMap::new(),
            valid: HashMap::new(),
            epochs,
            steps_per_epoch: steps_per_epoch.max(1),
            rate: None,
            last: None,
        }
    }
}

/// A file ember can do without (curves, charts, TensorBoard events) could not be written:
/// `warning: MESSAGE` on stderr, once per `kind` in a process, however often it recurs.
pub fn warn_once(kind: &'static str, message: &str) {
    static WARNED: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    let mut warned = WARNED.lock().expect("warnings lock");
    if !warned.contains(&kind) {
        warned.push(kind);
        let _ = writeln!(std::io::stderr(), "warning: {message}");
    }
}

/// Formats seconds as `1h02m`, `3m05s` or `12s`.
pub fn duration(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// Burn renderer for the live bar.
pub struct BarRenderer {
    bar: ProgressBar,
    names: HashMap<MetricId, String>,
    train: HashMap<String, f64>,
    valid: HashMap<String, f64>,
    epochs: usize,
    steps_per_epoch: usize,
    /// Smoothed steps per second of the whole run (validation and checkpoints included, as
    /// the ETA needs), so a little under the epoch lines' training-only rate.
    rate: Option<f64>,
    /// (steps done in the run, when) at the previous training report, which may lie epochs
    /// back: runs of short epochs report once per interval, not once per epoch.
    last: Option<(usize, Instant)>,
}

impl BarRenderer {
    fn store(&mut self, valid: bool, state: MetricState) {
        if let MetricState::Numeric(entry, value) = state
            && let Some(name) = self.names.get(&entry.metric_id)
        {
            let map = if valid {
                &mut self.valid
            } else {
                &mut self.train
            };
            map.insert(name.clone(), value.current());
        }
    }
}

impl MetricsRendererTraining for BarRenderer {
    fn update_train(&mut self, state: MetricState) {
        self.store(false, state);
    }

    fn update_valid(&mut self, state: MetricState) {
        self.store(true, state);
    }

    fn render_train(&mut self, item: TrainingProgress, _: Vec<ProgressType>) {
        let epoch = item.global_progress.items_processed;
        let step = item.iteration.unwrap_or(0);
        let now = Instant::now();
        let done = (epoch.saturating_sub(1)) * self.steps_per_epoch + step;
        if let Some((d, t)) = self.last
            && done > d
        {
            let r = (done - d) as f64 / now.duration_since(t).as_secs_f64().max(1e-9);
            self.rate = Some(self.rate.map_or(r, |old| 0.7 * old + 0.3 * r));
        }
        self.last = Some((done, now));
        let left = (self.epochs * self.steps_per_epoch).saturating_sub(done);
        let mut msg = format!("step {step}/{}", self.steps_per_epoch);
        if let Some(r) = self.rate {
            msg += &format!(" · {r:.0} steps/s · ETA {}", duration(left as f64 / r));
        }
        if let Some(l) = self.train.get("Loss") {
            msg += &format!(" · loss {l:.4}");
        }
        if let Some(a) = self.valid.get("Accuracy") {
            msg += &format!(" · valid acc {a:.2} %");
        }
        self.bar
            .set_prefix(format!("epoch {epoch}/{}", self.epochs));
        self.bar.set_length(self.steps_per_epoch as u64);
        self.bar.set_position(step as u64);
        self.bar.set_message(msg);
    }

    fn render_valid(&mut self, item: TrainingProgress, _: Vec<ProgressType>) {
        let epoch = item.global_progress.items_processed;
        self.bar
            .set_prefix(format!("epoch {epoch}/{}", self.epochs));
        self.bar.set_message("validating");
    }

    fn on_train_end(
        &mut self,
        _: Option<LearnerSummary>,
    ) -> Result<(), Box<dyn std::error::Error>> {
        self.bar.finish_and_clear();
        Ok(())
    }
}

impl MetricsRendererEvaluation for BarRenderer {
    fn update_test(&mut self, _: EvaluationName, _: MetricState) {}

    fn render_test(&mut self, _: EvaluationProgress, _: Vec<ProgressType>) {}

    fn on_test_end(&mut self, _: Option<LearnerSummary>) -> Result<(), Box<dyn std::error::Error>> {
        Ok(())
    }
}

impl MetricsRenderer for BarRenderer {
    fn manual_close(&mut self) {
        self.bar.finish_and_clear();
    }

    fn register_metric(&mut self, definition: MetricDefinition) {
        self.names.insert(definition.metric_id, definition.name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(5.4), "5s");
        assert_eq!(duration(185.0), "3m05s");
        assert_eq!(duration(3720.0), "1h02m");
    }
}
