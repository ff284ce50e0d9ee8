//! A dense layer on the GPU in one launch each way:
//! - forward, `y = act(x · w + b)`: each unit a 4 × 4 block of outputs, their sums in
//!   registers, then the bias and the activation;
//! - backward, from the output's gradient `g`: `dz = g · act'(y)` made where it is read, then
//!   `dw = xᵀ · dz` and `db = Σ dz` (by the units of `dw`'s first row) and, where asked,
//!   `dx = dz · wᵀ`, each unit a 4 × 4 block, the cubes of the one launch split between the
//!   two products.
//!
//! No shared memory and no barriers: at these models' sizes the operands stay in the caches,
//! and a software device (lavapipe, in CI) runs barrier-free kernels many times faster. Each
//! output element is one unit's sum in a fixed order: the same inputs give the same bits on a
//! device, whatever runs beside them.

use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeRuntime, ops::numeric::empty_device};
use cubecl::prelude::*;

/// A cube is `TILE × TILE` units; each unit sums a `MICRO × MICRO` block of outputs (16 sums
/// from 8 loads a step, in registers), so a cube covers `SPAN × SPAN` outputs.
pub const TILE: usize = 16;
pub const MICRO: usize = 4;
pub const SPAN: usize = TILE * MICRO;

/// The activations, as the kernels' compile-time codes.
pub const IDENTITY: u32 = 0;
pub const RELU: u32 = 1;
pub const TANH: u32 = 2;

#[cube]
fn activate<F: Float>(z: F, #[comptime] act: u32) -> F {
    if comptime![act == RELU] {
        F::max(z, F::new(0.0))
    } else if comptime![act == TANH] {
        F::tanh(z)
    } else {
        z
    }
}

/// The gradient before the activation, from the activation's output `y` and its gradient `g`.
#[cube]
fn pre_activation<F: Float>(y: F, g: F, #[comptime] act: u32) -> F {
    if comptime![act == RELU] {
        if y > F::new(0.0) { g } else { F::new(0.0) }
    } else if comptime![act == TANH] {
        g * (F::new(1.0) - y * y)
    } else {
        g
    }
}

/// Index `i` clamped into `0..len`: edge units load real elements (whose sums they never
/// store) instead of branching on every load.
#[cube]
fn clamp(i: usize, len: usize) -> usize {
    select(i < len, i, len - 1)
}

/// `acc += rows ⊗ cols`: a register tile of `MICRO` x `MICRO` sums takes one term each.
#[cube]
fn outer_add<F: Float>(acc: &mut Array<F>, rows: &Array<F>, cols: &Array<F>) {
    let q = comptime![MICRO];
    #[unroll]
    for a in 0..q {
        #[unroll]
        for c in 0..q {
            acc[a * q + c] += rows[a] * cols[c];
        }
    }
}

#[cube(launch_unchecked)]
fn forward_kernel<F: Float>(
    x: &Tensor<F>,
    w: &Tensor<F>,
    b: &Tensor<F>,
    y: &mut Tensor<F>,
    #[comptime] act: u32,
) {
    let q = comptime![MICRO];
    let m = y.shape(0);
    let n = y.shape(1);
    let r0 = CUBE_POS_Y as usize * comptime![SPAN] + UNIT_POS_Y as usize * q;
    let c0 = CUBE_POS_X as usize * comptime![SPAN] + UNIT_POS_X as usize * q;
    let mut acc = Array::<F>::new(comptime![MICRO * MICRO]);
    #[unroll]
    for e in 0..q * q {
        acc[e] = F::new(0.0);
    }
    let mut xs = Array::<F>::new(q);
    let mut ws = Array::<F>::new(q);
    for i in 0..x.shape(1) {
        #[unroll]
        for a in 0..q {
            xs[a] = x[clamp(r0 + a, m) * x.stride(0) + i * x.stride(1)];
            ws[a] = w[i * w.stride(0) + clamp(c0 + a, n) * w.stride(1)];
        }
        outer_add::<F>(&mut acc, &xs, &ws);
    }
    #[unroll]
    for a in 0..q {
        #[unroll]
        for c in 0..q {
            let (r, col) = (r0 + a, c0 + c);
            if r < m && col < n {
                let z = acc[a * q + c] + b[col * b.stride(0)];
                y[r * y.stride(0) + col * y.stride(1)] = activate::<F>(z, act);
            }
        }
    }
}

