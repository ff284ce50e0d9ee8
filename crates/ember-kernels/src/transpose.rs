//! A matrix view copied out transposed, row-major, tile by tile.
//!
//! Why: the gemm crate packs an operand that does not run along its kernel's rows one element
//! at a time, down a column. A layer's input gradient `dz · wᵀ` is such a product: `w`'s rows
//! are `n` floats apart, and at a power-of-two `n` (fashion-mlp's 512) the 64 rows the pack
//! reads at once fall into two of L1's 64 sets, so nearly every element is a cache miss. That
//! pack was a sixth of a fashion-mlp step on Zen 4. A transposed copy in 8 x 8 tiles touches
//! 8 lines of each side at a time, and the product then reads it by whole vectors (packed or
//! in place). On the crate's blocked kernel the bits are the same either way: packing moves
//! values, it does not reorder the sums. `ops::input_grad` chooses what to copy, and copies
//! only for products that take the blocked kernel.

use crate::{view::SendPtr, view::SendView};
use rayon::prelude::*;

/// Tile edge: 8 source rows and 8 destination rows, one cache line or less of each.
const TILE: usize = 8;

/// Elements above which a copy may be spread over the pool: fashion-mlp's 512 x 512 weight is
/// a few tens of µs of copying, several hand-offs' worth.
const SPLIT_ELEMENTS: usize = 1 << 16;

/// `src [rows, cols]`, read through its strides, as a row-major `[cols, rows]` buffer; spread
/// over the pool by blocks of the copy's rows when `split` and the matrix is large.
///
/// # Safety
/// `src` must be readable at `r * rs + c * cs` for every `r < rows`, `c < cols`.
pub unsafe fn transposed(
    src: (*const f32, isize, isize),
    rows: usize,
    cols: usize,
    split: bool,
) -> Vec<f32> {
    let mut out: Vec<f32> = Vec::with_capacity(rows * cols);
    // SAFETY: `out` has room for the [cols, rows] copy; `src` is forwarded from the caller.
    unsafe { transpose_to(src, rows, cols, (out.as_mut_ptr(), rows), split) };
    // SAFETY: the tiles cover every element of the [cols, rows] output once.
    unsafe { out.set_len(rows * cols) };
    out
}

/// `src [rows, cols]`, read through its strides, into the `[cols, rows]` matrix at `dst` whose
/// rows are `ds` elements apart; spread over the pool by blocks of the copy's rows when `split`
/// and the matrix is large.
///
/// # Safety
/// As for [`transposed`]; `dst` is writable at `c * ds + r` for every `c < cols`, `r < rows`.
pub(crate) unsafe fn transpose_to(
    src: (*const f32, isize, isize),
    rows: usize,
    cols: usize,
    (dst, ds): (*mut f32, usize),
    split: bool,
) {
    let blocks = match split && rows * cols >= SPLIT_ELEMENTS {
        true => rayon::current_num_threads().min(cols / TILE),
        false => 1,
    };
    let (src_view, dst) = (SendView(src), SendPtr(dst));
    // Block b copies source columns from edge(b), a whole number of tiles, to the next edge.
    let edge = |b: usize| (b * cols / blocks.max(1)) / TILE * TILE;
    let end = |b: usize| if b + 1 >= blocks { cols } else { edge(b + 1) };
    // SAFETY (both arms): the blocks' columns cover 0..cols once, and each writes only the
    // copy's rows of its own columns; `src` and `dst` are forwarded from the caller.
    if blocks < 2 {
        unsafe { copy_columns(src, rows, 0..cols, (dst.get(), ds)) };
    } else {
        (0..blocks).into_par_iter().for_each(|b| unsafe {
            copy_columns(src_view.get(), rows, edge(b)..end(b), (dst.get(), ds))
        });
    }
}

/// `src [rows, cols]`, read through its strides, into `dst` as a row-major `[cols, rows]`
/// matrix, on this thread: [`transposed`] into a buffer the caller reuses.
///
/// # Safety
/// As for [`transposed`].
pub unsafe fn transpose_into(
    src: (*const f32, isize, isize),
    rows: usize,
    cols: usize,
    dst: &mut [f32],
) {
    assert_eq!(dst.len(), rows * cols, "the transposed copy's size");
    // SAFETY: forwarded from the caller; dst holds the whole copy.
    unsafe { transpose_to(src, rows, cols, (dst.as_mut_ptr(), rows), false) };
}

