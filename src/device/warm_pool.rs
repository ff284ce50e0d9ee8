//! Keeps the CPU pool's other workers awake while ember runs on it, as OpenMP's runtimes do
//! for PyTorch and XLA (an active wait policy).
//!
//! A training step hands work to the pool ten or more times: each product split in blocks,
//! each element-wise pass split in chunks. Between those hand-offs the driving thread runs
//! Burn's serial bookkeeping, and a rayon worker with nothing to do yields a few dozen times and
//! then sleeps. Waking it is a futex call and, on a VM, tens of microseconds; by then the
//! driving thread has often done the worker's share itself. A 2-thread tabular-mlp step spent
//! about 15 % of its samples in the kernel's scheduler this way, and ran no faster than one
//! thread.
//!
//! So each other worker runs a loop that takes the pool's jobs as they appear
//! (`rayon::yield_now`), spinning between them and then yielding its core to any thread that
//! wants it. After [`IDLE_BEFORE_NAPS`] without a job (reading data, writing a checkpoint) it
//! naps between looks, longer the longer it has been idle ([`nap_after`]), so an idle run
//! costs almost nothing; the first hand-off after a nap runs on the driving thread alone until
//! the worker looks again. `EMBER_WAIT_POLICY=passive` turns all this off.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Spinning this long without a job: longer than any serial stretch inside a training step.
const IDLE_BEFORE_NAPS: Duration = Duration::from_millis(5);

/// The shortest nap between looks once idle, and the longest.
const NAP: Duration = Duration::from_micros(200);
const LONGEST_NAP: Duration = Duration::from_millis(2);

/// The nap between looks after `idle` without a job: a sixteenth of it, from [`NAP`] to
/// [`LONGEST_NAP`]. A worker idle for a whole run (linear-scalar's second: nothing of its 20 µs
/// step splits) then wakes 500 times a second, not 5,000; at 5,000 the run's 2-thread steps were
/// 2 to 5 % slower than with the worker asleep (`EMBER_WAIT_POLICY=passive`; a Zen 4 VM, where
/// each wake goes through the hypervisor). A worker idle between epochs rejoins at most a
/// sixteenth of its idle stretch late.
fn nap_after(idle: Duration) -> Duration {
    (idle / 16).clamp(NAP, LONGEST_NAP)
}

thread_local! {
    /// Whether this thread is driving a pool whose other workers are kept awake.
    static WARM: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Sets the flag that ends the workers' loops when `f` returns or unwinds.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
        WARM.set(false);
    }
}

/// `EMBER_WAIT_POLICY=passive` lets idle workers sleep at once (rayon's own way), as
/// `OMP_WAIT_POLICY=passive` does for OpenMP: for a machine shared with other work.
pub const WAIT_POLICY_ENV: &str = "EMBER_WAIT_POLICY";

/// Runs `f` on the current pool worker with the pool's other workers kept awake. Not where the
/// pool has more threads than the machine has cores: there a spinning worker would take the
/// driving thread's core.
///
/// Called where the CPU backend's work begins, from the thread that drives it, while the
/// pool's other workers have no job of their own: a worker that took its loop inside a job it
/// had stolen would hold that job until the loop ends. A nested call runs `f` as it is.
pub fn with_warm_workers<T>(f: impl FnOnce() -> T) -> T {
    let threads = rayon::current_num_threads();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let passive = std::env::var(WAIT_POLICY_ENV).is_ok_and(|v| v.eq_ignore_ascii_case("passive"));
    let Some(driver) = rayon::current_thread_index() else {
        return f();
    };
    if threads < 2 || threads > cores || passive || WARM.get() {
        return f();
    }
    WARM.set(true);
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    rayon::spawn_broadcast(move |ctx| {
        // The driving thread would pick up its own copy while it waits for a job of its own:
        // it must not stay in the loop, which only it could end.
        if ctx.index() != driver {
            take_jobs_until(&flag);
        }
    });
    let _stop = StopOnDrop(stop);
    f()
}

/// Runs the pool's jobs as they appear, spinning between them, until `stop` is set.
fn take_jobs_until(stop: &AtomicBool) {
    let (mut last_job, mut idle_looks, mut napping) = (Instant::now(), 0u32, false);
    while !stop.load(Ordering::Acquire) {
        match rayon::yield_now() {
            Some(rayon::Yield::Executed) => {
                (last_job, idle_looks, napping) = (Instant::now(), 0, false);
            }
            Some(rayon::Yield::Idle) => {
                idle_looks = idle_looks.wrapping_add(1);
                // The clock only every 64 looks: reading it cost more than a look.
                napping = napping || idle_looks % 64 == 0 && last_job.elapsed() >= IDLE_BEFORE_NAPS;
                if napping {
                    std::thread::sleep(nap_after(last_job.elapsed()));
                } else if idle_looks > 64 {
                    // Past the first looks, give the core to any other thread that wants it
                    // (tests and other programs beside a run): a microsecond when none does.
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(threads: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
    }

    #[test]
    fn the_other_worker_takes_jobs_and_is_free_again_after() {
        let pool = std::sync::Arc::new(pool(2));
        let threads = pool.install(|| {
            with_warm_workers(|| {
                let wait = || std::thread::sleep(Duration::from_millis(20));
                rayon::join(
                    || (wait(), rayon::current_thread_index()).1,
                    rayon::current_thread_index,
                )
            })
        });
        assert_ne!(
            threads.0, threads.1,
            "the second half ran on the same thread"
        );
        assert_eq!(every_thread_answers(pool), [0, 1]);
    }

    /// The index of each of the pool's threads, asked of each: a worker still in its loop
    /// would never answer, so this fails after 10 s rather than hanging.
    fn every_thread_answers(pool: std::sync::Arc<rayon::ThreadPool>) -> Vec<usize> {
        let (send, answers) = std::sync::mpsc::channel();
        std::thread::spawn(move || send.send(pool.broadcast(|ctx| ctx.index())));
        let mut seen = answers.recv_timeout(Duration::from_secs(10)).unwrap();
        seen.sort();
        seen
    }

    #[test]
    fn naps_grow_with_the_idle_stretch_within_their_bounds() {
        let ms = Duration::from_millis;
        assert_eq!(nap_after(ms(2)), NAP);
        assert_eq!(nap_after(ms(16)), ms(1));
        assert_eq!(nap_after(ms(1000)), LONGEST_NAP);
    }

    #[test]
    fn a_panic_in_the_run_stops_the_loop_and_reaches_the_caller() {
        let pool = std::sync::Arc::new(pool(2));
        let caught = pool.install(|| {
            std::panic::catch_unwind(|| with_warm_workers(|| panic!("the run failed")))
        });
        assert!(caught.is_err());
        assert_eq!(every_thread_answers(pool), [0, 1]);
    }
}
