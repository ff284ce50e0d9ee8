//! CPU time of this process's threads by role, from `/proc/self/task/*/schedstat` (nanoseconds
//! on a CPU): what a training step costs the host, apart from what it costs the device's own
//! server threads. CubeCL runs each GPU device's work behind threads named `DSD-<type>-<index>`
//! (compiling and launching kernels; on a software device such as lavapipe, running them too);
//! every other thread (the one that drives training, Burn's fusion stream `DSU-*`, allocators)
//! is the host's.

/// CPU nanoseconds: (host threads, device server threads).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadTime {
    pub host_ns: u64,
    pub device_ns: u64,
}

/// Each live thread's CPU time at one moment, by thread id, for [`ThreadClock::since`].
#[derive(Debug, Clone, Default)]
pub struct ThreadClock {
    /// (thread id, a device server thread, CPU nanoseconds so far), in id order.
    threads: Vec<(u32, bool, u64)>,
}

impl ThreadClock {
    /// The CPU time of every live thread of this process so far; none where `/proc` cannot
    /// tell (not Linux).
    pub fn now() -> ThreadClock {
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return ThreadClock::default();
        };
        let mut threads: Vec<(u32, bool, u64)> = tasks
            .flatten()
            .filter_map(|task| {
                let id = task.file_name().to_str()?.parse().ok()?;
                let path = task.path();
                let comm = std::fs::read_to_string(path.join("comm")).ok()?;
                let stat = std::fs::read_to_string(path.join("schedstat")).ok()?;
                let ns = stat.split_whitespace().next()?.parse().ok()?;
                Some((id, is_device_thread(comm.trim()), ns))
            })
            .collect();
        threads.sort_unstable();
        ThreadClock { threads }
    }

    /// The CPU time spent since `earlier`, thread by thread: a thread's own difference, or all
    /// of a thread's time where it started since. A thread that ended meanwhile is not counted
    /// (its time is gone from `/proc`), and takes nothing from the others'.
    pub fn since(&self, earlier: &ThreadClock) -> ThreadTime {
        let mut t = ThreadTime::default();
        for &(id, device, ns) in &self.threads {
            let before = earlier
                .threads
                .binary_search_by_key(&id, |&(id, _, _)| id)
                .map_or(0, |at| earlier.threads[at].2);
            let spent = ns.saturating_sub(before);
            match device {
                true => t.device_ns += spent,
                false => t.host_ns += spent,
            }
        }
        t
    }
}

/// CubeCL's downstream device threads, and Mesa's llvmpipe workers on a software device.
fn is_device_thread(comm: &str) -> bool {
    comm.starts_with("DSD-") || comm.starts_with("llvmpipe-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_thread_s_work_counts_as_the_host_s() {
        let before = ThreadClock::now();
        let mut x = 0u64;
        let started = std::time::Instant::now();
        while started.elapsed() < std::time::Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let spent = ThreadClock::now().since(&before);
        // Other tests' threads may add to either sum, never take from it.
        assert!(spent.host_ns >= 10_000_000, "{spent:?} ({x})");
    }

    #[test]
    fn device_threads_are_cubecl_s_downstream_servers() {
        assert!(is_device_thread("DSD-3-0"));
        assert!(is_device_thread("llvmpipe-1"));
        assert!(!is_device_thread("DSU-3-0"));
        assert!(!is_device_thread("ember-cpu-0"));
    }

    /// A thread that ends between the two readings takes nothing from the time of the others.
    #[test]
    fn a_thread_that_ends_meanwhile_does_not_cancel_this_one_s_work() {
        let busy = |ms| {
            let started = std::time::Instant::now();
            let mut x = 0u64;
            while started.elapsed() < std::time::Duration::from_millis(ms) {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
            x
        };
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || {
            busy(60);
            wait.recv().ok();
        });
        std::thread::sleep(std::time::Duration::from_millis(100));
        let before = ThreadClock::now();
        let x = busy(20);
        go.send(()).unwrap();
        other.join().unwrap();
        let spent = ThreadClock::now().since(&before);
        assert!(spent.host_ns >= 5_000_000, "{spent:?} ({x})");
    }
}
