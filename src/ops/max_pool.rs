//! k×k max-pooling at stride k, without padding (ember's only pool), on the CPU. Burn's flex
//! backend runs every 2-d pool as a 3-d one with padding, dilation and an i64 index per output:
//! in fashion-cnn's profile its forward took a quarter of the training step, more than either
//! convolution. Here each plane's windows are read once, and the backward finds each window's
//! maximum again in the input rather than keeping indices.
//!
//! The maximum is the one Burn picks: the window's first value (rows, then columns) unless a
//! later one is strictly greater. So NaN only wins from the first place, ties go to the first,
//! and outputs and gradients are the same bits as Burn's.

use super::{contiguous::contiguous, elementwise::dispatch, view::assume_init, view::uninit};
use burn::backend::flex::FlexTensor;
use burn::tensor::TensorData;
use rayon::prelude::*;
use std::mem::MaybeUninit;

/// Planes per task: enough that a small map's planes are not a task each.
const PLANES_PER_TASK: usize = 16;

/// The sizes of one pool over `x` `[n, c, h, w]`: `planes` = n·c maps of `h` × `w`, pooled to
/// `oh` × `ow` (the rows and columns past the last whole window are left out).
#[derive(Debug, Clone, Copy)]
struct Geometry {
    n: usize,
    c: usize,
    planes: usize,
    h: usize,
    w: usize,
    k: usize,
    oh: usize,
    ow: usize,
}

impl Geometry {
    fn of(x: &FlexTensor, k: usize) -> Self {
        let s = x.layout().shape();
        let (h, w) = (s[2], s[3]);
        Self {
            n: s[0],
            c: s[1],
            planes: s[0] * s[1],
            h,
            w,
            k,
            oh: h / k,
            ow: w / k,
        }
    }

    fn dims(&self, (h, w): (usize, usize)) -> [usize; 4] {
        [self.n, self.c, h, w]
    }

    /// Calls `f(i, at, v)` for each window `i` (row-major) of `plane`, with the position `at`
    /// in the plane and the value `v` of its maximum. The common window sizes are compiled
    /// apart: with `k` known, the window's loops unroll (a run-time `k` made the pool five
    /// times slower).
    #[inline]
    fn each_max(&self, plane: &[f32], f: impl FnMut(usize, usize, f32)) {
        match self.k {
            2 => self.each_max_of::<2>(plane, f),
            3 => self.each_max_of::<3>(plane, f),
            _ => self.each_max_of::<0>(plane, f),
        }
    }

    /// [`Geometry::each_max`] for windows of `K` (0: `self.k`, read at run time). The
    /// comparisons are selects, not branches: after a ReLU, which value wins is a coin toss.
    #[inline(always)]
    fn each_max_of<const K: usize>(&self, plane: &[f32], mut f: impl FnMut(usize, usize, f32)) {
        let (w, k) = (self.w, if K == 0 { self.k } else { K });
        for oy in 0..self.oh {
            let top = oy * k * w;
            let band = &plane[top..top + k * w];
            for ox in 0..self.ow {
                let left = ox * k;
                let mut best = (left, band[left]);
                for ky in 0..k {
                    let start = ky * w + left;
                    for (kx, &v) in band[start..start + k].iter().enumerate() {
                        let better = v > best.1;
                        best.0 = if better { start + kx } else { best.0 };
                        best.1 = if better { v } else { best.1 };
                    }
                }
                f(oy * self.ow + ox, top + best.0, best.1);
            }
        }
    }
}

