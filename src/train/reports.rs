//! When the strategies hand their figures to Burn's event processor (the progress bar).
//!
//! The processor runs on a thread of its own, and every event wakes it. A run of short epochs
//! (linear-scalar's last 13 ms) sent four events an epoch, for a bar that redraws a few times a
//! second: sending fewer cut that run's wall time by about 6 %. So the figures go out at most
//! once per reporting interval, across epoch boundaries, plus the last step of the last epoch;
//! an epoch that ends between two reports sends nothing. The strategies still read the figures
//! from the device at every epoch's end, for the NaN guard and metrics.csv.
//!
//! This suits the processor ember sets up: a renderer and a null metric logger. Burn's own
//! metric loggers number epochs by counting `EndEpoch` events, so one of those would need every
//! epoch's end.

use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct ReportClock {
    /// `None`: one report at the end of each epoch, and none within.
    every: Option<Duration>,
    state: Mutex<State>,
}

struct State {
    last: Instant,
    /// Whether the current epoch has sent a training report, so its end and its validation
    /// figures go out too.
    epoch_reported: bool,
}

impl ReportClock {
    /// Reports every `every`; while kernel launches are counted (`device::launches`), only at
    /// each epoch's end, so that the launches counted within an epoch are its steps' own.
    pub fn new(every: Option<Duration>) -> Self {
        let every = every.filter(|_| !crate::device::launches::enabled());
        let state = State {
            last: Instant::now(),
            epoch_reported: false,
        };
        Self {
            every,
            state: Mutex::new(state),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock only means a panic elsewhere; the two fields are still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a step's figures go to the processor: `epoch_end` and `run_end` say whether the
    /// step is the last of its epoch and of the run.
    pub fn step_due(&self, epoch_end: bool, run_end: bool) -> bool {
        let mut s = self.state();
        let due = run_end
            || match self.every {
                Some(every) => s.last.elapsed() >= every,
                None => epoch_end,
            };
        if due {
            s.last = Instant::now();
            s.epoch_reported = true;
        }
        due
    }

    /// Whether the current epoch's end goes to the processor (when one of its steps did).
    pub fn epoch_reported(&self) -> bool {
        self.state().epoch_reported
    }

    /// Whether the epoch's validation figures go to the processor; the next epoch starts
    /// unreported.
    pub fn take_epoch(&self) -> bool {
        std::mem::take(&mut self.state().epoch_reported)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_epochs_share_one_report_per_interval() {
        let clock = ReportClock::new(Some(Duration::from_secs(3600)));
        assert!(
            !clock.step_due(true, false),
            "an epoch end inside the interval"
        );
        assert!(!clock.take_epoch());
        assert!(clock.step_due(true, true), "the run's last step");
        assert!(clock.epoch_reported());
        assert!(clock.take_epoch());
        assert!(!clock.epoch_reported());
    }

    #[test]
    fn without_an_interval_each_epoch_end_reports() {
        let clock = ReportClock::new(None);
        assert!(!clock.step_due(false, false));
        assert!(clock.step_due(true, false));
        assert!(clock.take_epoch());
    }

    #[test]
    fn an_elapsed_interval_reports_within_an_epoch() {
        let clock = ReportClock::new(Some(Duration::ZERO));
        assert!(clock.step_due(false, false));
        assert!(clock.epoch_reported());
    }
}