/// Source rows copied a band at a time: two tiles' worth, 64 bytes of each of the copy's rows,
/// so that a line of the copy is written whole (where the rows start on a line) or in two
/// parts of one band, while it is in L1. A band of one tile wrote each half-line on its own
/// pass along the source rows, by which time a 512-row copy had pushed the line out of L1.
const BAND: usize = 2 * TILE;

/// Source columns `columns` of `src [rows, _]` into the same rows of the `[_, rows]` copy at
/// `dst` (rows `ds` apart), tile by tile.
///
/// # Safety
/// As for [`transpose_to`], for those columns.
unsafe fn copy_columns(
    (src, rs, cs): (*const f32, isize, isize),
    rows: usize,
    columns: std::ops::Range<usize>,
    (dst, ds): (*mut f32, usize),
) {
    let whole_tile = whole_tile_copier(cs);
    for band in (0..rows).step_by(BAND) {
        for c0 in columns.clone().step_by(TILE) {
            for r0 in (band..rows.min(band + BAND)).step_by(TILE) {
                let (src_tile, dst_tile) = (r0 as isize * rs + c0 as isize * cs, c0 * ds + r0);
                let size = ((rows - r0).min(TILE), (columns.end - c0).min(TILE));
                // SAFETY: the tile's elements lie inside src's rows x cols and dst's cols x rows.
                unsafe {
                    let (from, to) = (src.offset(src_tile), dst.add(dst_tile));
                    match whole_tile {
                        Some(copy) if size == (TILE, TILE) => copy(from, rs, to, ds),
                        _ => tile_portable((from, rs, cs), size, (to, ds)),
                    }
                }
            }
        }
    }
}

/// An 8 x 8 tile's copier from source rows `rs` apart to destination rows `ds` apart.
type TileCopy = unsafe fn(*const f32, isize, *mut f32, usize);

/// The vector copier of whole tiles, where the source rows are contiguous and the CPU has AVX
/// (ember's AVX2 and AVX-512 levels imply it).
fn whole_tile_copier(cs: isize) -> Option<TileCopy> {
    #[cfg(target_arch = "x86_64")]
    if cs == 1 && crate::simd::detected() != crate::simd::Simd::Portable {
        return Some(tile_avx);
    }
    let _ = cs;
    None
}

/// One tile of `rows x cols` (at most 8 x 8), element by element.
///
/// # Safety
/// As for [`transposed`], for the tile's elements.
unsafe fn tile_portable(
    (src, rs, cs): (*const f32, isize, isize),
    (rows, cols): (usize, usize),
    (dst, ds): (*mut f32, usize),
) {
    for c in 0..cols {
        for r in 0..rows {
            // SAFETY: forwarded from the caller.
            unsafe { *dst.add(c * ds + r) = *src.offset(r as isize * rs + c as isize * cs) };
        }
    }
}

