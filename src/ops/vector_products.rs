//! The products the gemm crate hands to its matrix-vector and outer-product kernels, as an
//! output layer of one unit has them (a binary or regression head, tabular-mlp's
//! `[2048 x 10] · [10 x 1]`): the forward `x · w` (a dot product per row), the weight gradient
//! `xᵀ · dz` (one long sum per weight) and the input gradient `dz · wᵀ` (a sum of one term).
//!
//! The crate's kernels for these work one output element at a time: a row's dot product ends
//! in a horizontal sum of a whole vector register, a weight's sum waits on its own chain
//! through memory, and the outer product is a scalar loop. On an Emerald Rapids Xeon the three
//! took 19, 9 and 7 µs of a 340 µs tabular-mlp step, on one thread whatever the pool. Here
//! each output element is computed by the very operations the crate uses, in its order, but
//! 16 elements at once: the bits are the crate's (the tests compare them), in less time.
//!
//! On AVX-512 only, where the crate's vectors are 16 lanes and ember's kernels can hold 16 rows
//! in one register; elsewhere the crate's own kernels run, unchanged.

use super::kernels::View;
use crate::device::simd::{Simd, detected};
use std::arch::x86_64::*;

/// Which of the crate's kernels a product takes, copied here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kernel {
    /// One output column, lhs along its rows: a dot product per row, in the order of the
    /// crate's matrix-vector kernel.
    RowDots,
    /// One output column, lhs along its columns: a chain of fused multiply-adds per element.
    ColumnChains,
    /// A sum of one term into a fresh destination: each element one rounded product.
    Outer,
}

/// The lanes of the crate's AVX-512 vectors, and of ember's.
const LANES: usize = 16;

/// The kernel for `dst [m, n] = (keep ? dst : 0) + lhs [m, k] · rhs [k, n]` (`dst` row-major),
/// where the crate would take one of the kernels copied here; `None` elsewhere. The conditions
/// are the crate's dispatch (`gemm_common::gemm`), in its order: outputs of at most 256
/// elements with both operands along the sum go to its lane-wise kernel (whether or not it
/// turns the product over, which it does when `dst`'s rows are longer than one element), sums
/// of at most two terms to its outer-product kernel, and one output column to a
/// matrix-vector kernel chosen by lhs's strides; the rest, turned over, to its blocked kernel.
pub(super) fn kernel_for(
    (m, n, k): (usize, usize, usize),
    keep: bool,
    ((_, l_rs, l_cs), (_, r_rs, _)): (View, View),
) -> Option<Kernel> {
    let lane_wise = l_cs == 1 && r_rs == 1 && m * n <= 256;
    if detected() != Simd::Avx512 || lane_wise || k == 0 {
        return None;
    }
    if k == 1 {
        return (!keep).then_some(Kernel::Outer);
    }
    // Sums of two terms, views that run backwards (the crate flips them first) and several
    // columns stay with the crate.
    if n != 1 || k == 2 || l_rs <= 0 || l_cs <= 0 || r_rs <= 0 {
        return None;
    }
    match (l_rs, l_cs) {
        (1, _) => Some(Kernel::ColumnChains),
        // Rows of 8 vectors or more start with eight vectors of partial sums, not copied here;
        // the gather's offsets are 32-bit.
        (_, 1) if r_rs == 1 && k < 8 * LANES && l_rs < i32::MAX as isize / 16 => {
            Some(Kernel::RowDots)
        }
        _ => None,
    }
}

/// `dst [m, n] = (keep ? dst : 0) + lhs [m, k] · rhs [k, n]` by `kernel`, with the crate's bits.
///
/// # Safety
/// `kernel` is [`kernel_for`]'s answer for these arguments; `dst` holds `m * n` writable
/// elements (initialised when `keep`); `lhs` and `rhs` address `m x k` and `k x n` elements
/// through their strides.
#[target_feature(enable = "avx512f,fma")]
pub(super) unsafe fn product_into(
    kernel: Kernel,
    dst: *mut f32,
    (m, n, k): (usize, usize, usize),
    keep: bool,
    ((l, l_rs, l_cs), (r, r_rs, r_cs)): (View, View),
) {
    // SAFETY (every arm): forwarded from the caller; each block writes only its own rows.
    unsafe {
        match kernel {
            Kernel::RowDots => {
                for first in (0..m).step_by(LANES) {
                    let x = (l.offset(first as isize * l_rs), l_rs);
                    let rows = LANES.min(m - first);
                    row_dots(dst.add(first), rows, x, (r, k), keep);
                }
            }
            Kernel::ColumnChains => {
                for first in (0..m).step_by(LANES) {
                    let x = (l.add(first), l_cs);
                    let rows = LANES.min(m - first);
                    column_chains(dst.add(first), rows, x, (r, r_rs, k), keep);
                }
            }
            Kernel::Outer => {
                // dst may be uninitialised: written through the pointer, never referenced.
                let row: Vec<f32> = (0..n).map(|j| *r.offset(j as isize * r_cs)).collect();
                for i in 0..m {
                    let (a, out) = (*l.offset(i as isize * l_rs), dst.add(i * n));
                    for (j, &b) in row.iter().enumerate() {
                        out.add(j).write(a * b);
                    }
                }
            }
        }
    }
}

