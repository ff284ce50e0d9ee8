//! A dense layer on the GPU in one launch each way:
//! - forward, `y = act(x · w + b)`: each unit a 4 × 4 block of outputs, their sums in
//!   registers, then the bias and the activation;
//! - backward, from the output's gradient `g` (or `g · s` for a scale `s` `[1]`, which a
//!   classifier's head uses): `dz = g · act'(y)` made where it is read, then
//!   `dw = xᵀ · dz` and `db = Σ dz` (by the units of `dw`'s first row) and, where asked,
//!   `dx = dz · wᵀ`, each unit a 4 × 4 block, the cubes of the one launch split between the
//!   two products.
//!
//! K replicas of a layer (`w` `[K, k, n]`, `b` `[K, n]`, and `x` `[K, m, k]` or one `[m, k]`
//! shared by all) take the same launch, a layer of cubes per replica (the grid's third axis):
//! every tensor is read through replica `r`'s matrix in it ([`View`]).
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

/// Where replica `r`'s matrix (or vector) starts in `t`: a tensor of one replica's rank (a
/// matrix `[rows, cols]`, a vector `[n]`) is every replica's; one rank more (`[K, rows, cols]`,
/// `[K, n]`) holds each replica's.
#[cube]
fn base<F: Float>(t: &Tensor<F>, r: usize, #[comptime] matrix: bool) -> usize {
    let own = comptime![if matrix { 3 } else { 2 }];
    select(t.rank() == own, r * t.stride(0), 0)
}

/// The offset of element `(i, j)` of the matrix at `base` in `t` (its last two axes).
#[cube]
pub(super) fn at<F: Float>(t: &Tensor<F>, base: usize, i: usize, j: usize) -> usize {
    let d = t.rank() - 2;
    base + i * t.stride(d) + j * t.stride(d + 1)
}

/// The length of `t`'s last axis, and of the one before (a matrix's columns and rows).
#[cube]
pub(super) fn cols<F: Float>(t: &Tensor<F>) -> usize {
    t.shape(t.rank() - 1)
}

#[cube]
pub(super) fn rows<F: Float>(t: &Tensor<F>) -> usize {
    t.shape(t.rank() - 2)
}

