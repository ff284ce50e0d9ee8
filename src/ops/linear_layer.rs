//! A linear layer with its activation on the CPU, forward and backward: the product, the
//! bias and the activation in one pass; at one thread, the forward turned over (`yᵀ = wᵀ·xᵀ`)
//! where that reads the weight along its rows.

use super::contiguous::{contiguous, is_transposed_view, owned_contiguous, to_contiguous};
use super::elementwise::{
    FILL_PARALLEL_ELEMENTS, column_sums, derivative, derivative_over_pool, fill_rows_over_pool,
    zip_f32,
};
use super::input_grad;
use super::products::{PARALLEL_WORK, ROW_BLOCK_WORK, gemm_into, product};
use super::view::{LayerDims, ProductDims, View, assume_init, dims, tensor, uninit, view};
use burn::backend::flex::FlexTensor;
use burn::tensor::DType;
use std::mem::MaybeUninit;

/// `act(x · w + b)`: the bias is written into the output first and the product accumulated onto
/// it, then the activation is applied in place; or, for a tall batch and a narrow output on
/// AVX-512, the same bits from [`super::tall_products`].
///
/// With `hand_on_view` (a hidden layer's output, which only ember's operations read), a layer
/// turned over hands its output on as the view of yᵀ ([`linear_turned_over`]); else in rows.
pub fn linear(
    x: FlexTensor,
    w: FlexTensor,
    b: FlexTensor,
    act: super::Activation,
    hand_on_view: bool,
) -> FlexTensor {
    for t in [&x, &w, &b] {
        assert_eq!(
            t.dtype(),
            DType::F32,
            "ember's CPU kernels take f32 tensors"
        );
    }
    let (m, k) = dims(&x);
    let (k2, n) = dims(&w);
    assert_eq!(k, k2, "linear: x has {k} columns but w has {k2} rows");
    let layer = LayerDims {
        batch: m,
        inputs: k,
        outputs: n,
    };
    let x = rows_unless(x, super::gemm::blocked(layer.forward()));
    let (b, b_range) = contiguous(b, n);
    let bias = &b.storage::<f32>()[b_range];
    let operands = (view(&x), view(&w));
    if turns_over(operands, layer) {
        // SAFETY: the views address x's m x k and w's k x n elements.
        let y_t = unsafe { linear_turned_over(operands, bias, layer, act) };
        let y = transposed_view(tensor(y_t, n, m));
        return if hand_on_view { y } else { to_contiguous(&y) };
    }
    let mut out = uninit(m * n);
    #[cfg(target_arch = "x86_64")]
    if super::tall_products::applies(layer.forward(), operands) {
        let split = m * n * k >= ROW_BLOCK_WORK;
        // SAFETY: `out` holds m x n elements, which the product writes whole; the views
        // address x's m x k and w's k x n elements; `bias` holds n.
        unsafe {
            let dst = out.as_mut_ptr().cast();
            super::tall_products::linear_into(dst, layer.forward(), operands, bias, act, split);
            return tensor(assume_init(out), m, n);
        }
    }
    fill_rows_over_pool(&mut out, bias);
    // SAFETY: `out` was filled just above; x and w are viewed through their layouts.
    tensor(
        unsafe { onto_biases(out, layer.forward(), operands, act) },
        m,
        n,
    )
}

/// `act(out + lhs [m, k] · rhs [k, n])` for `out [m, n]` filled with biases: the product
/// accumulated onto it, spread over the pool, then the activation; the values.
///
/// # Safety
/// Every element of `out` is initialised; the views address `m x k` and `k x n` elements.
unsafe fn onto_biases(
    mut out: Vec<MaybeUninit<f32>>,
    dims: ProductDims,
    operands: (View, View),
    act: super::Activation,
) -> Vec<f32> {
    // SAFETY: forwarded from the caller; `out` holds m * n elements.
    unsafe { gemm_into(out.as_mut_ptr().cast(), dims, true, operands, act, true) };
    // SAFETY: initialised by the caller, then accumulated onto by the product.
    unsafe { assume_init(out) }
}

/// Whether [`linear`] computes `x [m, k] · w [k, n]` turned over ([`linear_turned_over`]):
/// where the turn pays on this CPU ([`turn_pays`]), on one thread, where the product takes the
/// gemm crate's blocked kernel either way
/// (`gemm::blocked`), w's rows are long and run along its columns, and the copies the
/// turn takes (x packed, yᵀ copied back by y's consumers) are smaller than w, which the
/// product as written packs whole. On two threads the turned product, cut into blocks of w's
/// columns, each packing x, ran slower than the product as written in column blocks
/// (fashion-mlp, Emerald Rapids, 6 rounds side by side: 0.93x; on one thread 1.07x). Not for a
/// view that runs backwards along the sum (a flipped input or weight): the crate sums a left
/// operand with a negative column stride from its far end, and the turn swaps which operand is
/// on the left.
pub(super) fn turns_over(((_, _, x_cs), (_, w_rs, w_cs)): (View, View), layer: LayerDims) -> bool {
    let one_thread = rayon::current_num_threads() < 2;
    let forwards = x_cs > 0 && w_rs > 0;
    let cheaper = layer.outputs >= 64 && input_grad::turning_copies_less(layer);
    let shapes = super::gemm::blocked(layer.forward()) && forwards && w_cs == 1 && cheaper;
    one_thread && shapes && turn_pays()
}

