//! A narrow layer's forward over a tall batch, `act(x [m, k] · w [k, n] + b)` with at most 48
//! output columns, a sum of at most 512 and hundreds of rows or more (tabular-mlp's
//! `[2048 x 61] · [61 x 20]` and `[2048 x 20] · [20 x 10]`), on AVX-512.
//!
//! The gemm crate runs its vectors along an output row, so a row of 20 fills 20 of the 32
//! lanes of its two vectors. Here the vectors run along the batch instead: each lane is a row
//! of x, each step of the sum one vector of x's column (gathered, as x's rows stand) and one
//! broadcast scalar of w's row per output column, so every lane is useful.
//!
//! The bits are the crate's. For these shapes the crate always takes its blocked kernel, and a
//! sum of at most 512 it never cuts into chunks, whatever the cache. Each output element is
//! then a chain of fused multiply-adds from zero in the order of the sum, which the crate adds
//! onto the bias that the destination holds as `fma(1, sum, bias)`: one rounding, the same as
//! `bias + sum`. Here each element takes the same chain and the same addition (NaN payloads
//! aside, where two NaNs meet). Each element is computed whole by one thread, so the thread
//! count does not change a bit.
//!
//! A block is 16 rows of the batch (one vector); a tile is a block's share of up to 24 output
//! columns, held in registers.

use crate::Activation;
use crate::elementwise::activate;
use crate::gemm::blocked;
use crate::simd::{Simd, detected};
use crate::view::{ProductDims, SendPtr, SendView, View, even_tiles};
use rayon::prelude::*;

/// Rows in one AVX-512 vector: the rows of a block.
const LANES: usize = 16;

/// Floats in a cache line.
const LINE: isize = 16;

/// Output columns in a tile at most: one accumulator register each, beside x's vector and a
/// broadcast scalar in the 32 registers.
const COLS: usize = 24;

/// Wider outputs stay with the crate: each further tile gathers x's columns again. The
/// scatters' 32-bit offsets (`15 · n`) rely on this bound too.
const MAX_COLS: usize = 2 * COLS;

/// The longest sum the crate never cuts into chunks (`gemm_common::cache::kernel_params` takes
/// `max(512, …).min(k)` as its chunk).
const UNCUT: usize = 512;

/// Multiply-adds per thread at least, when the blocks are spread over the pool.
const PART_WORK: usize = 1 << 16;

/// Shorter batches stay with the crate: fashion-mlp's 64-row output layer was not measured here.
const MIN_ROWS: usize = 256;

/// Whether [`linear_into`] computes `x [m, k] · w [k, n]`: on AVX-512, for a tall batch and a
/// narrow output where the crate takes its blocked kernel (`gemm::blocked`: not its
/// matrix-vector kernels for one column, its kernel for sums of 1 or 2, or its lane-wise kernel
/// for small outputs), with both operands read forwards (the crate sums a flipped view from its
/// far end).
pub fn applies(dims: ProductDims, (x, w): (View, View)) -> bool {
    let ProductDims {
        rows: m,
        cols: n,
        inner: k,
    } = dims;
    let ((_, x_rs, x_cs), (_, w_rs, w_cs)) = (x, w);
    let forwards = x_rs > 0 && x_cs > 0 && w_rs > 0 && w_cs > 0;
    // The gather's offsets are 32-bit: LANES rows of x apart.
    let gathers = x_rs <= (i32::MAX / LANES as i32) as isize;
    let shape = m >= MIN_ROWS && n <= MAX_COLS && k <= UNCUT && blocked(dims);
    shape && forwards && gathers && detected() == Simd::Avx512
}

