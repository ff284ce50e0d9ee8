//! Batch normalisation in training on the GPU (`EmberBackend::batch_norm` and its backward),
//! one launch each way, a cube per channel of `x` `[n, c, s]`:
//! - forward: the channel's mean, then its biased variance about that mean (two passes, as
//!   the composition), each summed by the cube's units in a fixed order; then `y = (x - mean)
//!   · inv · gamma + beta` with `inv = 1 / sqrt(var + epsilon)`;
//! - backward: `dbeta = Σ g` and `dgamma = Σ g · xhat` over the channel, then `dx = (g · N -
//!   dbeta - xhat · dgamma) · gamma · inv / N`, `N = n · s`.
//!
//! Burn's composition of the same formulas took a dozen launches each way (reductions, then
//! broadcast element-wise kernels). The sums are in a fixed order, so a run repeats its bits.

use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeRuntime, ops::numeric::empty_device};
use cubecl::prelude::*;

const UNITS: usize = 256;

/// The offset in `t` (`[n, c, s]`) of element `e` of channel `ch`, counting along `s` then
/// `n`.
#[cube]
fn offset<F: Float>(t: &Tensor<F>, ch: usize, e: usize) -> usize {
    let s = t.shape(2);
    (e / s) * t.stride(0) + ch * t.stride(1) + (e % s) * t.stride(2)
}

/// The sum of every unit's `v` over the cube, in a fixed order; every unit gets it.
#[cube]
fn cube_sum<F: Float>(sums: &mut SharedMemory<F>, v: F, u: usize) -> F {
    sums[u] = v;
    sync_cube();
    #[unroll]
    for level in 1..comptime![UNITS.trailing_zeros() as usize + 1] {
        let half = comptime![UNITS >> level];
        if u < half {
            sums[u] = sums[u] + sums[u + half];
        }
        sync_cube();
    }
    let total = sums[0];
    // No unit writes its next figure before every unit has read this one.
    sync_cube();
    total
}

#[cube(launch_unchecked)]
fn forward_kernel<F: Float>(
    x: &Tensor<F>,
    gamma: &Tensor<F>,
    beta: &Tensor<F>,
    y: &mut Tensor<F>,
    mean: &mut Tensor<F>,
    var: &mut Tensor<F>,
    epsilon: f32,
) {
    let units = comptime![UNITS];
    let (ch, u) = (CUBE_POS_X as usize, UNIT_POS as usize);
    let count = x.shape(0) * x.shape(2);
    let total = F::cast_from(count);
    let mut sums = SharedMemory::<F>::new(units);
    let mut part = F::new(0.0);
    let mut e = u;
    while e < count {
        part += x[offset::<F>(x, ch, e)];
        e += units;
    }
    let mu = cube_sum::<F>(&mut sums, part, u) / total;
    let mut squares = F::new(0.0);
    e = u;
    while e < count {
        let d = x[offset::<F>(x, ch, e)] - mu;
        squares += d * d;
        e += units;
    }
    let v = cube_sum::<F>(&mut sums, squares, u) / total;
    let inv = F::new(1.0) / F::sqrt(v + F::cast_from(epsilon));
    let (g, b) = (gamma[ch * gamma.stride(0)], beta[ch * beta.stride(0)]);
    e = u;
    while e < count {
        let o = offset::<F>(x, ch, e);
        y[offset::<F>(y, ch, e)] = (x[o] - mu) * inv * g + b;
        e += units;
    }
    if u == 0 {
        mean[ch] = mu;
        var[ch] = v;
    }
}