/// The first `rows` of 16 lanes.
fn mask(rows: usize) -> __mmask16 {
    ((1u32 << rows) - 1) as u16
}

/// `rows` (at most 16) of a one-column forward, `dst[i] = (keep ? dst[i] : 0) + x_i · w` for
/// rows `x_i` of `k` elements `x_rs` apart and a contiguous `w`, in the order of the crate's
/// `mixed_gemv_rowmajor` with its 16-lane vectors (for `k < 128`, where it starts from zero
/// vectors): lane `l` sums the products at `l`, `l + 16`, ... below the last whole vector by
/// fused multiply-adds; the lanes are added in order; the rest of the row is fused onto that
/// one by one; then the destination is added. One register holds the 16 rows' sums.
///
/// # Safety
/// `dst` holds `rows` elements (initialised when `keep`); `x` addresses `rows` rows of `k`.
#[target_feature(enable = "avx512f,fma")]
unsafe fn row_dots(
    dst: *mut f32,
    rows: usize,
    (x, x_rs): (*const f32, isize),
    (w, k): (*const f32, usize),
    keep: bool,
) {
    let mask = mask(rows);
    let offsets = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32(x_rs as i32),
    );
    // SAFETY: the masked-off rows are not read; d < k is inside each row and inside w.
    let term = |d: usize, sum: __m512| unsafe {
        let column = _mm512_mask_i32gather_ps::<4>(_mm512_setzero_ps(), mask, offsets, x.add(d));
        _mm512_fmadd_ps(column, _mm512_set1_ps(*w.add(d)), sum)
    };
    let whole = k / LANES * LANES;
    let mut sum = _mm512_setzero_ps();
    if whole > 0 {
        for lane in 0..LANES {
            let chain = (lane..whole)
                .step_by(LANES)
                .fold(_mm512_setzero_ps(), |c, d| term(d, c));
            sum = if lane == 0 {
                chain
            } else {
                _mm512_add_ps(sum, chain)
            };
        }
    }
    sum = (whole..k).fold(sum, |s, d| term(d, s));
    // SAFETY: the first `rows` elements of dst, read only when kept (initialised).
    unsafe {
        if keep {
            sum = _mm512_add_ps(sum, _mm512_maskz_loadu_ps(mask, dst));
        }
        _mm512_mask_storeu_ps(dst, mask, sum);
    }
}

