//! Products with narrow rows summed over a short sum, on AVX-512 or AVX2 with FMA: tabular-mlp's
//! second layer's input gradient, `dx [2048 x 20] = dz [2048 x 10] · wᵀ [10 x 20]`.
//!
//! The gemm crate computes a row-major output as its transpose, `dstᵀ = rhsᵀ · lhsᵀ`, and packs
//! lhs's rows into panels first. With a sum of 10 the packing and the crate's bookkeeping cost
//! as much as the arithmetic: one thread took 20 µs for that product, this kernel 10 µs (a
//! Xeon with AVX-512, family 6 model 167; the copy of the destination left out). Each output
//! element here is the crate's chain, so the bits are the crate's (the tests compare them):
//! fused multiply-adds from zero in the order of the sum (one chunk: the crate's chunks are far
//! longer than [`SHORT`]), then added to the destination when it is kept. A tile is a few rows
//! of the output by one or two vectors of its columns (one to three on AVX2), in registers; each step of the sum
//! broadcasts one scalar of each of lhs's rows and reads one row of rhs. Each element is
//! summed by one thread, so the thread count does not change a bit.

use crate::simd::{Simd, detected};
use crate::view::{ProductDims, SendPtr, SendView, View};
use rayon::prelude::*;
use std::arch::x86_64::*;

/// The longest sum taken: measured from 7 to 16 (1.2x to 2x the crate). At 20 the crate was
/// faster (tabular-mlp's second layer forward: 16 against 19 µs).
const SHORT: usize = 16;

/// Columns in an AVX-512 vector.
const LANES: usize = 16;

/// The widest output taken on AVX-512: two vectors of columns, one tile across. Wider outputs
/// ran slower than the crate (`[64 x 512]` summed over 10: 16 against 6 µs).
const WIDE: usize = 2 * LANES;

/// Output rows in a tile: independent chains enough to cover the fused multiply-add's latency,
/// with accumulators and rhs's row in registers (12 x 1 + 1 and 8 x 2 + 2 of 32).
const ROWS_OF_ONE_VECTOR: usize = 12;
const ROWS_OF_TWO_VECTORS: usize = 8;

/// Columns in an AVX2 vector, and the widest output taken there: three vectors (tabular-mlp's
/// 20 columns), whose tiles of 4 rows fill AVX2's 16 registers (12 accumulators, rhs's row
/// and lhs's broadcast scalar).
const AVX2_LANES: usize = 8;
const AVX2_WIDE: usize = 3 * AVX2_LANES;

/// The widest output taken at `level` (none without FMA).
pub fn wide(level: Simd) -> usize {
    match level {
        Simd::Avx512 => WIDE,
        Simd::Avx2 => AVX2_WIDE,
        Simd::Portable => 0,
    }
}

/// Rows in a piece of work on the pool.
const PIECE_ROWS: usize = 256;

/// Whether [`product_into`] computes `m x n` outputs summed over `k`: on AVX-512 (AVX2), for at
/// most [`WIDE`] ([`AVX2_WIDE`]) columns summed over at most [`SHORT`], where the crate takes
/// its blocked kernel (`gemm::blocked`), with lhs's rows and one of rhs's axes where they
/// stand (a weight's rows, or its columns: its transpose).
pub fn applies(dims: ProductDims, (lhs, rhs): (View, View)) -> bool {
    let ((_, l_rs, l_cs), (_, r_rs, r_cs)) = (lhs, rhs);
    let (n, k) = (dims.cols, dims.inner);
    let shape = n <= wide(detected()) && k <= SHORT && crate::gemm::blocked(dims);
    let operands = l_cs == 1 && l_rs > 0 && ((r_cs == 1 && r_rs > 0) || (r_rs == 1 && r_cs > 0));
    shape && operands
}

/// `dst [m, n] = (keep ? dst : 0) + lhs [m, k] · rhs [k, n]`, dst's rows `dst_rs` apart, with
/// the gemm crate's bits; the rows over the pool in pieces when `split`.
///
/// # Safety
/// [`applies`] holds; `dst_rs >= n`; `dst` is writable at `i * dst_rs + j` for `i < m`,
/// `j < n` (and initialised there when `keep`); `lhs` and `rhs` address `m x k` and `k x n`
/// elements through their strides.
pub unsafe fn product_into(
    dst: (*mut f32, usize),
    dims: ProductDims,
    keep: bool,
    operands: (View, View),
    split: bool,
) {
    // SAFETY: forwarded from the caller; the CPU has `detected()`'s features.
    unsafe { product_at(detected(), dst, dims, keep, operands, split) }
}

