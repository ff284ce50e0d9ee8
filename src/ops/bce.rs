//! Binary cross-entropy on logits for K replicas on the CPU: each replica's mean loss in one
//! pass, and the logits' gradient in one more. Through Burn's operations the stable form
//! `relu(z) - z·y + log1p(exp(-|z|))` and its mean are eight operations on `[K, n, 1]` tensors
//! forward and more backward, each a serial pass with its own allocation; here each replica's
//! rows are one pass, the replicas spread over the pool when there are enough rows.

use super::kernels::{contiguous, owned_contiguous};
use burn::backend::flex::FlexTensor;
use burn::tensor::TensorData;
use rayon::prelude::*;

/// Elements above which the replicas are spread over the pool: each costs an `exp` and a
/// `log1p` (tens of ns), so far fewer than an element-wise kernel's threshold.
const PARALLEL_ELEMENTS: usize = 4096;

/// Whether `elements` are worth spreading over the pool.
fn parallel(elements: usize) -> bool {
    elements >= PARALLEL_ELEMENTS && rayon::current_num_threads() > 1
}

/// `(replicas, rows per replica)` of logits `[K, n, ...]`.
fn dims(logits: &FlexTensor) -> (usize, usize) {
    let shape = logits.layout().shape();
    let reps = shape[0];
    (reps, shape.num_elements() / reps.max(1))
}

/// `log1p(exp(-|z|))` and `exp(-|z|)`.
fn softplus_of_minus_abs(z: f32) -> (f32, f32) {
    let s = (-z.abs()).exp();
    (s.ln_1p(), s)
}

/// Each replica's mean loss `[K]` for logits `[K, n, 1]` and 0/1 targets of the same shape.
pub fn forward(logits: FlexTensor, y: FlexTensor) -> FlexTensor {
    assert_eq!(logits.layout().shape(), y.layout().shape(), "shapes differ");
    let (reps, n) = dims(&logits);
    let (z, z_range) = contiguous(logits, reps * n);
    let (y, y_range) = contiguous(y, reps * n);
    let (z, t) = (&z.storage::<f32>()[z_range], &y.storage::<f32>()[y_range]);
    let loss = |r: usize| {
        let rows = z[r * n..][..n].iter().zip(&t[r * n..][..n]);
        let sum: f64 = rows
            .map(|(&z, &t)| f64::from(z.max(0.0) - z * t + softplus_of_minus_abs(z).0))
            .sum();
        (sum / n as f64) as f32
    };
    let losses: Vec<f32> = match parallel(reps * n) {
        true => (0..reps).into_par_iter().map(loss).collect(),
        false => (0..reps).map(loss).collect(),
    };
    FlexTensor::from_data(TensorData::new(losses, [reps]))
}

/// The logits' gradient, `(sigmoid(z) - y) / n` times each replica's incoming gradient `[K]`.
pub fn backward(logits: FlexTensor, y: FlexTensor, dloss: FlexTensor) -> FlexTensor {
    let (reps, n) = dims(&logits);
    let (dloss, dl_range) = contiguous(dloss, reps);
    let dl = &dloss.storage::<f32>()[dl_range];
    let (y, y_range) = contiguous(y, reps * n);
    let targets = &y.storage::<f32>()[y_range];
    let mut g = owned_contiguous(logits);
    let each = |(r, z): (usize, &mut [f32])| {
        let scale = dl[r] / n as f32;
        for (z, &t) in z.iter_mut().zip(&targets[r * n..][..n]) {
            let s = softplus_of_minus_abs(*z).1;
            let sigmoid = if *z >= 0.0 {
                1.0 / (1.0 + s)
            } else {
                s / (1.0 + s)
            };
            *z = (sigmoid - t) * scale;
        }
    };
    let values = &mut g.storage_mut::<f32>()[..reps * n];
    match parallel(reps * n) {
        true => values.par_chunks_mut(n.max(1)).enumerate().for_each(each),
        false => values.chunks_mut(n.max(1)).enumerate().for_each(each),
    }
    g
}
