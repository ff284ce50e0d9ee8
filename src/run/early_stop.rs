//! Early stopping, computed from the run's history (which a resumed run restores), as Keras'
//! `EarlyStopping`: an epoch improves on the best so far when its metric is better by more than
//! `min_delta`; the run stops after `patience` epochs without an improvement. Burn's
//! `MetricEarlyStoppingStrategy` has no `min_delta`, keeps no state across a resume, and reads
//! metrics that ember's logger does not give it.

use crate::config::{EarlyStopping, Monitor};
use crate::record::EpochRecord;

/// What the history says: the best epoch so far, and whether to stop now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub best_epoch: usize,
    pub stop: bool,
}

fn value(r: &EpochRecord, metric: Monitor) -> Option<f64> {
    match metric {
        Monitor::ValidLoss => Some(r.valid.loss),
        Monitor::ValidAccuracy => r.valid.accuracy,
        Monitor::ValidMae => r.valid.mae,
        Monitor::ValidR2 => r.valid.r2,
    }
}

/// The decision after the last epoch of `history`; `None` before the first epoch.
pub fn decide(history: &[EpochRecord], rule: &EarlyStopping) -> Option<Decision> {
    let mut best: Option<(usize, f64)> = None;
    let mut waited = 0;
    for r in history {
        let Some(v) = value(r, rule.metric) else {
            continue;
        };
        let improves = match best {
            None => true,
            Some((_, b)) if rule.metric.higher_is_better() => v > b + rule.min_delta,
            Some((_, b)) => v < b - rule.min_delta,
        };
        if improves {
            best = Some((r.epoch, v));
            waited = 0;
        } else {
            waited += 1;
        }
    }
    best.map(|(best_epoch, _)| Decision {
        best_epoch,
        stop: waited >= rule.patience,
    })
}

/// The epoch whose weights a run's final model holds: the best epoch where early stopping
/// restores it, else the last; `None` before the first epoch.
pub fn model_epoch(history: &[EpochRecord], rule: Option<&EarlyStopping>) -> Option<usize> {
    let restored = rule
        .filter(|r| r.restore_best)
        .and_then(|r| decide(history, r))
        .map(|d| d.best_epoch);
    restored.or_else(|| history.last().map(|r| r.epoch))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::SplitRecord;

    fn history(losses: &[f64]) -> Vec<EpochRecord> {
        let split = |loss| SplitRecord {
            loss,
            accuracy: None,
            seconds: 1.0,
            steps: 1,
            mae: None,
            r2: None,
            lr: None,
        };
        losses
            .iter()
            .enumerate()
            .map(|(i, &l)| EpochRecord {
                epoch: i + 1,
                train: split(1.0),
                valid: split(l),
            })
            .collect()
    }

    #[test]
    fn stops_after_patience_epochs_without_an_improvement_beyond_min_delta() {
        let rule = EarlyStopping {
            metric: Monitor::ValidLoss,
            patience: 2,
            min_delta: 0.05,
            restore_best: false,
        };
        let h = history(&[1.0, 0.8, 0.78, 0.9, 0.7, 0.69, 0.68]);
        let at = |n: usize| decide(&h[..n], &rule).unwrap();
        assert_eq!(
            at(3),
            Decision {
                best_epoch: 2,
                stop: false
            }
        );
        assert_eq!(
            at(4),
            Decision {
                best_epoch: 2,
                stop: true
            }
        );
        let rule = EarlyStopping {
            patience: 3,
            ..rule
        };
        let at = |n: usize| decide(&h[..n], &rule).unwrap();
        assert_eq!(
            at(5),
            Decision {
                best_epoch: 5,
                stop: false
            }
        );
        assert_eq!(
            at(7),
            Decision {
                best_epoch: 5,
                stop: false
            }
        );
        assert_eq!(decide(&[], &rule), None);
        assert_eq!(model_epoch(&h, Some(&rule)), Some(7));
        let restoring = EarlyStopping {
            restore_best: true,
            ..rule
        };
        assert_eq!(model_epoch(&h, Some(&restoring)), Some(5));
        assert_eq!(model_epoch(&h, None), Some(7));
        assert_eq!(model_epoch(&[], Some(&restoring)), None);
    }
}
