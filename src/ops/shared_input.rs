//! K replicas of a layer on one shared input, as one wide product. Replica r's weights `[k, n]`
//! sit side by side as columns `r·n..(r+1)·n` of one `[k, K·n]` matrix, so the layer is
//! `x [m, k] · [k, K·n]`: one product, whose width suits the gemm crate's micro-kernels. One
//! product per replica ran tabular-mlp's 20-column ones at about two thirds of the speed, and
//! packed the same input K times.
//!
//! The output stays in the product's layout, `[m, K, n]`, and goes on as its `[K, m, n]` view
//! (strides `[n, K·n, 1]`, "side by side"). The next layer reads each replica through those
//! strides and writes its input gradient back in the same layout, so the backward's weight
//! gradient is one wide product as well: `xᵀ [k, m] · dz [m, K·n]`.

use super::{Activation, LinearGrads};
use super::{
    contiguous::contiguous, contiguous::owned_contiguous, elementwise::column_sums_strided,
    elementwise::derivative, elementwise::fill_rows, products::gemm_into, products::product,
    view::LayerDims, view::SendPtr, view::SendView, view::assume_init, view::uninit, view::view,
};
use burn::backend::Flex;
use burn::backend::flex::FlexTensor;
use burn::tensor::TensorData;
use burn::tensor::ops::FloatTensorOps;
use rayon::prelude::*;

/// Whether `t` `[K, m, n]` is the view of an `[m, K, n]` buffer, as [`forward`] returns.
pub fn is_side_by_side(t: &FlexTensor) -> bool {
    let (shape, strides) = (t.layout().shape(), t.layout().strides());
    shape.num_dims() == 3
        && shape[0] > 1
        && strides[0] == shape[2] as isize
        && strides[1] == (shape[0] * shape[2]) as isize
        && strides[2] == 1
}

/// `[m, K, n]` values as the `[K, m, n]` tensor that views them.
fn side_by_side(values: Vec<f32>, (reps, m, n): (usize, usize, usize)) -> FlexTensor {
    let rows = FlexTensor::from_data(TensorData::new(values, [m, reps, n]));
    Flex::float_swap_dims(rows, 0, 1)
}

/// The replicas' weights `[K, k, n]` side by side: `[k, K·n]`.
fn wide_weights(w: FlexTensor, (reps, k, n): (usize, usize, usize)) -> Vec<f32> {
    let (w, range) = contiguous(w, reps * k * n);
    let values = &w.storage::<f32>()[range];
    let mut out = Vec::with_capacity(k * reps * n);
    for j in 0..k {
        for r in 0..reps {
            out.extend_from_slice(&values[(r * k + j) * n..][..n]);
        }
    }
    out
}

/// `act(x · w_r + b_r)` for every replica r: the `[K, m, n]` view of one `[m, K·n]` product.
/// `x` `[m, k]`, `w` `[K, k, n]`, `b` `[K, n]`.
pub fn forward(x: FlexTensor, w: FlexTensor, b: FlexTensor, act: Activation) -> FlexTensor {
    let ws = w.layout().shape().clone();
    let (reps, k, n) = (ws[0], ws[1], ws[2]);
    let m = x.layout().shape()[0];
    let width = reps * n;
    let wide = wide_weights(w, (reps, k, n));
    let (b, b_range) = contiguous(b, width);
    let bias = &b.storage::<f32>()[b_range];
    let mut out = uninit(m * width);
    // Every row starts as the biases, a block of rows per pool thread.
    let rows_per_block = m.div_ceil(rayon::current_num_threads()).max(1);
    (out.par_chunks_mut(rows_per_block * width)).for_each(|rows| fill_rows(rows, bias));
    let wide_view = (wide.as_ptr(), width as isize, 1);
    // SAFETY: `out` holds m * width elements, all initialised just above; `x`'s view addresses
    // m x k elements and `wide` holds k * width.
    unsafe {
        let dst = out.as_mut_ptr().cast();
        let wide_layer = LayerDims {
            batch: m,
            inputs: k,
            outputs: width,
        };
        gemm_into(
            dst,
            wide_layer.forward(),
            true,
            (view(&x), wide_view),
            act,
            true,
        );
    }
    // SAFETY: filled with the biases, then accumulated onto by the product.
    side_by_side(unsafe { assume_init(out) }, (reps, m, n))
}

