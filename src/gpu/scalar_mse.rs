//! linear-scalar's model and loss on the GPU (`EmberBackend::scalar_mse_replicas`), one launch
//! each way, a cube per replica:
//! - forward: each row's residual `e = x · [w; p] - y` (the row's last column is the scalar
//!   input `f`, which `p` multiplies), kept for the backward, and the mean of `e²`, summed by
//!   the cube's units in a fixed order;
//! - backward: `[dw; dp] = xᵀ · (e · 2 · dloss / n)`, a unit per input column summing over the
//!   rows in order.
//!
//! `x` is `[n, c + 1]` shared by the replicas or `[K, n, c + 1]`; `y` `[n, 1]` (shared) or
//! `[K·n, 1]`; `w` `[K, c, 1]`; `p` `[K]`; the residuals `[K, n, 1]`.

use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeRuntime, ops::numeric::empty_device};
use cubecl::prelude::*;

const UNITS: usize = 256;

/// Where replica `k`'s rows start in `x` (0 where the replicas share it).
#[cube]
fn rows_base<F: Float>(x: &Tensor<F>, k: usize) -> usize {
    select(x.rank() == 2, 0, k * x.stride(0))
}

#[cube(launch_unchecked)]
fn forward_kernel<F: Float>(
    x: &Tensor<F>,
    y: &Tensor<F>,
    w: &Tensor<F>,
    p: &Tensor<F>,
    loss: &mut Tensor<F>,
    e: &mut Tensor<F>,
) {
    let units = comptime![UNITS];
    let (k, u) = (CUBE_POS_X as usize, UNIT_POS as usize);
    let d = x.rank() - 2;
    let (n, c) = (x.shape(d), w.shape(1));
    let (xb, rs, cs) = (rows_base::<F>(x, k), x.stride(d), x.stride(d + 1));
    // Replica `k`'s targets: the shared `[n, 1]`, or its own `n` rows of `[K·n, 1]`.
    let yb = select(x.rank() == 2, 0, k * n);
    let (wb, ws, pk) = (k * w.stride(0), w.stride(1), p[k * p.stride(0)]);
    let mut squares = SharedMemory::<F>::new(units);
    let mut sum = F::new(0.0);
    let mut r = u;
    while r < n {
        let row = xb + r * rs;
        let mut z = F::new(0.0);
        for j in 0..c {
            z += x[row + j * cs] * w[wb + j * ws];
        }
        z += x[row + c * cs] * pk;
        let v = z - y[(yb + r) * y.stride(0)];
        e[k * e.stride(0) + r * e.stride(1)] = v;
        sum += v * v;
        r += units;
    }
    squares[u] = sum;
    sync_cube();
    #[unroll]
    for level in 1..comptime![UNITS.trailing_zeros() as usize + 1] {
        let half = comptime![UNITS >> level];
        if u < half {
            squares[u] = squares[u] + squares[u + half];
        }
        sync_cube();
    }
    if u == 0 {
        loss[k * loss.stride(0)] = squares[0] / F::cast_from(n);
    }
}

#[cube(launch_unchecked)]
fn backward_kernel<F: Float>(
    x: &Tensor<F>,
    e: &Tensor<F>,
    dloss: &Tensor<F>,
    dw: &mut Tensor<F>,
    dp: &mut Tensor<F>,
) {
    let units = comptime![UNITS];
    let (k, u) = (CUBE_POS_X as usize, UNIT_POS as usize);
    let d = x.rank() - 2;
    let (n, c) = (x.shape(d), dw.shape(1));
    let (xb, rs, cs) = (rows_base::<F>(x, k), x.stride(d), x.stride(d + 1));
    let eb = k * e.stride(0);
    let scale = dloss[k * dloss.stride(0)] * (F::new(2.0) / F::cast_from(n));
    let mut j = u;
    while j <= c {
        let mut sum = F::new(0.0);
        for r in 0..n {
            sum += x[xb + r * rs + j * cs] * (e[eb + r * e.stride(1)] * scale);
        }
        if j < c {
            dw[k * dw.stride(0) + j * dw.stride(1)] = sum;
        } else {
            dp[k * dp.stride(0)] = sum;
        }
        j += units;
    }
}

/// Each replica's mean squared error `[K]` and the residuals `[K, n, 1]` its backward reads.
pub fn forward<R: CubeRuntime>(
    x: CubeTensor<R>,
    y: CubeTensor<R>,
    w: CubeTensor<R>,
    p: CubeTensor<R>,
) -> (CubeTensor<R>, CubeTensor<R>) {
    let k = w.meta.shape()[0];
    let xs = x.meta.shape().to_vec();
    let n = xs[xs.len() - 2];
    let (client, device) = (x.client.clone(), x.device.clone());
    let loss = empty_device::<R, f32>(client.clone(), device.clone(), [k].into());
    let e = empty_device::<R, f32>(client.clone(), device, [k, n, 1].into());
    // SAFETY: cube `k` writes replica `k`'s loss and residuals only, each row's by one unit.
    unsafe {
        forward_kernel::launch_unchecked::<f32, R>(
            &client,
            CubeCount::Static(k as u32, 1, 1),
            CubeDim::new_1d(UNITS as u32),
            x.into_tensor_arg(),
            y.into_tensor_arg(),
            w.into_tensor_arg(),
            p.into_tensor_arg(),
            loss.clone().into_tensor_arg(),
            e.clone().into_tensor_arg(),
        );
    }
    (loss, e)
}

/// The gradients `dw` `[K, c, 1]` and `dp` `[K]` for the losses' gradient `dloss` `[K]`.
pub fn backward<R: CubeRuntime>(
    x: CubeTensor<R>,
    e: CubeTensor<R>,
    dloss: CubeTensor<R>,
) -> (CubeTensor<R>, CubeTensor<R>) {
    let xs = x.meta.shape().to_vec();
    let (k, c) = (e.meta.shape()[0], xs[xs.len() - 1] - 1);
    let (client, device) = (x.client.clone(), x.device.clone());
    let dw = empty_device::<R, f32>(client.clone(), device.clone(), [k, c, 1].into());
    let dp = empty_device::<R, f32>(client.clone(), device, [k].into());
    // SAFETY: cube `k` writes replica `k`'s gradients only, each element by one unit.
    unsafe {
        backward_kernel::launch_unchecked::<f32, R>(
            &client,
            CubeCount::Static(k as u32, 1, 1),
            CubeDim::new_1d(UNITS as u32),
            x.into_tensor_arg(),
            e.into_tensor_arg(),
            dloss.into_tensor_arg(),
            dw.clone().into_tensor_arg(),
            dp.clone().into_tensor_arg(),
        );
    }
    (dw, dp)
}
