//! CPU kernels for ember's operations on Burn's flex backend: plain loops over `f32` slices that
//! the compiler vectorises, compiled again for AVX2+FMA and for AVX-512 and picked at run time
//! (`device::simd`), so the binary still runs on any x86-64; and the linear layer, on the `gemm` crate Burn's CPU backend
//! multiplies with.

use super::input_grad;
use burn::backend::flex::FlexTensor;
use burn::tensor::DType;
use rayon::prelude::*;
use std::mem::MaybeUninit;

/// `t` as a contiguous tensor: itself when it is one, else a copy. The view of a transposed
/// f32 matrix (a layer turned over at one thread gives its output as one, see [`linear`]) is
/// copied by `transpose`'s tiles, where Burn's copy took 2.7 times as long (fashion-mlp,
/// Emerald Rapids).
fn to_contiguous(t: &FlexTensor) -> FlexTensor {
    if !is_transposed_view(t) {
        return t.to_contiguous();
    }
    let l = t.layout();
    let (rows, cols) = (l.shape()[0], l.shape()[1]);
    let (p, _, _) = view(t);
    // SAFETY: t's elements (i, j) lie at p + i + j * rows: a row-major [cols, rows] matrix.
    let values = unsafe { super::transpose::transposed((p, rows as isize, 1), cols, rows, true) };
    tensor(values, rows, cols)
}

/// Whether `t` is a 2-d f32 matrix whose elements (i, j) lie at i + j * rows from its first.
fn is_transposed_view(t: &FlexTensor) -> bool {
    let l = t.layout();
    l.num_dims() == 2
        && t.dtype() == DType::F32
        && l.shape()[0] > 1
        && l.strides() == [1, l.shape()[0] as isize]
}

/// A contiguous, uniquely owned copy (or the tensor itself, when it already is one).
pub(super) fn owned_contiguous(x: FlexTensor) -> FlexTensor {
    let layout = x.layout();
    if x.is_unique() && layout.is_contiguous() && layout.start_offset() == 0 {
        x
    } else {
        let c = to_contiguous(&x);
        if c.is_unique() {
            c
        } else {
            // `to_contiguous` may hand back shared storage; copy it out.
            let values = c.storage::<f32>()[..c.layout().num_elements()].to_vec();
            let shape = c.layout().shape().clone();
            FlexTensor::from_data(burn::tensor::TensorData::new(values, shape))
        }
    }
}

/// Applies `f` to the elements of `x` in place (on a private copy when `x` is shared).
pub fn map_f32(x: FlexTensor, f: impl Fn(&mut [f32])) -> FlexTensor {
    assert_eq!(
        x.dtype(),
        DType::F32,
        "ember's CPU kernels take f32 tensors"
    );
    let mut x = owned_contiguous(x);
    let n = x.layout().num_elements();
    f(&mut x.storage_mut::<f32>()[..n]);
    x
}

/// `f(a, b)` element-wise into `a`'s storage; both tensors have the same shape.
pub fn zip_f32(a: FlexTensor, b: FlexTensor, f: impl Fn(&mut [f32], &[f32])) -> FlexTensor {
    assert_eq!(a.layout().shape(), b.layout().shape(), "shapes differ");
    let b = if b.layout().is_contiguous() && b.layout().start_offset() == 0 {
        b
    } else {
        to_contiguous(&b)
    };
    let mut a = owned_contiguous(a);
    let n = a.layout().num_elements();
    f(&mut a.storage_mut::<f32>()[..n], &b.storage::<f32>()[..n]);
    a
}

/// Defines `$name(args)`, which runs `$generic` at the widest level this CPU has, and
/// `$at(level, args)`, which runs it at `level` (the kernels' tests compare the levels). Each
/// level is the same loop compiled for its instruction set; the vector width changes, not the
/// operations on an element, so every level with FMA gives the same bits.
macro_rules! dispatch {
    ($name:ident, $at:ident, $generic:ident, ($($arg:ident: $ty:ty),*)) => {
        #[allow(clippy::too_many_arguments)]
        pub fn $name($($arg: $ty),*) {
            $at(crate::device::simd::detected(), $($arg),*)
        }

        /// Runs at `level`, which must not be wider than the CPU's (it panics if it is).
        #[allow(clippy::too_many_arguments)]
        pub fn $at(level: crate::device::simd::Simd, $($arg: $ty),*) {
            use crate::device::simd::{detected, Simd};
            assert!(level <= detected(), "{level} kernels on a CPU with {}", detected());
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                fn avx512($($arg: $ty),*) {
                    $generic::<true>($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                #[allow(clippy::too_many_arguments)]
                fn avx2($($arg: $ty),*) {
                    $generic::<true>($($arg),*)
                }
                match level {
                    // SAFETY: the processor has the features of `level` (asserted above).
                    Simd::Avx512 => return unsafe { avx512($($arg),*) },
                    // SAFETY: as above.
                    Simd::Avx2 => return unsafe { avx2($($arg),*) },
                    Simd::Portable => {}
                }
            }
            $generic::<false>($($arg),*)
        }
    };
}
pub(super) use dispatch;

/// `a * b + c`, fused where the build has FMA (the AVX2 kernels), else a multiply and an add
/// (a software `fmaf` call would be far slower).
#[inline(always)]
pub(super) fn madd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA { a.mul_add(b, c) } else { a * b + c }
}

/// tanh of one value: Eigen's rational approximation (the one TensorFlow and XLA use on the
/// CPU), a degree-13 odd numerator over a degree-6 even denominator on [-7.9, 7.9], accurate to
/// a few ulp; beyond that range tanh is ±1 in f32.
#[inline(always)]
#[allow(clippy::excessive_precision)] // the coefficients as Eigen publishes them
fn tanh_one<const FMA: bool>(a: f32) -> f32 {
    let x = a.clamp(-7.905_311, 7.905_311);
    let x2 = x * x;
    let mut p = madd::<FMA>(x2, -2.760_768_5e-16, 2.000_187_9e-13);
    p = madd::<FMA>(x2, p, -8.604_671_5e-11);
    p = madd::<FMA>(x2, p, 5.122_297e-8);
    p = madd::<FMA>(x2, p, 1.485_722_4e-5);
    p = madd::<FMA>(x2, p, 6.372_619_3e-4);
    p = madd::<FMA>(x2, p, 4.893_524_6e-3);
    p *= x;
    let mut q = madd::<FMA>(x2, 1.198_258_4e-6, 1.185_347_1e-4);
    q = madd::<FMA>(x2, q, 2.268_434_6e-3);
    q = madd::<FMA>(x2, q, 4.893_525e-3);
    // Tiny inputs: tanh(x) = x to f32 precision (keeps -0.0 and subnormals exact); past 9 it is
    // ±1 in f32. Selects, not branches, so the loop vectorises. NaN passes through unchanged.
    let r = if a.abs() < 0.0004 { a } else { p / q };
    if a.abs() > 9.0 { 1f32.copysign(a) } else { r }
}

#[inline(always)]
fn tanh_generic<const FMA: bool>(values: &mut [f32]) {
    for v in values.iter_mut() {
        *v = tanh_one::<FMA>(*v);
    }
}

#[inline(always)]
fn tanh_grad_generic<const FMA: bool>(grad: &mut [f32], y: &[f32]) {
    for (g, y) in grad.iter_mut().zip(y) {
        *g *= 1.0 - y * y;
    }
}

dispatch!(tanh_slice, tanh_slice_at, tanh_generic, (values: &mut [f32]));
dispatch!(tanh_grad_slice, tanh_grad_slice_at, tanh_grad_generic, (grad: &mut [f32], y: &[f32]));

#[inline(always)]
fn relu_generic<const FMA: bool>(values: &mut [f32]) {
    for v in values.iter_mut() {
        // Not `max`: NaN must stay NaN, or the NaN guard would never see a diverged run.
        if *v < 0.0 {
            *v = 0.0;
        }
    }
}

#[inline(always)]
fn relu_grad_generic<const FMA: bool>(grad: &mut [f32], y: &[f32]) {
    for (g, y) in grad.iter_mut().zip(y) {
        if *y <= 0.0 {
            *g = 0.0;
        }
    }
}

