//! The wgpu adapters of this machine, and which one a device name means. Burn has no adapter
//! listing, and cubecl-wgpu panics when the adapter it is asked for is missing, so ember lists
//! them itself through the same `wgpu` (and the same graphics API) that cubecl-wgpu uses, and
//! only ever hands cubecl-wgpu an adapter that exists.
//!
//! Everything that decides is a pure function of the list, so it is tested on made-up lists.

use crate::error::Result;
use crate::input_err;

/// The kind of adapter, as wgpu reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdapterKind {
    DiscreteGpu,
    IntegratedGpu,
    VirtualGpu,
    /// A software rasteriser: lavapipe, llvmpipe, SwiftShader.
    Cpu,
    Other,
}

impl AdapterKind {
    pub fn label(self) -> &'static str {
        match self {
            AdapterKind::DiscreteGpu => "discrete GPU",
            AdapterKind::IntegratedGpu => "integrated GPU",
            AdapterKind::VirtualGpu => "virtual GPU",
            AdapterKind::Cpu => "software (CPU)",
            AdapterKind::Other => "other",
        }
    }
}

/// One row of `ember info`'s wgpu list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adapter {
    pub name: String,
    pub kind: AdapterKind,
    /// The graphics API (Vulkan, Metal, Dx12, Gl).
    pub api: String,
    /// The driver and its version, as the driver reports them.
    pub driver: String,
    /// The largest storage buffer a kernel can bind: the largest tensor on this adapter.
    pub max_binding_bytes: u64,
}

impl Adapter {
    /// `name [kind, api, driver]` (names have parentheses of their own).
    pub fn describe(&self) -> String {
        format!(
            "{} [{}, {}, {}]",
            self.name,
            self.kind.label(),
            self.api,
            self.driver
        )
    }
}

/// Which adapter cubecl-wgpu opens: a kind and the index within that kind, the way
/// `WgpuDevice::{DiscreteGpu(i), IntegratedGpu(i), VirtualGpu(i), Cpu}` count them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WgpuTarget {
    /// The row of the adapter list.
    pub row: usize,
    pub kind: AdapterKind,
    pub index: usize,
}

/// The adapter at `row`, as cubecl-wgpu addresses it. cubecl-wgpu counts adapters within their
/// kind, in the order wgpu lists them, and has a single `Cpu` device (the first software
/// adapter); it cannot open an adapter of kind `Other` by itself.
pub fn target(adapters: &[Adapter], row: usize) -> Result<WgpuTarget> {
    let Some(adapter) = adapters.get(row) else {
        return Err(match adapters.len() {
            0 => input_err!(
                "--device wgpu:{row}: no wgpu adapter found (install a Vulkan driver, e.g. Debian's mesa-vulkan-drivers, or use --device cpu)"
            ),
            n => input_err!(
                "--device wgpu:{row}: this machine has {n} wgpu adapter(s) (see ember info)"
            ),
        });
    };
    let index = adapters[..row]
        .iter()
        .filter(|a| a.kind == adapter.kind)
        .count();
    match adapter.kind {
        AdapterKind::Other => Err(input_err!(
            "--device wgpu:{row}: {} is of a kind Burn's wgpu backend cannot open",
            adapter.name
        )),
        AdapterKind::Cpu if index > 0 => Err(input_err!(
            "--device wgpu:{row}: Burn's wgpu backend opens only the first software adapter; use wgpu:{}",
            adapters
                .iter()
                .position(|a| a.kind == AdapterKind::Cpu)
                .unwrap_or(0)
        )),
        kind => Ok(WgpuTarget { row, kind, index }),
    }
}

/// The row `--device auto` takes: a real GPU (discrete first, then integrated), never a
/// software adapter, which runs slower than ember's own CPU backend and is chosen only by name.
pub fn auto_row(adapters: &[Adapter]) -> Option<usize> {
    [AdapterKind::DiscreteGpu, AdapterKind::IntegratedGpu]
        .into_iter()
        .find_map(|kind| adapters.iter().position(|a| a.kind == kind))
}

/// The adapters wgpu finds through the graphics API cubecl-wgpu uses (Vulkan on Linux and
/// Windows, Metal on macOS). Never panics: a machine without a Vulkan loader gives an empty
/// list at once.
///
/// Listed once per process (each listing starts a Vulkan instance, and a run asks for the
/// choice, its description, its hardware name and its size cap).
pub fn list() -> &'static [Adapter] {
    static LIST: std::sync::OnceLock<Vec<Adapter>> = std::sync::OnceLock::new();
    LIST.get_or_init(enumerate)
}

#[cfg(feature = "wgpu")]
fn enumerate() -> Vec<Adapter> {
    use burn::backend::wgpu::graphics::{AutoGraphicsApi, GraphicsApi};
    let backend = AutoGraphicsApi::backend();
    let listing = std::panic::catch_unwind(|| {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: backend.into(),
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        ready(instance.enumerate_adapters(backend.into()))
    });
    let Ok(adapters) = listing else {
        return Vec::new();
    };
    adapters
        .iter()
        .map(|a| {
            let info = a.get_info();
            Adapter {
                name: info.name.clone(),
                kind: match info.device_type {
                    wgpu::DeviceType::DiscreteGpu => AdapterKind::DiscreteGpu,
                    wgpu::DeviceType::IntegratedGpu => AdapterKind::IntegratedGpu,
                    wgpu::DeviceType::VirtualGpu => AdapterKind::VirtualGpu,
                    wgpu::DeviceType::Cpu => AdapterKind::Cpu,
                    wgpu::DeviceType::Other => AdapterKind::Other,
                },
                api: format!("{:?}", info.backend),
                driver: [info.driver.as_str(), info.driver_info.as_str()]
                    .iter()
                    .filter(|s| !s.is_empty())
                    .copied()
                    .collect::<Vec<_>>()
                    .join(" "),
                max_binding_bytes: a.limits().max_storage_buffer_binding_size,
            }
        })
        .collect()
}

