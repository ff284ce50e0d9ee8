//! linear-scalar's replicas on the CPU: each replica's prediction `x · w + p · f` and its mean
//! squared error in one operation, and both gradients in one more. Through Burn's operations a
//! group of K replicas runs a dozen operations on `[K, n]` tensors each way, and on linear-scalar's
//! 128-row batches each of them costs more in its own overhead than in arithmetic.
//!
//! `p` is appended to each replica's `w` (the coefficients, `[K, c + 1]`), so that with `f` as
//! the inputs' last column a replica's prediction is one dot product, and K replicas that share
//! their inputs are one product `[n, c + 1] · [c + 1, K]`.

use super::{
    contiguous::contiguous, contiguous::owned_contiguous, products::product, view::ProductDims,
    view::replica_view, view::view,
};
use burn::backend::flex::FlexTensor;
use burn::tensor::TensorData;

/// A copy of the first `len` values of `t`.
fn values(t: FlexTensor, len: usize) -> Vec<f32> {
    let (t, range) = contiguous(t, len);
    t.storage::<f32>()[range].to_vec()
}

fn tensor<const D: usize>(values: Vec<f32>, shape: [usize; D]) -> FlexTensor {
    FlexTensor::from_data(TensorData::new(values, shape))
}

/// Each replica's `w` `[c]` followed by its `p`: `[K, c + 1]`.
fn coefficients(w: FlexTensor, p: FlexTensor, (reps, c): (usize, usize)) -> Vec<f32> {
    let (w, p) = (values(w, reps * c), values(p, reps));
    let mut out = Vec::with_capacity(reps * (c + 1));
    for (w, p) in w.chunks(c).zip(&p) {
        out.extend_from_slice(w);
        out.push(*p);
    }
    out
}

/// The losses `[K]` and the residuals: `[n, K]` (a row per input row) for inputs `[n, c + 1]`
/// shared by every replica, `[K, n]` for inputs `[K, n, c + 1]`.
pub fn forward(
    x: FlexTensor,
    y: FlexTensor,
    w: FlexTensor,
    p: FlexTensor,
) -> (FlexTensor, FlexTensor) {
    let ws = w.layout().shape().clone();
    let (reps, c) = (ws[0], ws[1]);
    let xs = x.layout().shape().clone();
    let shared = xs.num_dims() == 2;
    let (n, width) = (xs[xs.num_dims() - 2], xs[xs.num_dims() - 1]);
    assert_eq!(width, c + 1, "scalar_mse: x has the wrong width");
    assert!(
        shared || xs[0] == reps,
        "scalar_mse: x has the wrong replica count"
    );
    let rows = if shared { n } else { reps * n };
    assert_eq!(
        y.layout().num_elements(),
        rows,
        "scalar_mse: y has the wrong rows"
    );
    let coefs = coefficients(w, p, (reps, c));
    let targets = values(y, rows);
    let mut loss = vec![0f32; reps];
    let residuals = if shared {
        // The coefficients `[K, c + 1]` read as `[c + 1, K]`.
        let coefs_t = (coefs.as_ptr(), 1, width as isize);
        let dims = ProductDims {
            rows: n,
            cols: reps,
            inner: width,
        };
        let mut e = product(dims, view(&x), coefs_t, true);
        for (row, t) in e.chunks_mut(reps).zip(&targets) {
            for (v, sum) in row.iter_mut().zip(&mut loss) {
                *v -= t;
                *sum += *v * *v;
            }
        }
        tensor(e, [n, reps])
    } else {
        let mut e = Vec::with_capacity(reps * n);
        let dims = ProductDims {
            rows: n,
            cols: 1,
            inner: width,
        };
        for r in 0..reps {
            let coef = (coefs[r * width..].as_ptr(), 1, 1);
            e.extend(product(dims, replica_view(&x, r), coef, true));
        }
        let rows = e.chunks_mut(n).zip(targets.chunks(n));
        for ((row, t), sum) in rows.zip(&mut loss) {
            for (v, t) in row.iter_mut().zip(t) {
                *v -= t;
                *sum += *v * *v;
            }
        }
        tensor(e, [reps, n])
    };
    loss.iter_mut().for_each(|s| *s /= n as f32);
    (tensor(loss, [reps]), residuals)
}

/// The gradients of `w` `[K, c, 1]` and `p` `[K]`, given the input, the residuals of
/// [`forward`] and the gradient of the losses `[K]`.
pub fn backward(
    x: FlexTensor,
    residuals: FlexTensor,
    dloss: FlexTensor,
) -> (FlexTensor, FlexTensor) {
    let reps = dloss.layout().shape()[0];
    let xs = x.layout().shape().clone();
    let width = xs[xs.num_dims() - 1];
    let n = residuals.layout().num_elements() / reps;
    assert_eq!(
        xs[xs.num_dims() - 2],
        n,
        "scalar_mse: x and the residuals differ in rows"
    );
    assert!(
        xs.num_dims() == 2 || xs[0] == reps,
        "scalar_mse: x has the wrong replica count"
    );
    // d(mean of e²)/de = 2e/n, times each replica's incoming gradient.
    let scale: Vec<f32> = (values(dloss, reps).iter())
        .map(|d| d * (2.0 / n as f32))
        .collect();
    let mut g = owned_contiguous(residuals);
    let g = &mut g.storage_mut::<f32>()[..reps * n];
    // [K, c + 1], a row per replica: gᵀ · x for a shared x, g_r · x_r for each replica's own.
    let grads = if xs.num_dims() == 2 {
        for row in g.chunks_mut(reps) {
            row.iter_mut().zip(&scale).for_each(|(v, s)| *v *= s);
        }
        let dims = ProductDims {
            rows: reps,
            cols: width,
            inner: n,
        };
        product(dims, (g.as_ptr(), 1, reps as isize), view(&x), true)
    } else {
        for (row, s) in g.chunks_mut(n).zip(&scale) {
            row.iter_mut().for_each(|v| *v *= s);
        }
        let mut out = Vec::with_capacity(reps * width);
        let dims = ProductDims {
            rows: 1,
            cols: width,
            inner: n,
        };
        for r in 0..reps {
            let g_r = (g[r * n..].as_ptr(), n as isize, 1);
            out.extend(product(dims, g_r, replica_view(&x, r), true));
        }
        out
    };
    let mut dw = Vec::with_capacity(reps * (width - 1));
    let mut dp = Vec::with_capacity(reps);
    for row in grads.chunks(width) {
        dw.extend_from_slice(&row[..width - 1]);
        dp.push(row[width - 1]);
    }
    (tensor(dw, [reps, width - 1, 1]), tensor(dp, [reps]))
}
