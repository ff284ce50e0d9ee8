//! Choosing where to train, and the seam where ember's generic code meets concrete Burn
//! backends: a [`Backends`] implementation runs an [`OnBackend`] task on `Autodiff<Flex>` (the
//! CPU) or, in the binary, on `Autodiff<Cuda>` (with fusion), picked at run time.

use crate::error::Result;
use crate::input_err;
use burn::backend::{Autodiff, Flex};
use std::str::FromStr;

/// What the user asked for with `--device`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceRequest {
    /// CUDA when compiled in and a GPU is present, else the CPU.
    Auto,
    Cpu,
    Cuda(usize),
}

impl FromStr for DeviceRequest {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "auto" => Ok(DeviceRequest::Auto),
            "cpu" => Ok(DeviceRequest::Cpu),
            "cuda" => Ok(DeviceRequest::Cuda(0)),
            _ => s
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(DeviceRequest::Cuda)
                .ok_or_else(|| format!("\"{s}\" is not a device: use auto, cpu, cuda or cuda:N")),
        }
    }
}

/// Where a run actually goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    Cpu,
    Cuda(usize),
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Cpu => write!(f, "cpu"),
            Device::Cuda(i) => write!(f, "cuda:{i}"),
        }
    }
}

/// The CUDA devices this process can use, or why there are none. Never panics: Burn's CUDA
/// backend panics on its first operation when the driver library is missing, so we look first.
pub fn cuda_devices() -> std::result::Result<Vec<String>, String> {
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

/// Resolves `--device` against what is present.
pub fn choose(request: DeviceRequest) -> Result<Device> {
    match request {
        DeviceRequest::Cpu => Ok(Device::Cpu),
        DeviceRequest::Auto => Ok(match cuda_devices() {
            Ok(devices) if !devices.is_empty() => Device::Cuda(0),
            _ => Device::Cpu,
        }),
        DeviceRequest::Cuda(i) => match cuda_devices() {
            Ok(devices) if i < devices.len() => Ok(Device::Cuda(i)),
            Ok(devices) => Err(input_err!(
                "--device cuda:{i}: this machine has {} CUDA device(s)",
                devices.len()
            )),
            Err(why) => Err(input_err!("--device cuda: {why}; use --device cpu or auto")),
        },
    }
}

/// A line for the log: the device with its name or thread count.
pub fn describe(device: Device) -> String {
    match device {
        Device::Cpu => format!(
            "cpu (Burn flex backend, {} threads)",
            rayon::current_num_threads()
        ),
        Device::Cuda(i) => {
            let name = cuda_devices()
                .ok()
                .and_then(|d| d.get(i).cloned())
                .unwrap_or_default();
            format!("cuda:{i} ({name}, Burn CUDA backend with fusion)")
        }
    }
}

/// Work that runs on whichever backend was chosen.
pub trait OnBackend {
    type Output;
    fn run<B: crate::ops::TrainBackend>(self, device: B::Device) -> Self::Output;
}

/// The CPU backend ember trains on.
pub type CpuBackend = Autodiff<Flex>;

/// The set of backends a program can run tasks on. The binary implements it with CUDA and the
/// CPU; the library's own tests with the CPU alone. Keeping the concrete backends out of the
/// library means Burn's generic code is compiled for CUDA once, in the binary, and not again
/// for the library's tests.
pub trait Backends {
    /// Runs `task` on `device`'s backend.
    fn dispatch<T: OnBackend>(device: Device, task: T) -> T::Output;
}

/// Only Burn's CPU backend.
pub struct CpuOnly;

impl Backends for CpuOnly {
    fn dispatch<T: OnBackend>(device: Device, task: T) -> T::Output {
        match device {
            Device::Cpu => task.run::<CpuBackend>(Default::default()),
            Device::Cuda(_) => unreachable!("CpuOnly serves programs that never choose CUDA"),
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
        assert!("gpu".parse::<DeviceRequest>().is_err());
        assert!("cuda:x".parse::<DeviceRequest>().is_err());
    }
}
