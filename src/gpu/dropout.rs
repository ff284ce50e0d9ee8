//! Dropout on the GPU in one launch each way (`EmberBackend::dropout`, whose backward is the
//! same call on the gradient): a unit per element keeps it, times `1 / (1 - p)`, or zeroes it
//! by the CPU kernel's hash of the element's index and the call's seed (`ops::dropout::keep`:
//! two rounds of Wellons' lowbias32 keyed by the seed's halves), so that a GPU run draws the
//! CPU's masks. Burn's composition drew a Bernoulli tensor and multiplied: four launches each
//! way.

use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeRuntime, ops::numeric::empty_device};
use cubecl::prelude::*;

use super::update::offset;

const UNITS: usize = 256;

/// The most elements one launch takes: a unit each, in cubes along one axis of the grid.
pub const MAX_ELEMENTS: usize = 65_535 * UNITS;

/// One round of lowbias32.
#[cube]
fn round(v: u32) -> u32 {
    let mut x = v;
    x ^= x >> 16;
    x *= 0x7feb_352d_u32;
    x ^= x >> 15;
    x *= 0x846c_a68b_u32;
    x ^ (x >> 16)
}

#[cube(launch_unchecked)]
fn dropout_kernel<F: Float>(
    x: &Tensor<F>,
    y: &mut Tensor<F>,
    seed_low: u32,
    seed_high: u32,
    threshold: u32,
    scale: f32,
) {
    let e = ABSOLUTE_POS;
    if e < y.len() {
        let hash = round(round(u32::cast_from(e) ^ seed_low) ^ seed_high);
        let factor = select(hash < threshold, F::cast_from(scale), F::new(0.0));
        y[e] = x[offset::<F>(x, e)] * factor;
    }
}

/// `x` with each element kept (times `scale`) where its hash under `seed` is below
/// `threshold`, else zeroed (`ops::dropout::threshold_and_scale` gives both from the rate);
/// `x` has at most [`MAX_ELEMENTS`].
pub fn dropout<R: CubeRuntime>(
    x: CubeTensor<R>,
    seed: u64,
    threshold: u32,
    scale: f32,
) -> CubeTensor<R> {
    let shape = x.meta.shape().clone();
    let n = shape.num_elements();
    let (client, device) = (x.client.clone(), x.device.clone());
    let y = empty_device::<R, f32>(client.clone(), device, shape);
    // SAFETY: each unit writes its own element of `y`, and the launch covers them once.
    unsafe {
        dropout_kernel::launch_unchecked::<f32, R>(
            &client,
            CubeCount::Static(n.div_ceil(UNITS).max(1) as u32, 1, 1),
            CubeDim::new_1d(UNITS as u32),
            x.into_tensor_arg(),
            y.clone().into_tensor_arg(),
            seed as u32,
            (seed >> 32) as u32,
            threshold,
            scale,
        );
    }
    y
}
