//! Kernel launches on a GPU device, counted as CubeCL reports them. At its profiling level
//! `minimal` CubeCL logs `Executing <kernel>` for every launch without waiting for the device
//! (`cubecl-runtime` 0.10, `logging/server.rs`); forwarded to the `log` crate, each such record
//! lands in ember's logger (`crate::logging`), which hands it to [`observe`] here. Off unless asked for
//! (`ember bench --launches`): before the first device opens, [`enable`] has
//! `cubecl_config::install` turn the logging on.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The `log` target CubeCL's forwarded log lines carry.
const TARGET: &str = "cubecl_common::config::logger";

static ON: AtomicBool = AtomicBool::new(false);
static COUNT: AtomicU64 = AtomicU64::new(0);

/// Counts launches from now on; call before the first GPU device is opened.
pub fn enable() {
    ON.store(true, Ordering::Relaxed);
    crate::logging::observe_with(observe);
}

/// Whether launches are counted.
pub fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Counts `record` when it is CubeCL's line for a launch; says whether it was one of CubeCL's
/// profiling lines (which are never printed).
fn observe(record: &log::Record) -> bool {
    if record.target() != TARGET {
        return false;
    }
    if record.args().to_string().starts_with("Executing ") {
        COUNT.fetch_add(1, Ordering::Relaxed);
    }
    true
}

/// The launches counted so far, once the count has stopped moving: CubeCL's log lines travel
/// through a channel and a thread of their own, so the caller syncs the device first and this
/// waits until no line has arrived for 50 ms (at most 5 s).
pub fn settled() -> u64 {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = COUNT.load(Ordering::Relaxed);
    let mut still_since = Instant::now();
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
        let now = COUNT.load(Ordering::Relaxed);
        if now != last {
            (last, still_since) = (now, Instant::now());
        } else if still_since.elapsed() >= Duration::from_millis(50) {
            break;
        }
    }
    last
}

/// A run's launches per step from each epoch's: the median of the epochs after the first
/// (whose steps also make the kernels' first buffers), or the first where it is the only one.
pub fn per_step(epochs: &[f64]) -> Option<f64> {
    match epochs {
        [] => None,
        [only] => Some(*only),
        [_, rest @ ..] => Some(crate::stats::median(rest.to_vec())),
    }
}

/// What the training steps between [`Meter::start`] and [`Meter::stop`] cost: kernel launches
/// (where counted) and CPU time, per step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepCost {
    pub launches: Option<f64>,
    /// CPU milliseconds of the host's threads ([`super::thread_time`]).
    pub host_ms: f64,
    /// CPU milliseconds of the device's server threads.
    pub device_ms: f64,
}

/// Measures a stretch of training steps, from a synced device to a synced device, so that the
/// launches and CPU time of exactly those steps are counted.
pub struct Meter {
    launches: Option<u64>,
    time: super::thread_time::ThreadClock,
}

impl Meter {
    /// Waits for `device` and takes the counts as they stand.
    pub fn start<B: burn::tensor::backend::Backend>(device: &B::Device) -> Meter {
        let _ = B::sync(device);
        Meter {
            launches: enabled().then(settled),
            time: super::thread_time::ThreadClock::now(),
        }
    }

    /// Waits for `device` and gives the cost of each of the `steps` since [`Meter::start`].
    pub fn stop<B: burn::tensor::backend::Backend>(
        self,
        device: &B::Device,
        steps: usize,
    ) -> StepCost {
        let _ = B::sync(device);
        let time = super::thread_time::ThreadClock::now().since(&self.time);
        let steps = steps.max(1) as f64;
        StepCost {
            launches: self
                .launches
                .map(|start| (settled() - start) as f64 / steps),
            host_ms: time.host_ns as f64 / 1e6 / steps,
            device_ms: time.device_ns as f64 / 1e6 / steps,
        }
    }
}