/// Whether turning a forward product over pays on this CPU: only where the gemm crate runs its
/// AVX-512 kernel. fashion-mlp at one thread, the same binary with the turn and without
/// (docs/benchmarks/avx2-paths-on-zen4.md, "The forward turned over at one thread does not pay
/// on AVX2"): 1.07x with it on an Emerald Rapids Xeon, even on a Zen 4 (within the noise); with
/// the crate's FMA kernel (that Zen 4 with AVX-512 hidden, an AVX2 machine's path) 1.09x to
/// 1.13x faster without it.
/// Either way gives the same bits; the tests take the turn wherever they run (`with_turn`).
fn turn_pays() -> bool {
    #[cfg(test)]
    if let Some(forced) = super::kernel_tests::FORCED_TURN.get() {
        return forced;
    }
    crate::ops::simd::gemm_kernel() == "avx512f"
}

/// `act(x · w + b)` as `yᵀ [n, m] = act(b + wᵀ · xᵀ)`: for a batch that is small against the
/// layer, the gemm crate then reads w along its rows as it stands, where the product as
/// written packed all of w every step (fashion-mlp's first two layers: 2.6 MB a step, 8 % of
/// a one-thread step on an Emerald Rapids Xeon). The same bits: each element starts from its
/// bias and is summed over k in the chunks of the product as written (`input_grad` says why
/// turning a product over keeps them), and the activation does not care where an element
/// sits.
///
/// For a hidden layer, [`linear`] hands yᵀ on as y's transposed view, not copied back into
/// y's rows: the next layer's products then read it along the batch, as the crate wants its
/// operand, where they packed y's rows column by column (fashion-mlp's second layer: its
/// forward product 10 % faster, its weight gradient's 5 %). A consumer that needs y's rows
/// copies them ([`to_contiguous`]): the layer's own backward, for the activation's
/// derivative, dropout, and a next layer whose product would take another kernel than the
/// blocked one ([`rows_unless`]). An output layer copies yᵀ back into rows: Burn's losses would
/// sum a view in another order than rows.
///
/// # Safety
/// The views address x's m x k and w's k x n elements.
unsafe fn linear_turned_over(
    ((xp, x_rs, x_cs), (wp, w_rs, w_cs)): (View, View),
    bias: &[f32],
    layer: LayerDims,
    act: super::Activation,
) -> Vec<f32> {
    let (m, k, n) = (layer.batch, layer.inputs, layer.outputs);
    let mut y_t = uninit(n * m);
    for (row, &b) in y_t.chunks_mut(m).zip(bias) {
        row.fill(MaybeUninit::new(b));
    }
    let operands = ((wp, w_cs, w_rs), (xp, x_cs, x_rs));
    // SAFETY: `y_t` was filled just above; the views are forwarded from the caller with their
    // strides swapped.
    let turned = ProductDims {
        rows: n,
        cols: m,
        inner: k,
    };
    unsafe { onto_biases(y_t, turned, operands, act) }
}

/// The `[cols, rows]` view of a `[rows, cols]` tensor, sharing its storage.
fn transposed_view(t: FlexTensor) -> FlexTensor {
    let layout = t.layout().transpose(0, 1);
    t.with_layout(layout)
}

/// `x` as it is where its product takes the gemm crate's blocked kernel (`blocked`), else in
/// rows: the crate picks its other kernels (a matrix-vector product for a one-output layer,
/// the lane-wise one for a tiny output) by the operands' strides, and they sum in other
/// orders, so a turned layer's view would change the next layer's bits against rows.
fn rows_unless(x: FlexTensor, blocked: bool) -> FlexTensor {
    match !blocked && is_transposed_view(&x) {
        true => to_contiguous(&x),
        false => x,
    }
}

