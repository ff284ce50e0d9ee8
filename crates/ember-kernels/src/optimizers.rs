//! SGD's and Adam's updates on the CPU: element-wise passes over a parameter, its
//! gradient and Adam's moments, at the CPU's widest SIMD level, pieces over the pool.

use crate::AdamStep;
use crate::elementwise::{PARALLEL_ELEMENTS, chunk_len};
use rayon::prelude::*;

/// `g <- w - lr * g`: the SGD update, written over the gradient.
#[inline(always)]
fn sgd_generic<const FMA: bool>(g: &mut [f32], w: &[f32], lr: f32) {
    for (g, w) in g.iter_mut().zip(w) {
        *g = w - lr * *g;
    }
}

/// The Adam update in one pass: moments in place, new weights written over the gradient.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn adam_generic<const FMA: bool>(
    g: &mut [f32],
    w: &[f32],
    m: &mut [f32],
    v: &mut [f32],
    beta1: f32,
    beta2: f32,
    factor: f32,
    eps: f32,
    lr: f32,
) {
    // The moments of a weight whose gradient stays zero decay into subnormals, which cost
    // Intel cores a microcode assist per operation (see `subnormals`).
    let _flush = crate::subnormals::FlushSubnormals::new();
    let n = g.len();
    let (w, m, v) = (&w[..n], &mut m[..n], &mut v[..n]);
    for i in 0..n {
        let gi = g[i];
        // The operation order of Burn's Adam, so both round alike.
        m[i] = m[i] * beta1 + gi * (1.0 - beta1);
        v[i] = v[i] * beta2 + gi * gi * (1.0 - beta2);
        let update = m[i] * factor / (v[i].sqrt() + eps);
        g[i] = w[i] - update * lr;
    }
}

crate::dispatch!(sgd_slice, sgd_slice_at, sgd_generic, (g: &mut [f32], w: &[f32], lr: f32));

#[rustfmt::skip]
crate::dispatch!(adam_slice, adam_slice_at, adam_generic, (g: &mut [f32], w: &[f32], m: &mut [f32], v: &mut [f32], beta1: f32, beta2: f32, factor: f32, eps: f32, lr: f32));

/// [`sgd_slice`], split across the pool for large tensors. Element-wise, so the result is the
/// same bits however it is split.
pub fn sgd(g: &mut [f32], w: &[f32], lr: f32) {
    match chunk_len(g.len(), PARALLEL_ELEMENTS) {
        Some(c) => g
            .par_chunks_mut(c)
            .zip(w.par_chunks(c))
            .for_each(|(g, w)| sgd_slice(g, w, lr)),
        // From the last piece to the first: the weight gradient's product wrote the gradient's
        // last rows last, so they are the likeliest to be still in L2 (fashion-mlp at one
        // thread on an Emerald Rapids Xeon, 3 rounds side by side: 0.6 to 1.1 % faster steps).
        None => {
            for (g, w) in g.rchunks_mut(SGD_PIECE).zip(w.rchunks(SGD_PIECE)) {
                sgd_slice(g, w, lr)
            }
        }
    }
}

/// Elements per piece of a one-thread SGD pass (16 KiB of each operand).
const SGD_PIECE: usize = 4096;

/// One Adam step over slices: `g` (the gradient) becomes the new weights, `m` and `v` the new
/// moments, in place; see [`adam_generic`]. `lrs` has one rate, or one per replica: the
/// elements split into as many equal slices, in order.
pub fn adam(
    g: &mut [f32],
    w: &[f32],
    (m1, v1): (&mut [f32], &mut [f32]),
    s: AdamStep,
    lrs: &[f32],
) {
    let n = g.len();
    let (factor, eps) = s.corrections();
    let each = (n / lrs.len()).max(1);
    let slices = g
        .chunks_mut(each)
        .zip(w.chunks(each))
        .zip(m1.chunks_mut(each).zip(v1.chunks_mut(each)));
    for (((g, w), (m, v)), &lr) in slices.zip(lrs) {
        let step = |g: &mut [f32], w: &[f32], m: &mut [f32], v: &mut [f32]| {
            adam_slice(g, w, m, v, s.beta1, s.beta2, factor, eps, lr)
        };
        // Split across the pool for large tensors, as `sgd` is.
        match chunk_len(g.len(), PARALLEL_ELEMENTS) {
            Some(c) => g
                .par_chunks_mut(c)
                .zip(w.par_chunks(c))
                .zip(m.par_chunks_mut(c))
                .zip(v.par_chunks_mut(c))
                .for_each(|(((g, w), m), v)| step(g, w, m, v)),
            None => step(g, w, m, v),
        }
    }
}
