//! Learning-rate schedules, stepped once per batch and given in epochs by the config: constant,
//! step decay (Burn's `StepLrScheduler`), and cosine decay with an optional linear warm-up
//! (ember's own: Burn's `ComposedLrScheduler` runs its parts side by side rather than one after
//! the other, and Burn's cosine restarts after its period). The schedule's length is fixed in
//! the resolved config, so a run resumed with a larger `--epochs` keeps it (and stays at the
//! final rate past its end).

use crate::config::ScheduleSpec;
use burn::lr_scheduler::LrScheduler;
use burn::lr_scheduler::step::{StepLrScheduler, StepLrSchedulerConfig};
use burn::prelude::Backend;

/// The learning rate of every step: one type for every schedule, so that the Learner is
/// compiled once.
#[derive(Clone, Debug)]
pub enum Schedule {
    Constant(f64),
    Step(StepLrScheduler),
    Cosine(WarmupCosine),
}

/// Linear warm-up from `base / warmup` to `base` over `warmup` steps, then a half cosine from
/// `base` down to `min` at step `total`, then `min`.
#[derive(Clone, Debug)]
pub struct WarmupCosine {
    base: f64,
    min: f64,
    warmup: usize,
    total: usize,
    /// Steps taken so far.
    done: usize,
}

impl WarmupCosine {
    /// The rate of the step that follows `done` steps.
    fn rate(&self, done: usize) -> f64 {
        if done < self.warmup {
            return self.base * (done + 1) as f64 / self.warmup as f64;
        }
        let span = self.total.saturating_sub(self.warmup).max(1);
        let progress = ((done - self.warmup) as f64 / span as f64).min(1.0);
        self.min + (self.base - self.min) * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos())
    }
}

/// Steps in `epochs` epochs, at least one.
fn steps(epochs: f64, steps_per_epoch: usize) -> usize {
    ((epochs * steps_per_epoch as f64).round() as usize).max(1)
}

impl Schedule {
    /// The schedule `spec` describes for a base rate `lr` and `steps_per_epoch` batches.
    pub fn new(spec: &ScheduleSpec, lr: f64, steps_per_epoch: usize) -> Self {
        match *spec {
            ScheduleSpec::Constant => Schedule::Constant(lr),
            ScheduleSpec::Step { every, gamma } => Schedule::Step(
                StepLrSchedulerConfig::new(lr, steps(every, steps_per_epoch))
                    .with_gamma(gamma)
                    .init()
                    .expect("a step size of at least one is valid"),
            ),
            ScheduleSpec::Cosine {
                warmup,
                epochs,
                min_lr,
            } => Schedule::Cosine(WarmupCosine {
                base: lr,
                min: min_lr,
                warmup: if warmup > 0.0 {
                    steps(warmup, steps_per_epoch)
                } else {
                    0
                },
                total: steps(
                    epochs.expect("the schedule length is fixed when a run starts"),
                    steps_per_epoch,
                ),
                done: 0,
            }),
        }
    }
}

impl LrScheduler for Schedule {
    /// The steps taken (for the constant schedule, nothing).
    type Record<B: Backend> = i64;

    fn step(&mut self) -> f64 {
        match self {
            Schedule::Constant(lr) => *lr,
            Schedule::Step(s) => s.step(),
            Schedule::Cosine(c) => {
                let lr = c.rate(c.done);
                c.done += 1;
                lr
            }
        }
    }

    fn to_record<B: Backend>(&self) -> i64 {
        match self {
            Schedule::Constant(_) => 0,
            Schedule::Step(s) => i64::from(LrScheduler::to_record::<B>(s)),
            Schedule::Cosine(c) => c.done as i64,
        }
    }

    fn load_record<B: Backend>(self, record: i64) -> Self {
        match self {
            Schedule::Constant(_) => self,
            Schedule::Step(s) => Schedule::Step(s.load_record::<B>(record as i32)),
            Schedule::Cosine(c) => Schedule::Cosine(WarmupCosine {
                done: record as usize,
                ..c
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;

    fn rates(mut s: Schedule, n: usize) -> Vec<f64> {
        (0..n).map(|_| s.step()).collect()
    }

    #[test]
    fn step_decay_counts_epochs_in_batches() {
        let spec = ScheduleSpec::Step {
            every: 2.0,
            gamma: 0.5,
        };
        let r = rates(Schedule::new(&spec, 1.0, 3), 13);
        assert_eq!(&r[..6], &[1.0; 6]);
        assert_eq!(&r[6..12], &[0.5; 6]);
        assert_eq!(r[12], 0.25);
    }

    #[test]
    fn warmup_then_cosine_runs_one_after_the_other_and_stays_at_the_end() {
        let spec = ScheduleSpec::Cosine {
            warmup: 1.0,
            epochs: Some(3.0),
            min_lr: 0.1,
        };
        let r = rates(Schedule::new(&spec, 1.0, 4), 20);
        assert_eq!(&r[..4], &[0.25, 0.5, 0.75, 1.0]);
        assert!((r[4] - 1.0).abs() < 1e-12, "{}", r[4]);
        assert!((r[8] - 0.55).abs() < 1e-12, "{}", r[8]); // half way: (1 + 0.1) / 2
        assert!(r[4..12].windows(2).all(|w| w[1] < w[0]));
        assert!(r[12..].iter().all(|v| (v - 0.1).abs() < 1e-12), "{r:?}");
    }

    #[test]
    fn a_restored_schedule_goes_on_where_it_stopped() {
        let spec = ScheduleSpec::Cosine {
            warmup: 0.0,
            epochs: Some(2.0),
            min_lr: 0.0,
        };
        for spec in [
            spec,
            ScheduleSpec::Step {
                every: 1.0,
                gamma: 0.1,
            },
        ] {
            let mut a = Schedule::new(&spec, 0.3, 5);
            let _ = rates(a.clone(), 0);
            for _ in 0..7 {
                a.step();
            }
            let record = a.to_record::<Flex>();
            let b = Schedule::new(&spec, 0.3, 5).load_record::<Flex>(record);
            assert_eq!(rates(a, 6), rates(b, 6));
        }
    }
}