#[inline(always)]
fn column_sums_generic<const FMA: bool>(sums: &mut [f32], rows: &[f32]) {
    for row in rows.chunks_exact(sums.len()) {
        for (s, v) in sums.iter_mut().zip(row) {
            *s += v;
        }
    }
}

/// Adds `m` rows of `sums.len()` elements, `stride` elements apart from the start of `rows`,
/// into `sums`: one replica's columns of side-by-side rows.
pub(super) fn column_sums_strided(sums: &mut [f32], rows: &[f32], stride: usize, m: usize) {
    for i in 0..m {
        let row = &rows[i * stride..][..sums.len()];
        sums.iter_mut().zip(row).for_each(|(s, v)| *s += v);
    }
}

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
    let _flush = super::subnormals::FlushSubnormals::new();
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

dispatch!(sgd_slice, sgd_slice_at, sgd_generic, (g: &mut [f32], w: &[f32], lr: f32));
#[rustfmt::skip]
dispatch!(adam_slice, adam_slice_at, adam_generic, (g: &mut [f32], w: &[f32], m: &mut [f32], v: &mut [f32], beta1: f32, beta2: f32, factor: f32, eps: f32, lr: f32));
dispatch!(relu_slice, relu_slice_at, relu_generic, (values: &mut [f32]));
dispatch!(relu_grad_slice, relu_grad_slice_at, relu_grad_generic, (grad: &mut [f32], y: &[f32]));
dispatch!(column_sums_in_memory, column_sums_in_memory_at, column_sums_generic, (sums: &mut [f32], rows: &[f32]));

/// `sums[j] += rows[i * n + j]` for every row `i` in order, `n = sums.len()`: in registers
/// where the rows are short (`column_sums`), the same adds either way.
pub fn column_sums(sums: &mut [f32], rows: &[f32]) {
    let n = sums.len();
    assert_eq!(rows.len().checked_rem(n), Some(0), "rows of {n} columns");
    #[cfg(target_arch = "x86_64")]
    if super::column_sums::applies(n) {
        return super::column_sums::sums_into(sums, rows);
    }
    column_sums_in_memory(sums, rows)
}
#[rustfmt::skip]
dispatch!(dropout_slice, dropout_slice_at, dropout_generic, (values: &mut [f32], first: u32, seed: u64, threshold: u32, scale: f32));

/// Dropout in place on the elements of a tensor from index `first` on: each element times
/// `scale` where its index's hash under `seed` is kept, else times zero (as Burn's `x * mask`
/// does, so a NaN stays NaN for the NaN guard).
#[inline(always)]
fn dropout_generic<const FMA: bool>(
    values: &mut [f32],
    first: u32,
    seed: u64,
    threshold: u32,
    scale: f32,
) {
    for (i, v) in values.iter_mut().enumerate() {
        let keep = super::dropout::keep(first.wrapping_add(i as u32), seed, threshold);
        *v *= if keep { scale } else { 0.0 };
    }
}

/// [`dropout_slice`], split across the pool for large tensors. The mask depends on the
/// element's index alone, so the result is the same bits however it is split.
pub fn dropout(values: &mut [f32], seed: u64, threshold: u32, scale: f32) {
    match chunk_len(values.len(), DROPOUT_PARALLEL_ELEMENTS) {
        Some(c) => values
            .par_chunks_mut(c)
            .enumerate()
            .for_each(|(k, v)| dropout_slice(v, (k * c) as u32, seed, threshold, scale)),
        None => dropout_slice(values, 0, seed, threshold, scale),
    }
}

/// Elements above which an optimizer pass is split across the pool: each thread then gets
/// tens of thousands of elements, which outweighs the hand-off. (fashion-mlp's two big weight
/// matrices are above it; the other jobs' parameters are far below.)
const PARALLEL_ELEMENTS: usize = 1 << 16;

/// The same for dropout, whose two hash rounds cost several times an optimizer's arithmetic
/// per element: fashion-mlp's hidden layers (64 x 512 = 32,768) are above it. Below the
/// optimizer's threshold, their dropout ran on one thread while the other waited, about 9 % of
/// a 2-thread step against 3 % of a 1-thread one
/// (docs/benchmarks/adam-and-subnormals-on-sapphire-rapids.md, "Subnormals").
const DROPOUT_PARALLEL_ELEMENTS: usize = 1 << 14;

/// One piece per pool thread, or `None` when `n` elements (fewer than `least`) are not worth
/// splitting.
fn chunk_len(n: usize, least: usize) -> Option<usize> {
    let threads = rayon::current_num_threads();
    (threads > 1 && n >= least).then(|| n.div_ceil(threads).next_multiple_of(64))
}

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

/// Elements from which an activation's derivative pass is split across the pool:
/// tabular-mlp's `[2048 x 20]` and `[2048 x 10]` gradients, whose passes otherwise ran on one
/// thread while the other waited for the weight gradients' products.
const DERIVATIVE_PARALLEL_ELEMENTS: usize = 1 << 14;

/// `pass(dz, y)`, split across the pool for large tensors. Element-wise, so the result is the
/// same bits however it is split.
fn derivative_over_pool(pass: GradPass, dz: &mut [f32], y: &[f32]) {
    match chunk_len(dz.len(), DERIVATIVE_PARALLEL_ELEMENTS) {
        Some(c) => (dz.par_chunks_mut(c).zip(y.par_chunks(c))).for_each(|(dz, y)| pass(dz, y)),
        None => pass(dz, y),
    }
}

/// Rows and columns of a 2-d tensor.
pub(super) fn dims(t: &FlexTensor) -> (usize, usize) {
    let s = t.layout().shape();
    assert_eq!(s.num_dims(), 2, "ember's linear takes 2-d tensors");
    (s[0], s[1])
}

/// (row stride, column stride) in elements, and the first element.
pub(super) fn view(t: &FlexTensor) -> (*const f32, isize, isize) {
    let strides = t.layout().strides();
    let base = t.storage::<f32>().as_ptr();
    // SAFETY: the layout's offset lies inside the tensor's storage.
    let ptr = unsafe { base.add(t.layout().start_offset()) };
    (ptr, strides[0], strides[1])
}

/// The work above which a product is split across the pool by blocks of columns (Burn's own
/// threshold).
const PARALLEL_WORK: usize = 192 * 192 * 192;

/// A strided matrix: its first element, row stride and column stride, in elements.
pub(super) type View = (*const f32, isize, isize);

/// The work above which a product too narrow for column blocks is split by blocks of rows:
/// tabular-mlp's 2,048-row products (61 x 20 and 20 x 10 weights) and fashion-mlp's output
/// layer. About 10 µs of arithmetic, several times a hand-off to the pool.
pub(super) const ROW_BLOCK_WORK: usize = 1 << 17;