#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
fn backward_kernel<F: Float>(
    x: &Tensor<F>,
    gamma: &Tensor<F>,
    mean: &Tensor<F>,
    var: &Tensor<F>,
    grad: &Tensor<F>,
    dx: &mut Tensor<F>,
    dgamma: &mut Tensor<F>,
    dbeta: &mut Tensor<F>,
    epsilon: f32,
) {
    let units = comptime![UNITS];
    let (ch, u) = (CUBE_POS_X as usize, UNIT_POS as usize);
    let count = x.shape(0) * x.shape(2);
    let total = F::cast_from(count);
    let mu = mean[ch * mean.stride(0)];
    let inv = F::new(1.0) / F::sqrt(var[ch * var.stride(0)] + F::cast_from(epsilon));
    let mut sums = SharedMemory::<F>::new(units);
    let (mut gs, mut gxs) = (F::new(0.0), F::new(0.0));
    let mut e = u;
    while e < count {
        let g = grad[offset::<F>(grad, ch, e)];
        gs += g;
        gxs += g * ((x[offset::<F>(x, ch, e)] - mu) * inv);
        e += units;
    }
    let db = cube_sum::<F>(&mut sums, gs, u);
    let dg = cube_sum::<F>(&mut sums, gxs, u);
    let factor = gamma[ch * gamma.stride(0)] * inv / total;
    e = u;
    while e < count {
        let xhat = (x[offset::<F>(x, ch, e)] - mu) * inv;
        let g = grad[offset::<F>(grad, ch, e)];
        dx[offset::<F>(dx, ch, e)] = (g * total - db - xhat * dg) * factor;
        e += units;
    }
    if u == 0 {
        dgamma[ch] = dg;
        dbeta[ch] = db;
    }
}

fn cube_count(channels: usize) -> CubeCount {
    CubeCount::Static(channels as u32, 1, 1)
}

/// The output `[n, c, s]`, and the batch's mean and biased variance `[c]`.
pub fn forward<R: CubeRuntime>(
    x: CubeTensor<R>,
    gamma: CubeTensor<R>,
    beta: CubeTensor<R>,
    epsilon: f32,
) -> [CubeTensor<R>; 3] {
    let shape = x.meta.shape().clone();
    let c = shape[1];
    let (client, device) = (x.client.clone(), x.device.clone());
    let y = empty_device::<R, f32>(client.clone(), device.clone(), shape);
    let mean = empty_device::<R, f32>(client.clone(), device.clone(), [c].into());
    let var = empty_device::<R, f32>(client.clone(), device, [c].into());
    // SAFETY: cube `ch` reads and writes channel `ch` only, each element by one unit.
    unsafe {
        forward_kernel::launch_unchecked::<f32, R>(
            &client,
            cube_count(c),
            CubeDim::new_1d(UNITS as u32),
            x.into_tensor_arg(),
            gamma.into_tensor_arg(),
            beta.into_tensor_arg(),
            y.clone().into_tensor_arg(),
            mean.clone().into_tensor_arg(),
            var.clone().into_tensor_arg(),
            epsilon,
        );
    }
    [y, mean, var]
}

/// `(dx, dgamma, dbeta)` from the forward's input, `gamma`, the batch's statistics and the
/// output's gradient.
pub fn backward<R: CubeRuntime>(
    [x, gamma, mean, var, grad]: [CubeTensor<R>; 5],
    epsilon: f32,
) -> [CubeTensor<R>; 3] {
    let shape = x.meta.shape().clone();
    let c = shape[1];
    let (client, device) = (x.client.clone(), x.device.clone());
    let dx = empty_device::<R, f32>(client.clone(), device.clone(), shape);
    let dgamma = empty_device::<R, f32>(client.clone(), device.clone(), [c].into());
    let dbeta = empty_device::<R, f32>(client.clone(), device, [c].into());
    // SAFETY: cube `ch` reads and writes channel `ch` only, each element by one unit.
    unsafe {
        backward_kernel::launch_unchecked::<f32, R>(
            &client,
            cube_count(c),
            CubeDim::new_1d(UNITS as u32),
            x.into_tensor_arg(),
            gamma.into_tensor_arg(),
            mean.into_tensor_arg(),
            var.into_tensor_arg(),
            grad.into_tensor_arg(),
            dx.clone().into_tensor_arg(),
            dgamma.clone().into_tensor_arg(),
            dbeta.clone().into_tensor_arg(),
            epsilon,
        );
    }
    [dx, dgamma, dbeta]
}