/// The gradients of [`forward`]: `dw` `[K, k, n]` from one wide product, `db` `[K, n]`, and the
/// shared input's (the sum over the replicas, which the product's contraction makes).
pub fn backward(
    x: FlexTensor,
    w: FlexTensor,
    y: FlexTensor,
    grad: FlexTensor,
    act: Activation,
    need_dx: bool,
) -> LinearGrads<Flex> {
    let gs = grad.layout().shape().clone();
    let (reps, m, n) = (gs[0], gs[1], gs[2]);
    let k = w.layout().shape()[1];
    let width = reps * n;
    // The gradient and the output (always side by side) as `[m, K·n]` rows.
    let mut dz = rows_of(grad, (reps, m, n));
    let (y, y_range) = contiguous(Flex::float_swap_dims(y, 0, 1), m * width);
    let y_rows = &y.storage::<f32>()[y_range];
    let dz_rows = &mut dz.storage_mut::<f32>()[..m * width];
    activation_grad(dz_rows, y_rows, act, width);
    let mut db = vec![0f32; width];
    db.par_chunks_mut(n).enumerate().for_each(|(r, sums)| {
        column_sums_strided(sums, &dz_rows[r * n..], width, m);
    });
    let dz_view = (dz_rows.as_ptr(), width as isize, 1);
    let (xp, x_rs, x_cs) = view(&x);
    let wide_layer = LayerDims {
        batch: m,
        inputs: k,
        outputs: width,
    };
    let dw_wide = product(wide_layer.weight_grad(), (xp, x_cs, x_rs), dz_view, true);
    let mut dw = Vec::with_capacity(reps * k * n);
    for r in 0..reps {
        (0..k).for_each(|j| dw.extend_from_slice(&dw_wide[j * width + r * n..][..n]));
    }
    let dx = need_dx.then(|| {
        let wide = wide_weights(w, (reps, k, n));
        let dx = product(
            wide_layer.input_grad(),
            dz_view,
            (wide.as_ptr(), 1, width as isize),
            true,
        );
        FlexTensor::from_data(TensorData::new(dx, [m, k]))
    });
    LinearGrads {
        dx,
        dw: FlexTensor::from_data(TensorData::new(dw, [reps, k, n])),
        db: FlexTensor::from_data(TensorData::new(db, [reps, n])),
    }
}

/// A `[K, m, n]` gradient as `[m, K·n]` rows: itself when it is side by side (as the next
/// layer writes it), else each replica's rows copied into place (Burn's strided copy of the
/// swapped view walks it element by element).
fn rows_of(grad: FlexTensor, (reps, m, n): (usize, usize, usize)) -> FlexTensor {
    if is_side_by_side(&grad) {
        return owned_contiguous(Flex::float_swap_dims(grad, 0, 1));
    }
    let (grad, range) = contiguous(grad, reps * m * n);
    let values = &grad.storage::<f32>()[range];
    let mut rows = vec![0f32; m * reps * n];
    for (i, row) in rows.chunks_exact_mut(reps * n).enumerate() {
        for (r, dst) in row.chunks_exact_mut(n).enumerate() {
            dst.copy_from_slice(&values[(r * m + i) * n..][..n]);
        }
    }
    FlexTensor::from_data(TensorData::new(rows, [m, reps * n]))
}

/// The gradient before the activation, in place, a block of rows per pool thread.
fn activation_grad(dz: &mut [f32], y: &[f32], act: Activation, width: usize) {
    let Some(grad) = derivative(act) else {
        return;
    };
    let rows = dz.len() / width.max(1);
    let block = rows.div_ceil(rayon::current_num_threads()).max(1) * width;
    (dz.par_chunks_mut(block))
        .zip(y.par_chunks(block))
        .for_each(|(dz, y)| grad(dz, y));
}

/// Each replica's input gradient `dz_r [m, n] · w_rᵀ [n, k]`, written side by side (`[m, K, k]`)
/// as the input `x` that the layer read side by side: one replica per pool thread.
pub fn input_grads(
    views: &[(SendView, SendView, SendView)],
    (reps, layer): (usize, LayerDims),
) -> FlexTensor {
    let (m, k) = (layer.batch, layer.inputs);
    let mut dx = uninit(m * reps * k);
    let base = SendPtr(dx.as_mut_ptr().cast());
    let each = |r: usize| {
        let (w, dz) = (views[r].1.get(), views[r].2.get());
        // SAFETY: replica r writes columns r·k..(r+1)·k of every row of `dx` (m rows of
        // reps·k), which no other replica writes; the views address dz_r and w_r.
        unsafe {
            let plan = super::input_grad::prepare(dz, w, layer, false);
            plan.write(base.get().add(r * k), reps * k, false);
        }
    };
    (0..reps).into_par_iter().for_each(each);
    // SAFETY: the replicas' columns cover every row whole.
    side_by_side(unsafe { assume_init(dx) }, (reps, m, k))
}
