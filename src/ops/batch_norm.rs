//! Batch normalisation of `[n, channels, s]` maps (`s` = height × width) on the CPU, one channel's
//! statistics per task. Through Burn's operations on the flex backend a training step's batch
//! norm is a dozen broadcast operations, each an element-by-element strided walk; in a small
//! CNN they took most of the step. Here the forward is one pass for the sums of the values and
//! of their squares and one writing the output; the backward one pass for the two sums and one
//! writing the gradient. Sums are accumulated in f64.

use super::channel_sums::channel_sums;
use super::{
    contiguous::contiguous, contiguous::owned_contiguous, contiguous::values,
    elementwise::dispatch, view::assume_init, view::uninit,
};
use burn::backend::flex::FlexTensor;
use burn::tensor::TensorData;
use rayon::prelude::*;
use std::mem::MaybeUninit;

/// `(n, channels, s)` of a `[n, c, s]` tensor.
fn dims(x: &FlexTensor) -> (usize, usize, usize) {
    let shape = x.layout().shape();
    (shape[0], shape[1], shape[2])
}

/// Per channel, the mean and the biased variance of its values, from one pass's f64 sums of
/// `x` and `x²` (`var = E[x²] - mean²`). A second pass over the centred values was a whole
/// read of the convolution's output more; in f64 the difference of the two loses nothing an
/// f32 variance keeps unless the mean is some 10⁴ standard deviations from zero.
fn moments(dims: (usize, usize, usize), x: &[f32]) -> (Vec<f64>, Vec<f64>) {
    let count = (dims.0 * dims.2) as f64;
    let sums = channel_sums(
        dims,
        -0.0,
        [x],
        |_| (),
        |(), [v]| {
            let v = f64::from(v);
            [v, v * v]
        },
    );
    sums.into_iter()
        .map(|[sum, squares]| {
            let mean = sum / count;
            (mean, (squares / count - mean * mean).max(0.0))
        })
        .unzip()
}

/// `f(channel, block, block index)` for every block of `s` values of `[n, c, s]` maps, in place,
/// on the pool.
fn per_block<T: Send>(
    values: &mut [T],
    c: usize,
    s: usize,
    f: impl Fn(usize, &mut [T], usize) + Sync,
) {
    values
        .par_chunks_mut(s.max(1))
        .with_min_len(64)
        .enumerate()
        .for_each(|(i, block)| f(i % c, block, i));
}

/// `y = (x - mean) / sqrt(var + eps) · gamma + beta` per channel, with the batch's mean and
/// biased variance `[c]`, which it returns too.
pub fn forward(
    x: FlexTensor,
    gamma: FlexTensor,
    beta: FlexTensor,
    epsilon: f64,
) -> (FlexTensor, FlexTensor, FlexTensor) {
    let (n, c, s) = dims(&x);
    let shape = x.layout().shape().clone();
    let (xt, range) = contiguous(x, n * c * s);
    let x = &xt.storage::<f32>()[range];
    let (gamma, beta) = (values(gamma, c), values(beta, c));
    let (mean, var) = moments((n, c, s), x);
    let (scale, shift) = affine(&gamma, &beta, &mean, &var, epsilon);
    // The input stays (autodiff keeps it for the backward pass): the output is a new buffer,
    // written in the same pass that reads the input.
    let mut y = uninit(n * c * s);
    per_block(&mut y, c, s, |ch, out, i| {
        normalize(out, &x[i * s..][..s], scale[ch], shift[ch]);
    });
    // SAFETY: the blocks cover every element, and each wrote all of its own.
    let y = unsafe { assume_init(y) };
    let vector = |v: &[f64]| FlexTensor::from_data(TensorData::new(to_f32(v), [c]));
    (
        FlexTensor::from_data(TensorData::new(y, shape)),
        vector(&mean),
        vector(&var),
    )
}

