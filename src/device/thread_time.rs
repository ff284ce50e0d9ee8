//! CPU time of this process's threads by role, from `/proc/self/task/*/schedstat` (nanoseconds
//! on a CPU): what a training step costs the host, apart from what it costs the device's own
//! server threads. CubeCL runs each GPU device's work behind threads named `DSD-<type>-<index>`
//! (compiling and launching kernels; on a software device such as lavapipe, running them too);
//! every other thread (the one that drives training, Burn's fusion stream `DSU-*`, allocators)
//! is the host's.

/// CPU nanoseconds so far: (host threads, device server threads).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadTime {
    pub host_ns: u64,
    pub device_ns: u64,
}

impl ThreadTime {
    /// The CPU time of every live thread of this process so far; zero where `/proc` cannot
    /// tell (not Linux).
    pub fn now() -> ThreadTime {
        let mut t = ThreadTime::default();
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return t;
        };
        for task in tasks.flatten() {
            let path = task.path();
            let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
            let stat = std::fs::read_to_string(path.join("schedstat")).unwrap_or_default();
            let ns: u64 = stat
                .split_whitespace()
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            match is_device_thread(comm.trim()) {
                true => t.device_ns += ns,
                false => t.host_ns += ns,
            }
        }
        t
    }

    /// The time spent since `earlier` (threads that ended meanwhile are not counted).
    pub fn since(self, earlier: ThreadTime) -> ThreadTime {
        ThreadTime {
            host_ns: self.host_ns.saturating_sub(earlier.host_ns),
            device_ns: self.device_ns.saturating_sub(earlier.device_ns),
        }
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
        let before = ThreadTime::now();
        let mut x = 0u64;
        let started = std::time::Instant::now();
        while started.elapsed() < std::time::Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let spent = ThreadTime::now().since(before);
        assert!(spent.host_ns >= 10_000_000, "{spent:?} ({x})");
        assert_eq!(spent.device_ns, 0);
    }

    #[test]
    fn device_threads_are_cubecl_s_downstream_servers() {
        assert!(is_device_thread("DSD-3-0"));
        assert!(is_device_thread("llvmpipe-1"));
        assert!(!is_device_thread("DSU-3-0"));
        assert!(!is_device_thread("ember-cpu-0"));
    }
}