/// `dst [m, n] = act((keep ? dst : 0) + lhs [m, k] · rhs [k, n])`, with `dst` row-major; spread
/// over the pool when `split` and the product is large.
///
/// A wide product is split by blocks of columns, a narrow one by blocks of rows; either way
/// each block is a whole single-threaded product on one pool thread. With fashion-mlp's 64-row
/// products, the gemm crate's own split gained about 1.1x at 2 threads, and two column blocks
/// 1.55-1.7x (`make bench-ops`). Each element of `dst` is summed over `k` in the order the
/// whole product would use, so the result is the same bits at any thread count (unit tests
/// check up to 16 and 64 threads); what that takes is written at [`MIN_BLOCK_COLUMNS`] and
/// [`row_blocks`].
/// A product that fits neither is left to the gemm crate's own split when it is large.
///
/// Three kinds of product go to ember's own x86 kernels first, which give the crate's bits:
/// those the crate hands to its matrix-vector and outer-product kernels, a one-unit output
/// layer's (`vector_products`), small outputs over long sums, weight gradients
/// (`long_sums`), and narrow rows over short sums, a small layer's input gradient
/// (`short_sums`).
///
/// # Safety
/// `dst` holds `m * n` writable elements (initialised when `keep`); `lhs` and `rhs` address
/// `m x k` and `k x n` elements through their strides.
pub(super) unsafe fn gemm_into(
    dst: *mut f32,
    (m, n, k): (usize, usize, usize),
    keep: bool,
    (lhs, rhs): ((*const f32, isize, isize), (*const f32, isize, isize)),
    act: super::Activation,
    split: bool,
) {
    let threads = rayon::current_num_threads();
    let (serial, pool) = (gemm::Parallelism::None, gemm::Parallelism::Rayon(0));
    let work = m * n * k;
    let product = (dst, (m, n, k), keep, (lhs, rhs), act);
    // SAFETY (every call): forwarded from the caller.
    #[cfg(target_arch = "x86_64")]
    if act == super::Activation::Identity
        && let Some(kernel) = super::vector_products::kernel_for((m, n, k), keep, (lhs, rhs))
    {
        let split = split && work >= super::vector_products::SPLIT_WORK;
        let operands = (lhs, rhs);
        return unsafe {
            super::vector_products::product_into(kernel, dst, (m, n, k), keep, operands, split)
        };
    }
    #[cfg(target_arch = "x86_64")]
    if act == super::Activation::Identity && super::long_sums::applies((m, n, k), (lhs, rhs)) {
        let split = split && work >= ROW_BLOCK_WORK;
        return unsafe { super::long_sums::product_into(dst, (m, n, k), keep, (lhs, rhs), split) };
    }
    #[cfg(target_arch = "x86_64")]
    if act == super::Activation::Identity && super::short_sums::applies((m, n, k), (lhs, rhs)) {
        let split = split && work >= ROW_BLOCK_WORK;
        let dst = (dst, n);
        return unsafe { super::short_sums::product_into(dst, (m, n, k), keep, (lhs, rhs), split) };
    }
    if !split || threads < 2 || work < ROW_BLOCK_WORK {
        return unsafe { gemm_block(dst, n, (m, n, k), keep, (lhs, rhs), act, serial) };
    }
    let columns = threads.min(n / MIN_BLOCK_COLUMNS);
    if work >= PARALLEL_WORK && columns >= 2 {
        return unsafe { in_blocks(product, Cut::Columns, columns) };
    }
    let rows = row_blocks(m, n, k, threads);
    if rows >= 2 {
        return unsafe { in_blocks(product, Cut::Rows, rows) };
    }
    let parallelism = if work >= PARALLEL_WORK { pool } else { serial };
    unsafe { gemm_block(dst, n, (m, n, k), keep, (lhs, rhs), act, parallelism) }
}

/// A product's operands as [`gemm_into`] takes them: destination, sizes, keep, (lhs, rhs) and
/// the activation.
type Product = (
    *mut f32,
    (usize, usize, usize),
    bool,
    ((*const f32, isize, isize), (*const f32, isize, isize)),
    super::Activation,
);

/// How [`in_blocks`] cuts a product: into blocks of whole columns or of whole rows.
#[derive(Clone, Copy)]
enum Cut {
    Columns,
    Rows,
}

/// [`gemm_into`] as `blocks` blocks cut as `cut`, one whole single-threaded product per pool
/// thread.
///
/// # Safety
/// As for [`gemm_into`].
unsafe fn in_blocks((dst, (m, n, k), keep, (lhs, rhs), act): Product, cut: Cut, blocks: usize) {
    let start = |b: usize| match cut {
        // Column block b starts at b·n/blocks rounded down to whole vectors, so each is more
        // than MIN_BLOCK_COLUMNS - BLOCK_COLUMNS wide, and the last at least n / blocks.
        Cut::Columns => (b * n / blocks) / BLOCK_COLUMNS * BLOCK_COLUMNS,
        Cut::Rows => b * m / blocks,
    };
    let end = match cut {
        Cut::Columns => n,
        Cut::Rows => m,
    };
    let (dst, lhs, rhs) = (SendPtr(dst), SendView(lhs), SendView(rhs));
    (0..blocks).into_par_iter().for_each(|b| {
        let first = start(b);
        let len = if b + 1 == blocks { end } else { start(b + 1) } - first;
        let ((l, l_rs, l_cs), (r, r_rs, r_cs)) = (lhs.get(), rhs.get());
        // SAFETY: block b writes columns (rows) first..first + len of dst, which no other block
        // writes, and reads the same columns of rhs (rows of lhs).
        unsafe {
            let (block_dst, size, operands) = match cut {
                Cut::Columns => {
                    let block_rhs = (r.offset(first as isize * r_cs), r_rs, r_cs);
                    (dst.get().add(first), (m, len, k), (lhs.get(), block_rhs))
                }
                Cut::Rows => {
                    let block_lhs = (l.offset(first as isize * l_rs), l_rs, l_cs);
                    (
                        dst.get().add(first * n),
                        (len, n, k),
                        (block_lhs, rhs.get()),
                    )
                }
            };
            let serial = gemm::Parallelism::None;
            gemm_block(block_dst, n, size, keep, operands, act, serial);
        }
    });
}

/// Rows per block at least: a block of one row would take the gemm crate's vector path, which
/// sums in another order, and a few rows are not worth a hand-off.
const MIN_BLOCK_ROWS: usize = 8;

/// How many blocks of rows an `m x k · k x n` product splits into on `threads` (fewer than 2:
/// not split). Each block must take the gemm crate's path for the whole product, since the
/// paths sum in different orders. A product of at most 64 rows and 64 columns is summed over
/// `k` in chunks of 512, and a larger one in chunks set by the cache; the two agree when
/// `k <= 512`. So where `k` is longer, the blocks of a product that takes the larger path keep
/// more than 64 rows each, and take it too. Likewise for the 256-element kernel below.
fn row_blocks(m: usize, n: usize, k: usize, threads: usize) -> usize {
    let mut least = if k > 512 && m > 64 && n <= 64 {
        MIN_BLOCK_ROWS.max(65)
    } else {
        MIN_BLOCK_ROWS
    };
    // A product of at most 256 elements whose operands both run along `k` takes a kernel
    // that sums in vector lanes; so the blocks of a larger one stay larger.
    if m * n > 256 {
        least = least.max(256 / n.max(1) + 1);
    }
    threads.min(m / least)
}

/// Column blocks start on multiples of this many f32 columns (two 8-lane AVX registers).
const BLOCK_COLUMNS: usize = 16;

/// Columns per block at least, before block edges are rounded to BLOCK_COLUMNS: so every
/// block is wider than 64 columns. The gemm crate sums a product of at most 64 rows and 64
/// columns over `k` in other chunks than a wider one, and narrower blocks would make the
/// result depend on the thread count.
const MIN_BLOCK_COLUMNS: usize = 80;

/// A destination that crosses into the pool's threads: each writes its own columns.
#[derive(Clone, Copy)]
pub(super) struct SendPtr(pub(super) *mut f32);
// SAFETY: the blocks write disjoint elements of a buffer that outlives the parallel loop.
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

impl SendPtr {
    /// The pointer; a method, so that a closure captures the whole `SendPtr`, not its field.
    pub(super) fn get(self) -> *mut f32 {
        self.0
    }
}

/// One product into `dst`, whose rows are `dst_rs` elements apart, on `parallelism`, then the
/// activation on each of its rows while they are in cache.
///
/// # Safety
/// As for [`gemm_into`], with `dst` rows `dst_rs` apart.
pub(super) unsafe fn gemm_block(
    dst: *mut f32,
    dst_rs: usize,
    (m, n, k): (usize, usize, usize),
    keep: bool,
    ((lhs, lhs_rs, lhs_cs), (rhs, rhs_rs, rhs_cs)): (
        (*const f32, isize, isize),
        (*const f32, isize, isize),
    ),
    act: super::Activation,
    parallelism: gemm::Parallelism,
) {
    // SAFETY: forwarded from the caller.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
            1,
            dst_rs as isize,
            keep,
            lhs,
            lhs_cs,
            lhs_rs,
            rhs,
            rhs_cs,
            rhs_rs,
            if keep { 1.0 } else { 0.0 },
            1.0,
            false,
            false,
            false,
            parallelism,
        );
    }
    if act == super::Activation::Identity {
        return;
    }
    if dst_rs == n {
        // SAFETY: the block's m rows are contiguous: m * n elements the product just wrote.
        activate(act, unsafe { std::slice::from_raw_parts_mut(dst, m * n) });
    } else {
        for row in 0..m {
            // SAFETY: row `row` of the block: n elements that the product just wrote.
            activate(act, unsafe {
                std::slice::from_raw_parts_mut(dst.add(row * dst_rs), n)
            });
        }
    }
}

