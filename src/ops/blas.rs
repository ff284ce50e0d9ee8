//! The matrix products on a tuned BLAS, behind the `blas` cargo feature: OpenBLAS's serial
//! build, linked by `build.rs`. On this project's Zen 3 machine its sgemm runs the fashion-mlp
//! shapes 10 to 20 % faster than the `gemm` crate (BENCHMARKS.md, "The products").
//!
//! The library is the serial build on purpose: ember splits work across rayon's pool itself, so
//! a BLAS with threads of its own would fight rayon's for the cores. Products too large for one
//! core are split here into column blocks, one serial call per pool thread.

use rayon::prelude::*;
use std::ffi::c_int;

const ROW_MAJOR: c_int = 101;
const NO_TRANS: c_int = 111;
const TRANS: c_int = 112;

unsafe extern "C" {
    // The CBLAS interface, declared here so that no binding crate is needed.
    fn cblas_sgemm(
        layout: c_int,
        trans_a: c_int,
        trans_b: c_int,
        m: c_int,
        n: c_int,
        k: c_int,
        alpha: f32,
        a: *const f32,
        lda: c_int,
        b: *const f32,
        ldb: c_int,
        beta: f32,
        c: *mut f32,
        ldc: c_int,
    );
}

/// How CBLAS reads a row-major `rows x cols` operand with element strides `(rs, cs)`: as is,
/// or transposed, with its leading dimension. `None` when neither stride is 1 (a broadcast or
/// a strided view), which CBLAS cannot address.
fn operand(rows: usize, cols: usize, rs: isize, cs: isize) -> Option<(c_int, c_int)> {
    let ld = |stride: isize, least: usize| {
        (stride >= least.max(1) as isize)
            .then(|| c_int::try_from(stride).ok())
            .flatten()
    };
    let as_is = (cs == 1).then(|| ld(rs, cols)).flatten();
    let transposed = || (rs == 1).then(|| ld(cs, rows)).flatten();
    as_is
        .map(|lda| (NO_TRANS, lda))
        .or_else(|| transposed().map(|lda| (TRANS, lda)))
}

/// One serial sgemm call, `dst [m, n] (leading dimension ldc) = beta·dst + lhs · rhs`.
#[derive(Clone, Copy)]
struct Call {
    lhs: (*const f32, c_int, c_int),
    rhs: (*const f32, c_int, c_int),
    rhs_cs: isize,
    dst: *mut f32,
    ldc: c_int,
    m: c_int,
    k: c_int,
    beta: f32,
}
// SAFETY: the pointers address tensors that outlive the parallel loop; each call writes its own
// column block of `dst`.
unsafe impl Send for Call {}
unsafe impl Sync for Call {}

impl Call {
    /// Columns `c0 .. c0 + cols` of the product.
    ///
    /// # Safety
    /// As [`gemm_into`]'s, for that column block.
    unsafe fn columns(self, c0: usize, cols: usize) {
        let (lhs, trans_a, lda) = self.lhs;
        let (rhs, trans_b, ldb) = self.rhs;
        // SAFETY: the block's first rhs column and dst column lie inside their buffers.
        unsafe {
            cblas_sgemm(
                ROW_MAJOR,
                trans_a,
                trans_b,
                self.m,
                cols as c_int,
                self.k,
                1.0,
                lhs,
                lda,
                rhs.offset(c0 as isize * self.rhs_cs),
                ldb,
                self.beta,
                self.dst.add(c0),
                self.ldc,
            );
        }
    }
}

/// `dst [m, n] = (keep ? dst : 0) + lhs [m, k] · rhs [k, n]` on `threads` pool threads, each
/// taking a block of columns. Returns false, having done nothing, when CBLAS cannot address an
/// operand; the caller then uses the `gemm` crate.
///
/// # Safety
/// As the `gemm_into` of `kernels.rs`: `dst` holds `m * n` writable elements (initialised when
/// `keep`); `lhs` and `rhs` address `m x k` and `k x n` elements through their strides.
pub unsafe fn gemm_into(
    dst: *mut f32,
    (m, n, k): (usize, usize, usize),
    keep: bool,
    (lhs, lhs_rs, lhs_cs): (*const f32, isize, isize),
    (rhs, rhs_rs, rhs_cs): (*const f32, isize, isize),
    threads: usize,
) -> bool {
    let fits = |v: usize| c_int::try_from(v).is_ok();
    let (Some((trans_a, lda)), Some((trans_b, ldb))) =
        (operand(m, k, lhs_rs, lhs_cs), operand(k, n, rhs_rs, rhs_cs))
    else {
        return false;
    };
    if !(fits(m) && fits(n) && fits(k)) || m == 0 || n == 0 {
        return false;
    }
    let call = Call {
        lhs: (lhs, trans_a, lda),
        rhs: (rhs, trans_b, ldb),
        rhs_cs,
        dst,
        ldc: n as c_int,
        m: m as c_int,
        k: k as c_int,
        // With beta = 0, sgemm writes dst without reading it.
        beta: if keep { 1.0 } else { 0.0 },
    };
    // Blocks of whole 16-column panels, so that every block runs the wide micro-kernel.
    let width = n.div_ceil(threads.max(1)).next_multiple_of(16);
    if width >= n {
        // SAFETY: forwarded from the caller; the block is the whole product.
        unsafe { call.columns(0, n) };
    } else {
        (0..n.div_ceil(width)).into_par_iter().for_each(|b| {
            let c0 = b * width;
            // SAFETY: forwarded from the caller; blocks are disjoint and inside `n`.
            unsafe { call.columns(c0, width.min(n - c0)) };
        });
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operands_are_read_as_is_or_transposed_or_not_at_all() {
        assert_eq!(operand(4, 3, 3, 1), Some((NO_TRANS, 3)));
        assert_eq!(operand(4, 3, 1, 4), Some((TRANS, 4)));
        assert_eq!(operand(4, 3, 0, 1), None, "a broadcast row");
        assert_eq!(operand(4, 3, 6, 2), None, "every other column");
        assert_eq!(operand(1, 3, 1, 1), Some((TRANS, 1)), "one row");
    }

    #[test]
    fn column_blocks_give_the_whole_product() {
        let (m, n, k) = (5, 40, 7);
        let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 - 3.0).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.5).collect();
        let mut want = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                want[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
            }
        }
        for threads in [1, 2, 3] {
            let mut got = vec![1f32; m * n];
            // SAFETY: the buffers have the sizes the dimensions say, read through row strides.
            let done = unsafe {
                gemm_into(
                    got.as_mut_ptr(),
                    (m, n, k),
                    false,
                    (a.as_ptr(), k as isize, 1),
                    (b.as_ptr(), n as isize, 1),
                    threads,
                )
            };
            assert!(done);
            assert_eq!(got, want, "{threads} threads");
        }
    }
}
