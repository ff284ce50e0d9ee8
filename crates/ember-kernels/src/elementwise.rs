//! Element-wise CPU kernels: plain loops over `f32` slices that the compiler vectorises,
//! compiled again for AVX2+FMA and for AVX-512 and picked at run time (`ops::simd`, the
//! [`dispatch`] macro), so the binary still runs on any x86-64: activations and their
//! derivatives, column sums, dropout, row fills, over the pool where large.

use rayon::prelude::*;
use std::mem::MaybeUninit;

/// Defines `$name(args)`, which runs `$generic` at the widest level this CPU has, and
/// `$at(level, args)`, which runs it at `level` (the kernels' tests compare the levels). Each
/// level is the same loop compiled for its instruction set; the vector width changes, not the
/// operations on an element, so every level with FMA gives the same bits.
#[macro_export]
macro_rules! dispatch {
    ($name:ident, $at:ident, $generic:ident, ($($arg:ident: $ty:ty),*)) => {
        #[allow(clippy::too_many_arguments)]
        pub fn $name($($arg: $ty),*) {
            $at($crate::simd::detected(), $($arg),*)
        }

        /// Runs at `level`, which must not be wider than the CPU's (it panics if it is).
        #[allow(clippy::too_many_arguments)]
        pub fn $at(level: $crate::simd::Simd, $($arg: $ty),*) {
            use $crate::simd::{detected, Simd};
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
pub use crate::dispatch;

/// `a * b + c`, fused where the build has FMA (the AVX2 kernels), else a multiply and an add
/// (a software `fmaf` call would be far slower).
#[inline(always)]
pub fn madd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
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
pub fn column_sums_strided(sums: &mut [f32], rows: &[f32], stride: usize, m: usize) {
    for i in 0..m {
        let row = &rows[i * stride..][..sums.len()];
        sums.iter_mut().zip(row).for_each(|(s, v)| *s += v);
    }
}

dispatch!(relu_slice, relu_slice_at, relu_generic, (values: &mut [f32]));

dispatch!(relu_grad_slice, relu_grad_slice_at, relu_grad_generic, (grad: &mut [f32], y: &[f32]));

dispatch!(column_sums_in_memory, column_sums_in_memory_at, column_sums_generic, (sums: &mut [f32], rows: &[f32]));

/// `sums[j] += rows[i * n + j]` for every row `i` in order, `n = sums.len()`: in registers
/// where the rows are short (`column_sums`), the same adds either way.
pub fn column_sums(sums: &mut [f32], rows: &[f32]) {
    let n = sums.len();
    assert_eq!(rows.len().checked_rem(n), Some(0), "rows of {n} columns");
    #[cfg(target_arch = "x86_64")]
    if crate::column_sums::applies(n) {
        return crate::column_sums::sums_into(sums, rows);
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
        let keep = keep(first.wrapping_add(i as u32), seed, threshold);
        *v *= if keep { scale } else { 0.0 };
    }
}

/// The keep test of element `i` under `seed`: two rounds of a 32-bit integer hash (Wellons'
/// lowbias32) keyed by the seed's halves, compared with `threshold` = (1-p)·2^32. 32-bit
/// integer operations only, so the loop vectorises.
#[inline(always)]
pub fn keep(i: u32, seed: u64, threshold: u32) -> bool {
    let round = |mut x: u32| {
        x ^= x >> 16;
        x = x.wrapping_mul(0x7feb_352d);
        x ^= x >> 15;
        x = x.wrapping_mul(0x846c_a68b);
        x ^ (x >> 16)
    };
    round(round(i ^ seed as u32) ^ (seed >> 32) as u32) < threshold
}

/// The keep threshold and the kept elements' scale at rate `p`.
pub fn threshold_and_scale(p: f64) -> (u32, f32) {
    let keep = 1.0 - p;
    (
        (keep * 4_294_967_296.0).min(u32::MAX as f64) as u32,
        (1.0 / keep) as f32,
    )
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
pub const PARALLEL_ELEMENTS: usize = 1 << 16;

/// The same for dropout, whose two hash rounds cost several times an optimizer's arithmetic
/// per element: fashion-mlp's hidden layers (64 x 512 = 32,768) are above it. Below the
/// optimizer's threshold, their dropout ran on one thread while the other waited, about 9 % of
/// a 2-thread step against 3 % of a 1-thread one
/// (docs/benchmarks/adam-and-subnormals-on-sapphire-rapids.md, "Subnormals").
pub const DROPOUT_PARALLEL_ELEMENTS: usize = 1 << 14;

/// One piece per pool thread, or `None` when `n` elements (fewer than `least`) are not worth
/// splitting.
pub fn chunk_len(n: usize, least: usize) -> Option<usize> {
    let threads = rayon::current_num_threads();
    (threads > 1 && n >= least).then(|| n.div_ceil(threads).next_multiple_of(64))
}

/// Elements from which an activation's derivative pass is split across the pool:
/// tabular-mlp's `[2048 x 20]` and `[2048 x 10]` gradients, whose passes otherwise ran on one
/// thread while the other waited for the weight gradients' products.
const DERIVATIVE_PARALLEL_ELEMENTS: usize = 1 << 14;

/// `pass(dz, y)`, split across the pool for large tensors. Element-wise, so the result is the
/// same bits however it is split.
pub fn derivative_over_pool(pass: GradPass, dz: &mut [f32], y: &[f32]) {
    match chunk_len(dz.len(), DERIVATIVE_PARALLEL_ELEMENTS) {
        Some(c) => (dz.par_chunks_mut(c).zip(y.par_chunks(c))).for_each(|(dz, y)| pass(dz, y)),
        None => pass(dz, y),
    }
}

/// A pass over a gradient, in place, given the output it belongs to.
pub type GradPass = fn(&mut [f32], &[f32]);

/// The pass that turns an output's gradient into the gradient before `act`, given the output;
/// `None` for the identity.
pub fn derivative(act: crate::Activation) -> Option<GradPass> {
    match act {
        crate::Activation::Identity => None,
        crate::Activation::Relu => Some(relu_grad_slice),
        crate::Activation::Tanh => Some(tanh_grad_slice),
    }
}

/// Applies `act` in place.
pub fn activate(act: crate::Activation, values: &mut [f32]) {
    match act {
        crate::Activation::Identity => {}
        crate::Activation::Relu => relu_slice(values),
        crate::Activation::Tanh => tanh_slice(values),
    }
}

/// Fills `dst` with copies of `row`, doubling the copied span each time: a few copy calls,
/// where one per row cost more than a narrow layer's product (a regression's one-column output
/// layer made one per element).
pub fn fill_rows(dst: &mut [MaybeUninit<f32>], row: &[f32]) {
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
pub const FILL_PARALLEL_ELEMENTS: usize = 1 << 15;

/// [`fill_rows`] in blocks of whole rows across the pool, for large outputs.
pub fn fill_rows_over_pool(dst: &mut [MaybeUninit<f32>], row: &[f32]) {
    let threads = rayon::current_num_threads();
    if threads < 2 || dst.len() < FILL_PARALLEL_ELEMENTS || row.is_empty() {
        return fill_rows(dst, row);
    }
    let rows = (dst.len() / row.len()).div_ceil(threads);
    dst.par_chunks_mut(rows * row.len())
        .for_each(|block| fill_rows(block, row));
}