/// [`product_into`] on `level`'s vectors.
///
/// # Safety
/// As for [`product_into`], with `n` at most `wide(level)`; the CPU has `level`'s features.
unsafe fn product_at(
    level: Simd,
    (dst, dst_rs): (*mut f32, usize),
    dims: ProductDims,
    keep: bool,
    (lhs, rhs): (View, View),
    split: bool,
) {
    let ProductDims {
        rows: m,
        cols: n,
        inner: k,
    } = dims;
    assert!(n <= wide(level), "{n} columns at {level}");
    // rhs as k rows of n, copied when it is a transpose (at most 16 x 32 elements).
    let mut turned = [0f32; SHORT * WIDE];
    let (r, r_rs, r_cs) = rhs;
    let rhs = if r_cs == 1 {
        SendView((r, r_rs, 1))
    } else {
        debug_assert_eq!(r_rs, 1, "applies() takes rhs along its rows or its columns");
        for (s, row) in turned.chunks_exact_mut(n).take(k).enumerate() {
            for (j, v) in row.iter_mut().enumerate() {
                // SAFETY: element (s, j) of rhs, inside it as the caller vouches.
                *v = unsafe { *r.offset(s as isize + j as isize * r_cs) };
            }
        }
        SendView((turned.as_ptr(), n as isize, 1))
    };
    let (dst, lhs) = (SendPtr(dst), SendView(lhs));
    let piece = |p: usize| {
        let (first, rows) = (p * PIECE_ROWS, PIECE_ROWS.min(m - p * PIECE_ROWS));
        let (l, l_rs, _) = lhs.get();
        let (r, r_rs, _) = rhs.get();
        // SAFETY: rows first..first + rows of dst and lhs, inside them as the caller vouches;
        // each piece writes its own rows; the CPU has level's features.
        unsafe {
            let dst = (dst.get().add(first * dst_rs), dst_rs);
            let lhs = (l.offset(first as isize * l_rs), l_rs as usize);
            let rhs = (r, r_rs as usize);
            let dims = ProductDims { rows, ..dims };
            match level {
                Simd::Avx512 => rows_into(dst, dims, keep, lhs, rhs),
                _ => rows_into_avx2(dst, dims, keep, lhs, rhs),
            }
        }
    };
    let pieces = m.div_ceil(PIECE_ROWS);
    match split && rayon::current_num_threads() > 1 && pieces > 1 {
        true => (0..pieces).into_par_iter().for_each(piece),
        false => (0..pieces).for_each(piece),
    }
}

/// `rows` rows of the product: tiles of a few rows by all `n` columns (one or two masked
/// vectors), then the rows left over one at a time.
///
/// # Safety
/// As for [`product_into`], for these rows: `lhs` and `dst` start at the first one; rhs's
/// rows are `r_rs` apart with their `n` columns adjacent.
#[target_feature(enable = "avx512f,fma")]
unsafe fn rows_into(
    (dst, dst_rs): (*mut f32, usize),
    ProductDims {
        rows,
        cols: n,
        inner: k,
    }: ProductDims,
    keep: bool,
    (l, l_rs): (*const f32, usize),
    rhs: (*const f32, usize),
) {
    let mask = |cols: usize| ((1u32 << cols.min(LANES)) - 1) as __mmask16;
    let mut i = 0;
    // SAFETY (every tile): rows i.. of dst and lhs, inside them as the caller vouches.
    macro_rules! tiles {
        ($rows:expr, $v:literal, $masks:expr) => {
            while rows - i >= $rows {
                let (dst, lhs) = unsafe { (dst.add(i * dst_rs), l.add(i * l_rs)) };
                unsafe { tile::<$rows, $v>((dst, dst_rs), k, keep, (lhs, l_rs), rhs, $masks) };
                i += $rows;
            }
        };
    }
    if n > LANES {
        let masks = [mask(LANES), mask(n - LANES)];
        tiles!(ROWS_OF_TWO_VECTORS, 2, masks);
        tiles!(1, 2, masks);
    } else {
        tiles!(ROWS_OF_ONE_VECTOR, 1, [mask(n)]);
        tiles!(1, 1, [mask(n)]);
    }
}