/// `dst [m, n] = act(x · w + bias)`, row-major, with the gemm crate's bits (after a fill of the
/// biases and its product onto them); blocks of rows over the pool when `split`.
///
/// # Safety
/// [`applies`] holds; `dst` holds `m * n` writable elements (initialised or not); the views
/// address `m x k` and `k x n` elements; `bias` holds `n`.
pub unsafe fn linear_into(
    dst: *mut f32,
    ProductDims {
        rows: m,
        cols: n,
        inner: k,
    }: ProductDims,
    (x, w): (View, View),
    bias: &[f32],
    act: Activation,
    split: bool,
) {
    assert_eq!(bias.len(), n, "one bias per output column");
    let blocks = m.div_ceil(LANES);
    let parts = match split {
        true => rayon::current_num_threads()
            .min(blocks)
            .min((m * n * k / PART_WORK).max(1)),
        false => 1,
    };
    let (dst, x, w) = (SendPtr(dst), SendView(x), SendView(w));
    // Part p takes blocks p·blocks/parts up to (p + 1)·blocks/parts.
    let part = |p: usize| {
        for b in p * blocks / parts..(p + 1) * blocks / parts {
            let (first, rows) = (b * LANES, LANES.min(m - b * LANES));
            // SAFETY: forwarded from the caller; block b writes rows first..first + rows only.
            unsafe { block_into(dst.get(), (first, rows, n, k), (x.get(), w.get()), bias) };
            // SAFETY: the block's rows are contiguous (dst is row-major) and were just written.
            let written =
                unsafe { std::slice::from_raw_parts_mut(dst.get().add(first * n), rows * n) };
            activate(act, written);
        }
    };
    match parts > 1 {
        true => (0..parts).into_par_iter().for_each(part),
        false => part(0),
    }
}

/// Rows `first..first + rows` (at most LANES) of [`linear_into`]'s output before the
/// activation, a tile of columns at a time.
///
/// # Safety
/// As for [`linear_into`], with the rows inside dst and x.
#[target_feature(enable = "avx512f,fma")]
unsafe fn block_into(
    dst: *mut f32,
    (first, rows, n, k): (usize, usize, usize, usize),
    ((x, x_rs, x_cs), (w, w_rs, w_cs)): (View, View),
    bias: &[f32],
) {
    // SAFETY: row `first` is inside x and dst.
    let (x, dst) = unsafe {
        (
            (x.offset(first as isize * x_rs), x_rs, x_cs),
            dst.add(first * n),
        )
    };
    for (col, cols) in even_tiles(n, COLS) {
        // SAFETY: the tile's columns are inside w and dst; its rows inside x and dst.
        unsafe {
            let w = (w.offset(col as isize * w_cs), w_rs, w_cs);
            let out = (dst.add(col), n, &bias[col..col + cols]);
            tile(cols, k, (x, rows), w, out);
        }
    }
}

/// A tile's output: its first element, dst's row length, and the tile's biases.
type Out<'a> = (*mut f32, usize, &'a [f32]);

/// [`tile_sums`] for a tile `cols` wide (2 to COLS), with x's columns loaded where they are
/// contiguous (a layer handed on as a view) and gathered where they are not.
///
/// # Safety
/// As for [`tile_sums`].
#[target_feature(enable = "avx512f,fma")]
unsafe fn tile(cols: usize, k: usize, x: (View, usize), w: View, out: Out) {
    let gather = (x.0).1 != 1;
    macro_rules! widths {
        ($($c:literal)*) => {
            match (cols, gather) {
                // SAFETY (every arm): forwarded from the caller.
                $(($c, true) => unsafe { tile_sums::<$c, true>(k, x, w, out) },
                  ($c, false) => unsafe { tile_sums::<$c, false>(k, x, w, out) },)*
                _ => unreachable!("a tile of {cols} columns"),
            }
        };
    }
    widths!(2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24)
}

