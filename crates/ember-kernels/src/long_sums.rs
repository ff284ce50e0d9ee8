//! Products with a small output summed over a long sum, on AVX-512 or AVX2 with FMA: a small
//! layer's weight gradient (tabular-mlp's `[61 x 20]` and `[20 x 10]`, each summed over 2,048
//! rows), or, where the gemm crate runs its AVX-512 kernel, at one thread a small output layer
//! after a layer handed on as a view (fashion-mlp's `[64 x 10]` over 512 inputs).
//!
//! The gemm crate sums such a product (at most 64 x 64 outputs) in chunks of 512 along the
//! sum: each output element is a chain of fused multiply-adds over its chunk, and the chunks'
//! totals are added into the destination in order. At these shapes it runs far below its
//! peak, and its blocks of rows gain little across threads (the `[61 x 20]` product: 73 to
//! 77 µs whole, 44 to 48 µs as each of two row blocks). Here each output element takes the
//! same chain in the same order, so the bits are the crate's (the tests compare them): a tile
//! of up to 32 rows x 12 columns in AVX-512 registers (16 x 6 in AVX2's), each step of the sum
//! one or two vectors of lhs's column (x's row, as it stands) and a few scalars of rhs's row,
//! with no copies; the
//! tiles' rows spread over the pool, or, where the sum has a chunk for every thread, its
//! chunks ([`by_chunks`]). Either way each chunk of an element is summed by one thread and the
//! chunks are added in order, so the thread count does not change a bit.

use crate::simd::{Simd, detected};
use crate::view::{ProductDims, SendPtr, SendView, View, even_tiles};
use rayon::prelude::*;

/// The widest tile, in rows and columns ([`Width::AVX512`]'s).
const ROWS: usize = 32;
const COLS: usize = 12;

/// The vectors a product runs on: their lanes, and the columns of a tile. A tile's rows are at
/// most two vectors, so that each scalar of rhs read in a step of the sum feeds two
/// multiply-adds (a tile of one vector spent a load on each one), and its columns one
/// accumulator register per vector of rows each, enough chains of fused multiply-adds to keep
/// both FMA units busy through their latency: AVX-512's 32 registers hold 2 x 12 of them, AVX2's
/// 16 hold 2 x 6 beside the two vectors of lhs and rhs's broadcast scalar. The width changes
/// which elements share a register, not any element's chain, so the bits are the same.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Width {
    lanes: usize,
    cols: usize,
}

impl Width {
    const AVX512: Width = Width {
        lanes: 16,
        cols: COLS,
    };
    const AVX2: Width = Width { lanes: 8, cols: 6 };

    /// The width for `level`, which must have FMA.
    fn of(level: Simd) -> Width {
        match level {
            Simd::Avx512 => Width::AVX512,
            Simd::Avx2 => Width::AVX2,
            Simd::Portable => unreachable!("long sums need FMA"),
        }
    }

    /// Output rows in a tile at most.
    fn rows(self) -> usize {
        2 * self.lanes
    }
}

/// The gemm crate's chunk along the sum for outputs of at most 64 x 64.
pub const CHUNK: usize = 512;

/// Shorter sums stay with the gemm crate: the kernel was measured on sums of 512 rows and more
/// (tabular-mlp's weight gradients, fashion-mlp's output layer).
const LONG: usize = 256;

/// Whether [`product_into`] computes `m x n` outputs summed over `k`: on AVX-512 or AVX2, for
/// an output of at most 64 x 64 with a long sum, whose lhs runs along its rows and rhs along its columns
/// (a weight gradient's xᵀ and dz), where the crate takes its blocked kernel. Not its
/// matrix-vector kernels (one row or column), nor its lane-wise kernel (at most 256 outputs,
/// both operands along the sum), nor where the sum runs backwards along an operand (a flipped
/// view, which the crate sums from its far end).
pub(crate) fn applies(dims: ProductDims, (lhs, rhs): (View, View)) -> bool {
    let ProductDims {
        rows: m,
        cols: n,
        inner: k,
    } = dims;
    let ((_, l_rs, l_cs), (_, r_rs, r_cs)) = (lhs, rhs);
    let lane_wise = l_cs == 1 && r_rs == 1 && m * n <= 256;
    let blocked = (2..=64).contains(&m) && (2..=64).contains(&n) && !lane_wise;
    // Read where they stand: lhs's rows and rhs's columns next to each other.
    let adjacent = l_rs == 1 && r_cs == 1;
    blocked && adjacent && l_cs > 0 && r_rs > 0 && k >= LONG && detected() >= Simd::Avx2
}

