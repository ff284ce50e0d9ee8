//! Binary cross-entropy on logits for K replicas on the CPU: each replica's mean loss in one
//! pass, and the logits' gradient in one more. Through Burn's operations the stable form
//! `relu(z) - z·y + log1p(exp(-|z|))` and its mean are eight operations on `[K, n, 1]` tensors
//! forward and more backward, each a serial pass with its own allocation; here each replica's
//! rows are one pass on one pool thread.

use super::kernels::owned_contiguous;
use burn::backend::flex::FlexTensor;
use burn::tensor::TensorData;
use rayon::prelude::*;

/// Elements above which the replicas are spread over the pool: each costs an `exp` and a
/// `log1p` (tens of ns), so far fewer than an element-wise kernel's threshold.
const PARALLEL_ELEMENTS: usize = 4096;

/// `each(r, rows)` over the replicas' `n`-element slices of `values`, on the pool when worth it.
fn per_replica<T: Send>(
    values: &mut [f32],
    n: usize,
    each: impl Fn(usize, &mut [f32]) -> T + Sync + Send,
) -> Vec<T> {
    let parallel = values.len() >= PARALLEL_ELEMENTS && rayon::current_num_threads() > 1;
    let chunks = values.chunks_mut(n.max(1)).enumerate();
    if parallel {
        let chunks: Vec<_> = chunks.collect();
        chunks.into_par_iter().map(|(r, c)| each(r, c)).collect()
    } else {
        chunks.map(|(r, c)| each(r, c)).collect()
    }
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
    let mut z = owned_contiguous(logits);
    let y = owned_contiguous(y);
    let targets = &y.storage::<f32>()[..reps * n];
    let losses = per_replica(&mut z.storage_mut::<f32>()[..reps * n], n, |r, z| {
        let t = &targets[r * n..][..n];
        let sum: f64 = (z.iter().zip(t))
            .map(|(&z, &t)| f64::from(z.max(0.0) - z * t + softplus_of_minus_abs(z).0))
            .sum();
        (sum / n as f64) as f32
    });
    FlexTensor::from_data(TensorData::new(losses, [reps]))
}

/// The logits' gradient, `(sigmoid(z) - y) / n` times each replica's incoming gradient `[K]`.
pub fn backward(logits: FlexTensor, y: FlexTensor, dloss: FlexTensor) -> FlexTensor {
    let (reps, n) = dims(&logits);
    let dloss = dloss.to_contiguous();
    let dl = &dloss.storage::<f32>()[dloss.layout().start_offset()..][..reps];
    let y = owned_contiguous(y);
    let targets = &y.storage::<f32>()[..reps * n];
    let mut g = owned_contiguous(logits);
    per_replica(&mut g.storage_mut::<f32>()[..reps * n], n, |r, z| {
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
    });
    g
}
