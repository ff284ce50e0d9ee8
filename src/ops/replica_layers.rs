//! The linear layers of K replicas (`[K, n, m]` weights) on the CPU: each replica's
//! product over the pool, forward and backward.

use super::contiguous::{contiguous, owned_contiguous};
use super::elementwise::{PARALLEL_ELEMENTS, column_sums, derivative, fill_rows};
use super::input_grad;
use super::products::gemm_into;
use super::view::{LayerDims, SendView, assume_init, replica_view, uninit};
use burn::backend::flex::FlexTensor;
use rayon::prelude::*;

/// The multiply-adds above which replicas are spread over the pool. Each product, however
/// small, costs a few µs of the gemm crate's set-up, so a group's smallest layers (tabular-mlp's
/// 10 → 1, 8 replicas) are worth spreading too.
const REPLICA_PARALLEL_WORK: usize = 32 * 32 * 32;

/// Runs `each(r, slice)` over the `r`-th `len`-element slice of `out`, one replica per pool
/// thread when there are several replicas and enough `work` (multiply-adds) to share, else in
/// turn with each product split across the pool (`split` = true). Either way a product gives
/// the same bits.
fn per_replica<T: Send>(
    out: &mut [T],
    len: usize,
    work: usize,
    each: impl Fn(usize, &mut [T], bool) + Sync,
) {
    let replicas = out.len() / len.max(1);
    if replicas > 1 && work >= REPLICA_PARALLEL_WORK && rayon::current_num_threads() > 1 {
        out.par_chunks_mut(len)
            .enumerate()
            .for_each(|(r, dst)| each(r, dst, false));
    } else {
        for (r, dst) in out.chunks_mut(len.max(1)).enumerate() {
            each(r, dst, true);
        }
    }
}

/// [`linear`] for K replicas: `x` `[K, m, k]` (or `[m, k]`, shared), `w` `[K, k, n]`, `b`
/// `[K, n]`, giving `[K, m, n]`: one product per replica, each onto its bias rows, or for a
/// shared `x` one wide product (`shared_input.rs`), its output side by side.
pub fn linear_replicas(
    x: FlexTensor,
    w: FlexTensor,
    b: FlexTensor,
    act: super::Activation,
) -> FlexTensor {
    let ws = w.layout().shape().clone();
    let (reps, k, n) = (ws[0], ws[1], ws[2]);
    let xs = x.layout().shape();
    let m = xs[xs.num_dims() - 2];
    assert_eq!(xs[xs.num_dims() - 1], k, "linear: x has the wrong width");
    let stacked = xs.num_dims() == 3;
    assert!(
        !stacked || xs[0] == reps,
        "linear: x has the wrong replica count"
    );
    if !stacked {
        return super::shared_input::forward(x, w, b, act);
    }
    let layer = LayerDims {
        batch: m,
        inputs: k,
        outputs: n,
    };
    let (b, b_range) = contiguous(b, reps * n);
    let bias = &b.storage::<f32>()[b_range];
    let mut out = uninit(reps * m * n);
    let views: Vec<(SendView, SendView)> = (0..reps)
        .map(|r| (SendView(replica_view(&x, r)), SendView(replica_view(&w, r))))
        .collect();
    // Each replica's bias rows, product and activation on one thread, while its output is in
    // cache.
    per_replica(&mut out, m * n, reps * m * n * k, |r, dst, split| {
        fill_rows(dst, &bias[r * n..][..n]);
        let (xv, wv) = views[r];
        let dst = dst.as_mut_ptr().cast::<f32>();
        // SAFETY: `dst` holds replica r's m * n elements, initialised just above; the views
        // address its input and weights.
        unsafe { gemm_into(dst, layer.forward(), true, (xv.0, wv.0), act, split) };
    });
    // SAFETY: every replica's slice was filled and then written by its product.
    let out = unsafe { assume_init(out) };
    FlexTensor::from_data(burn::tensor::TensorData::new(out, [reps, m, n]))
}