/// The max-pool of `x` `[n, c, h, w]` over k×k windows at stride k: `[n, c, h / k, w / k]`.
pub fn forward(x: FlexTensor, k: usize) -> FlexTensor {
    let g = Geometry::of(&x, k);
    let (plane, out) = (g.h * g.w, g.oh * g.ow);
    if out == 0 {
        // A map smaller than the window has no window; rayon refuses chunks of size 0.
        return zeros(g, (g.oh, g.ow));
    }
    let (t, range) = contiguous(x, g.planes * plane);
    let values = &t.storage::<f32>()[range];
    let mut y = uninit(g.planes * out);
    y.par_chunks_mut(out * PLANES_PER_TASK)
        .zip(values.par_chunks(plane * PLANES_PER_TASK))
        .for_each(|(ys, xs)| {
            if k == 2 {
                return pool2_planes(xs, ys, g.h, g.w);
            }
            for (y, x) in ys.chunks_mut(out).zip(xs.chunks(plane)) {
                g.each_max(x, |i, _, v| {
                    y[i].write(v);
                });
            }
        });
    // SAFETY: every output element was written above.
    let y = unsafe { assume_init(y) };
    FlexTensor::from_data(TensorData::new(y, g.dims((g.oh, g.ow))))
}

/// The gradient of [`forward`] for `x`, given the output's gradient `grad`: each window's
/// gradient goes to its maximum, the rest of the input gets zero.
pub fn backward(x: FlexTensor, k: usize, grad: FlexTensor) -> FlexTensor {
    let g = Geometry::of(&x, k);
    let (plane, out) = (g.h * g.w, g.oh * g.ow);
    if out == 0 {
        // No window: no value reached the output, so none gets a gradient.
        return zeros(g, (g.h, g.w));
    }
    let (t, range) = contiguous(x, g.planes * plane);
    let values = &t.storage::<f32>()[range];
    let (grad, grad_range) = contiguous(grad, g.planes * out);
    let grads = &grad.storage::<f32>()[grad_range];
    let mut dx = uninit(g.planes * plane);
    dx.par_chunks_mut(plane * PLANES_PER_TASK)
        .zip(values.par_chunks(plane * PLANES_PER_TASK))
        .zip(grads.par_chunks(out * PLANES_PER_TASK))
        .for_each(|((dxs, xs), gs)| {
            if k == 2 {
                return pool2_grad_planes(xs, gs, dxs, g.h, g.w);
            }
            dxs.fill(MaybeUninit::new(0.0));
            let planes = dxs.chunks_mut(plane).zip(xs.chunks(plane));
            for ((dx, x), gs) in planes.zip(gs.chunks(out)) {
                // Added to zero, as Burn's backward does (so -0.0 comes out as 0.0).
                g.each_max(x, |i, at, _| {
                    dx[at].write(0.0 + gs[i]);
                });
            }
        });
    // SAFETY: each task wrote its whole share (the zeros first, on the general path).
    let dx = unsafe { assume_init(dx) };
    FlexTensor::from_data(TensorData::new(dx, g.dims((g.h, g.w))))
}

/// Zeros `[n, c, h, w]`, with the pool's `n` and `c`.
fn zeros(g: Geometry, (h, w): (usize, usize)) -> FlexTensor {
    let zeros = vec![0.0f32; g.planes * h * w];
    FlexTensor::from_data(TensorData::new(zeros, g.dims((h, w))))
}

/// The maximum of a 2×2 window `[top left, top right, bottom left, bottom right]` as
/// [`Geometry::each_max_of`] picks it (a later value wins only when strictly greater), in
/// selects that vectorise.
#[inline(always)]
fn max4(v: [f32; 4]) -> f32 {
    v[1..]
        .iter()
        .fold(v[0], |best, &x| if x > best { x } else { best })
}

/// Which value of a 2×2 window [`max4`] picks, as one flag per place: each later value that
/// is strictly greater than the maximum so far takes over, so the last that does wins. Flags
/// rather than an index, so that the backward's loop vectorises.
#[inline(always)]
fn wins4(v: [f32; 4]) -> [bool; 4] {
    let w1 = v[1] > v[0];
    let m1 = if w1 { v[1] } else { v[0] };
    let w2 = v[2] > m1;
    let m2 = if w2 { v[2] } else { m1 };
    let w3 = v[3] > m2;
    [!(w1 | w2 | w3), w1 & !(w2 | w3), w2 & !w3, w3]
}