/// The gradients of [`linear`] from its inputs, its output `y` and the output's gradient.
pub fn linear_backward(
    x: FlexTensor,
    w: FlexTensor,
    y: FlexTensor,
    grad: FlexTensor,
    act: super::Activation,
    need_dx: bool,
) -> super::LinearGrads<burn::backend::Flex> {
    let (m, n) = dims(&grad);
    let (_, k) = dims(&x);
    let layer = LayerDims {
        batch: m,
        inputs: k,
        outputs: n,
    };
    let x = rows_unless(x, super::gemm::blocked(layer.weight_grad()));
    // Small layers with FMA and a pool: by groups of rows, one thread to each (tabular-mlp).
    let threads = rayon::current_num_threads();
    #[cfg(target_arch = "x86_64")]
    if super::chunked_backward::applies(layer, (view(&x), view(&w)), need_dx, threads) {
        return super::chunked_backward::backward(x, w, y, grad, act, need_dx);
    }
    // The gradient before the activation, in the incoming gradient's buffer when possible.
    let dz = match derivative(act) {
        None => owned_contiguous(grad),
        Some(pass) => zip_f32(grad, y, |dz, y| derivative_over_pool(pass, dz, y)),
    };
    let dz_values = &dz.storage::<f32>()[..m * n];
    let db_of = || {
        let mut db = vec![0f32; n];
        column_sums(&mut db, dz_values);
        db
    };
    // dw [k, n] = xᵀ [k, m] · dz [m, n]: xᵀ is x's view with its strides swapped.
    let dw_of = |split| {
        let (xp, x_rs, x_cs) = view(&x);
        let dz_view = (dz_values.as_ptr(), n as isize, 1);
        product(layer.weight_grad(), (xp, x_cs, x_rs), dz_view, split)
    };
    // dx [m, k] = dz [m, n] · wᵀ [n, k], its transposed copy made over the pool when `split`.
    // SAFETY: the views cover dz's m x n and w's k x n elements, which outlive the plan.
    let dx_plan = |split| unsafe {
        input_grad::prepare((dz_values.as_ptr(), n as isize, 1), view(&w), layer, split)
    };
    let dx_of = |plan: input_grad::InputGrad, split| {
        let mut dx = uninit(m * k);
        // SAFETY: `dx` holds m x k elements, which the plan writes whole.
        unsafe { plan.write(dx.as_mut_ptr().cast(), k, split) };
        tensor(unsafe { assume_init(dx) }, m, k)
    };
    let grads = |dw, dx, db| super::LinearGrads {
        dx,
        dw: tensor(dw, k, n),
        db: FlexTensor::from_data(burn::tensor::TensorData::new(db, [n])),
    };
    // When both are needed, the two products run side by side, each on one thread
    // ([`gradients_side_by_side`]). dx's first copy (dzᵀ or wᵀ) comes first, over the pool:
    // inside the join it would leave dw's thread waiting. A turned plan's copy back runs on
    // dx's thread, inside the join. The bias sums follow dx, or take a third thread where
    // there is one and they are large. This thread takes dx's side, the longer one in
    // tabular-mlp's second layer: with dw here instead, its 2-thread steps ran about 10 %
    // slower (Emerald Rapids, 12 rounds).
    if need_dx && gradients_side_by_side(m * n * k, threads) {
        let dx_side = |plan| dx_of(plan, false);
        let plan = dx_plan(true);
        let ((dx, db), dw) = match threads > 2 && m * n >= FILL_PARALLEL_ELEMENTS {
            true => rayon::join(|| rayon::join(|| dx_side(plan), db_of), || dw_of(false)),
            false => rayon::join(|| (dx_side(plan), db_of()), || dw_of(false)),
        };
        return grads(dw, Some(dx), db);
    }
    let products = || (dw_of(true), need_dx.then(|| dx_of(dx_plan(true), true)));
    // Large bias sums go to another thread while this one starts on the products, which then
    // share what is left of the pool.
    let ((dw, dx), db) = match m * n >= FILL_PARALLEL_ELEMENTS {
        true => rayon::join(products, db_of),
        false => (products(), db_of()),
    };
    grads(dw, dx, db)
}

/// Whether a layer's two gradient products of `work` multiply-adds each run side by side on
/// `threads`, each whole on one thread: two whole products keep the cores busier than each one
/// split in halves with a join in between. On two threads that holds from the row blocks' size
/// up: tabular-mlp's second layer (dw [20 x 10] summed over 2,048 rows, too few rows for row
/// blocks, beside dx) ran 1.09x faster than with dx alone split (Emerald Rapids, 4 rounds), and
/// fashion-mlp's output layer as fast. With FMA (AVX2 or AVX-512), tabular-mlp's second layer
/// now goes by groups of rows instead (`chunked_backward`). On more threads, products below the column
/// blocks' size are left to the row blocks, which use every thread.
fn gradients_side_by_side(work: usize, threads: usize) -> bool {
    match threads {
        0 | 1 => false,
        2 => work >= ROW_BLOCK_WORK,
        _ => work >= PARALLEL_WORK,
    }
}