/// Each replica's gradient before the activation (`[K, m, n]`, in the incoming gradient's
/// buffer) and its bias gradient (`[K, n]`), one replica per thread.
fn replica_dz(
    grad: FlexTensor,
    y: FlexTensor,
    act: super::Activation,
    (reps, m, n): (usize, usize, usize),
) -> (FlexTensor, Vec<f32>) {
    let mut dz = owned_contiguous(grad);
    let (y, y_range) = contiguous(y, reps * m * n);
    let y_values = &y.storage::<f32>()[y_range];
    let mut db = vec![0f32; reps * n];
    let dz_all = &mut dz.storage_mut::<f32>()[..reps * m * n];
    let pass = derivative(act);
    let each = |(dz, (y, sums)): (&mut [f32], (&[f32], &mut [f32]))| {
        if let Some(pass) = pass {
            pass(dz, y);
        }
        column_sums(sums, dz);
    };
    if reps > 1 && reps * m * n >= PARALLEL_ELEMENTS && rayon::current_num_threads() > 1 {
        (dz_all.par_chunks_mut(m * n))
            .zip(y_values.par_chunks(m * n).zip(db.par_chunks_mut(n)))
            .for_each(each);
    } else {
        (dz_all.chunks_mut(m * n))
            .zip(y_values.chunks(m * n).zip(db.chunks_mut(n)))
            .for_each(each);
    }
    (dz, db)
}

/// The gradients of [`linear_replicas`], replica by replica; a shared input's gradient is the
/// sum over the replicas.
pub fn linear_replicas_backward(
    x: FlexTensor,
    w: FlexTensor,
    y: FlexTensor,
    grad: FlexTensor,
    act: super::Activation,
    need_dx: bool,
) -> super::LinearGrads<burn::backend::Flex> {
    if x.layout().shape().num_dims() == 2 {
        return super::shared_input::backward(x, w, y, grad, act, need_dx);
    }
    let gs = grad.layout().shape().clone();
    let (reps, m, n) = (gs[0], gs[1], gs[2]);
    let k = w.layout().shape()[1];
    let (dz, db) = replica_dz(grad, y, act, (reps, m, n));
    let layer = LayerDims {
        batch: m,
        inputs: k,
        outputs: n,
    };
    let dz_values = &dz.storage::<f32>()[..reps * m * n];
    let dz_view = |r: usize| SendView((dz_values[r * m * n..].as_ptr(), n as isize, 1));
    let views: Vec<(SendView, SendView, SendView)> = (0..reps)
        .map(|r| {
            let (x, w) = (replica_view(&x, r), replica_view(&w, r));
            (SendView(x), SendView(w), dz_view(r))
        })
        .collect();
    // dw_r [k, n] = x_rᵀ [k, m] · dz_r [m, n].
    let mut dw = uninit(reps * k * n);
    per_replica(&mut dw, k * n, reps * m * n * k, |r, dst, split| {
        let ((xp, x_rs, x_cs), dz) = (views[r].0.0, views[r].2.0);
        // SAFETY: `dst` holds k * n elements, which the product overwrites whole (keep is
        // false); the views address x_r and dz_r.
        unsafe {
            gemm_into(
                dst.as_mut_ptr().cast(),
                layer.weight_grad(),
                false,
                ((xp, x_cs, x_rs), dz),
                super::Activation::Identity,
                split,
            )
        };
    });
    // SAFETY: every replica's product wrote its whole slice.
    let dw = unsafe { assume_init(dw) };
    let dx = need_dx.then(|| match super::shared_input::is_side_by_side(&x) {
        true => super::shared_input::input_grads(&views, (reps, layer)),
        false => input_grads(&views, (reps, layer)),
    });
    super::LinearGrads {
        dx,
        dw: FlexTensor::from_data(burn::tensor::TensorData::new(dw, [reps, k, n])),
        db: FlexTensor::from_data(burn::tensor::TensorData::new(db, [reps, n])),
    }
}

/// Each replica's input gradient `dx_r [m, k] = dz_r [m, n] · w_rᵀ [n, k]`: `[K, m, k]`.
fn input_grads(
    views: &[(SendView, SendView, SendView)],
    (reps, layer): (usize, LayerDims),
) -> FlexTensor {
    let (m, k, n) = (layer.batch, layer.inputs, layer.outputs);
    let mut dx = uninit(reps * m * k);
    per_replica(&mut dx, m * k, reps * m * n * k, |r, dst, split| {
        let (w, dz) = (views[r].1.0, views[r].2.0);
        // SAFETY: `dst` holds m * k elements, which the plan writes whole; the views address
        // dz_r and w_r.
        unsafe {
            let plan = input_grad::prepare(dz, w, layer, split);
            plan.write(dst.as_mut_ptr().cast(), k, split)
        };
    });
    // SAFETY: every replica's product wrote its whole slice.
    let dx = unsafe { assume_init(dx) };
    FlexTensor::from_data(burn::tensor::TensorData::new(dx, [reps, m, k]))
}