/// The gradients of `N` neighbouring 2×2 windows, given `W` = 2·`N` values of the input's
/// top and bottom rows and the windows' output gradients `g`: each window's gradient at its
/// maximum (added to zero, as Burn's backward does, so -0.0 comes out as 0.0), zero at the
/// other three places. On arrays, which the compiler keeps in vector registers.
#[inline(always)]
fn pool2_grads<const N: usize, const W: usize>(
    [t, b]: [[f32; W]; 2],
    g: [f32; N],
) -> [[f32; W]; 2] {
    let (mut dt, mut db) = ([0.0; W], [0.0; W]);
    for (i, g) in g.into_iter().enumerate() {
        let (l, r) = (2 * i, 2 * i + 1);
        let wins = wins4([t[l], t[r], b[l], b[r]]);
        let v = 0.0 + g;
        let pick = |won: bool| if won { v } else { 0.0 };
        (dt[l], dt[r]) = (pick(wins[0]), pick(wins[1]));
        (db[l], db[r]) = (pick(wins[2]), pick(wins[3]));
    }
    [dt, db]
}

/// [`pool2_grads`] of the windows `ox..ox + N` of a pair of rows: `x` the input's top and
/// bottom rows, `g` the row's output gradients, `dx` the gradient's rows.
#[inline(always)]
fn pool2_grads_at<const N: usize, const W: usize>(
    x: [&[f32]; 2],
    g: &[f32],
    dx: &mut [&mut [MaybeUninit<f32>]; 2],
    ox: usize,
) {
    let span = 2 * ox..2 * ox + W;
    let rows = x.map(|row| <[f32; W]>::try_from(&row[span.clone()]).unwrap());
    let grads = pool2_grads::<N, W>(rows, g[ox..ox + N].try_into().unwrap());
    for (to, from) in dx.iter_mut().zip(grads) {
        for (t, f) in to[span.clone()].iter_mut().zip(from) {
            t.write(f);
        }
    }
}

/// One pair of rows of [`pool2_grad_generic`]: `x` the input's top and bottom rows, `g` the
/// row's output gradients, `dx` the gradient's rows (each at least 2·`g.len()` long). Four
/// windows at a time as 4-lane vectors, then the rest one by one: a plain loop over the row
/// vectorised 16 windows wide, more than a row of a small map has, so its vector part never ran.
#[inline(always)]
fn pool2_grad_rows(x: [&[f32]; 2], g: &[f32], mut dx: [&mut [MaybeUninit<f32>]; 2]) {
    let whole = g.len() / 4 * 4;
    for ox in (0..whole).step_by(4) {
        pool2_grads_at::<4, 8>(x, g, &mut dx, ox);
    }
    for ox in whole..g.len() {
        pool2_grads_at::<1, 2>(x, g, &mut dx, ox);
    }
}

/// The 2×2 pool of the planes `xs` (each `h` × `w`) into `ys` (each `h / 2` × `w / 2`): a
/// loop over pairs of rows that the compiler vectorises, where the general windows' loop
/// took a scalar pass per window. (`FMA` is `dispatch!`'s parameter; there is nothing to fuse.)
#[inline(always)]
fn pool2_generic<const FMA: bool>(xs: &[f32], ys: &mut [MaybeUninit<f32>], h: usize, w: usize) {
    let ow = w / 2;
    for (x, y) in xs.chunks_exact(h * w).zip(ys.chunks_exact_mut(h / 2 * ow)) {
        for (oy, out) in y.chunks_exact_mut(ow).enumerate() {
            let top = x[2 * oy * w..][..2 * ow].chunks_exact(2);
            let bottom = x[(2 * oy + 1) * w..][..2 * ow].chunks_exact(2);
            for ((o, t), b) in out.iter_mut().zip(top).zip(bottom) {
                o.write(max4([t[0], t[1], b[0], b[1]]));
            }
        }
    }
}