/// `dz[r, j]`: the output's gradient at `(r, j)` before the activation.
#[cube]
fn dz_at<F: Float>(g: &Tensor<F>, y: &Tensor<F>, r: usize, j: usize, #[comptime] act: u32) -> F {
    let gv = g[r * g.stride(0) + j * g.stride(1)];
    let yv = y[r * y.stride(0) + j * y.stride(1)];
    pre_activation::<F>(yv, gv, act)
}

/// A cube's `[SPAN, SPAN]` block of `dw = xᵀ · dz` from unit `(i0, j0)` on, and of `db` where
/// the block is `dw`'s first.
#[cube]
#[allow(clippy::too_many_arguments)]
fn weight_grad<F: Float>(
    x: &Tensor<F>,
    g: &Tensor<F>,
    y: &Tensor<F>,
    dw: &mut Tensor<F>,
    db: &mut Tensor<F>,
    i0: usize,
    j0: usize,
    #[comptime] act: u32,
) {
    let q = comptime![MICRO];
    let (k, n) = (dw.shape(0), dw.shape(1));
    let mut acc = Array::<F>::new(comptime![MICRO * MICRO]);
    let mut bias = Array::<F>::new(q);
    #[unroll]
    for e in 0..q * q {
        acc[e] = F::new(0.0);
    }
    #[unroll]
    for c in 0..q {
        bias[c] = F::new(0.0);
    }
    let mut xs = Array::<F>::new(q);
    let mut ds = Array::<F>::new(q);
    for r in 0..x.shape(0) {
        #[unroll]
        for a in 0..q {
            xs[a] = x[r * x.stride(0) + clamp(i0 + a, k) * x.stride(1)];
            ds[a] = dz_at::<F>(g, y, r, clamp(j0 + a, n), act);
        }
        outer_add::<F>(&mut acc, &xs, &ds);
        #[unroll]
        for a in 0..q {
            bias[a] += ds[a];
        }
    }
    #[unroll]
    for a in 0..q {
        #[unroll]
        for c in 0..q {
            let (i, j) = (i0 + a, j0 + c);
            if i < k && j < n {
                dw[i * dw.stride(0) + j * dw.stride(1)] = acc[a * q + c];
            }
        }
    }
    if i0 == 0 {
        #[unroll]
        for c in 0..q {
            let j = j0 + c;
            if j < n {
                db[j * db.stride(0)] = bias[c];
            }
        }
    }
}

/// A unit's `[MICRO, MICRO]` block of `dx = dz · wᵀ` from `(r0, i0)` on.
#[cube]
fn input_grad<F: Float>(
    w: &Tensor<F>,
    g: &Tensor<F>,
    y: &Tensor<F>,
    dx: &mut Tensor<F>,
    r0: usize,
    i0: usize,
    #[comptime] act: u32,
) {
    let q = comptime![MICRO];
    let (m, k) = (dx.shape(0), dx.shape(1));
    let mut acc = Array::<F>::new(comptime![MICRO * MICRO]);
    #[unroll]
    for e in 0..q * q {
        acc[e] = F::new(0.0);
    }
    let mut ds = Array::<F>::new(q);
    let mut ws = Array::<F>::new(q);
    for j in 0..w.shape(1) {
        #[unroll]
        for a in 0..q {
            ds[a] = dz_at::<F>(g, y, clamp(r0 + a, m), j, act);
            ws[a] = w[clamp(i0 + a, k) * w.stride(0) + j * w.stride(1)];
        }
        outer_add::<F>(&mut acc, &ds, &ws);
    }
    #[unroll]
    for a in 0..q {
        #[unroll]
        for c in 0..q {
            let (r, i) = (r0 + a, i0 + c);
            if r < m && i < k {
                dx[r * dx.stride(0) + i * dx.stride(1)] = acc[a * q + c];
            }
        }
    }
}