/// `x · scale + shift` per channel of `[n, c, s]` maps: batch norm at inference, with the
/// running statistics folded into `scale` and `shift`.
pub fn channel_affine(x: FlexTensor, scale: FlexTensor, shift: FlexTensor) -> FlexTensor {
    let (n, c, s) = dims(&x);
    // In place when nothing else holds `x` (the convolution's output at inference).
    let mut y = owned_contiguous(x);
    let (scale, shift) = (values(scale, c), values(shift, c));
    per_block(
        &mut y.storage_mut::<f32>()[..n * c * s],
        c,
        s,
        |ch, block, _| {
            let (k, b) = (scale[ch], shift[ch]);
            for v in block {
                *v = *v * k + b;
            }
        },
    );
    y
}

/// Per channel, the `scale = gamma / sqrt(var + eps)` and `shift = beta - mean · scale` that
/// turn `x` into the normalised output in one multiply-add.
fn affine(
    gamma: &[f32],
    beta: &[f32],
    mean: &[f64],
    var: &[f64],
    epsilon: f64,
) -> (Vec<f32>, Vec<f32>) {
    let scale: Vec<f64> = (gamma.iter().zip(var))
        .map(|(&g, &v)| f64::from(g) / (v + epsilon).sqrt())
        .collect();
    let shift = (beta.iter().zip(mean).zip(&scale))
        .map(|((&b, &m), &k)| f64::from(b) - m * k)
        .collect::<Vec<_>>();
    (to_f32(&scale), to_f32(&shift))
}

fn to_f32(v: &[f64]) -> Vec<f32> {
    v.iter().map(|&x| x as f32).collect()
}

/// The gradients `(dx, dgamma, dbeta)` of [`forward`], given its input, `gamma`, the batch's
/// mean and variance, and the output's gradient: with `x̂ = (x - mean) / sqrt(var + eps)`,
/// `dbeta = Σ dy`, `dgamma = Σ dy · x̂` and
/// `dx = gamma / sqrt(var + eps) / N · (N · dy - dbeta - x̂ · dgamma)`.
pub fn backward(
    x: FlexTensor,
    gamma: FlexTensor,
    mean: FlexTensor,
    var: FlexTensor,
    epsilon: f64,
    grad: FlexTensor,
) -> (FlexTensor, FlexTensor, FlexTensor) {
    let (n, c, s) = dims(&x);
    let len = n * c * s;
    let (xt, range) = contiguous(x, len);
    let x = &xt.storage::<f32>()[range];
    // The output's gradient becomes the input's, in its own buffer when nothing else holds it.
    let mut dx = owned_contiguous(grad);
    let dy = &mut dx.storage_mut::<f32>()[..len];
    let gamma = values(gamma, c);
    let mean: Vec<f64> = values(mean, c).into_iter().map(f64::from).collect();
    let inv: Vec<f64> = (values(var, c).into_iter())
        .map(|v| 1.0 / (f64::from(v) + epsilon).sqrt())
        .collect();
    let lane = |ch: usize| (mean[ch], inv[ch]);
    let sums = channel_sums((n, c, s), 0.0, [x, &*dy], lane, |(m, k), [x, dy]| {
        let g = f64::from(dy);
        [g, g * (f64::from(x) - m) * k]
    });
    let count = (n * s) as f64;
    per_block(dy, c, s, |ch, block, i| {
        let (m, k, [sd, sdx]) = (mean[ch], inv[ch], sums[ch]);
        let factor = f64::from(gamma[ch]) * k / count;
        input_grad(block, &x[i * s..][..s], [m, k, factor, count, sd, sdx]);
    });
    let vector = |q: usize| {
        let sums = sums.iter().map(|p| p[q] as f32).collect::<Vec<_>>();
        FlexTensor::from_data(TensorData::new(sums, [c]))
    };
    (dx, vector(1), vector(0))
}

// The two passes over every element, compiled for each CPU level (`elementwise::dispatch!`): as
// plain loops the f64 one ran two lanes wide. Neither multiplies and adds in one rounding (no
// `mul_add`), so every level gives the same bits.

/// `out = x · k + b`: one channel's block of the normalised output.
#[inline(always)]
fn normalize_generic<const FMA: bool>(out: &mut [MaybeUninit<f32>], x: &[f32], k: f32, b: f32) {
    for (o, v) in out.iter_mut().zip(x) {
        o.write(*v * k + b);
    }
}