/// The gradient of [`pool2_generic`] for the planes `xs`, given the output's gradient `gs`,
/// written over the whole of `dxs`: each window's gradient at its maximum (added to zero, as
/// Burn's backward does, so -0.0 comes out as 0.0), zero elsewhere and in the row and column
/// an odd size leaves out.
#[inline(always)]
fn pool2_grad_generic<const FMA: bool>(
    xs: &[f32],
    gs: &[f32],
    dxs: &mut [MaybeUninit<f32>],
    h: usize,
    w: usize,
) {
    let (oh, ow) = (h / 2, w / 2);
    let planes = xs.chunks_exact(h * w).zip(dxs.chunks_exact_mut(h * w));
    for ((x, dx), g) in planes.zip(gs.chunks_exact(oh * ow)) {
        let (pairs, rest) = dx.split_at_mut(2 * oh * w);
        let rows = pairs.chunks_exact_mut(2 * w).zip(g.chunks_exact(ow));
        for (oy, (dx, g)) in rows.enumerate() {
            let (top, bottom) = dx.split_at_mut(w);
            let x = [&x[2 * oy * w..][..w], &x[(2 * oy + 1) * w..][..w]];
            pool2_grad_rows(x, g, [&mut *top, &mut *bottom]);
            top[2 * ow..].fill(MaybeUninit::new(0.0));
            bottom[2 * ow..].fill(MaybeUninit::new(0.0));
        }
        rest.fill(MaybeUninit::new(0.0));
    }
}

#[rustfmt::skip]
dispatch!(pool2_planes, pool2_planes_at, pool2_generic, (xs: &[f32], ys: &mut [MaybeUninit<f32>], h: usize, w: usize));
#[rustfmt::skip]
dispatch!(pool2_grad_planes, pool2_grad_planes_at, pool2_grad_generic, (xs: &[f32], gs: &[f32], dxs: &mut [MaybeUninit<f32>], h: usize, w: usize));

#[cfg(test)]
mod tests {
    use burn::backend::Flex;
    use burn::tensor::ops::ModuleOps;
    use burn::tensor::{Tensor, TensorData, TensorPrimitive};

    type B = Flex;

    /// Values with many ties (a quarter are zero, as after a ReLU, and the rest are few
    /// distinct values), a NaN and infinities.
    fn input(shape: [usize; 4]) -> Tensor<B, 4> {
        let len = shape.iter().product::<usize>();
        let mut values: Vec<f32> = (0..len)
            .map(|i| match (i * 7919) % 23 {
                0..=5 => 0.0,
                6 => f32::INFINITY,
                7 => f32::NEG_INFINITY,
                r => (r % 5) as f32 - 2.0,
            })
            .collect();
        // A NaN first in its window, and one later in another.
        values[0] = f32::NAN;
        values[len / 2 + 1] = f32::NAN;
        Tensor::from_data(TensorData::new(values, shape), &Default::default())
    }

    fn bits(t: Tensor<B, 4>) -> Vec<u32> {
        t.into_data().iter::<f32>().map(f32::to_bits).collect()
    }

    fn float(t: Tensor<B, 4>) -> burn::backend::flex::FlexTensor {
        t.into_primitive().tensor()
    }

    fn tensor(t: burn::backend::flex::FlexTensor) -> Tensor<B, 4> {
        Tensor::from_primitive(TensorPrimitive::Float(t))
    }