/// `dst [m, n] = (keep ? dst : 0) + lhs [m, k] · rhs [k, n]`, `dst` row-major, with the gemm
/// crate's bits; the tiles' rows, or the sum's chunks ([`by_chunks`]), over the pool when
/// `split`.
///
/// # Safety
/// [`applies`] holds; `dst` holds `m * n` writable elements (initialised when `keep`); `lhs`
/// and `rhs` address `m x k` and `k x n` elements through their strides.
pub(crate) unsafe fn product_into(
    dst: *mut f32,
    dims: ProductDims,
    keep: bool,
    operands: (View, View),
    split: bool,
) {
    // SAFETY: forwarded from the caller; the CPU has `detected()`'s features.
    unsafe { product_at(Width::of(detected()), dst, dims, keep, operands, split) }
}

/// [`product_into`] on vectors of `width`.
///
/// # Safety
/// As for [`product_into`]; the CPU has `width`'s instructions.
unsafe fn product_at(
    width: Width,
    dst: *mut f32,
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
    let threads = if split {
        rayon::current_num_threads()
    } else {
        1
    };
    if threads > 1 && chunks_balance_better(width, (m, k), threads) {
        // SAFETY: forwarded from the caller.
        return unsafe { by_chunks(width, dst, dims, keep, (lhs, rhs)) };
    }
    let (dst, lhs, rhs) = (SendPtr(dst), SendView(lhs), SendView(rhs));
    // Blocks of two vectors of rows, or of one where that leaves a thread without a block.
    let block = if m.div_ceil(width.rows()) >= threads {
        width.rows()
    } else {
        width.lanes
    };
    let rows = |b: usize| {
        let (first, rows) = (b * block, block.min(m - b * block));
        let (dims, operands) = ((first, rows, n, k), (lhs.get(), rhs.get()));
        // SAFETY: forwarded from the caller; block b writes only rows first..first + rows.
        unsafe { rows_into(width, dst.get(), dims, keep, operands) }
    };
    let blocks = m.div_ceil(block);
    match threads > 1 {
        true => (0..blocks).into_par_iter().for_each(rows),
        false => (0..blocks).for_each(rows),
    }
}

/// Whether [`product_into`], split over `threads`, would take the sum's chunks ([`by_chunks`]):
/// a layer's backward can then run the chunks itself ([`chunk_into`], [`add_chunks`]) with the
/// bits of the product on any number of threads.
pub fn takes_chunks(dims: ProductDims, operands: (View, View), threads: usize) -> bool {
    let (m, k) = (dims.rows, dims.inner);
    // The width only once `applies` holds: a CPU without FMA has none.
    threads > 1
        && applies(dims, operands)
        && chunks_balance_better(Width::of(detected()), (m, k), threads)
}

/// Chunks of the sum that [`by_chunks`] takes at most: their buffers stay small (256 KB for a
/// 64 x 64 output).
const MAX_CHUNKS: usize = 16;

/// Whether [`by_chunks`] leaves its busiest thread no more steps of rows than blocks of rows
/// would: tabular-mlp's first weight gradient (61 rows, 4 chunks) on two threads, but not a
/// 700-long sum's two uneven chunks.
fn chunks_balance_better(width: Width, (m, k): (usize, usize), threads: usize) -> bool {
    let chunks = k.div_ceil(CHUNK);
    let by_chunks = chunks.div_ceil(threads) * CHUNK * m;
    let rows = width.rows();
    let by_rows = m.div_ceil(rows).div_ceil(threads) * rows.min(m) * k;
    chunks >= threads && chunks <= MAX_CHUNKS && by_chunks <= by_rows
}

