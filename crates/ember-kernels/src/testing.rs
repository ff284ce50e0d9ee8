//! Helpers the kernels' tests share, in this crate and in ember's tests of the tensor-level
//! operations (the `testing` feature): bit-for-bit comparison, salted values, and a kernel
//! against the `gemm` crate's own product on a pool of threads.

use crate::gemm::gemm_block;
use crate::products::gemm_into;
#[cfg(target_arch = "x86_64")]
use crate::view::View;
use crate::view::{ProductDims, SendPtr, SendView};

/// Whether two results are the same floats, bit for bit.
pub fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// Values with many bits set, of both signs, different for each `salt` (the x86 kernels'
/// tests).
#[cfg(target_arch = "x86_64")]
pub fn salted_values(len: usize, salt: u32) -> Vec<f32> {
    (0..len as u32)
        .map(|i| {
            ((i.wrapping_mul(2654435761) ^ salt.wrapping_mul(40503)) % 20011) as f32 / 977.0 - 10.0
        })
        .collect()
}

/// `[m, n]` from `gemm_into` on a pool of `threads` (ember's own kernel where one applies)
/// and from the gemm crate as one serial product, on [`salted_values`] with a kept start;
/// `lhs_t`: lhs `[m, k]` is the transpose of a row-major `[k, m]` (a weight gradient's
/// xᵀ); `rhs_t`: rhs `[k, n]` is the transpose of a row-major `[n, k]` (a weight in an
/// input gradient). Otherwise both are row-major.
#[cfg(target_arch = "x86_64")]
pub fn ours_and_crates(
    threads: usize,
    dims: ProductDims,
    keep: bool,
    layouts: (bool, bool),
) -> [Vec<f32>; 2] {
    let identity = crate::Activation::Identity;
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
pub fn ours_and_crates_by(
    threads: usize,
    dims: ProductDims,
    keep: bool,
    (lhs_t, rhs_t): (bool, bool),
    ours_into: impl Fn(*mut f32, (View, View)) + Sync,
) -> [Vec<f32>; 2] {
    let ProductDims {
        rows: m,
        cols: n,
        inner: k,
    } = dims;
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
    let (identity, dst) = (crate::Activation::Identity, SendPtr(ours.as_mut_ptr()));
    pool.install(|| ours_into(dst.get(), (lhs.get(), rhs.get())));
    let (operands, serial) = ((lhs.get(), rhs.get()), gemm::Parallelism::None);
    // SAFETY: crates holds m * n initialised elements; the views m x k and k x n.
    unsafe {
        let crates = crates.as_mut_ptr();
        gemm_block(crates, n, dims, keep, operands, identity, serial)
    };
    [ours, crates]
}

/// Values in [-1, 1) from a fixed linear congruential sequence.
pub fn values(len: usize, seed: u64) -> Vec<f32> {
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
pub fn gemm_on_pool(
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
        let identity = crate::Activation::Identity;
        gemm_into(
            dst_ptr.get(),
            ProductDims::mnk((m, n, k)),
            keep,
            operands,
            identity,
            true,
        )
    });
    dst
}
