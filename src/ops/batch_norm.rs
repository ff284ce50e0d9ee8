//! Batch normalisation of `[n, channels, s]` maps (`s` = height × width) on the CPU, one channel's
//! statistics per task. Through Burn's operations on the flex backend a training step's batch
//! norm is a dozen broadcast operations, each an element-by-element strided walk; in a small
//! CNN they took most of the step. Here the forward is a pass for the mean, one for the
//! variance and one writing the output; the backward one pass for the two sums and one writing
//! the gradient. Sums are accumulated in f64.

use super::kernels::values;
use burn::backend::flex::FlexTensor;
use burn::tensor::TensorData;
use rayon::prelude::*;

/// `(n, channels, s)` of a `[n, c, s]` tensor.
fn dims(x: &FlexTensor) -> (usize, usize, usize) {
    let shape = x.layout().shape();
    (shape[0], shape[1], shape[2])
}

/// `f(channel, the offsets of its n blocks of s values)` for every channel, on the pool.
fn per_channel<T: Send>(
    (n, c, s): (usize, usize, usize),
    f: impl Fn(usize, &mut dyn Iterator<Item = usize>) -> T + Sync,
) -> Vec<T> {
    (0..c)
        .into_par_iter()
        .map(|ch| f(ch, &mut (0..n).map(|b| (b * c + ch) * s)))
        .collect()
}

/// `f(channel, block, block index)` for every block of `s` values of `[n, c, s]` maps, in place,
/// on the pool.
fn per_block(values: &mut [f32], c: usize, s: usize, f: impl Fn(usize, &mut [f32], usize) + Sync) {
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
    let x = values(x, n * c * s);
    let (gamma, beta) = (values(gamma, c), values(beta, c));
    let count = (n * s) as f64;
    let values = |at: usize| x[at..][..s].iter().map(|&v| f64::from(v));
    let mean: Vec<f64> = per_channel((n, c, s), |_, blocks| {
        blocks.flat_map(values).sum::<f64>() / count
    });
    let var: Vec<f64> = per_channel((n, c, s), |ch, blocks| {
        let m = mean[ch];
        blocks
            .flat_map(values)
            .map(|v| (v - m).powi(2))
            .sum::<f64>()
            / count
    });
    let (scale, shift) = affine(&gamma, &beta, &mean, &var, epsilon);
    let mut y = x;
    channel_affine_in_place(&mut y, c, s, &scale, &shift);
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
    let shape = x.layout().shape().clone();
    let mut y = values(x, n * c * s);
    let (scale, shift) = (values(scale, c), values(shift, c));
    channel_affine_in_place(&mut y, c, s, &scale, &shift);
    FlexTensor::from_data(TensorData::new(y, shape))
}

fn channel_affine_in_place(y: &mut [f32], c: usize, s: usize, scale: &[f32], shift: &[f32]) {
    per_block(y, c, s, |ch, block, _| {
        let (k, b) = (scale[ch], shift[ch]);
        for v in block {
            *v = *v * k + b;
        }
    });
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
    let shape = x.layout().shape().clone();
    let len = n * c * s;
    let (x, dy) = (values(x, len), values(grad, len));
    let gamma = values(gamma, c);
    let mean: Vec<f64> = values(mean, c).into_iter().map(f64::from).collect();
    let inv: Vec<f64> = (values(var, c).into_iter())
        .map(|v| 1.0 / (f64::from(v) + epsilon).sqrt())
        .collect();
    let sums: Vec<(f64, f64)> = per_channel((n, c, s), |ch, blocks| {
        let (m, k) = (mean[ch], inv[ch]);
        let pairs = blocks.flat_map(|at| x[at..][..s].iter().zip(&dy[at..][..s]));
        pairs.fold((0.0, 0.0), |(sd, sdx), (&x, &g)| {
            let g = f64::from(g);
            (sd + g, sdx + g * (f64::from(x) - m) * k)
        })
    });
    let count = (n * s) as f64;
    let mut dx = dy;
    per_block(&mut dx, c, s, |ch, block, i| {
        let (m, k, (sd, sdx)) = (mean[ch], inv[ch], sums[ch]);
        let factor = f64::from(gamma[ch]) * k / count;
        for (g, &x) in block.iter_mut().zip(&x[i * s..][..s]) {
            let xhat = (f64::from(x) - m) * k;
            *g = (factor * (count * f64::from(*g) - sd - xhat * sdx)) as f32;
        }
    });
    let vector = |f: fn(&(f64, f64)) -> f64| {
        FlexTensor::from_data(TensorData::new(
            sums.iter().map(|p| f(p) as f32).collect::<Vec<_>>(),
            [c],
        ))
    };
    (
        FlexTensor::from_data(TensorData::new(dx, shape)),
        vector(|p| p.1),
        vector(|p| p.0),
    )
}
