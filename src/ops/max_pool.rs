//! k×k max-pooling at stride k, without padding (ember's only pool), on the CPU. Burn's flex
//! backend runs every 2-d pool as a 3-d one with padding, dilation and an i64 index per output:
//! in fashion-cnn's profile its forward took a quarter of the training step, more than either
//! convolution. Here each plane's windows are read once, and the backward finds each window's
//! maximum again in the input rather than keeping indices.
//!
//! The maximum is the one Burn picks: the window's first value (rows, then columns) unless a
//! later one is strictly greater. So NaN only wins from the first place, ties go to the first,
//! and outputs and gradients are the same bits as Burn's.

use super::kernels::{assume_init, contiguous, uninit};
use burn::backend::flex::FlexTensor;
use burn::tensor::TensorData;
use rayon::prelude::*;

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
    let (t, range) = contiguous(x, g.planes * plane);
    let values = &t.storage::<f32>()[range];
    let mut y = uninit(g.planes * out);
    y.par_chunks_mut(out * PLANES_PER_TASK)
        .zip(values.par_chunks(plane * PLANES_PER_TASK))
        .for_each(|(ys, xs)| {
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
    let (t, range) = contiguous(x, g.planes * plane);
    let values = &t.storage::<f32>()[range];
    let (grad, grad_range) = contiguous(grad, g.planes * out);
    let grads = &grad.storage::<f32>()[grad_range];
    let mut dx = vec![0.0f32; g.planes * plane];
    dx.par_chunks_mut(plane * PLANES_PER_TASK)
        .zip(values.par_chunks(plane * PLANES_PER_TASK))
        .zip(grads.par_chunks(out * PLANES_PER_TASK))
        .for_each(|((dxs, xs), gs)| {
            let planes = dxs.chunks_mut(plane).zip(xs.chunks(plane));
            for ((dx, x), gs) in planes.zip(gs.chunks(out)) {
                // Added to zero, as Burn's backward does (so -0.0 comes out as 0.0).
                g.each_max(x, |i, at, _| dx[at] += gs[i]);
            }
        });
    FlexTensor::from_data(TensorData::new(dx, g.dims((g.h, g.w))))
}

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

    #[test]
    fn the_kernel_matches_burns_pool_and_its_gradient_bit_for_bit() {
        // Odd sizes leave a row and a column out; windows of 3 and 4 (read at run time) too.
        for (shape, k) in [
            ([3, 5, 8, 8], 2),
            ([2, 3, 7, 9], 2),
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