/// A pass over a gradient, in place, given the output it belongs to.
pub(super) type GradPass = fn(&mut [f32], &[f32]);

/// The pass that turns an output's gradient into the gradient before `act`, given the output;
/// `None` for the identity.
pub(super) fn derivative(act: super::Activation) -> Option<GradPass> {
    match act {
        super::Activation::Identity => None,
        super::Activation::Relu => Some(relu_grad_slice),
        super::Activation::Tanh => Some(tanh_grad_slice),
    }
}

/// The first `len` values of `t`, contiguous, as a vector of their own.
pub(super) fn values(t: FlexTensor, len: usize) -> Vec<f32> {
    let (t, range) = contiguous(t, len);
    t.storage::<f32>()[range].to_vec()
}

/// `t` contiguous (a copy only when it is not), and the range of its first `len` values in its
/// storage.
pub(super) fn contiguous(t: FlexTensor, len: usize) -> (FlexTensor, std::ops::Range<usize>) {
    let t = to_contiguous(&t);
    let start = t.layout().start_offset();
    (t, start..start + len)
}

/// Applies `act` in place.
pub(super) fn activate(act: super::Activation, values: &mut [f32]) {
    match act {
        super::Activation::Identity => {}
        super::Activation::Relu => relu_slice(values),
        super::Activation::Tanh => tanh_slice(values),
    }
}

/// A matrix product into a fresh buffer that the product overwrites whole.
pub(super) fn product(
    (m, n, k): (usize, usize, usize),
    lhs: (*const f32, isize, isize),
    rhs: (*const f32, isize, isize),
    split: bool,
) -> Vec<f32> {
    let mut out: Vec<f32> = Vec::with_capacity(m * n);
    // SAFETY: `out` has room for m * n elements, which gemm writes without reading (keep is
    // false), so every element is initialised before `set_len`; lhs and rhs come from `view`.
    unsafe {
        let identity = super::Activation::Identity;
        gemm_into(
            out.as_mut_ptr(),
            (m, n, k),
            false,
            (lhs, rhs),
            identity,
            split,
        );
        out.set_len(m * n);
    }
    out
}

pub(super) fn tensor(values: Vec<f32>, rows: usize, cols: usize) -> FlexTensor {
    FlexTensor::from_data(burn::tensor::TensorData::new(values, [rows, cols]))
}

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
    let x = rows_unless(x, input_grad::blocked(m, n, k));
    let (b, b_range) = contiguous(b, n);
    let bias = &b.storage::<f32>()[b_range];
    let operands = (view(&x), view(&w));
    if turns_over(operands, (m, k, n)) {
        // SAFETY: the views address x's m x k and w's k x n elements.
        let y_t = unsafe { linear_turned_over(operands, bias, (m, k, n), act) };
        let y = transposed_view(tensor(y_t, n, m));
        return if hand_on_view { y } else { to_contiguous(&y) };
    }
    let mut out = uninit(m * n);
    #[cfg(target_arch = "x86_64")]
    if super::tall_products::applies((m, n, k), operands) {
        let split = m * n * k >= ROW_BLOCK_WORK;
        // SAFETY: `out` holds m x n elements, which the product writes whole; the views
        // address x's m x k and w's k x n elements; `bias` holds n.
        unsafe {
            let dst = out.as_mut_ptr().cast();
            super::tall_products::linear_into(dst, (m, n, k), operands, bias, act, split);
            return tensor(assume_init(out), m, n);
        }
    }
    fill_rows_over_pool(&mut out, bias);
    // SAFETY: `out` was filled just above; x and w are viewed through their layouts.
    tensor(unsafe { onto_biases(out, (m, n, k), operands, act) }, m, n)
}

/// `act(out + lhs [m, k] · rhs [k, n])` for `out [m, n]` filled with biases: the product
/// accumulated onto it, spread over the pool, then the activation; the values.
///
/// # Safety
/// Every element of `out` is initialised; the views address `m x k` and `k x n` elements.
unsafe fn onto_biases(
    mut out: Vec<MaybeUninit<f32>>,
    (m, n, k): (usize, usize, usize),
    operands: (View, View),
    act: super::Activation,
) -> Vec<f32> {
    // SAFETY: forwarded from the caller; `out` holds m * n elements.
    unsafe {
        gemm_into(
            out.as_mut_ptr().cast(),
            (m, n, k),
            true,
            operands,
            act,
            true,
        )
    };
    // SAFETY: initialised by the caller, then accumulated onto by the product.
    unsafe { assume_init(out) }
}

