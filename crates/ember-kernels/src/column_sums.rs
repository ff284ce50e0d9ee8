//! A small layer's bias gradient: each column of `dz` summed over the batch's rows, with the
//! sums held in registers (tabular-mlp's `[2048 x 20]`, `[2048 x 10]` and `[2048 x 1]`).
//!
//! Each column's sum is one chain of adds, row after row, so it waits on the add before it
//! whatever the code. The portable loop (`elementwise::column_sums_in_memory`) keeps the sums in
//! memory, so each row's add also waits for the previous row's store to come back, and a row
//! shorter than a vector is added lane by lane. Here a row is a few masked vectors added into
//! as many registers: the same adds in the same order, so the same bits.
//!
//! 256-bit vectors on every CPU with AVX2, AVX-512 ones included: on Golden Cove cores
//! (Sapphire and Emerald Rapids) a 256-bit add takes 2 cycles and a 512-bit one 4, and a
//! chain of adds runs at that latency. At 2,048 rows, one thread, on an Emerald Rapids Xeon
//! (median of 15 x 200 sums): 20 columns 9.9 µs in memory, 2.7 µs in 512-bit registers and 2.3
//! µs in 256-bit ones; one column 5.5, 2.2 and 1.4 µs.

use crate::simd::{Simd, detected};
use crate::vector_products::Lanes;
use std::arch::x86_64::{__m256, _mm256_setzero_ps};

/// Columns summed in registers at most: 8 vectors of 8. Wider rows stay with the portable
/// loop, whose many sums in memory are independent chains that overlap.
const MAX_COLUMNS: usize = 64;

/// Columns per pass over the rows: 4 vectors, 4 chains of adds in flight.
const PASS_COLUMNS: usize = 32;

/// Whether [`sums_into`] takes rows of `n` columns on this CPU.
pub(crate) fn applies(n: usize) -> bool {
    (1..=MAX_COLUMNS).contains(&n) && detected() >= Simd::Avx2
}

/// `sums[j] += rows[i * n + j]` for every row `i` in order, `n = sums.len()`: the portable
/// loop's adds, in registers.
pub(crate) fn sums_into(sums: &mut [f32], rows: &[f32]) {
    let n = sums.len();
    assert!(
        applies(n),
        "{n} columns in registers on a CPU with {}",
        detected()
    );
    for first in (0..n).step_by(PASS_COLUMNS) {
        let cols = PASS_COLUMNS.min(n - first);
        let sums_of = match cols.div_ceil(8) {
            1 => pass::<1>,
            2 => pass::<2>,
            3 => pass::<3>,
            _ => pass::<4>,
        };
        // SAFETY: the CPU has AVX2 (`applies`); columns first..first + cols of each whole row
        // of `rows` lie inside it, and of `sums`.
        unsafe { sums_of((first, cols, n), &mut sums[first..], rows) }
    }
}

/// Adds columns `first..first + cols` (`cols` in `V` vectors) of each row of `n` in `rows`
/// (whole rows: [`crate::elementwise::column_sums`] checks it) into `sums`, which starts at
/// column `first`.
///
/// # Safety
/// The CPU has AVX2; `sums` holds at least `cols` elements.
#[target_feature(enable = "avx2")]
unsafe fn pass<const V: usize>(
    (first, cols, n): (usize, usize, usize),
    sums: &mut [f32],
    rows: &[f32],
) {
    // SAFETY: as the caller guarantees; a mask keeps each vector to the columns in the pass.
    unsafe {
        let mut masks = [__m256::mask(0); V];
        let mut acc: [__m256; V] = [_mm256_setzero_ps(); V];
        for v in 0..V {
            masks[v] = __m256::mask((cols - 8 * v).min(8));
            acc[v] = __m256::load(masks[v], sums.as_ptr().add(8 * v));
        }
        for row in rows.chunks_exact(n) {
            let p = row.as_ptr().add(first);
            for v in 0..V {
                acc[v] = acc[v].add(__m256::load(masks[v], p.add(8 * v)));
            }
        }
        for v in 0..V {
            acc[v].store(masks[v], sums.as_mut_ptr().add(8 * v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{elementwise::column_sums_in_memory_at, testing::same_bits};

    /// Deterministic values of both signs and many magnitudes, zeros of both signs among them.
    fn values(len: usize, seed: u32) -> Vec<f32> {
        (0..len as u32)
            .map(|i| {
                let h = (i ^ seed).wrapping_mul(0x9e37_79b9).rotate_left(13);
                match h % 11 {
                    0 => 0.0,
                    1 => -0.0,
                    _ => (h as f32 / u32::MAX as f32 - 0.5) * 10f32.powi((h % 7) as i32 - 3),
                }
            })
            .collect()
    }

    #[test]
    fn register_sums_give_the_portable_loops_bits() {
        if !applies(1) {
            eprintln!("no AVX2 on this CPU: nothing to compare");
            return;
        }
        for n in [1, 3, 7, 8, 9, 10, 16, 20, 31, 32, 33, 40, 61, 64] {
            for m in [0, 1, 5, 2048] {
                let rows = values(m * n, (m * 131 + n) as u32);
                // A kept start: the sums already hold values, as the replicas' columns do.
                let start = values(n, n as u32);
                let mut expected = start.clone();
                column_sums_in_memory_at(Simd::Portable, &mut expected, &rows);
                let mut got = start.clone();
                sums_into(&mut got, &rows);
                assert!(
                    same_bits(&got, &expected),
                    "{m} x {n}: {got:?} against {expected:?}"
                );
            }
        }
    }
}