    /// The 2×2 kernels at every level this CPU has, bit for bit against the general windows'
    /// loop (which the test below holds to Burn's): rows long enough for whole vectors and a
    /// remainder, odd sizes.
    #[test]
    fn the_2x2_kernels_give_the_same_bits_at_every_level() {
        use crate::ops::simd::detected;
        use std::mem::MaybeUninit;
        let unwrap = |v: Vec<MaybeUninit<f32>>| -> Vec<u32> {
            // SAFETY: the kernels write every element.
            v.into_iter()
                .map(|v| unsafe { v.assume_init() }.to_bits())
                .collect()
        };
        for shape in [[2, 3, 6, 70], [1, 4, 9, 33], [3, 2, 2, 2]] {
            let [n, c, h, w] = shape;
            let x = input(shape);
            let g = super::Geometry::of(&float(x.clone()), 2);
            let mut xs: Vec<f32> = x.into_data().to_vec().unwrap();
            // NaNs in the windows' bottom rows too (`input` puts them in top rows).
            xs[w + 2] = f32::NAN;
            xs[3 * w + 1] = f32::NAN;
            let mut want = vec![0u32; n * c * g.oh * g.ow];
            let mut want_dx = vec![0u32; xs.len()];
            let gs: Vec<f32> = (0..want.len()).map(|i| i as f32 - 7.0).collect();
            for (p, x) in xs.chunks(h * w).enumerate() {
                g.each_max(x, |i, at, v| {
                    want[p * g.oh * g.ow + i] = v.to_bits();
                    want_dx[p * h * w + at] = (0.0 + gs[p * g.oh * g.ow + i]).to_bits();
                });
            }
            for level in detected().up_to() {
                let mut ys = vec![MaybeUninit::new(f32::NAN); want.len()];
                super::pool2_planes_at(level, &xs, &mut ys, h, w);
                assert_eq!(unwrap(ys), want, "{level} {shape:?}");
                let mut dx = vec![MaybeUninit::new(f32::NAN); xs.len()];
                super::pool2_grad_planes_at(level, &xs, &gs, &mut dx, h, w);
                assert_eq!(unwrap(dx), want_dx, "{level} {shape:?}");
            }
        }
    }

    /// A map smaller than the window (which the config refuses before any pool runs) gives
    /// an empty output and a zero gradient, not a panic in the pool's chunks.
    #[test]
    fn a_map_smaller_than_the_window_pools_to_nothing() {
        for shape in [[2, 3, 1, 5], [1, 2, 5, 1], [2, 1, 2, 2]] {
            let x = input(shape);
            let y = tensor(super::forward(float(x.clone()), 3));
            let [n, c, h, w] = shape;
            assert_eq!(y.dims(), [n, c, h / 3, w / 3], "{shape:?}");
            let dx = super::backward(float(x), 3, float(y.clone()));
            assert_eq!(bits(tensor(dx)), vec![0; n * c * h * w], "{shape:?}");
        }
    }

    #[test]
    fn the_kernel_matches_burns_pool_and_its_gradient_bit_for_bit() {
        // Odd sizes leave a row and a column out; windows of 3 and 4 (read at run time) too.
        for (shape, k) in [
            ([3, 5, 8, 8], 2),
            ([2, 3, 7, 9], 2),
            ([2, 3, 5, 37], 2),
            ([5, 4, 8, 8], 2),
            ([2, 2, 9, 10], 3),
            ([1, 2, 9, 9], 4),
        ] {
            let x = input(shape);
            let p = [k, k];
            let burns = B::max_pool2d_with_indices(float(x.clone()), p, p, [0, 0], [1, 1], false);
            let ours = tensor(super::forward(float(x.clone()), k));
            assert_eq!(
                ours.dims(),
                tensor(burns.output.clone()).dims(),
                "{shape:?} k {k}"
            );
            assert_eq!(
                bits(ours.clone()),
                bits(tensor(burns.output)),
                "{shape:?} k {k}"
            );

            // A gradient with a negative zero, which Burn's backward turns into +0.0.
            let grad = input(ours.dims()).mul_scalar(-1.5).add_scalar(0.5);
            let grad = grad.clone().mask_fill(grad.clone().equal_elem(0.5), -0.0);
            let burns_dx = B::max_pool2d_with_indices_backward(
                float(x.clone()),
                p,
                p,
                [0, 0],
                [1, 1],
                false,
                float(grad.clone()),
                burns.indices,
            );
            let ours_dx = super::backward(float(x), k, float(grad));
            assert_eq!(
                bits(tensor(ours_dx)),
                bits(tensor(burns_dx.x_grad)),
                "{shape:?} k {k}"
            );
        }
    }
}