/// Whether [`linear`] computes `x [m, k] · w [k, n]` turned over ([`linear_turned_over`]):
/// where the turn pays on this CPU ([`turn_pays`]), on one thread, where the product takes the
/// gemm crate's blocked kernel either way
/// (`input_grad::blocked`), w's rows are long and run along its columns, and the copies the
/// turn takes (x packed, yᵀ copied back by y's consumers) are smaller than w, which the
/// product as written packs whole. On two threads the turned product, cut into blocks of w's
/// columns, each packing x, ran slower than the product as written in column blocks
/// (fashion-mlp, Emerald Rapids, 6 rounds side by side: 0.93x; on one thread 1.07x). Not for a
/// view that runs backwards along the sum (a flipped input or weight): the crate sums a left
/// operand with a negative column stride from its far end, and the turn swaps which operand is
/// on the left.
fn turns_over(
    ((_, _, x_cs), (_, w_rs, w_cs)): (View, View),
    (m, k, n): (usize, usize, usize),
) -> bool {
    let one_thread = rayon::current_num_threads() < 2;
    let forwards = x_cs > 0 && w_rs > 0;
    let cheaper = n >= 64 && input_grad::turning_copies_less(m, k, n);
    let shapes = input_grad::blocked(m, n, k) && forwards && w_cs == 1 && cheaper;
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
    if let Some(forced) = tests::FORCED_TURN.get() {
        return forced;
    }
    crate::device::simd::gemm_kernel() == "avx512f"
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
    (m, k, n): (usize, usize, usize),
    act: super::Activation,
) -> Vec<f32> {
    let mut y_t = uninit(n * m);
    for (row, &b) in y_t.chunks_mut(m).zip(bias) {
        row.fill(MaybeUninit::new(b));
    }
    let operands = ((wp, w_cs, w_rs), (xp, x_cs, x_rs));
    // SAFETY: `y_t` was filled just above; the views are forwarded from the caller with their
    // strides swapped.
    unsafe { onto_biases(y_t, (n, m, k), operands, act) }
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
    let x = rows_unless(x, input_grad::blocked(k, n, m));
    // Small layers with FMA and a pool: by groups of rows, one thread to each (tabular-mlp).
    let threads = rayon::current_num_threads();
    #[cfg(target_arch = "x86_64")]
    if super::chunked_backward::applies((m, k, n), (view(&x), view(&w)), need_dx, threads) {
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
        product((k, n, m), (xp, x_cs, x_rs), dz_view, split)
    };
    // dx [m, k] = dz [m, n] · wᵀ [n, k], its transposed copy made over the pool when `split`.
    // SAFETY: the views cover dz's m x n and w's k x n elements, which outlive the plan.
    let dx_plan = |split| unsafe {
        input_grad::prepare(
            (dz_values.as_ptr(), n as isize, 1),
            view(&w),
            (m, k, n),
            split,
        )
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

/// The learning rate of each replica (one for a plain tensor), read from the host-side
/// storage of the CPU backend.
pub fn learning_rates(lr: &super::Lr<burn::backend::Flex>) -> Vec<f32> {
    match lr {
        super::Lr::One(lr) => vec![*lr as f32],
        super::Lr::PerReplica(v) => {
            let v = v.clone().to_contiguous();
            let n = v.layout().num_elements();
            v.storage::<f32>()[v.layout().start_offset()..][..n].to_vec()
        }
    }
}

/// One Adam step; see [`adam_generic`]. `lrs` has one rate, or one per replica: the tensors'
/// elements split into as many equal slices, in order.
pub fn adam(
    w: FlexTensor,
    g: FlexTensor,
    m: FlexTensor,
    v: FlexTensor,
    s: super::AdamStep,
    lrs: &[f32],
) -> (FlexTensor, FlexTensor, FlexTensor) {
    let w = if w.layout().is_contiguous() && w.layout().start_offset() == 0 {
        w
    } else {
        w.to_contiguous()
    };
    let (mut out, mut m, mut v) = (
        owned_contiguous(g),
        owned_contiguous(m),
        owned_contiguous(v),
    );
    let n = out.layout().num_elements();
    let (factor, eps) = s.corrections();
    let (g, w) = (&mut out.storage_mut::<f32>()[..n], &w.storage::<f32>()[..n]);
    let (m1, v1) = (
        &mut m.storage_mut::<f32>()[..n],
        &mut v.storage_mut::<f32>()[..n],
    );
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
    (out, m, v)
}

/// Replica `r`'s `[rows, cols]` matrix in a stacked `[K, rows, cols]` tensor, or the tensor
/// itself when it is a 2-d one that every replica shares.
pub(super) fn replica_view(t: &FlexTensor, r: usize) -> (*const f32, isize, isize) {
    let strides = t.layout().strides();
    if strides.len() == 2 {
        return view(t);
    }
    let base = t.storage::<f32>().as_ptr();
    let offset = t.layout().start_offset() as isize + r as isize * strides[0];
    // SAFETY: replica r's first element lies inside the tensor's storage.
    (unsafe { base.offset(offset) }, strides[1], strides[2])
}

/// A raw view that crosses into the pool's threads: each writes its own replica's slice.
#[derive(Clone, Copy)]
pub(super) struct SendView(pub(super) (*const f32, isize, isize));
// SAFETY: the views point into tensors that outlive the parallel loop and are only read.
unsafe impl Send for SendView {}
unsafe impl Sync for SendView {}

impl SendView {
    /// The view; a method, so that a closure captures the whole `SendView`, not its field.
    pub(super) fn get(self) -> (*const f32, isize, isize) {
        self.0
    }
}

/// Tiles of at most `widest` columns over `n` columns, as even as their number allows (20 as 10
/// and 10, not 12 and 8): each tile's first column and width, in order.
#[cfg(target_arch = "x86_64")]
pub(super) fn even_tiles(n: usize, widest: usize) -> impl Iterator<Item = (usize, usize)> {
    let tiles = n.div_ceil(widest);
    (0..tiles).scan(0, move |col, t| {
        let (first, cols) = (*col, (n - *col).div_ceil(tiles - t));
        *col += cols;
        Some((first, cols))
    })
}

/// A buffer of `len` floats for a kernel that writes every element before any is read.
pub(super) fn uninit(len: usize) -> Vec<MaybeUninit<f32>> {
    let mut v = Vec::with_capacity(len);
    // SAFETY: the capacity is `len`, and `MaybeUninit` elements need no initialisation.
    unsafe { v.set_len(len) };
    v
}

/// The floats of a buffer from [`uninit`].
///
/// # Safety
/// Every element has been written.
pub(super) unsafe fn assume_init(v: Vec<MaybeUninit<f32>>) -> Vec<f32> {
    let mut v = std::mem::ManuallyDrop::new(v);
    let (ptr, len, cap) = (v.as_mut_ptr().cast::<f32>(), v.len(), v.capacity());
    // SAFETY: same allocation, layout and length; the caller vouches for the elements.
    unsafe { Vec::from_raw_parts(ptr, len, cap) }
}

/// Fills `dst` with copies of `row`, doubling the copied span each time: a few copy calls,
/// where one per row cost more than a narrow layer's product (a regression's one-column output
/// layer made one per element).
pub(super) fn fill_rows(dst: &mut [MaybeUninit<f32>], row: &[f32]) {
    let (total, p) = (dst.len(), dst.as_mut_ptr().cast::<f32>());
    let mut filled = row.len().min(total);
    // SAFETY: every copy writes inside `dst` (at most `total` elements) and reads `row` or the
    // part of `dst` already written, which never overlaps the part being written.
    unsafe {
        std::ptr::copy_nonoverlapping(row.as_ptr(), p, filled);
        while 0 < filled && filled < total {
            let span = filled.min(total - filled);
            std::ptr::copy_nonoverlapping(p, p.add(filled), span);
            filled += span;
        }
    }
}

/// Elements above which [`fill_rows_over_pool`] splits, and [`linear_backward`] sums the bias
/// gradient beside the products: a copy or a sum is fast, so only outputs of tens of thousands
/// of elements (tabular-mlp's 2,048 x 20) are worth a hand-off.
const FILL_PARALLEL_ELEMENTS: usize = 1 << 15;

/// [`fill_rows`] in blocks of whole rows across the pool, for large outputs.
fn fill_rows_over_pool(dst: &mut [MaybeUninit<f32>], row: &[f32]) {
    let threads = rayon::current_num_threads();
    if threads < 2 || dst.len() < FILL_PARALLEL_ELEMENTS || row.is_empty() {
        return fill_rows(dst, row);
    }
    let rows = (dst.len() / row.len()).div_ceil(threads);
    dst.par_chunks_mut(rows * row.len())
        .for_each(|block| fill_rows(block, row));
}

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
        unsafe { gemm_into(dst, (m, n, k), true, (xv.0, wv.0), act, split) };
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
                (k, n, m),
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
        true => super::shared_input::input_grads(&views, (reps, m, k, n)),
        false => input_grads(&views, (reps, m, k, n)),
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
    (reps, m, k, n): (usize, usize, usize, usize),
) -> FlexTensor {
    let mut dx = uninit(reps * m * k);
    per_replica(&mut dx, m * k, reps * m * n * k, |r, dst, split| {
        let (w, dz) = (views[r].1.0, views[r].2.0);
        // SAFETY: `dst` holds m * k elements, which the plan writes whole; the views address
        // dz_r and w_r.
        unsafe {
            let plan = input_grad::prepare(dz, w, (m, k, n), split);
            plan.write(dst.as_mut_ptr().cast(), k, split)
        };
    });
    // SAFETY: every replica's product wrote its whole slice.
    let dx = unsafe { assume_init(dx) };
    FlexTensor::from_data(burn::tensor::TensorData::new(dx, [reps, m, k]))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::device::simd::{Simd, detected};

    thread_local! {
        /// Whether [`turn_pays`] says yes or no on this thread, in place of the CPU's answer.
        pub(super) static FORCED_TURN: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
    }

    /// `f` with the forward's turn allowed (or not) on this CPU, whichever kernel the gemm
    /// crate runs here: the turned path is tested on every machine, not only where it is taken.
    pub(super) fn with_turn<R>(turn: bool, f: impl FnOnce() -> R) -> R {
        FORCED_TURN.set(Some(turn));
        let result = f();
        FORCED_TURN.set(None);
        result
    }

    /// Values in [-1, 1) from a fixed linear congruential sequence.
    fn values(len: usize, seed: u64) -> Vec<f32> {
        let mut state = seed;
        (0..len)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect()
    }

    /// `dst + lhs · rhs` through `gemm_into`, in a pool of `threads`. `keep_t` is (keep, lhs
    /// read as the transpose of a `[k, m]` matrix as the dW product does, rhs read as the
    /// transpose of an `[n, k]` matrix as the dx product does).
    fn gemm(
        threads: usize,
        (m, n, k): (usize, usize, usize),
        keep_t: (bool, bool, bool),
    ) -> Vec<f32> {
        let (keep, lhs_t, rhs_t) = keep_t;
        let (lhs, rhs) = (values(m * k, 1), values(k * n, 2));
        let lhs_view = match lhs_t {
            false => SendView((lhs.as_ptr(), k as isize, 1)),
            true => SendView((lhs.as_ptr(), 1, m as isize)),
        };
        let rhs_view = match rhs_t {
            false => SendView((rhs.as_ptr(), n as isize, 1)),
            true => SendView((rhs.as_ptr(), 1, k as isize)),
        };
        let mut dst = values(m * n, 3);
        let dst_ptr = SendPtr(dst.as_mut_ptr());
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        // SAFETY: dst holds m * n initialised elements; lhs and rhs hold m * k and k * n.
        pool.install(|| unsafe {
            let operands = (lhs_view.get(), rhs_view.get());
            let identity = crate::ops::Activation::Identity;
            gemm_into(dst_ptr.get(), (m, n, k), keep, operands, identity, true)
        });
        dst
    }

    /// Bit patterns, for comparisons that tell -0.0 from 0.0 and compare NaNs.
    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// Inputs that reach every branch of the kernels: tiny, large, signed zeros, NaN, and a
    /// length that leaves a remainder after any vector width.
    fn kernel_inputs() -> Vec<f32> {
        let mut v: Vec<f32> = values(1003, 7).iter().map(|x| x * 12.0).collect();
        v.extend([0.0, -0.0, 1e-5, -3e-4, 9.5, -40.0, f32::NAN, 1e-40]);
        v
    }

    /// `kernel`'s output at every level this CPU has.
    fn at_each_level(kernel: impl Fn(Simd) -> Vec<f32>) -> Vec<(Simd, Vec<u32>)> {
        detected().up_to().map(|l| (l, bits(&kernel(l)))).collect()
    }

    /// Every level with FMA gives the same bits as the first one; the portable level gives the
    /// same bits too, except where the kernel itself fuses multiply-adds (`tanh`'s polynomial),
    /// where it is within `ulps` units in the last place of it.
    fn check_levels(name: &str, results: &[(Simd, Vec<u32>)], ulps: i64) {
        let portable = &results[0].1;
        let fma = results.iter().find(|(l, _)| *l >= Simd::Avx2);
        for (level, got) in results.iter().skip(1) {
            let want = &fma.expect("a level with FMA").1;
            assert_eq!(
                got, want,
                "{name} at {level} differs from the first level with FMA"
            );
        }
        let Some((_, fma)) = fma else { return };
        let worst = portable
            .iter()
            .zip(fma)
            .map(|(p, f)| (*p as i64 - *f as i64).abs())
            .max();
        assert!(
            worst <= Some(ulps),
            "{name}: portable and fma {worst:?} ulp apart"
        );
    }

    #[test]
    fn every_kernel_level_gives_the_portable_result() {
        let (x, y) = (kernel_inputs(), values(1011, 9));
        let y = &y[..x.len()];
        // `a` written in place, `b` read.
        let run = |a: &[f32], f: &dyn Fn(&mut [f32])| {
            let mut a = a.to_vec();
            f(&mut a);
            a
        };
        let tanh = at_each_level(|l| run(&x, &|a| tanh_slice_at(l, a)));
        // The polynomial rounds differently without FMA: 5 ulp apart at most on these inputs.
        check_levels("tanh", &tanh, 8);
        let relu = at_each_level(|l| run(&x, &|a| relu_slice_at(l, a)));
        check_levels("relu", &relu, 0);
        let tg = at_each_level(|l| run(y, &|a| tanh_grad_slice_at(l, a, &x)));
        check_levels("tanh_grad", &tg, 0);
        let rg = at_each_level(|l| run(y, &|a| relu_grad_slice_at(l, a, &x)));
        check_levels("relu_grad", &rg, 0);
        let sgd = at_each_level(|l| run(y, &|a| sgd_slice_at(l, a, &x, 0.01)));
        check_levels("sgd", &sgd, 0);
        let sums = at_each_level(|l| run(&y[..7], &|a| column_sums_in_memory_at(l, a, &x[..1001])));
        check_levels("column_sums", &sums, 0);
        let adam = at_each_level(|l| {
            let (mut g, mut m) = (y.to_vec(), values(y.len(), 11));
            let mut v: Vec<f32> = values(y.len(), 12).iter().map(|v| v.abs()).collect();
            adam_slice_at(l, &mut g, &x, &mut m, &mut v, 0.9, 0.999, 0.3, 1e-8, 1e-3);
            [g, m, v].concat()
        });
        check_levels("adam", &adam, 0);
        let (threshold, scale) = super::super::dropout::threshold_and_scale(0.3);
        let drop = at_each_level(|l| run(&x, &|a| dropout_slice_at(l, a, 5, 77, threshold, scale)));
        check_levels("dropout", &drop, 0);
    }

    /// A weight whose gradient stayed zero: its moments decay into subnormals, which the Adam
    /// pass flushes to zero at every level (see `subnormals`); the caller's arithmetic keeps
    /// its subnormals after the pass.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn adam_flushes_decayed_moments_to_zero_at_every_level() {
        let tiny = f32::MIN_POSITIVE;
        for level in crate::device::simd::detected().up_to() {
            let (mut g, w) = (vec![0.0; 40], vec![0.5; 40]);
            let (mut m, mut v) = (vec![tiny; 40], vec![tiny; 40]);
            adam_slice_at(
                level, &mut g, &w, &mut m, &mut v, 0.9, 0.999, 1.0, 1e-8, 1e-3,
            );
            let zero = m.iter().chain(&v).all(|x| x.to_bits() == 0);
            assert!(zero, "{level}: {m:?} {v:?}");
            let after = std::hint::black_box(tiny) * std::hint::black_box(0.5);
            assert!(
                after.to_bits() != 0,
                "{level}: the caller's flags were not restored"
            );
        }
    }

    /// The same through `adam` split across a pool of 2 threads, whose threads each get their
    /// own flags back.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn adam_over_the_pool_flushes_on_every_thread_and_restores_each() {
        let n = PARALLEL_ELEMENTS + 77;
        let t = |value: f32| tensor(vec![value; n], 1, n);
        let step = super::super::AdamStep {
            beta1: 0.9,
            beta2: 0.999,
            epsilon: 1e-8,
            time: 3,
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let (w, g) = (t(0.5), t(0.0));
        let (m, v) = (t(f32::MIN_POSITIVE), t(f32::MIN_POSITIVE));
        let (_, m, v) = pool.install(|| adam(w, g, m, v, step, &[1e-3]));
        for moment in [m, v] {
            let values = &moment.storage::<f32>()[..n];
            assert!(values.iter().all(|x| x.to_bits() == 0));
        }
        use super::super::subnormals::{FLUSH, read_mxcsr};
        let flags = pool.broadcast(|_| read_mxcsr() & FLUSH);
        assert_eq!(flags, vec![0, 0], "a pool thread kept the flags");
    }

    /// fashion-mlp's hidden layer (64 x 512), split across pools of 2 to 5 threads, and an
    /// uneven length: the same bits as one pass on one thread.
    #[test]
    fn dropout_over_the_pool_gives_the_one_thread_bits() {
        let (threshold, scale) = super::super::dropout::threshold_and_scale(0.1);
        for n in [64 * 512, DROPOUT_PARALLEL_ELEMENTS + 77] {
            let mut one = values(n, 4);
            dropout_slice(&mut one, 0, 99, threshold, scale);
            for threads in 2..=5 {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build();
                let mut split = values(n, 4);
                pool.unwrap()
                    .install(|| dropout(&mut split, 99, threshold, scale));
                assert!(same_bits(&one, &split), "{n} elements on {threads} threads");
            }
        }
    }

    #[test]
    fn row_blocks_give_the_same_bits_as_one_product_at_any_thread_count() {
        // (keep, lhs transposed, rhs transposed) of a forward product, a dW and a dx.
        let (fwd, dw, dx) = (
            (true, false, false),
            (false, true, false),
            (false, false, true),
        );
        for (shape, keep_t) in [
            // tabular-mlp: the forward products, dW of the first two layers, dx of the second.
            ((2048, 20, 61), fwd),
            ((2048, 10, 20), fwd),
            ((61, 20, 2048), dw),
            ((20, 10, 2048), dw),
            ((2048, 20, 10), dx),
            // fashion-mlp's output layer: forward and dW.
            ((64, 10, 512), fwd),
            ((512, 10, 64), dw),
            // One column (the gemm crate's vector path); a long sum over k through the
            // cache-sized chunks, rows splitting unevenly.
            ((16384, 1, 10), fwd),
            ((300, 16, 1500), dw),
            ((140, 48, 700), fwd),
            // Operands both along k, whose blocks of 256 elements or fewer would take the
            // gemm crate's lane-wise kernel.
            ((128, 16, 64), dx),
            ((2048, 1, 64), (true, false, true)),
        ] {
            let (m, n, k) = shape;
            assert!(m * n * k >= ROW_BLOCK_WORK && row_blocks(m, n, k, 2) == 2);
            let one = gemm(1, shape, keep_t);
            for threads in [2, 3, 4, 5, 7, 8, 16, 32, 64] {
                let split = gemm(threads, shape, keep_t);
                assert!(
                    same_bits(&one, &split),
                    "{shape:?} on {threads} threads differs from 1 thread"
                );
            }
        }
    }

    #[test]
    fn every_input_gradient_plan_keeps_the_strided_products_bits() {
        // (batch, inputs, outputs, plan): fashion-mlp's layers, odd sizes, a layer just at the
        // copy's width, sums longer than the gemm crate's 512-element chunk (with an output of
        // at most 64 x 64, whose chunks are set another way), and products that keep the view
        // because the crate takes another kernel for them (one row; at most 256 outputs).
        for (m, k, n, plan) in [
            (64, 512, 512, "turned over"),
            (64, 784, 512, "turned over"),
            (64, 512, 10, "strided"),
            (37, 100, 70, "turned over"),
            (2048, 20, 64, "copied weight"),
            (300, 200, 100, "copied weight"),
            (64, 300, 1100, "turned over"),
            (40, 60, 1100, "turned over"),
            (1, 300, 64, "strided"),
            (2, 100, 64, "strided"),
            (4, 64, 64, "strided"),
            (5, 64, 64, "turned over"),
        ] {
            let (dz, w) = (values(m * n, 1), values(k * n, 2));
            let views = ((dz.as_ptr(), n as isize, 1), (w.as_ptr(), n as isize, 1));
            let prepared = unsafe { input_grad::prepare(views.0, views.1, (m, k, n), false) };
            assert_eq!(prepared.kind(), plan, "{m}x{k}x{n}");
            // The strided product on one thread, as dx was computed before any copy.
            let strided = gemm(1, (m, k, n), (false, false, true));
            for threads in [1, 2, 3] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build();
                let grads = pool.unwrap().install(|| {
                    let (x, y) = (tensor(values(m * k, 3), m, k), tensor(dz.clone(), m, n));
                    let (w, grad) = (tensor(w.clone(), k, n), tensor(dz.clone(), m, n));
                    linear_backward(x, w, y, grad, crate::ops::Activation::Identity, true)
                });
                let dx = tensor_values(grads.dx.expect("dx was asked for"), m * k);
                assert!(
                    same_bits(&dx, &strided),
                    "dx of {m}x{k}x{n} on {threads} threads"
                );
            }
        }
    }

    #[test]
    fn a_forward_turned_over_keeps_the_bits_of_the_product_as_written() {
        use burn::tensor::ops::FloatTensorOps;
        // (batch, inputs, outputs, x stored transposed): fashion-mlp's first two layers, a
        // sum longer than one 512-element chunk, an odd size. One thread turns them over, two
        // do not.
        for (m, k, n, x_t) in [
            (64, 784, 512, false),
            (64, 512, 512, true),
            (5, 1100, 64, false),
            (37, 100, 70, false),
        ] {
            for act in [
                crate::ops::Activation::Identity,
                crate::ops::Activation::Relu,
                crate::ops::Activation::Tanh,
            ] {
                let run = |threads| {
                    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build();
                    pool.unwrap().install(|| {
                        let x_view = match x_t {
                            false => (std::ptr::null(), k as isize, 1),
                            true => (std::ptr::null(), 1, m as isize),
                        };
                        let w_view = (std::ptr::null(), n as isize, 1);
                        let turns = with_turn(true, || turns_over((x_view, w_view), (m, k, n)));
                        assert_eq!(turns, threads == 1);
                        let x = match x_t {
                            false => tensor(values(m * k, 1), m, k),
                            true => burn::backend::Flex::float_swap_dims(
                                tensor(values(m * k, 1), k, m),
                                0,
                                1,
                            ),
                        };
                        let (w, b) = (tensor(values(k * n, 2), k, n), values(n, 3));
                        let b = FlexTensor::from_data(burn::tensor::TensorData::new(b, [n]));
                        with_turn(true, || tensor_values(linear(x, w, b, act, true), m * n))
                    })
                };
                let (turned, as_written) = (run(1), run(2));
                assert!(same_bits(&turned, &as_written), "{m}x{k}x{n} {act:?}");
            }
        }
    }

    #[test]
    fn a_transposed_view_is_copied_out_as_burn_copies_it() {
        use burn::tensor::ops::FloatTensorOps;
        for (rows, cols) in [(64, 512), (3, 5), (17, 1), (2, 100)] {
            let t = tensor(values(rows * cols, 1), cols, rows);
            let view = burn::backend::Flex::float_swap_dims(t, 0, 1);
            assert!(same_bits(
                &tensor_values(to_contiguous(&view), rows * cols),
                &view.to_contiguous().storage::<f32>()[..rows * cols],
            ));
        }
    }

    #[test]
    fn a_turned_layers_output_feeds_the_next_layer_and_the_backward_with_the_bits_of_its_rows() {
        // fashion-mlp's three layers at one thread: the first two turn over and hand on views.
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build();
        pool.unwrap().install(|| {
            with_turn(true, || {
                let (m, relu) = (64, crate::ops::Activation::Relu);
                let layer = |k: usize, n: usize, seed: u64| {
                    let w = tensor(values(k * n, seed), k, n);
                    let b = burn::tensor::TensorData::new(values(n, seed + 1), [n]);
                    (w, FlexTensor::from_data(b))
                };
                let (l1, l2, l3) = (layer(784, 512, 2), layer(512, 512, 4), layer(512, 10, 6));
                // A one-output head: the gemm crate's matrix-vector kernels, which go by strides.
                let l4 = layer(512, 1, 10);
                let x = tensor(values(m * 784, 1), m, 784);
                let h1 = linear(x, l1.0, l1.1, relu, true);
                assert_eq!(h1.layout().strides(), [1, m as isize], "a view of yᵀ");
                let h1_rows = tensor(tensor_values(h1.clone(), m * 512), m, 512);
                // The second layer (turned over) and the third (not) from the view and from rows.
                let through = |h: FlexTensor| {
                    let h2 = linear(h.clone(), l2.0.clone(), l2.1.clone(), relu, true);
                    let out = linear(h2.clone(), l3.0.clone(), l3.1.clone(), relu, false);
                    let one = linear(h.clone(), l4.0.clone(), l4.1.clone(), relu, false);
                    let grad = tensor(values(m * 512, 8), m, 512);
                    let g = linear_backward(h.clone(), l2.0.clone(), h2.clone(), grad, relu, true);
                    let dx = g.dx.expect("dx was asked for");
                    let one_grad = tensor(values(m, 12), m, 1);
                    let g1 = linear_backward(h, l4.0.clone(), one.clone(), one_grad, relu, true);
                    [
                        tensor_values(h2, m * 512),
                        tensor_values(out, m * 10),
                        tensor_values(one, m),
                        tensor_values(g.dw, 512 * 512),
                        tensor_values(g.db, 512),
                        tensor_values(dx, m * 512),
                        tensor_values(g1.dw, 512),
                    ]
                };
                for (i, (a, b)) in through(h1).iter().zip(through(h1_rows)).enumerate() {
                    assert!(same_bits(a, &b), "result {i}");
                }
            })
        });
    }

    #[test]
    fn a_view_running_backwards_along_the_sum_is_not_turned_over() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build();
        pool.unwrap().install(|| {
            let (m, k, n, null) = (64, 784, 512, std::ptr::null());
            let (x, w) = ((null, k as isize, 1), (null, n as isize, 1));
            with_turn(true, || {
                assert!(turns_over((x, w), (m, k, n)));
                // An input flipped along its features, and a weight flipped along its rows.
                assert!(!turns_over(((null, k as isize, -1), w), (m, k, n)));
                assert!(!turns_over((x, (null, -(n as isize), 1)), (m, k, n)));
            });
        });
    }

    #[test]
    fn the_forward_turns_over_only_where_the_gemm_crate_runs_its_avx512_kernel() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build();
        pool.unwrap().install(|| {
            let (m, k, n, null) = (64, 784, 512, std::ptr::null());
            let (x, w) = ((null, k as isize, 1), (null, n as isize, 1));
            let avx512 = crate::device::simd::gemm_kernel() == "avx512f";
            assert_eq!(turns_over((x, w), (m, k, n)), avx512);
            assert!(!with_turn(false, || turns_over((x, w), (m, k, n))));
            // A layer handed on from the first: a view of yᵀ where it turned, else rows.
            let x = tensor(values(m * k, 1), m, k);
            let (w, b) = (tensor(values(k * n, 2), k, n), values(n, 3));
            let b = FlexTensor::from_data(burn::tensor::TensorData::new(b, [n]));
            let h = linear(x, w, b, crate::ops::Activation::Relu, true);
            let strides = if avx512 {
                [1, m as isize]
            } else {
                [n as isize, 1]
            };
            assert_eq!(h.layout().strides(), strides);
        });
    }

    #[test]
    fn input_gradients_split_over_the_pool_keep_the_strided_products_bits() {
        // Each plan's copy and product spread over the pool (in a step, dx of so large a
        // product runs whole beside dW, so linear_backward does not split these), and written
        // into rows wider than dx's, as the replicas' side-by-side layout has them.
        for (m, k, n, plan) in [
            (64, 784, 512, "turned over"),
            (600, 200, 128, "copied weight"),
        ] {
            let (dz, w) = (values(m * n, 1), values(k * n, 2));
            let views = ((dz.as_ptr(), n as isize, 1), (w.as_ptr(), n as isize, 1));
            let strided = gemm(1, (m, k, n), (false, false, true));
            for threads in [2, 3, 8] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build();
                let (dz_view, w_view) = (SendView(views.0), SendView(views.1));
                let dx = pool.unwrap().install(|| unsafe {
                    let (dz_view, w_view) = (dz_view.get(), w_view.get());
                    let prepared = input_grad::prepare(dz_view, w_view, (m, k, n), true);
                    assert_eq!(prepared.kind(), plan);
                    let mut dx = vec![0f32; m * k];
                    prepared.write(dx.as_mut_ptr(), k, true);
                    dx
                });
                assert!(same_bits(&dx, &strided), "{m}x{k}x{n} on {threads} threads");
            }
            let wide = unsafe {
                let prepared = input_grad::prepare(views.0, views.1, (m, k, n), false);
                let mut wide = vec![f32::NAN; m * (k + 3)];
                prepared.write(wide.as_mut_ptr(), k + 3, false);
                wide
            };
            let rows: Vec<f32> = wide.chunks(k + 3).flat_map(|r| r[..k].to_vec()).collect();
            assert!(same_bits(&rows, &strided), "{m}x{k}x{n} into wider rows");
            assert!(
                wide.chunks(k + 3)
                    .all(|r| r[k..].iter().all(|v| v.is_nan()))
            );
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn even_tiles_share_columns_as_evenly_as_their_number_allows() {
        let tiles = |n, widest| even_tiles(n, widest).collect::<Vec<_>>();
        assert_eq!(tiles(20, 12), vec![(0, 10), (10, 10)]);
        assert_eq!(tiles(30, 24), vec![(0, 15), (15, 15)]);
        assert_eq!(tiles(25, 12), vec![(0, 9), (9, 8), (17, 8)]);
        assert_eq!(tiles(7, 24), vec![(0, 7)]);
    }

    /// Whether two results are the same floats, bit for bit.
    pub(in crate::ops) fn same_bits(a: &[f32], b: &[f32]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
    }

    /// Values with many bits set, of both signs, different for each `salt` (the x86 kernels'
    /// tests).
    #[cfg(target_arch = "x86_64")]
    pub(in crate::ops) fn salted_values(len: usize, salt: u32) -> Vec<f32> {
        (0..len as u32)
            .map(|i| {
                ((i.wrapping_mul(2654435761) ^ salt.wrapping_mul(40503)) % 20011) as f32 / 977.0
                    - 10.0
            })
            .collect()
    }

    /// `[m, n]` from `gemm_into` on a pool of `threads` (ember's own kernel where one applies)
    /// and from the gemm crate as one serial product, on [`salted_values`] with a kept start;
    /// `lhs_t`: lhs `[m, k]` is the transpose of a row-major `[k, m]` (a weight gradient's
    /// xᵀ); `rhs_t`: rhs `[k, n]` is the transpose of a row-major `[n, k]` (a weight in an
    /// input gradient). Otherwise both are row-major.
    #[cfg(target_arch = "x86_64")]
    pub(in crate::ops) fn ours_and_crates(
        threads: usize,
        dims: (usize, usize, usize),
        keep: bool,
        layouts: (bool, bool),
    ) -> [Vec<f32>; 2] {
        let identity = crate::ops::Activation::Identity;
        // SAFETY: `ours_and_crates_by` hands over m * n initialised elements and views of
        // m x k and k x n.
        let ours = |dst, operands| unsafe {
            gemm_into(dst, dims, keep, operands, identity, true);
        };
        ours_and_crates_by(threads, dims, keep, layouts, ours)
    }

    /// [`ours_and_crates`] with `ours(dst, (lhs, rhs))` in place of `gemm_into`: a kernel's own
    /// entry (at a given vector width, say), run on the pool into dst's `m * n` initialised
    /// elements, row-major.
    #[cfg(target_arch = "x86_64")]
    pub(in crate::ops) fn ours_and_crates_by(
        threads: usize,
        (m, n, k): (usize, usize, usize),
        keep: bool,
        (lhs_t, rhs_t): (bool, bool),
        ours_into: impl Fn(*mut f32, (View, View)) + Sync,
    ) -> [Vec<f32>; 2] {
        let (lhs_values, rhs_values) = (salted_values(m * k, 1), salted_values(k * n, 2));
        let lhs = match lhs_t {
            true => SendView((lhs_values.as_ptr(), 1, m as isize)),
            false => SendView((lhs_values.as_ptr(), k as isize, 1)),
        };
        let rhs = match rhs_t {
            true => SendView((rhs_values.as_ptr(), 1, k as isize)),
            false => SendView((rhs_values.as_ptr(), n as isize, 1)),
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let (mut ours, mut crates) = (salted_values(m * n, 3), salted_values(m * n, 3));
        let (identity, dst) = (crate::ops::Activation::Identity, SendPtr(ours.as_mut_ptr()));
        pool.install(|| ours_into(dst.get(), (lhs.get(), rhs.get())));
        let (operands, serial) = ((lhs.get(), rhs.get()), gemm::Parallelism::None);
        // SAFETY: crates holds m * n initialised elements; the views m x k and k x n.
        unsafe {
            let crates = crates.as_mut_ptr();
            gemm_block(crates, n, (m, n, k), keep, operands, identity, serial)
        };
        [ours, crates]
    }

    /// The first `len` values of a tensor (the kernels' `values`, which the test values hide).
    fn tensor_values(t: FlexTensor, len: usize) -> Vec<f32> {
        super::values(t, len)
    }

    #[test]
    fn column_blocks_give_the_same_bits_as_one_product_at_any_thread_count() {
        // fashion-mlp's forward, dW and dx shapes, and a width that splits unevenly.
        for (shape, keep, lhs_t) in [
            ((64, 512, 784), true, false),
            ((784, 512, 64), false, true),
            ((64, 784, 512), false, false),
            ((64, 200, 700), true, false),
            // tabular-mlp's 8 replicas side by side: forward and dW.
            ((2048, 160, 61), true, false),
            ((61, 160, 2048), false, true),
        ] {
            let one = gemm(1, shape, (keep, lhs_t, false));
            for threads in 2..=16 {
                let split = gemm(threads, shape, (keep, lhs_t, false));
                assert!(
                    same_bits(&one, &split),
                    "{shape:?} on {threads} threads differs from 1 thread"
                );
            }
        }
    }
}
