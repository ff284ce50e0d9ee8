//! The seam where ember's generic code meets concrete Burn backends. A [`Backends`]
//! implementation runs an [`OnBackend`] task on the backend of a [`super::Device`]; the binary
//! names CUDA, wgpu and the CPU there, once, so Burn's generic code is compiled for each of them
//! in one place.

use super::Device;
use burn::backend::{Autodiff, Flex};

/// A backend ember trains on: Burn's autodiff over an inner backend, both with ember's ops.
pub trait TrainBackend:
    burn::tensor::backend::AutodiffBackend<InnerBackend = Self::Inference> + crate::ops::EmberBackend
{
    type Inference: crate::ops::EmberBackend<Device = Self::Device>;
}

impl<B> TrainBackend for B
where
    B: burn::tensor::backend::AutodiffBackend + crate::ops::EmberBackend,
    B::InnerBackend: crate::ops::EmberBackend,
{
    type Inference = B::InnerBackend;
}

/// Work that runs on whichever backend was chosen.
pub trait OnBackend {
    type Output;
    fn run<B: TrainBackend>(self, device: B::Device) -> Self::Output;
}

/// The CPU backend ember trains on.
pub type CpuBackend = Autodiff<Flex>;

/// The set of backends a program can run tasks on. The binary implements it with CUDA, wgpu and
/// the CPU; the library's own tests with the CPU alone. Keeping the concrete backends out of the
/// library means Burn's generic code is compiled for the GPU backends once, in the binary, and
/// not again for the library's tests.
pub trait Backends {
    /// Runs `task` on `device`'s backend.
    fn dispatch<T: OnBackend>(device: Device, task: T) -> T::Output;
}

/// Only Burn's CPU backend.
pub struct CpuOnly;

impl Backends for CpuOnly {
    fn dispatch<T: OnBackend>(device: Device, task: T) -> T::Output {
        match device {
            // The CPU backend's work begins here: keep the pool's workers awake for it.
            Device::Cpu => {
                crate::device::with_warm_workers(|| task.run::<CpuBackend>(Default::default()))
            }
            Device::Cuda(_) | Device::Wgpu(_) => {
                unreachable!("CpuOnly serves programs that never choose a GPU")
            }
        }
    }
}
