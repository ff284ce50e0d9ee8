//! Choosing where to train, and the seam where ember's generic code meets concrete Burn
//! backends: a [`Backends`] implementation runs an [`OnBackend`] task on `Autodiff<Flex>` (the
//! CPU) or, in the binary, on `Autodiff<Cuda>` or `Autodiff<Wgpu>` (both with fusion), picked
//! at run time.

pub mod adapters;
mod backend;
mod cubecl_config;
pub mod host_read;
pub mod launches;
pub mod thread_time;
mod warm_pool;
pub use warm_pool::with_warm_workers;

pub use backend::{Backends, CpuBackend, CpuOnly, OnBackend, TrainBackend};

use crate::error::Result;
use crate::input_err;
use adapters::{Adapter, WgpuTarget};
use std::str::FromStr;

/// What the user asked for with `--device`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceRequest {
    /// CUDA, else a real GPU through wgpu, else the CPU.
    Auto,
    Cpu,
    Cuda(usize),
    /// A row of `ember info`'s wgpu list.
    Wgpu(usize),
}

/// The spelling `from_str` reads back (for the command lines of a sweep's trials).
impl std::fmt::Display for DeviceRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceRequest::Auto => write!(f, "auto"),
            DeviceRequest::Cpu => write!(f, "cpu"),
            DeviceRequest::Cuda(i) => write!(f, "cuda:{i}"),
            DeviceRequest::Wgpu(i) => write!(f, "wgpu:{i}"),
        }
    }
}

impl FromStr for DeviceRequest {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let indexed = |prefix: &str| -> Option<usize> {
            match s.strip_prefix(prefix)? {
                "" => Some(0),
                n => n.strip_prefix(':')?.parse().ok(),
            }
        };
        match s {
            "auto" => Ok(DeviceRequest::Auto),
            "cpu" => Ok(DeviceRequest::Cpu),
            _ => indexed("cuda")
                .map(DeviceRequest::Cuda)
                .or_else(|| indexed("wgpu").map(DeviceRequest::Wgpu))
                .ok_or_else(|| {
                    format!("\"{s}\" is not a device: use auto, cpu, cuda, cuda:N, wgpu or wgpu:N")
                }),
        }
    }
}

/// Where a run actually goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    Cpu,
    Cuda(usize),
    Wgpu(WgpuTarget),
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
            Device::Wgpu(t) => write!(f, "wgpu:{}", t.row),
        }
    }
}

/// The CUDA devices this process can use, or why there are none. Never panics: Burn's CUDA
/// backend panics on its first operation when the driver library is missing, so we look first.
/// Probed once per process.
pub fn cuda_devices() -> std::result::Result<Vec<String>, String> {
    static PROBE: std::sync::OnceLock<std::result::Result<Vec<String>, String>> =
        std::sync::OnceLock::new();
    PROBE.get_or_init(probe_cuda).clone()
}

fn probe_cuda() -> std::result::Result<Vec<String>, String> {
    #[cfg(feature = "cuda")]
    {
        use cudarc::driver::result;
        // SAFETY: only checks whether the shared libraries can be opened.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err("no CUDA driver library (libcuda) on this machine".into());
        }
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err("the CUDA driver is present but NVRTC (libnvrtc), which compiles Burn's kernels, is not".into());
        }
        result::init().map_err(|e| format!("the CUDA driver failed to start ({e:?})"))?;
        let count = result::device::get_count().map_err(|e| format!("{e:?}"))?;
        (0..count)
            .map(|i| {
                let dev = result::device::get(i).map_err(|e| format!("{e:?}"))?;
                result::device::get_name(dev).map_err(|e| format!("{e:?}"))
            })
            .collect()
    }
    #[cfg(not(feature = "cuda"))]
    {
        Err("this ember was built without the `cuda` feature".into())
    }
}