/// One channel's block of [`backward`]'s `dx`, in place of `dy` in `g`, given `x` and the
/// channel's `[mean, 1 / sqrt(var + eps), gamma · that / N, N, Σ dy, Σ dy · x̂]`.
#[inline(always)]
fn input_grad_generic<const FMA: bool>(g: &mut [f32], x: &[f32], channel: [f64; 6]) {
    let [m, k, factor, count, sd, sdx] = channel;
    for (g, &x) in g.iter_mut().zip(x) {
        let xhat = (f64::from(x) - m) * k;
        *g = (factor * (count * f64::from(*g) - sd - xhat * sdx)) as f32;
    }
}

#[rustfmt::skip]
dispatch!(normalize, normalize_at, normalize_generic, (out: &mut [MaybeUninit<f32>], x: &[f32], k: f32, b: f32));
dispatch!(input_grad, input_grad_at, input_grad_generic, (g: &mut [f32], x: &[f32], channel: [f64; 6]));

#[cfg(test)]
mod tests {
    use super::*;

    /// The element passes give the same bits at every level this CPU has.
    #[test]
    fn the_passes_give_the_same_bits_at_every_level() {
        use crate::ops::simd::{Simd, detected};
        let x: Vec<f32> = (0..203)
            .map(|i| ((i * 7919) % 101) as f32 * 0.37 - 17.0 + 1e-3 / (i as f32 + 1.0))
            .collect();
        let dy: Vec<f32> = x.iter().map(|v| (v * 1.3).sin()).collect();
        let normalized = |level| {
            let mut out = vec![MaybeUninit::new(f32::NAN); x.len()];
            normalize_at(level, &mut out, &x, 0.731, -1.19);
            // SAFETY: the pass writes every element.
            out.iter()
                .map(|v| unsafe { v.assume_init() }.to_bits())
                .collect::<Vec<_>>()
        };
        let grads = |level| {
            let mut g = dy.clone();
            input_grad_at(level, &mut g, &x, [0.37, 1.7, 0.013, 203.0, -2.5, 11.25]);
            g.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        };
        for level in detected().up_to() {
            assert_eq!(normalized(level), normalized(Simd::Portable), "{level}");
            assert_eq!(grads(level), grads(Simd::Portable), "{level}");
        }
    }

    /// The one-pass moments are the two-pass ones (the mean, then the mean of the squared
    /// deviations, in f64) to a few f32 units in the last place: values of mixed magnitudes,
    /// groups of channels whole and not, maps with and without a remainder of a tile, and a
    /// channel whose mean is a thousand times its spread.
    #[test]
    fn moments_from_one_pass_are_the_two_pass_ones() {
        for (n, c, s) in [(5, 11, 37), (2, 16, 24)] {
            let x: Vec<f32> = (0..n * c * s)
                .map(|i| {
                    let r = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
                    let v = r as f32 / (1u64 << 24) as f32 - 0.5;
                    // Channel 3's values lie around 1000, each other's around zero.
                    match (i / s) % c {
                        3 => 1000.0 + v,
                        _ => v * 10f32.powi((i % 13) as i32 - 6),
                    }
                })
                .collect();
            let (means, vars) = moments((n, c, s), &x);
            for ch in 0..c {
                let values: Vec<f64> = (0..n)
                    .flat_map(|b| &x[(b * c + ch) * s..][..s])
                    .map(|&v| f64::from(v))
                    .collect();
                let count = values.len() as f64;
                let mean = values.iter().sum::<f64>() / count;
                let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / count;
                let close = |got: f64, want: f64| (got - want).abs() <= 1e-6 * want.abs() + 1e-30;
                assert!(
                    close(means[ch], mean),
                    "{n}x{c}x{s}, channel {ch}: mean {}",
                    means[ch]
                );
                assert!(
                    close(vars[ch], var),
                    "{n}x{c}x{s}, channel {ch}: var {} against {var}",
                    vars[ch]
                );
            }
        }
    }
}