/// `rows` (at most 16) of a one-column weight gradient, `dst[i] = (keep ? dst[i] : 0) +
/// Σ_d x[d][i] · dz[d]` for `x`'s rows `x_cs` apart, in the order of the crate's
/// `mixed_gemv_colmajor`: a fresh destination starts from the first product, rounded; every
/// later term (and the first onto a kept one) is a fused multiply-add, in order. One register
/// holds the 16 rows' sums.
///
/// # Safety
/// `dst` holds `rows` elements (initialised when `keep`); `x` addresses `rows` elements of each
/// of `k` rows; `dz` addresses `k` elements `dz_rs` apart.
#[target_feature(enable = "avx512f,fma")]
unsafe fn column_chains(
    dst: *mut f32,
    rows: usize,
    (x, x_cs): (*const f32, isize),
    (dz, dz_rs, k): (*const f32, isize, usize),
    keep: bool,
) {
    let mask = mask(rows);
    // SAFETY: the masked-off lanes are not read; d < k is inside x and dz.
    let (column, dz) = unsafe {
        (
            |d: usize| _mm512_maskz_loadu_ps(mask, x.offset(d as isize * x_cs)),
            |d: usize| _mm512_set1_ps(*dz.offset(d as isize * dz_rs)),
        )
    };
    // SAFETY: the first `rows` elements of dst, read only when kept (initialised).
    let mut sum = match keep {
        true => _mm512_fmadd_ps(column(0), dz(0), unsafe {
            _mm512_maskz_loadu_ps(mask, dst)
        }),
        false => _mm512_mul_ps(column(0), dz(0)),
    };
    for d in 1..k {
        sum = _mm512_fmadd_ps(column(d), dz(d), sum);
    }
    // SAFETY: as above.
    unsafe { _mm512_mask_storeu_ps(dst, mask, sum) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Activation;
    use crate::ops::kernels::{gemm_block, gemm_into};

    /// Values with many bits set, of both signs and a few zeros, different for each `salt`.
    fn values(len: usize, salt: u32) -> Vec<f32> {
        (0..len as u32)
            .map(|i| {
                let v = (i.wrapping_mul(2654435761) ^ salt.wrapping_mul(40503)) % 20011;
                if v.is_multiple_of(97) {
                    0.0
                } else {
                    v as f32 / 977.0 - 10.0
                }
            })
            .collect()
    }

    /// `dst [m, n]` from `gemm_into` (this module where it applies) and from the gemm crate,
    /// with lhs `[m, k]` rows `l_rs` apart (`lhs_t`: lhs is the transpose of row-major
    /// `[k, m]`, a weight gradient's xᵀ) and rhs `[k, n]` row-major.
    fn both(
        (m, n, k): (usize, usize, usize),
        keep: bool,
        lhs_t: bool,
        l_rs: usize,
    ) -> [Vec<f32>; 2] {
        let (lhs_values, rhs_values) = (values(m * l_rs.max(k) + k * m, 1), values(k * n, 2));
        let lhs = match lhs_t {
            true => (lhs_values.as_ptr(), 1, m as isize),
            false => (lhs_values.as_ptr(), l_rs as isize, 1),
        };
        let rhs = (rhs_values.as_ptr(), n as isize, 1);
        let (mut ours, mut crates) = (values(m * n, 3), values(m * n, 3));
        let (identity, serial) = (Activation::Identity, gemm::Parallelism::None);
        // SAFETY: both destinations hold m * n initialised elements; the views m x k, k x n.
        unsafe {
            gemm_into(
                ours.as_mut_ptr(),
                (m, n, k),
                keep,
                (lhs, rhs),
                identity,
                true,
            );
            let crates_dst = crates.as_mut_ptr();
            gemm_block(crates_dst, n, (m, n, k), keep, (lhs, rhs), identity, serial);
        }
        [ours, crates]
    }

    fn same_bits(a: &[f32], b: &[f32]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
    }

    #[test]
    fn one_column_products_give_the_gemm_crates_bits() {
        // On a CPU without AVX-512 this compares the crate with itself.
        let avx512 = detected() == Simd::Avx512;
        // Forward dot products: rows shorter than a vector, whole vectors, whole vectors and a
        // rest, up to the longest copied; rows in views wider than k; blocks with a rest.
        for (m, k, l_rs) in [
            (2048, 10, 10),
            (300, 3, 3),
            (257, 8, 8),
            (1000, 16, 20),
            (513, 17, 17),
            (700, 40, 41),
            (400, 63, 63),
            (333, 127, 127),
        ] {
            let plain = (
                (std::ptr::null(), l_rs as isize, 1),
                (std::ptr::null(), 1, 1),
            );
            let expected = avx512.then_some(Kernel::RowDots);
            assert_eq!(
                kernel_for((m, 1, k), true, plain),
                expected,
                "({m}, 1, {k})"
            );
            for keep in [false, true] {
                let [ours, crates] = both((m, 1, k), keep, false, l_rs);
                assert!(
                    same_bits(&ours, &crates),
                    "({m}, 1, {k}) rows {l_rs}, {keep}"
                );
            }
        }
        // Weight gradients: fewer weights than a vector, a vector and a rest; long sums.
        for (m, k) in [(10, 2048), (16, 300), (37, 1000), (5, 3), (300, 3)] {
            let xt = ((std::ptr::null(), 1, m as isize), (std::ptr::null(), 1, 1));
            let expected = avx512.then_some(Kernel::ColumnChains);
            assert_eq!(kernel_for((m, 1, k), false, xt), expected);
            for keep in [false, true] {
                let [ours, crates] = both((m, 1, k), keep, true, m);
                assert!(
                    same_bits(&ours, &crates),
                    "({m}, 1, {k}) transposed, {keep}"
                );
            }
        }
        // Input gradients: one term per element.
        for (m, n) in [(2048, 10), (300, 1), (129, 2)] {
            let [ours, crates] = both((m, n, 1), false, false, 1);
            assert!(same_bits(&ours, &crates), "({m}, {n}, 1)");
        }
    }
}