/// What `--device auto` picks from what is present: CUDA, then a real GPU through wgpu
/// (discrete, then integrated), then the CPU. A software Vulkan device is never picked.
pub fn auto(cuda_count: usize, adapters: &[Adapter]) -> Result<Device> {
    if cuda_count > 0 {
        return Ok(Device::Cuda(0));
    }
    match adapters::auto_row(adapters) {
        Some(row) => adapters::target(adapters, row).map(Device::Wgpu),
        None => Ok(Device::Cpu),
    }
}

/// What `--device auto` picks on this machine.
pub fn auto_device() -> Result<Device> {
    let cuda = cuda_devices().map_or(0, |d| d.len());
    // Listing adapters starts the Vulkan loader: only when there is no CUDA device.
    let adapters = if cuda == 0 { adapters::list() } else { &[] };
    auto(cuda, adapters)
}

/// Resolves `--device` against what is present, and sets up CubeCL before a GPU device is
/// first used.
pub fn choose(request: DeviceRequest) -> Result<Device> {
    let device = match request {
        DeviceRequest::Cpu => Device::Cpu,
        DeviceRequest::Auto => auto_device()?,
        DeviceRequest::Cuda(i) => match cuda_devices() {
            Ok(devices) if i < devices.len() => Device::Cuda(i),
            Ok(devices) => {
                return Err(input_err!(
                    "--device cuda:{i}: this machine has {} CUDA device(s)",
                    devices.len()
                ));
            }
            Err(why) => return Err(input_err!("--device cuda: {why}; use --device cpu or auto")),
        },
        DeviceRequest::Wgpu(row) => {
            if !cfg!(feature = "wgpu") {
                return Err(input_err!(
                    "--device wgpu: this ember was built without the `wgpu` feature"
                ));
            }
            Device::Wgpu(adapters::target(adapters::list(), row)?)
        }
    };
    if device != Device::Cpu {
        cubecl_config::install(&hardware(device));
    }
    Ok(device)
}

/// The hardware a device runs on: the GPU's or adapter's name, or `cpu`.
pub fn hardware(device: Device) -> String {
    match device {
        Device::Cpu => "cpu".to_string(),
        Device::Cuda(i) => cuda_devices()
            .ok()
            .and_then(|d| d.get(i).cloned())
            .unwrap_or_default(),
        Device::Wgpu(t) => adapters::list()
            .get(t.row)
            .map(|a| a.name.clone())
            .unwrap_or_default(),
    }
}

/// The largest tensor `device` holds, where it has a cap (wgpu binds a tensor as one storage
/// buffer); `None` where any tensor that fits in memory will do.
pub fn max_tensor_bytes(device: Device) -> Option<u64> {
    match device {
        Device::Wgpu(t) => adapters::list().get(t.row).map(|a| a.max_binding_bytes),
        Device::Cpu | Device::Cuda(_) => None,
    }
}

/// `ember info`'s lines about devices: the backends compiled in, the CPU, each CUDA device and
/// wgpu adapter, and what `--device auto` picks.
pub fn info_lines() -> Vec<String> {
    let built = |on: bool, name: &str| match on {
        true => format!("{name} (with fusion)"),
        false => format!("no {name} (built without the `{name}` feature)"),
    };
    let mut lines = vec![
        format!(
            "backends: cpu (flex), {}, {}",
            built(cfg!(feature = "cuda"), "cuda"),
            built(cfg!(feature = "wgpu"), "wgpu")
        ),
        format!("cpu: {} threads", rayon::current_num_threads()),
        crate::ops::simd::info_line(),
    ];
    match cuda_devices() {
        Ok(devices) if !devices.is_empty() => lines.extend(
            devices
                .iter()
                .enumerate()
                .map(|(i, name)| format!("cuda:{i}: {name}")),
        ),
        Ok(_) => lines.push("cuda: no device found".into()),
        Err(why) => lines.push(format!("cuda: unavailable ({why})")),
    }
    let adapters = adapters::list();
    if adapters.is_empty() {
        lines.push("wgpu: no adapter found".into());
    }
    lines.extend(
        adapters
            .iter()
            .enumerate()
            .map(|(i, a)| format!("wgpu:{i}: {}", a.describe())),
    );
    lines.push(match auto_device() {
        Ok(d) => format!("--device auto: {d}"),
        Err(e) => format!("--device auto: {e}"),
    });
    lines.push(match cubecl_config::cache_dir() {
        Some(dir) => format!(
            "kernel cache: {} (CUDA's compiled kernels, a folder per GPU model; wgpu compiles its shaders in each run)",
            dir.join("kernels").display()
        ),
        None => "kernel cache: none (no HOME or XDG_CACHE_HOME)".into(),
    });
    lines
}