/// [`product_into`] with its chunks of the sum over the pool: each chunk's sums into a buffer of
/// its own ([`chunk_into`]), then the chunks added into dst in order, as one thread adds them
/// ([`add_chunks`]). A chunk's sums start from zero, so the bits are the same, and each thread
/// reads only its chunks' rows of the operands, where blocks of dw's rows read all of x on
/// every thread. For tabular-mlp's first weight gradient that was 43.0 µs on two threads as
/// blocks of rows, 29.4 µs as chunks (47.6 on one).
///
/// # Safety
/// As for [`product_into`].
unsafe fn by_chunks(
    width: Width,
    dst: *mut f32,
    dims: ProductDims,
    keep: bool,
    operands: (View, View),
) {
    let ProductDims {
        rows: m,
        cols: n,
        inner: k,
    } = dims;
    let operands = (SendView(operands.0), SendView(operands.1));
    let mut partials = vec![0f32; k.div_ceil(CHUNK) * m * n];
    partials
        .par_chunks_mut(m * n)
        .enumerate()
        // SAFETY: forwarded from the caller; `sums` holds m x n elements.
        .for_each(|(c, sums)| unsafe {
            chunk_at(width, sums, dims, c, (operands.0.get(), operands.1.get()))
        });
    // SAFETY: forwarded from the caller.
    unsafe { add_chunks(dst, (m, n), keep, &partials) }
}

/// Chunk `c` of [`product_into`]'s sum into `sums` (`m x n`, row-major), from zero.
///
/// # Safety
/// As for [`product_into`]; `sums` holds `m * n` elements; chunk c starts inside the sum.
pub unsafe fn chunk_into(sums: &mut [f32], dims: ProductDims, c: usize, operands: (View, View)) {
    // SAFETY: forwarded from the caller; the CPU has `detected()`'s features.
    unsafe { chunk_at(Width::of(detected()), sums, dims, c, operands) }
}

/// [`chunk_into`] on vectors of `width`.
///
/// # Safety
/// As for [`chunk_into`]; the CPU has `width`'s instructions.
unsafe fn chunk_at(
    width: Width,
    sums: &mut [f32],
    ProductDims {
        rows: m,
        cols: n,
        inner: k,
    }: ProductDims,
    c: usize,
    ((l, l_rs, l_cs), (r, r_rs, r_cs)): (View, View),
) {
    assert!(
        sums.len() >= m * n,
        "{} sums for a {m} x {n} chunk",
        sums.len()
    );
    let (start, len) = (c * CHUNK, CHUNK.min(k - c * CHUNK));
    // SAFETY: sum index `start` is inside both operands; the chunk's sums fill `sums` (keep
    // false), a tile's rows at a time.
    unsafe {
        let lhs = (l.offset(start as isize * l_cs), l_rs, l_cs);
        let rhs = (r.offset(start as isize * r_rs), r_rs, r_cs);
        for first in (0..m).step_by(width.rows()) {
            let dims = (first, width.rows().min(m - first), n, len);
            rows_into(width, sums.as_mut_ptr(), dims, false, (lhs, rhs));
        }
    }
}

/// The chunks' sums (`m x n` each, in the order of the sum) added into `dst` in order, as the
/// gemm crate adds them: onto dst when `keep`, else the first chunk written as it is.
///
/// # Safety
/// `dst` holds `m * n` writable elements (initialised when `keep`).
pub unsafe fn add_chunks(dst: *mut f32, (m, n): (usize, usize), keep: bool, partials: &[f32]) {
    for (c, sums) in partials.chunks(m * n).enumerate() {
        for (i, &sum) in sums.iter().enumerate() {
            // SAFETY: i < m * n; dst's element is read only once written (by the caller when
            // keep, by chunk 0 otherwise).
            unsafe {
                let d = dst.add(i);
                d.write(if keep || c > 0 { d.read() + sum } else { sum });
            }
        }
    }
}