/// A tile: `rows` rows (at most LANES) and `C` columns. For each column q and row r,
/// `bias[q] + Σ_s x[r][s] · w[s][q]` over the `k` steps, the sum a chain of fused multiply-adds
/// from zero in the order of s, as the gemm crate's kernel sums. Step s reads x's column s for
/// the tile's rows (one vector: a masked load, or a gather when `GATHER`) and C scalars of w's
/// row s; each column's vector of rows is then scattered down dst's column.
///
/// # Safety
/// `rows` rows of x and dst, and `C` columns of w and dst, `k` steps each, lie inside the
/// views; `bias` holds C; `15 · x_rs` and `15 · dst_rs` fit in an i32 ([`applies`]).
#[target_feature(enable = "avx512f,fma")]
unsafe fn tile_sums<const C: usize, const GATHER: bool>(
    k: usize,
    ((x, x_rs, x_cs), rows): (View, usize),
    (w, w_rs, w_cs): View,
    (dst, dst_rs, bias): Out,
) {
    use std::arch::x86_64::*;
    let mask = ((1u32 << rows.min(LANES)) - 1) as __mmask16;
    // Lane r's element is r rows after the first row's.
    let lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    let strided = |stride: usize| _mm512_mullo_epi32(lanes, _mm512_set1_epi32(stride as i32));
    let x_offsets = strided(x_rs as usize);
    let mut acc = [_mm512_setzero_ps(); C];
    for s in 0..k as isize {
        // SAFETY: step s of x's rows and of w's row are inside the views; masked lanes are
        // not read.
        let (column, w_row) = unsafe { (x.offset(s * x_cs), w.offset(s * w_rs)) };
        let xv = match GATHER {
            true => unsafe {
                // The next block's rows, a cache line a step (all of them where x is row-major
                // and its rows no longer than the sum): gathers alone leave the batch's rows to
                // arrive one miss at a time (tabular-mlp's first layer ran slower than through
                // the crate without this, faster with it). A prefetch never faults, so past
                // x's end (the last block) it is harmless; the address is only computed
                // (wrapping), never read.
                let next = x.wrapping_offset(LANES as isize * x_rs + s * LINE);
                _mm_prefetch::<_MM_HINT_T0>(next.cast());
                _mm512_mask_i32gather_ps::<4>(_mm512_setzero_ps(), mask, x_offsets, column)
            },
            false => unsafe { _mm512_maskz_loadu_ps(mask, column) },
        };
        for (q, acc) in acc.iter_mut().enumerate() {
            // SAFETY: column q of w's row s is inside w.
            let b = _mm512_set1_ps(unsafe { *w_row.offset(q as isize * w_cs) });
            *acc = _mm512_fmadd_ps(xv, b, *acc);
        }
    }
    let dst_offsets = strided(dst_rs);
    for (q, (acc, &b)) in acc.iter().zip(bias).enumerate() {
        // The bias plus the sum: the crate's `fma(1, sum, bias)` onto the destination, rounded
        // once as this addition is.
        let v = _mm512_add_ps(_mm512_set1_ps(b), *acc);
        // SAFETY: the tile's rows of column q are inside dst; masked lanes are not written.
        unsafe { _mm512_mask_i32scatter_ps::<4>(dst.add(q), mask, dst_offsets, v) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::gemm_block;
    use crate::testing::{salted_values, same_bits};

    /// How a test lays x out: its rows (as a batch stands), its columns (a layer handed on as
    /// a view), rows with a gap after each (a slice of a wider table), or every other column.
    #[derive(Clone, Copy, Debug)]
    enum Layout {
        Rows,
        Columns,
        PaddedRows,
        EveryOtherColumn,
    }

    /// x's view over a buffer of `m x k` values laid out as `layout`, and the buffer's length.
    fn x_view(layout: Layout, (m, k): (usize, usize)) -> ((isize, isize), usize) {
        let (rs, cs) = match layout {
            Layout::Rows => (k, 1),
            Layout::Columns => (1, m),
            Layout::PaddedRows => (k + 3, 1),
            Layout::EveryOtherColumn => (2 * k + 1, 2),
        };
        ((rs as isize, cs as isize), (m - 1) * rs + (k - 1) * cs + 1)
    }

    /// Salted values with NaNs, infinities and zeros of both signs planted every 97th element
    /// when `special`.
    fn values(len: usize, salt: u32, special: bool) -> Vec<f32> {
        let planted = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0, 1e-40];
        let mut v = salted_values(len, salt);
        for (i, x) in v
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| special && i % 97 == 5)
        {
            *x = planted[(i / 97) % planted.len()];
        }
        v
    }

    /// `act(x · w + bias)` `[m, n]` as `linear_layer::linear` computes it on `threads` (here where
    /// [`applies`] holds, else the crate) and from the crate (the biases filled in, its product
    /// kept onto them, then the activation); w row-major, or transposed when `w_t`.
    fn both(
        threads: usize,
        (m, n, k): (usize, usize, usize),
        (layout, w_t, special): (Layout, bool, bool),
        act: Activation,
    ) -> [Vec<f32>; 2] {
        let dims = ProductDims::mnk((m, n, k));
        let ((x_rs, x_cs), x_len) = x_view(layout, (m, k));
        let (x, w, bias) = (
            values(x_len, 1, special),
            values(k * n, 2, special),
            values(n, 4, special),
        );
        let x = (x.as_ptr(), x_rs, x_cs);
        let w = match w_t {
            true => (w.as_ptr(), 1, k as isize),
            false => (w.as_ptr(), n as isize, 1),
        };
        let crates_of = |dst: &mut Vec<f32>| {
            *dst = (0..m).flat_map(|_| bias.iter().copied()).collect();
            let serial = gemm::Parallelism::None;
            // SAFETY: dst holds m * n initialised elements; the views address x's and w's.
            unsafe { gemm_block(dst.as_mut_ptr(), n, dims, true, (x, w), act, serial) };
        };
        let mut ours = vec![f32::NAN; m * n];
        match applies(dims, (x, w)) {
            true => {
                let (dst, views) = (SendPtr(ours.as_mut_ptr()), (SendView(x), SendView(w)));
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                // SAFETY: ours holds m * n elements; the views address x's and w's.
                pool.install(|| unsafe {
                    let views = (views.0.get(), views.1.get());
                    linear_into(dst.get(), dims, views, &bias, act, true)
                });
            }
            false => crates_of(&mut ours),
        }
        let mut crates = Vec::new();
        crates_of(&mut crates);
        [ours, crates]
    }

    /// Whether two results are the same bits, any NaN matching any NaN (which NaN survives
    /// where two meet is left to the instruction).
    fn same(a: &[f32], b: &[f32]) -> bool {
        let nan_free = |v: &[f32]| {
            v.iter()
                .map(|x| if x.is_nan() { f32::NAN } else { *x })
                .collect::<Vec<_>>()
        };
        same_bits(&nan_free(a), &nan_free(b))
    }

    #[test]
    fn tall_products_give_the_gemm_crates_bits_on_any_thread_count() {
        // tabular-mlp's two hidden layers and a validation batch's tail of rows, every tile
        // width from 2 to 24 on one tile, two tiles (25 to 48 columns), the shortest and
        // longest sums, and tanh, ReLU and none; x in each layout, w as it stands and
        // transposed, and values with NaNs, infinities, signed zeros and a subnormal planted.
        let tabular = [
            (2048, 20, 61),
            (2048, 10, 20),
            (1824, 20, 61),
            (1568, 10, 20),
        ];
        let widths = (2..=24).map(|n| (256 + n, n, 3 + 7 * n));
        let wide = [
            (300, 25, 40),
            (517, 33, 100),
            (256, 48, 512),
            (999, 2, 3),
            (4000, 7, 512),
        ];
        let shapes = tabular.into_iter().chain(widths).chain(wide);
        let runs = [
            (1, (Layout::Rows, false, false)),
            (2, (Layout::Rows, false, true)),
            (3, (Layout::Columns, false, false)),
            (1, (Layout::PaddedRows, true, false)),
            (5, (Layout::EveryOtherColumn, false, true)),
            (2, (Layout::Columns, true, true)),
        ];
        for (i, (m, n, k)) in shapes.enumerate() {
            let act = [Activation::Tanh, Activation::Relu, Activation::Identity][i % 3];
            for (threads, case) in runs {
                let [ours, crates] = both(threads, (m, n, k), case, act);
                let which = format!("({m}, {n}, {k}) on {threads} threads, {case:?}, {act:?}");
                assert!(same(&ours, &crates), "{which}");
            }
        }
    }

    #[test]
    fn tall_products_run_on_avx512_only_and_not_for_short_batches_wide_outputs_long_sums() {
        let (x, w) = ((std::ptr::null(), 61, 1), (std::ptr::null(), 20, 1));
        assert_eq!(
            applies(ProductDims::mnk((2048, 20, 61)), (x, w)),
            detected() == Simd::Avx512
        );
        assert!(!applies(ProductDims::mnk((255, 20, 61)), (x, w)));
        assert!(!applies(ProductDims::mnk((2048, 49, 61)), (x, w)));
        assert!(!applies(ProductDims::mnk((2048, 1, 61)), (x, w)));
        assert!(!applies(ProductDims::mnk((2048, 20, 513)), (x, w)));
        assert!(!applies(ProductDims::mnk((2048, 20, 2)), (x, w)));
        assert!(!applies(
            ProductDims::mnk((2048, 20, 61)),
            ((std::ptr::null(), 61, -1), w)
        ));
        assert!(!applies(
            ProductDims::mnk((2048, 20, 61)),
            (x, (std::ptr::null(), -20, 1))
        ));
    }
}