/// `R` rows by `V` vectors of columns (lanes past the masks neither read nor written): for each
/// element, `Σ_s lhs[i][s] · rhs[s][j]` over `k` steps, a chain of fused multiply-adds from
/// zero in the order of s, then added to dst's element when `keep`.
///
/// # Safety
/// `R` rows of dst (rows `dst_rs` apart) and of lhs (`l_rs` apart, `k` elements each) and `k`
/// rows of rhs (`r_rs` apart), each with the masks' columns, lie inside their buffers.
#[target_feature(enable = "avx512f,fma")]
unsafe fn tile<const R: usize, const V: usize>(
    (dst, dst_rs): (*mut f32, usize),
    k: usize,
    keep: bool,
    (lhs, l_rs): (*const f32, usize),
    (rhs, r_rs): (*const f32, usize),
    masks: [__mmask16; V],
) {
    let mut acc = [[_mm512_setzero_ps(); V]; R];
    for s in 0..k {
        let mut w = [_mm512_setzero_ps(); V];
        for (v, w) in w.iter_mut().enumerate() {
            // SAFETY: the masked lanes are not read; the others are inside rhs's row s.
            *w = unsafe { _mm512_maskz_loadu_ps(masks[v], rhs.add(s * r_rs + v * LANES)) };
        }
        for (i, acc) in acc.iter_mut().enumerate() {
            // SAFETY: step s of lhs's row i.
            let x = _mm512_set1_ps(unsafe { *lhs.add(i * l_rs + s) });
            for (acc, w) in acc.iter_mut().zip(&w) {
                *acc = _mm512_fmadd_ps(x, *w, *acc);
            }
        }
    }
    for (i, acc) in acc.iter().enumerate() {
        for (v, &sum) in acc.iter().enumerate() {
            // SAFETY: the masked lanes of dst's row i, as the caller vouches.
            unsafe {
                let d = dst.add(i * dst_rs + v * LANES);
                // dst is read only when kept: otherwise it may be uninitialised.
                let out = match keep {
                    true => _mm512_add_ps(_mm512_maskz_loadu_ps(masks[v], d), sum),
                    false => sum,
                };
                _mm512_mask_storeu_ps(d, masks[v], out);
            }
        }
    }
}

/// [`rows_into`] on AVX2: tiles of a few rows by one to three (masked) vectors of 8 columns.
///
/// # Safety
/// As for [`rows_into`], with `n` at most [`AVX2_WIDE`], on a CPU with AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_into_avx2(
    (dst, dst_rs): (*mut f32, usize),
    ProductDims {
        rows,
        cols: n,
        inner: k,
    }: ProductDims,
    keep: bool,
    (l, l_rs): (*const f32, usize),
    rhs: (*const f32, usize),
) {
    let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let masks: [__m256i; 3] = std::array::from_fn(|v| {
        let live = n.saturating_sub(v * AVX2_LANES).min(AVX2_LANES) as i32;
        _mm256_cmpgt_epi32(_mm256_set1_epi32(live), lane)
    });
    let mut i = 0;
    // SAFETY (every tile): rows i.. of dst and lhs, inside them as the caller vouches.
    macro_rules! tiles {
        ($rows:expr, $v:literal) => {
            let masks: [__m256i; $v] = std::array::from_fn(|v| masks[v]);
            while rows - i >= $rows {
                let (dst, lhs) = unsafe { (dst.add(i * dst_rs), l.add(i * l_rs)) };
                unsafe { tile_avx2::<$rows, $v>((dst, dst_rs), k, keep, (lhs, l_rs), rhs, masks) };
                i += $rows;
            }
        };
    }
    match n.div_ceil(AVX2_LANES) {
        3 => {
            tiles!(4, 3);
            tiles!(1, 3);
        }
        2 => {
            tiles!(6, 2);
            tiles!(1, 2);
        }
        _ => {
            tiles!(12, 1);
            tiles!(1, 1);
        }
    }
}