/// Rows `first..first + rows` (`rows` at most `width.rows()`) of [`product_into`]'s output,
/// read from the operands where they stand: a step of the sum is one or two (masked) vectors of
/// lhs's column and a few consecutive scalars of rhs's row.
///
/// # Safety
/// As for [`product_at`].
unsafe fn rows_into(
    width: Width,
    dst: *mut f32,
    (first, rows, n, k): (usize, usize, usize, usize),
    keep: bool,
    ((l, _, l_cs), (r, r_rs, _)): (View, View),
) {
    for (c, start) in (0..k).step_by(CHUNK).enumerate() {
        let len = CHUNK.min(k - start);
        // SAFETY: row `first` and sum index `start` are inside lhs; `start` inside rhs.
        let (lhs, rhs) = unsafe {
            let lhs = l.offset(first as isize + start as isize * l_cs);
            (lhs, r.offset(start as isize * r_rs))
        };
        for (col, cols) in even_tiles(n, width.cols) {
            // SAFETY: rows.. and cols columns from col are inside both operands; the CPU has
            // width's instructions.
            let sums = unsafe {
                let operands = ((lhs, l_cs, rows), (rhs.add(col), r_rs));
                match width == Width::AVX512 {
                    true => tile(cols, len, operands.0, operands.1),
                    false => tile_avx2(cols, len, operands.0, operands.1),
                }
            };
            for (q, column) in sums.iter().enumerate().take(cols) {
                for (p, &sum) in column.iter().enumerate().take(rows) {
                    // SAFETY: row first + p < m and column col + q < n of dst, read only
                    // once written (by the caller when keep, by an earlier chunk otherwise).
                    unsafe {
                        let d = dst.add((first + p) * n + col + q);
                        d.write(if keep || c > 0 { d.read() + sum } else { sum });
                    }
                }
            }
        }
    }
}

/// [`tile_sums`] for a tile `cols` wide (2 to COLS: [`rows_into`] shares n >= 2 columns
/// evenly) and one or two AVX-512 vectors of rows, each shape its own loop with its
/// accumulators in registers.
///
/// # Safety
/// As for [`tile_sums`].
#[target_feature(enable = "avx512f,fma")]
unsafe fn tile(
    cols: usize,
    len: usize,
    lhs: (*const f32, isize, usize),
    rhs: (*const f32, isize),
) -> [[f32; ROWS]; COLS] {
    macro_rules! widths {
        ($v:literal: $($c:literal)*) => {
            match cols {
                // SAFETY: forwarded from the caller.
                $($c => unsafe { tile_sums::<$v, $c>(len, lhs, rhs) },)*
                _ => unreachable!("a tile of {cols} columns"),
            }
        };
    }
    match lhs.2 > Width::AVX512.lanes {
        true => widths!(2: 2 3 4 5 6 7 8 9 10 11 12),
        false => widths!(1: 2 3 4 5 6 7 8 9 10 11 12),
    }
}

/// [`tile`] on AVX2: a tile `cols` wide (2 to 6) and one or two vectors of 8 rows.
///
/// # Safety
/// As for [`tile_sums`], on a CPU with AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_avx2(
    cols: usize,
    len: usize,
    lhs: (*const f32, isize, usize),
    rhs: (*const f32, isize),
) -> [[f32; ROWS]; COLS] {
    macro_rules! widths {
        ($v:literal: $($c:literal)*) => {
            match cols {
                // SAFETY: forwarded from the caller.
                $($c => unsafe { tile_sums_avx2::<$v, $c>(len, lhs, rhs) },)*
                _ => unreachable!("a tile of {cols} columns"),
            }
        };
    }
    match lhs.2 > Width::AVX2.lanes {
        true => widths!(2: 2 3 4 5 6),
        false => widths!(1: 2 3 4 5 6),
    }
}

/// One chunk's sums of a tile of `V` vectors of rows and `C` columns: for each column q,
/// `Σ_s lhs[s] · rhs[s][q]` over `len` steps, a chain of fused multiply-adds from zero in the
/// order of s, as the gemm crate's kernel sums. `lhs` is the first row's element of step 0,
/// steps `l_cs` apart, `rows` rows (the lanes past them masked off); `rhs` is step 0's first
/// column, steps `r_rs` apart.
///
/// # Safety
/// `rows` rows (at most `V` vectors) and `C` columns of `len` steps lie inside the operands.
#[target_feature(enable = "avx512f,fma")]
unsafe fn tile_sums<const V: usize, const C: usize>(
    len: usize,
    (lhs, l_cs, rows): (*const f32, isize, usize),
    (rhs, r_rs): (*const f32, isize),
) -> [[f32; ROWS]; COLS] {
    use std::arch::x86_64::*;
    const LANES: usize = Width::AVX512.lanes;
    let mut masks: [__mmask16; V] = [0; V];
    for (v, mask) in masks.iter_mut().enumerate() {
        *mask = ((1u32 << rows.saturating_sub(v * LANES).min(LANES)) - 1) as u16;
    }
    let mut acc = [[_mm512_setzero_ps(); C]; V];
    for s in 0..len as isize {
        // SAFETY: step s of both operands is inside them.
        let (step, w) = unsafe { (lhs.offset(s * l_cs), rhs.offset(s * r_rs)) };
        let mut x = [_mm512_setzero_ps(); V];
        for (v, x) in x.iter_mut().enumerate() {
            // SAFETY: the masked lanes are not read; the others are inside lhs.
            *x = unsafe { _mm512_maskz_loadu_ps(masks[v], step.add(v * LANES)) };
        }
        for q in 0..C {
            // SAFETY: the C scalars of this step are inside rhs.
            let b = _mm512_set1_ps(unsafe { *w.add(q) });
            for (acc, x) in acc.iter_mut().zip(&x) {
                acc[q] = _mm512_fmadd_ps(*x, b, acc[q]);
            }
        }
    }
    let mut out = [[0f32; ROWS]; COLS];
    for (v, acc) in acc.iter().enumerate() {
        for (o, a) in out.iter_mut().zip(acc) {
            // SAFETY: o holds ROWS elements, LANES of them from v · LANES.
            unsafe { _mm512_storeu_ps(o.as_mut_ptr().add(v * LANES), *a) };
        }
    }
    out
}