/// A line for the log: the device with its name or thread count.
pub fn describe(device: Device) -> String {
    match device {
        Device::Cpu => format!(
            "cpu (Burn flex backend, {} threads)",
            rayon::current_num_threads()
        ),
        Device::Cuda(i) => format!(
            "cuda:{i} ({}, Burn CUDA backend with fusion)",
            hardware(device)
        ),
        Device::Wgpu(t) => {
            let adapter = adapters::list()
                .get(t.row)
                .map(Adapter::describe)
                .unwrap_or_default();
            format!("wgpu:{} ({adapter}; Burn wgpu backend with fusion)", t.row)
        }
    }
}

/// Runs `f` on a worker of a rayon pool of `threads` threads (default: one per core), the pool
/// Burn's CPU backend then parallelises on. Running the training loop itself on a worker,
/// rather than on a thread of its own that hands work to the pool, keeps the thread count equal
/// to the core count: a separate loop thread competes with the pool's spinning workers on every
/// operation (on two cores that made two threads no faster than one).
pub fn on_cpu_pool<T: Send>(threads: Option<usize>, f: impl FnOnce() -> T + Send) -> Result<T> {
    let mut builder = rayon::ThreadPoolBuilder::new().thread_name(|i| format!("ember-cpu-{i}"));
    match threads {
        Some(0) => return Err(input_err!("--threads 0 must be at least 1")),
        Some(n) => builder = builder.num_threads(n),
        None => {}
    }
    let pool = builder
        .build()
        .map_err(|e| input_err!("cannot start the CPU thread pool: {e}"))?;
    Ok(pool.install(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_device_names() {
        assert_eq!("auto".parse(), Ok(DeviceRequest::Auto));
        assert_eq!("cpu".parse(), Ok(DeviceRequest::Cpu));
        assert_eq!("cuda".parse(), Ok(DeviceRequest::Cuda(0)));
        assert_eq!("cuda:3".parse(), Ok(DeviceRequest::Cuda(3)));
        assert_eq!("wgpu".parse(), Ok(DeviceRequest::Wgpu(0)));
        assert_eq!("wgpu:2".parse(), Ok(DeviceRequest::Wgpu(2)));
        for bad in ["gpu", "cuda:x", "cuda3", "wgpu:", "wgpu:-1"] {
            assert!(bad.parse::<DeviceRequest>().is_err(), "{bad}");
        }
    }

    #[test]
    fn auto_takes_cuda_then_a_real_gpu_then_the_cpu() {
        use adapters::AdapterKind;
        let adapter = |kind| Adapter {
            name: "x".into(),
            kind,
            api: "Vulkan".into(),
            driver: String::new(),
            max_binding_bytes: 128 << 20,
        };
        let lavapipe = adapter(AdapterKind::Cpu);
        let gpu = adapter(AdapterKind::DiscreteGpu);
        assert_eq!(
            auto(1, std::slice::from_ref(&gpu)).ok(),
            Some(Device::Cuda(0))
        );
        assert_eq!(
            auto(0, std::slice::from_ref(&lavapipe)).ok(),
            Some(Device::Cpu)
        );
        assert_eq!(auto(0, &[]).ok(), Some(Device::Cpu));
        let Ok(Device::Wgpu(t)) = auto(0, &[lavapipe, gpu]) else {
            panic!("a discrete GPU is taken");
        };
        assert_eq!((t.row, t.kind, t.index), (1, AdapterKind::DiscreteGpu, 0));
    }
}