#[cfg(not(feature = "wgpu"))]
fn enumerate() -> Vec<Adapter> {
    Vec::new()
}

/// Mesa's Vulkan drivers look for a Wayland display when an instance starts and, where
/// `XDG_RUNTIME_DIR` is unset (a CI job, an ssh session without a login session), print
/// "error: XDG_RUNTIME_DIR is invalid or not set in the environment" on stderr, which reads like
/// one of ember's own errors. ember opens no window, so where the variable is unset it points
/// it at the temp folder for its own process.
///
/// # Safety
/// Changes the environment: call it while the process has one thread (first thing in `main`).
pub unsafe fn quiet_wayland_probe() {
    if cfg!(all(feature = "wgpu", target_os = "linux"))
        && std::env::var_os("XDG_RUNTIME_DIR").is_none_or(|v| v.is_empty())
    {
        // SAFETY: the caller guarantees no other thread reads the environment meanwhile.
        unsafe { std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir()) };
    }
}

/// Runs a future that native wgpu completes without waiting (adapter enumeration is
/// synchronous there; the future exists for the web), polling it with a no-op waker.
#[cfg(feature = "wgpu")]
fn ready<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::yield_now();
    }
}

/// The Burn device for a target.
#[cfg(feature = "wgpu")]
pub fn burn_device(t: WgpuTarget) -> burn::backend::wgpu::WgpuDevice {
    use burn::backend::wgpu::WgpuDevice;
    match t.kind {
        AdapterKind::DiscreteGpu => WgpuDevice::DiscreteGpu(t.index),
        AdapterKind::IntegratedGpu => WgpuDevice::IntegratedGpu(t.index),
        AdapterKind::VirtualGpu => WgpuDevice::VirtualGpu(t.index),
        AdapterKind::Cpu => WgpuDevice::Cpu,
        // `target` never returns an adapter of kind Other.
        AdapterKind::Other => unreachable!("target() refuses adapters of kind Other"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adapter(name: &str, kind: AdapterKind) -> Adapter {
        Adapter {
            name: name.into(),
            kind,
            api: "Vulkan".into(),
            driver: "test".into(),
            max_binding_bytes: 128 << 20,
        }
    }

    fn lavapipe() -> Adapter {
        adapter("llvmpipe (LLVM 15.0.6, 256 bits)", AdapterKind::Cpu)
    }

    #[test]
    fn auto_never_picks_a_software_adapter() {
        assert_eq!(auto_row(&[lavapipe()]), None);
        assert_eq!(auto_row(&[]), None);
    }

    #[test]
    fn auto_prefers_a_discrete_gpu_then_an_integrated_one() {
        let list = [
            lavapipe(),
            adapter("Intel UHD", AdapterKind::IntegratedGpu),
            adapter("RTX 4090", AdapterKind::DiscreteGpu),
        ];
        assert_eq!(auto_row(&list), Some(2));
        assert_eq!(auto_row(&list[..2]), Some(1));
        let virtual_only = [adapter("virtio", AdapterKind::VirtualGpu), lavapipe()];
        assert_eq!(auto_row(&virtual_only), None);
    }

    #[test]
    fn rows_map_to_the_index_within_their_kind() {
        let list = [
            adapter("A", AdapterKind::DiscreteGpu),
            lavapipe(),
            adapter("B", AdapterKind::DiscreteGpu),
            adapter("C", AdapterKind::IntegratedGpu),
        ];
        let t = |row| target(&list, row).map(|t| (t.kind, t.index));
        assert_eq!(t(0).ok(), Some((AdapterKind::DiscreteGpu, 0)));
        assert_eq!(t(1).ok(), Some((AdapterKind::Cpu, 0)));
        assert_eq!(t(2).ok(), Some((AdapterKind::DiscreteGpu, 1)));
        assert_eq!(t(3).ok(), Some((AdapterKind::IntegratedGpu, 0)));
    }

    #[test]
    fn a_missing_row_is_a_one_line_input_error() {
        let none = target(&[], 0).unwrap_err();
        assert_eq!(none.exit_code(), 2);
        assert!(none.to_string().contains("no wgpu adapter found"), "{none}");
        let past = target(&[lavapipe()], 3).unwrap_err().to_string();
        assert!(past.contains("has 1 wgpu adapter"), "{past}");
        assert!(!past.contains('\n'));
    }

    #[test]
    fn only_the_first_software_adapter_and_no_other_kind_can_be_opened() {
        let list = [
            lavapipe(),
            adapter("SwiftShader", AdapterKind::Cpu),
            adapter("odd", AdapterKind::Other),
        ];
        assert!(target(&list, 0).is_ok());
        assert!(target(&list, 1).unwrap_err().to_string().contains("wgpu:0"));
        assert!(target(&list, 2).is_err());
    }
}