/// A unit's `[MICRO, MICRO]` block of `x · w` from `(r0, c0)` on, for the matrices at `xb`
/// and `wb` in `x` and `w`, into `acc`: each sum over the inner axis in order.
#[cube]
#[allow(clippy::too_many_arguments)]
pub(super) fn block_sums<F: Float>(
    x: &Tensor<F>,
    w: &Tensor<F>,
    xb: usize,
    wb: usize,
    r0: usize,
    c0: usize,
    acc: &mut Array<F>,
) {
    let q = comptime![MICRO];
    let (m, n) = (rows::<F>(x), cols::<F>(w));
    #[unroll]
    for e in 0..q * q {
        acc[e] = F::new(0.0);
    }
    let mut xs = Array::<F>::new(q);
    let mut ws = Array::<F>::new(q);
    for i in 0..cols::<F>(x) {
        #[unroll]
        for a in 0..q {
            xs[a] = x[at::<F>(x, xb, clamp(r0 + a, m), i)];
            ws[a] = w[at::<F>(w, wb, i, clamp(c0 + a, n))];
        }
        outer_add::<F>(acc, &xs, &ws);
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
    let rep = CUBE_POS_Z as usize;
    let (xb, wb, bb) = (
        base::<F>(x, rep, true),
        base::<F>(w, rep, true),
        base::<F>(b, rep, false),
    );
    let yb = base::<F>(y, rep, true);
    let bs = b.stride(b.rank() - 1);
    let (m, n) = (rows::<F>(x), cols::<F>(w));
    let r0 = CUBE_POS_Y as usize * comptime![SPAN] + UNIT_POS_Y as usize * q;
    let c0 = CUBE_POS_X as usize * comptime![SPAN] + UNIT_POS_X as usize * q;
    let mut acc = Array::<F>::new(comptime![MICRO * MICRO]);
    block_sums::<F>(x, w, xb, wb, r0, c0, &mut acc);
    #[unroll]
    for a in 0..q {
        #[unroll]
        for c in 0..q {
            let (r, col) = (r0 + a, c0 + c);
            if r < m && col < n {
                let z = acc[a * q + c] + b[bb + col * bs];
                let o = at::<F>(y, yb, r, col);
                y[o] = activate::<F>(z, act);
            }
        }
    }
}

/// `dz[r, j]`: the output's gradient at `(r, j)` before the activation, from the gradient `g`
/// and the output `y` of the replica whose matrices in them start at `gb` and `yb`.
#[cube]
#[allow(clippy::too_many_arguments)]
fn dz_at<F: Float>(
    g: &Tensor<F>,
    gb: usize,
    y: &Tensor<F>,
    yb: usize,
    r: usize,
    j: usize,
    scale: F,
    #[comptime] act: u32,
    #[comptime] scaled: bool,
) -> F {
    let mut v = g[at::<F>(g, gb, r, j)];
    if scaled {
        v *= scale;
    }
    pre_activation::<F>(y[at::<F>(y, yb, r, j)], v, act)
}

/// A cube's `[SPAN, SPAN]` block of replica `rep`'s `dw = xᵀ · dz` from unit `(i0, j0)` on,
/// and of its `db` where the block is `dw`'s first.
#[cube]
#[allow(clippy::too_many_arguments)]
fn weight_grad<F: Float>(
    x: &Tensor<F>,
    g: &Tensor<F>,
    y: &Tensor<F>,
    dw: &mut Tensor<F>,
    db: &mut Tensor<F>,
    rep: usize,
    i0: usize,
    j0: usize,
    scale: F,
    #[comptime] act: u32,
    #[comptime] scaled: bool,
) {
    let q = comptime![MICRO];
    let (k, n) = (dw.shape(dw.rank() - 2), dw.shape(dw.rank() - 1));
    let (xb, gb, yb) = (
        base::<F>(x, rep, true),
        base::<F>(g, rep, true),
        base::<F>(y, rep, true),
    );
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
    for r in 0..rows::<F>(x) {
        #[unroll]
        for a in 0..q {
            xs[a] = x[at::<F>(x, xb, r, clamp(i0 + a, k))];
            ds[a] = dz_at::<F>(g, gb, y, yb, r, clamp(j0 + a, n), scale, act, scaled);
        }
        outer_add::<F>(&mut acc, &xs, &ds);
        #[unroll]
        for a in 0..q {
            bias[a] += ds[a];
        }
    }
    let dwb = base::<F>(dw, rep, true);
    #[unroll]
    for a in 0..q {
        #[unroll]
        for c in 0..q {
            let (i, j) = (i0 + a, j0 + c);
            if i < k && j < n {
                let o = at::<F>(dw, dwb, i, j);
                dw[o] = acc[a * q + c];
            }
        }
    }
    if i0 == 0 {
        let (dbb, dbs) = (base::<F>(db, rep, false), db.stride(db.rank() - 1));
        #[unroll]
        for c in 0..q {
            let j = j0 + c;
            if j < n {
                db[dbb + j * dbs] = bias[c];
            }
        }
    }
}

/// A unit's `[MICRO, MICRO]` block of replica `rep`'s `dx = dz · wᵀ` from `(r0, i0)` on.
#[cube]
#[allow(clippy::too_many_arguments)]
fn input_grad<F: Float>(
    w: &Tensor<F>,
    g: &Tensor<F>,
    y: &Tensor<F>,
    dx: &mut Tensor<F>,
    rep: usize,
    r0: usize,
    i0: usize,
    scale: F,
    #[comptime] act: u32,
    #[comptime] scaled: bool,
) {
    let q = comptime![MICRO];
    let (m, k) = (rows::<F>(g), rows::<F>(w));
    let (wb, gb, yb) = (
        base::<F>(w, rep, true),
        base::<F>(g, rep, true),
        base::<F>(y, rep, true),
    );
    let mut acc = Array::<F>::new(comptime![MICRO * MICRO]);
    #[unroll]
    for e in 0..q * q {
        acc[e] = F::new(0.0);
    }
    let mut ds = Array::<F>::new(q);
    let mut ws = Array::<F>::new(q);
    for j in 0..cols::<F>(w) {
        #[unroll]
        for a in 0..q {
            ds[a] = dz_at::<F>(g, gb, y, yb, clamp(r0 + a, m), j, scale, act, scaled);
            ws[a] = w[at::<F>(w, wb, clamp(i0 + a, k), j)];
        }
        outer_add::<F>(&mut acc, &ds, &ws);
    }
    let dxb = base::<F>(dx, rep, true);
    #[unroll]
    for a in 0..q {
        #[unroll]
        for c in 0..q {
            let (r, i) = (r0 + a, i0 + c);
            if r < m && i < k {
                let o = at::<F>(dx, dxb, r, i);
                dx[o] = acc[a * q + c];
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
    scale: &Tensor<F>,
    #[comptime] act: u32,
    #[comptime] with_dx: bool,
    #[comptime] scaled: bool,
) {
    let span = comptime![SPAN];
    // Where `scaled`, `g` is read times `scale[0]` (a classifier's head: `g` is the logits'
    // gradient for a loss gradient of 1, `scale` the loss's gradient).
    let s = if scaled { scale[0] } else { F::new(1.0) };
    let q = comptime![MICRO];
    let (k, n) = (rows::<F>(w), cols::<F>(w));
    let dw_cols = n.div_ceil(span);
    let dw_cubes = k.div_ceil(span) * dw_cols;
    let (cube, rep) = (CUBE_POS_X as usize, CUBE_POS_Z as usize);
    let (ux, uy) = (UNIT_POS_X as usize * q, UNIT_POS_Y as usize * q);
    if cube < dw_cubes {
        let i0 = (cube / dw_cols) * span + uy;
        let j0 = (cube % dw_cols) * span + ux;
        weight_grad::<F>(x, g, y, dw, db, rep, i0, j0, s, act, scaled);
    } else {
        if comptime![with_dx] {
            let dx_cube = cube - dw_cubes;
            let dx_cols = k.div_ceil(span);
            let r0 = (dx_cube / dx_cols) * span + uy;
            let i0 = (dx_cube % dx_cols) * span + ux;
            input_grad::<F>(w, g, y, dx, rep, r0, i0, s, act, scaled);
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

pub(super) fn cube_dim() -> CubeDim {
    CubeDim::new_2d(TILE as u32, TILE as u32)
}

/// The replicas of `w` (`[K, k, n]`), or 1 (`[k, n]`).
fn replicas(w: &CubeTensor<impl CubeRuntime>) -> usize {
    let shape = w.meta.shape();
    if shape.len() == 3 { shape[0] } else { 1 }
}

/// `act(x · w + b)` for `x` `[m, k]`, `w` `[k, n]` and `b` `[n]`, all f32; or K replicas'
/// (`w` `[K, k, n]`, `b` `[K, n]`, `x` `[K, m, k]` or `[m, k]`): `[K, m, n]`.
pub fn forward<R: CubeRuntime>(
    x: CubeTensor<R>,
    w: CubeTensor<R>,
    b: CubeTensor<R>,
    act: u32,
) -> CubeTensor<R> {
    let (xs, ws) = (x.meta.shape().to_vec(), w.meta.shape().to_vec());
    let (m, n, k) = (xs[xs.len() - 2], ws[ws.len() - 1], replicas(&w));
    let shape = if ws.len() == 3 {
        vec![k, m, n]
    } else {
        vec![m, n]
    };
    let y = empty_device::<R, f32>(x.client.clone(), x.device.clone(), shape.into());
    let client = x.client.clone();
    let count = CubeCount::Static(tiles(n), tiles(m), k as u32);
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
/// gradient `g`, read times `scale[0]` where a `scale` `[1]` is given; `dx` only `with_dx`
/// (and only for an input of each replica's own).
pub fn backward<R: CubeRuntime>(
    (x, w, y, g): (CubeTensor<R>, CubeTensor<R>, CubeTensor<R>, CubeTensor<R>),
    scale: Option<CubeTensor<R>>,
    act: u32,
    with_dx: bool,
) -> (Option<CubeTensor<R>>, CubeTensor<R>, CubeTensor<R>) {
    let (xs, ws) = (x.meta.shape().to_vec(), w.meta.shape().to_vec());
    let (m, k, n, r) = (
        xs[xs.len() - 2],
        xs[xs.len() - 1],
        ws[ws.len() - 1],
        replicas(&w),
    );
    let (client, device) = (x.client.clone(), x.device.clone());
    let stacked = |dims: &[usize]| {
        let mut all = if ws.len() == 3 { vec![r] } else { vec![] };
        all.extend_from_slice(dims);
        burn::tensor::Shape::from(all)
    };
    let dw = empty_device::<R, f32>(client.clone(), device.clone(), stacked(&[k, n]));
    let db = empty_device::<R, f32>(client.clone(), device.clone(), stacked(&[n]));
    // Without dx, a one-element stand-in the kernel never touches.
    let dx_shape = if with_dx {
        stacked(&[m, k])
    } else {
        [1, 1].into()
    };
    let dx = empty_device::<R, f32>(client.clone(), device, dx_shape);
    let dx_cubes = if with_dx { tiles(m) * tiles(k) } else { 0 };
    let count = CubeCount::Static(tiles(k) * tiles(n) + dx_cubes, 1, r as u32);
    let scaled = scale.is_some();
    // Unscaled, a one-element stand-in the kernel never reads.
    let scale = scale
        .unwrap_or_else(|| empty_device::<R, f32>(client.clone(), dx.device.clone(), [1].into()));
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
            scale.into_tensor_arg(),
            act,
            with_dx,
            scaled,
        );
    }
    (with_dx.then_some(dx), dw, db)
}