/// [`tile_sums`] on AVX2: `V` vectors of 8 rows (the lanes past `rows` masked off) and `C`
/// columns, the same chains.
///
/// # Safety
/// As for [`tile_sums`], on a CPU with AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_sums_avx2<const V: usize, const C: usize>(
    len: usize,
    (lhs, l_cs, rows): (*const f32, isize, usize),
    (rhs, r_rs): (*const f32, isize),
) -> [[f32; ROWS]; COLS] {
    use std::arch::x86_64::*;
    const LANES: usize = Width::AVX2.lanes;
    let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let mut masks = [_mm256_setzero_si256(); V];
    for (v, mask) in masks.iter_mut().enumerate() {
        let live = rows.saturating_sub(v * LANES).min(LANES) as i32;
        *mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(live), lane);
    }
    let mut acc = [[_mm256_setzero_ps(); C]; V];
    for s in 0..len as isize {
        // SAFETY: step s of both operands is inside them.
        let (step, w) = unsafe { (lhs.offset(s * l_cs), rhs.offset(s * r_rs)) };
        let mut x = [_mm256_setzero_ps(); V];
        for (v, x) in x.iter_mut().enumerate() {
            // SAFETY: the masked lanes are not read; the others are inside lhs.
            *x = unsafe { _mm256_maskload_ps(step.add(v * LANES), masks[v]) };
        }
        for q in 0..C {
            // SAFETY: the C scalars of this step are inside rhs.
            let b = _mm256_set1_ps(unsafe { *w.add(q) });
            for (acc, x) in acc.iter_mut().zip(&x) {
                acc[q] = _mm256_fmadd_ps(*x, b, acc[q]);
            }
        }
    }
    let mut out = [[0f32; ROWS]; COLS];
    for (v, acc) in acc.iter().enumerate() {
        for (o, a) in out.iter_mut().zip(acc) {
            // SAFETY: o holds ROWS elements, LANES of them from v · LANES.
            unsafe { _mm256_storeu_ps(o.as_mut_ptr().add(v * LANES), *a) };
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{ours_and_crates, ours_and_crates_by, same_bits};

    /// `[m, n]` from `gemm_into` on `threads` and from the gemm crate; lhs `[m, k]` as the
    /// transpose of row-major `[k, m]` (a weight gradient's xᵀ) or row-major itself.
    fn both(threads: usize, dims: ProductDims, keep: bool, lhs_t: bool) -> [Vec<f32>; 2] {
        ours_and_crates(threads, dims, keep, (lhs_t, false))
    }

    #[test]
    fn long_sums_give_the_gemm_crates_bits_on_any_thread_count() {
        // tabular-mlp's two weight gradients, a full 64 x 64, odd shapes, sums just past a
        // chunk and just at the threshold, with and without a kept destination, and every
        // tile width from 2 to 12 (none is narrower: n >= 2 columns are shared evenly) on one
        // vector of rows and on two, at the widest level this CPU has (the next test runs the
        // narrower ones). On a CPU without FMA this compares the crate with itself.
        let widths = [
            (16, 2, 600),
            (33, 3, 600),
            (16, 4, 300),
            (20, 6, 600),
            (9, 7, 600),
        ];
        let more = [
            (16, 8, 600),
            (30, 9, 600),
            (16, 12, 600),
            (64, 24, 300),
            (5, 48, 600),
        ];
        let two_vectors = [
            (24, 2, 600),
            (29, 4, 300),
            (31, 5, 600),
            (18, 7, 600),
            (25, 8, 600),
        ];
        let shapes = (widths.into_iter().chain(more).chain(two_vectors)).chain([
            (61, 20, 2048),
            (20, 10, 2048),
            (64, 64, 700),
            (17, 33, 1500),
            (3, 64, 513),
            (64, 5, 256),
            (40, 40, 3001),
        ]);
        for (m, n, k) in shapes {
            let operands = (
                (std::ptr::null(), 1, m as isize),
                (std::ptr::null(), n as isize, 1),
            );
            let fma = detected() >= Simd::Avx2;
            assert_eq!(
                applies(ProductDims::mnk((m, n, k)), operands),
                fma,
                "({m}, {n}, {k})"
            );
            for (threads, keep, lhs_t) in [
                (1, false, true),
                (2, false, true),
                (3, true, true),
                (2, true, false),
                (1, false, false),
                (3, false, true),
            ] {
                let [ours, crates] = both(threads, ProductDims::mnk((m, n, k)), keep, lhs_t);
                assert!(
                    same_bits(&ours, &crates),
                    "({m}, {n}, {k}) on {threads} threads, keep {keep}, lhs transposed {lhs_t}"
                );
            }
        }
    }

    /// `[m, n]` from [`product_at`] at `width` on `threads` and from the gemm crate, lhs as a
    /// weight gradient's xᵀ; onto the destination's values when `keep`.
    fn at_width(width: Width, threads: usize, dims: ProductDims, keep: bool) -> [Vec<f32>; 2] {
        // SAFETY: m * n elements and views of m x k and k x n; the CPU has width's
        // instructions (the caller takes widths up to detected()'s).
        let ours = |dst, operands| unsafe { product_at(width, dst, dims, keep, operands, true) };
        ours_and_crates_by(threads, dims, keep, (true, false), ours)
    }

    #[test]
    fn every_width_this_cpu_has_gives_the_crates_bits() {
        // AVX2's tiles (16 x 6) on an AVX-512 machine too: the same chains, other registers.
        // Every tile width from 2 to 6 on one vector of rows and on two, partial vectors, and
        // the chunks over the pool (tabular-mlp's first weight gradient on 2 threads).
        let shapes = [
            (8, 2, 600),
            (13, 3, 300),
            (16, 5, 600),
            (21, 6, 600),
            (7, 4, 513),
        ];
        let more = [
            (61, 20, 2048),
            (20, 10, 2048),
            (64, 64, 700),
            (40, 40, 3001),
        ];
        let levels: Vec<Simd> = detected().up_to().filter(|l| *l >= Simd::Avx2).collect();
        for level in levels {
            for (m, n, k) in shapes.into_iter().chain(more) {
                for (threads, keep) in [(1, false), (2, true), (2, false), (3, true)] {
                    let [ours, crates] =
                        at_width(Width::of(level), threads, ProductDims::mnk((m, n, k)), keep);
                    let what = format!("{level}: ({m}, {n}, {k}) on {threads}, keep {keep}");
                    assert!(same_bits(&ours, &crates), "{what}");
                }
            }
        }
    }

    #[test]
    fn short_sums_large_outputs_and_flipped_views_stay_with_the_crate() {
        let forwards = ((std::ptr::null(), 1, 61), (std::ptr::null(), 20, 1));
        assert!(!applies(ProductDims::mnk((61, 20, 255)), forwards));
        assert!(!applies(ProductDims::mnk((65, 20, 2048)), forwards));
        assert!(!applies(ProductDims::mnk((2048, 20, 61)), forwards));
        // One column: the crate's matrix-vector kernel; both operands along the sum and at
        // most 256 outputs: its lane-wise kernel.
        assert!(!applies(ProductDims::mnk((10, 1, 2048)), forwards));
        let along_sum = ((std::ptr::null(), 2048, 1), (std::ptr::null(), 1, 2048));
        assert!(!applies(ProductDims::mnk((20, 10, 2048)), along_sum));
        let flipped = ((std::ptr::null(), 1, -61), (std::ptr::null(), 20, 1));
        assert!(!applies(ProductDims::mnk((61, 20, 2048)), flipped));
    }
}