#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
fn backward_kernel<F: Float>(
    x: &Tensor<F>,
    w: &Tensor<F>,
    y: &Tensor<F>,
    g: &Tensor<F>,
    dw: &mut Tensor<F>,
    db: &mut Tensor<F>,
    dx: &mut Tensor<F>,
    #[comptime] act: u32,
    #[comptime] with_dx: bool,
) {
    let span = comptime![SPAN];
    let q = comptime![MICRO];
    let (k, n) = (x.shape(1), w.shape(1));
    let dw_cols = n.div_ceil(span);
    let dw_cubes = k.div_ceil(span) * dw_cols;
    let cube = CUBE_POS_X as usize;
    let (ux, uy) = (UNIT_POS_X as usize * q, UNIT_POS_Y as usize * q);
    if cube < dw_cubes {
        let i0 = (cube / dw_cols) * span + uy;
        let j0 = (cube % dw_cols) * span + ux;
        weight_grad::<F>(x, g, y, dw, db, i0, j0, act);
    } else {
        if comptime![with_dx] {
            let dx_cube = cube - dw_cubes;
            let dx_cols = k.div_ceil(span);
            let r0 = (dx_cube / dx_cols) * span + uy;
            let i0 = (dx_cube % dx_cols) * span + ux;
            input_grad::<F>(w, g, y, dx, r0, i0, act);
        }
    }
}

/// The cubes that cover `n` outputs along one side.
pub fn spans(n: usize) -> usize {
    n.div_ceil(SPAN)
}

fn tiles(n: usize) -> u32 {
    spans(n) as u32
}

fn cube_dim() -> CubeDim {
    CubeDim::new_2d(TILE as u32, TILE as u32)
}

/// `act(x · w + b)` for `x` `[m, k]`, `w` `[k, n]` and `b` `[n]`, all f32.
pub fn forward<R: CubeRuntime>(
    x: CubeTensor<R>,
    w: CubeTensor<R>,
    b: CubeTensor<R>,
    act: u32,
) -> CubeTensor<R> {
    let (m, n) = (x.meta.shape()[0], w.meta.shape()[1]);
    let y = empty_device::<R, f32>(x.client.clone(), x.device.clone(), [m, n].into());
    let client = x.client.clone();
    let count = CubeCount::Static(tiles(n), tiles(m), 1);
    // SAFETY: every read and write of the kernel is inside its tensor's shape.
    unsafe {
        forward_kernel::launch_unchecked::<f32, R>(
            &client,
            count,
            cube_dim(),
            x.into_tensor_arg(),
            w.into_tensor_arg(),
            b.into_tensor_arg(),
            y.clone().into_tensor_arg(),
            act,
        );
    }
    y
}

/// `(dx, dw, db)` of [`forward`] from its inputs `x` and `w`, its output `y` and the output's
/// gradient `g`; `dx` only `with_dx`.
pub fn backward<R: CubeRuntime>(
    (x, w, y, g): (CubeTensor<R>, CubeTensor<R>, CubeTensor<R>, CubeTensor<R>),
    act: u32,
    with_dx: bool,
) -> (Option<CubeTensor<R>>, CubeTensor<R>, CubeTensor<R>) {
    let (m, k, n) = (x.meta.shape()[0], x.meta.shape()[1], w.meta.shape()[1]);
    let (client, device) = (x.client.clone(), x.device.clone());
    let dw = empty_device::<R, f32>(client.clone(), device.clone(), [k, n].into());
    let db = empty_device::<R, f32>(client.clone(), device.clone(), [n].into());
    // Without dx, a one-element stand-in the kernel never touches.
    let dx_shape = if with_dx { [m, k] } else { [1, 1] };
    let dx = empty_device::<R, f32>(client.clone(), device, dx_shape.into());
    let dx_cubes = if with_dx { tiles(m) * tiles(k) } else { 0 };
    let count = CubeCount::Static(tiles(k) * tiles(n) + dx_cubes, 1, 1);
    // SAFETY: every read and write of the kernel is inside its tensor's shape.
    unsafe {
        backward_kernel::launch_unchecked::<f32, R>(
            &client,
            count,
            cube_dim(),
            x.into_tensor_arg(),
            w.into_tensor_arg(),
            y.into_tensor_arg(),
            g.into_tensor_arg(),
            dw.clone().into_tensor_arg(),
            db.clone().into_tensor_arg(),
            dx.clone().into_tensor_arg(),
            act,
            with_dx,
        );
    }
    (with_dx.then_some(dx), dw, db)
}
