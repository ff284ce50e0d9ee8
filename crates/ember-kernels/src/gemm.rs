//! One block of a product on the `gemm` crate (the crate Burn's CPU backend multiplies
//! with), with the bias and the activation applied to its rows.

use crate::elementwise::activate;
use crate::view::ProductDims;

/// One product into `dst`, whose rows are `dst_rs` elements apart, on `parallelism`, then the
/// activation on each of its rows while they are in cache.
///
/// # Safety
/// As for [`gemm_into`](crate::products::gemm_into), with `dst` rows `dst_rs` apart.
pub unsafe fn gemm_block(
    dst: *mut f32,
    dst_rs: usize,
    dims: ProductDims,
    keep: bool,
    ((lhs, lhs_rs, lhs_cs), (rhs, rhs_rs, rhs_cs)): (
        (*const f32, isize, isize),
        (*const f32, isize, isize),
    ),
    act: crate::Activation,
    parallelism: gemm::Parallelism,
) {
    let ProductDims {
        rows: m,
        cols: n,
        inner: k,
    } = dims;
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
    if act == crate::Activation::Identity {
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

/// Whether a product with an output of `rows x cols`, summed over `inner`, takes the gemm
/// crate's blocked kernel, and takes it turned over too: not its matrix-vector kernels (an
/// output side of 1), its kernel for sums of at most 2, or its lane-wise kernel for outputs of
/// at most 256 elements.
pub fn blocked(ProductDims { rows, cols, inner }: ProductDims) -> bool {
    rows > 1 && cols > 1 && inner > 2 && rows * cols > 256
}
