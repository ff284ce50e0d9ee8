//! Burn metrics fed with epoch totals that were accumulated on the device. Burn's own
//! `LossMetric` and `AccuracyMetric` read tensors back to the host on every step; ember's
//! strategy sends a report only a few times a second, carrying the epoch's running mean, and
//! these metrics simply show it.

use crate::model::StepStats;
use burn::train::metric::{
    Adaptor, Metric, MetricAttributes, MetricMetadata, MetricName, Numeric, NumericAttributes,
    NumericEntry, SerializedEntry,
};
use std::sync::Arc;

impl Adaptor<StepStats> for StepStats {
    fn adapt(&self) -> StepStats {
        *self
    }
}

/// Which running value a metric shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Loss,
    Accuracy,
}

/// The epoch's running mean loss, or its running accuracy in percent.
#[derive(Clone)]
pub struct RunningMetric {
    kind: Kind,
    name: MetricName,
    value: Option<f64>,
}

impl RunningMetric {
    pub fn loss() -> Self {
        Self {
            kind: Kind::Loss,
            name: Arc::new("Loss".to_string()),
            value: None,
        }
    }

    pub fn accuracy() -> Self {
        Self {
            kind: Kind::Accuracy,
            name: Arc::new("Accuracy".to_string()),
            value: None,
        }
    }
}

impl Metric for RunningMetric {
    type Input = StepStats;

    fn name(&self) -> MetricName {
        self.name.clone()
    }

    fn attributes(&self) -> MetricAttributes {
        NumericAttributes {
            unit: (self.kind == Kind::Accuracy).then(|| "%".to_string()),
            higher_is_better: self.kind == Kind::Accuracy,
        }
        .into()
    }

    fn update(&mut self, item: &StepStats, _metadata: &MetricMetadata) -> SerializedEntry {
        let value = match self.kind {
            Kind::Loss => Some(item.loss),
            Kind::Accuracy => item.accuracy.map(|a| 100.0 * a),
        };
        if value.is_some() {
            self.value = value;
        }
        let v = self.value.unwrap_or(f64::NAN);
        let formatted = match self.kind {
            Kind::Loss => format!("{}: {v:.4}", self.name),
            Kind::Accuracy => format!("{}: {v:.2} %", self.name),
        };
        SerializedEntry::new(formatted, v.to_string())
    }

    fn clear(&mut self) {
        self.value = None;
    }
}

impl Numeric for RunningMetric {
    fn value(&self) -> NumericEntry {
        NumericEntry::Value(self.value.unwrap_or(f64::NAN))
    }

    fn running_value(&self) -> NumericEntry {
        self.value()
    }
}

/// Burn's metric logger writes a file per metric and epoch, row by row; ember keeps its own
/// per-epoch `metrics.csv`, so this logger keeps nothing.
pub struct NullLogger;

impl burn::train::logger::MetricLogger for NullLogger {
    fn log(
        &mut self,
        _: burn::train::metric::store::MetricsUpdate,
        _: usize,
        _: &burn::train::metric::store::Split,
    ) {
    }

    fn read_numeric(
        &mut self,
        _: &str,
        _: usize,
        _: &burn::train::metric::store::Split,
    ) -> std::result::Result<Vec<burn::train::metric::NumericEntry>, String> {
        Ok(Vec::new())
    }

    fn log_metric_definition(&mut self, _: burn::train::metric::MetricDefinition) {}

    fn log_epoch_summary(&mut self, _: burn::train::metric::store::EpochSummary) {}
}