/// One whole 8 x 8 tile with contiguous source rows, through AVX registers: eight row loads,
/// the textbook unpack, shuffle and lane-permute network, eight column stores.
///
/// # Safety
/// The CPU has AVX; 8 rows of 8 floats readable at `src + r * rs`, writable at `dst + c * ds`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
#[inline]
pub(crate) unsafe fn tile_avx(src: *const f32, rs: isize, dst: *mut f32, ds: usize) {
    use std::arch::x86_64::*;
    // SAFETY: the loads and stores stay inside the tile, as the caller vouches for.
    unsafe {
        let row = |r: isize| _mm256_loadu_ps(src.offset(r * rs));
        let (r0, r1, r2, r3) = (row(0), row(1), row(2), row(3));
        let (r4, r5, r6, r7) = (row(4), row(5), row(6), row(7));
        // Pairs of rows interleaved: t0 = a00 a10 a01 a11 | a04 a14 a05 a15, and so on.
        let interleave = |a, b| (_mm256_unpacklo_ps(a, b), _mm256_unpackhi_ps(a, b));
        let ((t0, t1), (t2, t3)) = (interleave(r0, r1), interleave(r2, r3));
        let ((t4, t5), (t6, t7)) = (interleave(r4, r5), interleave(r6, r7));
        // Four rows' column c in each lane: s0 = a00 a10 a20 a30 | a04 a14 a24 a34.
        let pairs = |a, b| {
            (
                _mm256_shuffle_ps::<0x44>(a, b),
                _mm256_shuffle_ps::<0xEE>(a, b),
            )
        };
        let ((s0, s1), (s2, s3)) = (pairs(t0, t2), pairs(t1, t3));
        let ((s4, s5), (s6, s7)) = (pairs(t4, t6), pairs(t5, t7));
        // Low lanes hold columns 0 to 3, high lanes 4 to 7.
        let columns = [
            _mm256_permute2f128_ps::<0x20>(s0, s4),
            _mm256_permute2f128_ps::<0x20>(s1, s5),
            _mm256_permute2f128_ps::<0x20>(s2, s6),
            _mm256_permute2f128_ps::<0x20>(s3, s7),
            _mm256_permute2f128_ps::<0x31>(s0, s4),
            _mm256_permute2f128_ps::<0x31>(s1, s5),
            _mm256_permute2f128_ps::<0x31>(s2, s6),
            _mm256_permute2f128_ps::<0x31>(s3, s7),
        ];
        for (c, column) in columns.into_iter().enumerate() {
            _mm256_storeu_ps(dst.add(c * ds), column);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::Simd;

    #[test]
    fn the_vector_tile_matches_the_element_by_element_one() {
        let src: Vec<f32> = (0..8 * 11).map(|i| i as f32 * 0.5 - 3.0).collect();
        let (mut portable, mut vector) = (vec![0f32; 64], vec![0f32; 64]);
        unsafe { tile_portable((src.as_ptr(), 11, 1), (8, 8), (portable.as_mut_ptr(), 8)) };
        match whole_tile_copier(1) {
            Some(copy) => unsafe { copy(src.as_ptr(), 11, vector.as_mut_ptr(), 8) },
            None => {
                // Only a CPU without AVX2 (or not x86) has no vector copier.
                return assert_eq!(crate::simd::detected(), Simd::Portable);
            }
        }
        assert_eq!(vector, portable);
        assert_eq!(portable[8 * 3 + 5], src[5 * 11 + 3]);
    }

    /// Whole and edge tiles, row- and column-major sources, there and back; and copies large
    /// enough to be spread over a pool of 3 (300 x 257: blocks rounded to whole tiles, the last
    /// one with the edge) equal the serial ones.
    #[test]
    fn every_element_lands_at_its_transposed_place() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let shapes = [
            (1, 1),
            (3, 17),
            (8, 8),
            (20, 9),
            (64, 512),
            (13, 1),
            (300, 257),
        ];
        for (rows, cols) in shapes {
            let src: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
            let copy = |(p, rs, cs), rows, cols, split| unsafe {
                transposed((p, rs, cs), rows, cols, split)
            };
            // Row-major, and the same values seen column-major through swapped strides.
            let row_major = copy((src.as_ptr(), cols as isize, 1), rows, cols, false);
            for r in 0..rows {
                for c in 0..cols {
                    assert_eq!(row_major[c * rows + r], src[r * cols + c], "{rows}x{cols}");
                }
            }
            let back = copy((row_major.as_ptr(), rows as isize, 1), cols, rows, false);
            assert_eq!(back, src, "{rows}x{cols} there and back");
            // The same buffer seen as a column-major [cols, rows] matrix transposes to itself.
            let column_major = copy((src.as_ptr(), 1, cols as isize), cols, rows, false);
            assert_eq!(column_major, src, "{rows}x{cols} column-major");
            let split = pool.install(|| {
                let a = copy((src.as_ptr(), cols as isize, 1), rows, cols, true);
                (a, copy((src.as_ptr(), 1, cols as isize), cols, rows, true))
            });
            assert_eq!(
                split,
                (row_major, column_major),
                "{rows}x{cols} over the pool"
            );
        }
    }

    /// Into rows wider than the copy's (the replicas' side-by-side layout): each element at
    /// its place, the gap between rows untouched, serial and over the pool.
    #[test]
    fn a_copy_into_wider_rows_leaves_the_gap_alone() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        for (rows, cols, gap) in [(64, 512, 5), (19, 300, 1), (8, 8, 8)] {
            let src: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
            let ds = rows + gap;
            for split in [false, true] {
                let mut dst = vec![-1f32; cols * ds];
                let (view, out) = ((src.as_ptr(), cols as isize, 1), dst.as_mut_ptr());
                let (view, out) = (SendView(view), SendPtr(out));
                pool.install(|| unsafe {
                    transpose_to(view.get(), rows, cols, (out.get(), ds), split)
                });
                for (c, row) in dst.chunks(ds).enumerate() {
                    for r in 0..rows {
                        assert_eq!(row[r], src[r * cols + c], "{rows}x{cols}, split {split}");
                    }
                    assert!(row[rows..].iter().all(|&v| v == -1.0), "{rows}x{cols} gap");
                }
            }
        }
    }
}