/// [`tile`] on AVX2: `R` rows by `V` vectors of 8 columns, the same chains.
///
/// # Safety
/// As for [`tile`], on a CPU with AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_avx2<const R: usize, const V: usize>(
    (dst, dst_rs): (*mut f32, usize),
    k: usize,
    keep: bool,
    (lhs, l_rs): (*const f32, usize),
    (rhs, r_rs): (*const f32, usize),
    masks: [__m256i; V],
) {
    let mut acc = [[_mm256_setzero_ps(); V]; R];
    for s in 0..k {
        let mut w = [_mm256_setzero_ps(); V];
        for (v, w) in w.iter_mut().enumerate() {
            // SAFETY: the masked lanes are not read; the others are inside rhs's row s.
            *w = unsafe { _mm256_maskload_ps(rhs.add(s * r_rs + v * AVX2_LANES), masks[v]) };
        }
        for (i, acc) in acc.iter_mut().enumerate() {
            // SAFETY: step s of lhs's row i.
            let x = _mm256_set1_ps(unsafe { *lhs.add(i * l_rs + s) });
            for (acc, w) in acc.iter_mut().zip(&w) {
                *acc = _mm256_fmadd_ps(x, *w, *acc);
            }
        }
    }
    for (i, acc) in acc.iter().enumerate() {
        for (v, &sum) in acc.iter().enumerate() {
            // SAFETY: the masked lanes of dst's row i, as the caller vouches.
            unsafe {
                let d = dst.add(i * dst_rs + v * AVX2_LANES);
                // dst is read only when kept: otherwise it may be uninitialised.
                let out = match keep {
                    true => _mm256_add_ps(_mm256_maskload_ps(d, masks[v]), sum),
                    false => sum,
                };
                _mm256_maskstore_ps(d, masks[v], out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Activation;
    use crate::gemm::gemm_block;
    use crate::testing::{ours_and_crates, ours_and_crates_by, salted_values as values, same_bits};

    /// `[m, n]` from `gemm_into` on `threads` and from the gemm crate; rhs `[k, n]` row-major,
    /// or the transpose of a row-major `[n, k]` (a weight in an input gradient).
    fn both(threads: usize, dims: ProductDims, keep: bool, rhs_t: bool) -> [Vec<f32>; 2] {
        ours_and_crates(threads, dims, keep, (false, rhs_t))
    }

    #[test]
    fn short_sums_give_the_gemm_crates_bits_on_any_thread_count() {
        // tabular-mlp's second input gradient, every sum from 3 to 16, widths of one and two
        // vectors (full and partial), row counts that leave partial tiles and pieces.
        let shapes = [
            (2048, 20, 10),
            (2048, 20, 16),
            (1000, 32, 3),
            (700, 16, 4),
            (300, 17, 5),
            (300, 2, 6),
            (130, 31, 7),
            (513, 9, 8),
            (50, 24, 9),
            (259, 12, 11),
            (40, 28, 12),
            (33, 10, 13),
            (600, 5, 14),
            (21, 30, 15),
        ];
        for (m, n, k) in shapes {
            for (threads, keep, rhs_t) in [
                (1, false, true),
                (2, false, true),
                (3, true, false),
                (2, true, false),
                (1, true, true),
            ] {
                let view = (std::ptr::null(), 1, 1);
                let rhs = if rhs_t {
                    (view.0, 1, k as isize)
                } else {
                    (view.0, n as isize, 1)
                };
                let taken = n <= wide(detected());
                let operands = ((view.0, k as isize, 1), rhs);
                let dims = ProductDims::mnk((m, n, k));
                assert_eq!(applies(dims, operands), taken, "({m}, {n}, {k})");
                let [ours, crates] = both(threads, dims, keep, rhs_t);
                assert!(
                    same_bits(&ours, &crates),
                    "({m}, {n}, {k}) on {threads} threads, keep {keep}, rhs transposed {rhs_t}"
                );
            }
        }
    }

    #[test]
    fn rows_in_a_wider_destination_get_the_crates_bits_and_leave_the_rest() {
        // Replicas' input gradients side by side (`shared_input`): each writes its k columns
        // of rows reps·k apart. Here 20 columns of rows 27 apart, both ways of reading rhs.
        let operands = ((std::ptr::null(), 10, 1), (std::ptr::null(), 20, 1));
        assert_eq!(
            applies(ProductDims::mnk((2048, 20, 10)), operands),
            detected() >= Simd::Avx2,
            "taken wherever there is FMA"
        );
        for level in detected().up_to().filter(|l| *l >= Simd::Avx2) {
            wider_destination_at(level);
        }
    }

    fn wider_destination_at(level: Simd) {
        let ((m, n, k), dst_rs) = ((700, 20, 10), 27);
        let (lhs, rhs) = (values(m * k, 1), values(k * n, 2));
        let lhs = (lhs.as_ptr(), k as isize, 1);
        for (rhs, keep) in [
            ((rhs.as_ptr(), n as isize, 1), true),
            ((rhs.as_ptr(), 1, k as isize), false),
        ] {
            let (mut ours, mut crates) = (values(m * dst_rs, 3), values(m * dst_rs, 3));
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(2)
                .build()
                .unwrap();
            let dst = SendPtr(ours.as_mut_ptr());
            let operands = (SendView(lhs), SendView(rhs));
            // SAFETY: m rows of dst_rs elements; the views m x k and k x n; the CPU has level's
            // features.
            pool.install(|| unsafe {
                let views = (operands.0.get(), operands.1.get());
                product_at(
                    level,
                    (dst.get(), dst_rs),
                    ProductDims::mnk((m, n, k)),
                    keep,
                    views,
                    true,
                )
            });
            let serial = gemm::Parallelism::None;
            let identity = Activation::Identity;
            unsafe {
                let crates = crates.as_mut_ptr();
                gemm_block(
                    crates,
                    dst_rs,
                    ProductDims::mnk((m, n, k)),
                    keep,
                    (lhs, rhs),
                    identity,
                    serial,
                )
            };
            assert!(same_bits(&ours, &crates), "{level}, keep {keep}");
        }
    }

    #[test]
    fn every_width_this_cpu_has_gives_the_crates_bits() {
        // AVX2's tiles on an AVX-512 machine too: one, two and three vectors of columns, full
        // and partial, row counts that leave partial tiles, on 1 and 3 threads.
        let shapes = [
            (2048, 20, 10),
            (301, 24, 7),
            (130, 17, 16),
            (77, 9, 3),
            (50, 8, 5),
            (600, 5, 14),
            (700, 16, 4),
        ];
        for level in detected().up_to().filter(|l| *l >= Simd::Avx2) {
            for (m, n, k) in shapes {
                for threads in [1, 3] {
                    // SAFETY: m rows of n elements; the views m x k and k x n; the CPU has
                    // level's features.
                    let ours = |dst, views| unsafe {
                        product_at(
                            level,
                            (dst, n),
                            ProductDims::mnk((m, n, k)),
                            true,
                            views,
                            true,
                        )
                    };
                    let dims = ProductDims::mnk((m, n, k));
                    let [ours, crates] =
                        ours_and_crates_by(threads, dims, true, (false, true), ours);
                    let what = format!("{level}: ({m}, {n}, {k}) on {threads} threads");
                    assert!(same_bits(&ours, &crates), "{what}");
                }
            }
        }
    }

    #[test]
    fn long_sums_wide_rows_and_other_kernels_stay_with_the_crate() {
        let row_major = |k: usize, n: usize| {
            (
                (std::ptr::null(), k as isize, 1),
                (std::ptr::null(), n as isize, 1),
            )
        };
        // Sums past 16, rows past two vectors (fashion-mlp's output layer's input gradient).
        assert!(!applies(
            ProductDims::mnk((2048, 10, 20)),
            row_major(20, 10)
        ));
        assert!(!applies(
            ProductDims::mnk((64, 512, 10)),
            row_major(10, 512)
        ));
        // The crate's kernels for sums of at most 2, for at most 256 outputs, for one column.
        assert!(!applies(ProductDims::mnk((2048, 20, 2)), row_major(2, 20)));
        assert!(!applies(ProductDims::mnk((16, 16, 10)), row_major(10, 16)));
        assert!(!applies(ProductDims::mnk((2048, 1, 10)), row_major(10, 1)));
        // lhs's rows not where they stand (a transpose).
        let lhs_t = ((std::ptr::null(), 1, 2048), (std::ptr::null(), 20, 1));
        assert!(!applies(ProductDims::mnk((2048, 20, 10)), lhs_t));
    }
}
