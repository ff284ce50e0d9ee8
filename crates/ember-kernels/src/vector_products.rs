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
//! a vector of elements at once: the bits are the crate's (the tests compare them), in less
//! time.
//!
//! On AVX-512 and AVX2 (with FMA): the crate's vectors there are 16 and 8 lanes, and ember's
//! kernels hold as many rows in one register. Elsewhere the crate's own kernels run.

use crate::simd::{Simd, detected, gemm_kernel};
use crate::view::{ProductDims, SendPtr, SendView, View};
use rayon::prelude::*;
use std::arch::x86_64::*;

/// Which of the crate's kernels a product takes, copied here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// One output column, lhs along its rows: a dot product per row, in the order of the
    /// crate's matrix-vector kernel.
    DotsPerRow,
    /// One output column, lhs along its columns: a chain of fused multiply-adds per element.
    ColumnChains,
    /// A sum of one term into a fresh destination: each element one rounded product.
    Outer,
}

/// The lanes of the crate's vectors on this CPU, where ember's kernels run at the same width:
/// its AVX-512 kernel wherever avx512f is present, its AVX2 one wherever FMA is; `None` for
/// its scalar fallback, which rounds each product, or where ember's level would not match.
fn lanes() -> Option<usize> {
    match (gemm_kernel(), detected()) {
        ("avx512f", Simd::Avx512) => Some(16),
        ("fma", Simd::Avx2) => Some(8),
        _ => None,
    }
}

/// The kernel for `dst [m, n] = (keep ? dst : 0) + lhs [m, k] · rhs [k, n]` (`dst` row-major),
/// where the crate would take one of the kernels copied here; `None` elsewhere. The conditions
/// are the crate's dispatch (`gemm_common::gemm`), in its order: outputs of at most 256
/// elements with both operands along the sum go to its lane-wise kernel (whether or not it
/// turns the product over, which it does when `dst`'s rows are longer than one element), sums
/// of at most two terms to its outer-product kernel, and one output column to a
/// matrix-vector kernel chosen by lhs's strides; the rest to its blocked kernel. Of these,
/// ember takes one-term sums into a fresh destination, one column with lhs along its columns,
/// and one column with lhs along its rows where the rows are short ([`dots_pay`]).
pub(crate) fn kernel_for(
    ProductDims {
        rows: m,
        cols: n,
        inner: k,
    }: ProductDims,
    keep: bool,
    ((_, l_rs, l_cs), (_, r_rs, _)): (View, View),
) -> Option<Kernel> {
    let lanes = lanes()?;
    // A view that runs backwards along the sum is flipped first (which can make the product
    // lane-wise); such products stay with the crate.
    let lane_wise = l_cs == 1 && r_rs == 1 && m * n <= 256;
    if lane_wise || k == 0 || l_cs <= 0 || r_rs <= 0 {
        return None;
    }
    if k == 1 {
        return (!keep).then_some(Kernel::Outer);
    }
    // Sums of two terms and several columns stay with the crate.
    if n != 1 || k == 2 || l_rs <= 0 {
        return None;
    }
    match (l_rs, l_cs) {
        (1, _) => Some(Kernel::ColumnChains),
        // The gather's offsets are 32-bit.
        (_, 1) if r_rs == 1 && dots_pay(k, lanes) && l_rs < i32::MAX as isize / 16 => {
            Some(Kernel::DotsPerRow)
        }
        _ => None,
    }
}

/// Whether [`dots_per_row`] beats the crate's matrix-vector kernel on rows of `k` at `lanes`
/// (both at the same width; 2,048 rows, one thread, Emerald Rapids,
/// `docs/benchmarks/tabular-mlp-on-emerald-rapids.md`). A gather costs a load per row and
/// element, where the crate loads whole vectors along a row and pays a horizontal sum per row.
/// With 16 lanes, rows shorter than 32 gained 1.1x to 5x (the shorter, the more: below 16 the
/// crate adds up a vector of zeros for each row); with 8 lanes only rows between one and two
/// vectors gained (1.1x and 1.3x at 10 and 12, 0.7x at 8, 0.4x to 0.8x from 16). Longer rows
/// would also start with the crate's eight vectors of partial sums, not copied here.
fn dots_pay(k: usize, lanes: usize) -> bool {
    match lanes {
        16 => k < 32,
        _ => k > 8 && k < 16,
    }
}

/// The work from which a product here is split into blocks of rows over the pool. Gathers
/// and single lanes make these kernels slow per multiply-add (tabular-mlp's head, `[2048 x
/// 10] · [10 x 1]`: 6.4 µs for 20,480), so they split from an eighth of the blocked
/// products' threshold (`products::ROW_BLOCK_WORK`), a few µs of work.
pub(crate) const SPLIT_WORK: usize = 1 << 14;

/// `dst [m, n] = (keep ? dst : 0) + lhs [m, k] · rhs [k, n]` by `kernel`, with the crate's bits;
/// blocks of rows over the pool when `split` (each element is computed whole by one thread,
/// so the bits do not depend on the split).
///
/// # Safety
/// `kernel` is [`kernel_for`]'s answer for these arguments; `dst` holds `m * n` writable
/// elements (initialised when `keep`); `lhs` and `rhs` address `m x k` and `k x n` elements
/// through their strides.
pub(crate) unsafe fn product_into(
    kernel: Kernel,
    dst: *mut f32,
    dims: ProductDims,
    keep: bool,
    (lhs, rhs): (View, View),
    split: bool,
) {
    let (m, n) = (dims.rows, dims.cols);
    let blocks = match split {
        true => rayon::current_num_threads().min(m / BLOCK_ROWS).max(1),
        false => 1,
    };
    let (dst, lhs, rhs) = (SendPtr(dst), SendView(lhs), SendView(rhs));
    let rows = |b: usize| {
        // Blocks start on whole vectors at either width.
        let start = |b: usize| (b * m / blocks) / BLOCK_ROWS * BLOCK_ROWS;
        let (first, last) = (start(b), if b + 1 == blocks { m } else { start(b + 1) });
        let ((l, l_rs, l_cs), dims) = (
            lhs.get(),
            ProductDims {
                rows: last - first,
                ..dims
            },
        );
        // SAFETY: forwarded from the caller; block b reads rows first..last of lhs and writes
        // the same rows of dst, which no other block writes.
        unsafe {
            let (dst, operands) = (
                dst.get().add(first * n),
                ((l.offset(first as isize * l_rs), l_rs, l_cs), rhs.get()),
            );
            match detected() {
                Simd::Avx512 => at_avx512(kernel, dst, dims, keep, operands),
                _ => at_avx2(kernel, dst, dims, keep, operands),
            }
        }
    };
    match blocks {
        1 => rows(0),
        _ => (0..blocks).into_par_iter().for_each(rows),
    }
}

/// Rows per block of a split product at least: a whole vector at either width.
const BLOCK_ROWS: usize = 16;

/// [`products`] in 16-lane vectors.
///
/// # Safety
/// As for [`product_into`], on a CPU with AVX-512.
#[target_feature(enable = "avx512f,fma")]
unsafe fn at_avx512(
    kernel: Kernel,
    dst: *mut f32,
    dims: ProductDims,
    keep: bool,
    operands: (View, View),
) {
    // SAFETY: forwarded from the caller.
    unsafe { products::<__m512>(kernel, dst, dims, keep, operands) }
}

/// [`products`] in 8-lane vectors.
///
/// # Safety
/// As for [`product_into`], on a CPU with AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
unsafe fn at_avx2(
    kernel: Kernel,
    dst: *mut f32,
    dims: ProductDims,
    keep: bool,
    operands: (View, View),
) {
    // SAFETY: forwarded from the caller.
    unsafe { products::<__m256>(kernel, dst, dims, keep, operands) }
}

/// [`product_into`] in vectors `V`, inlined into each level's build.
///
/// # Safety
/// As for [`product_into`], on a CPU with `V`'s level.
#[inline(always)]
unsafe fn products<V: Lanes>(
    kernel: Kernel,
    dst: *mut f32,
    ProductDims {
        rows: m,
        cols: n,
        inner: k,
    }: ProductDims,
    keep: bool,
    ((l, l_rs, l_cs), (r, r_rs, r_cs)): (View, View),
) {
    // SAFETY (every arm): forwarded from the caller; each block writes only its own rows.
    unsafe {
        match kernel {
            Kernel::DotsPerRow => {
                for first in (0..m).step_by(V::N) {
                    let x = (l.offset(first as isize * l_rs), l_rs);
                    let rows = V::N.min(m - first);
                    dots_per_row::<V>(dst.add(first), rows, x, (r, k), keep);
                }
            }
            Kernel::ColumnChains => {
                for first in (0..m).step_by(V::N) {
                    let x = (l.add(first), l_cs);
                    let rows = V::N.min(m - first);
                    column_chains::<V>(dst.add(first), rows, x, (r, r_rs, k), keep);
                }
            }
            Kernel::Outer => {
                // dst may be uninitialised: written through the pointer, never referenced.
                let row: Vec<f32> = (0..n).map(|j| *r.offset(j as isize * r_cs)).collect();
                for i in 0..m {
                    let (a, out) = (V::splat(*l.offset(i as isize * l_rs)), dst.add(i * n));
                    for j in (0..n).step_by(V::N) {
                        let mask = V::mask(V::N.min(n - j));
                        V::load(mask, row.as_ptr().add(j))
                            .mul(a)
                            .store(mask, out.add(j));
                    }
                }
            }
        }
    }
}

/// A vector of f32 at one level, with what the kernels here do with it; the masks keep the
/// first `rows` lanes. Every method is inlined into a function built for that level.
///
/// # Safety (every method)
/// The CPU has the vector's level; a pointer addresses the masked lanes' elements (at
/// `offsets` for a gather).
pub(crate) trait Lanes: Copy {
    /// Lanes in a vector: the crate's vectors at this level are as wide.
    const N: usize;
    type Mask: Copy;
    type Offsets: Copy;
    unsafe fn mask(rows: usize) -> Self::Mask;
    /// Lane `i` at `i · stride` elements.
    unsafe fn offsets(stride: isize) -> Self::Offsets;
    unsafe fn zero() -> Self;
    unsafe fn splat(v: f32) -> Self;
    unsafe fn add(self, other: Self) -> Self;
    unsafe fn mul(self, other: Self) -> Self;
    /// `self · b + c`, fused.
    unsafe fn fmadd(self, b: Self, c: Self) -> Self;
    /// The masked lanes from `p` on, zero past them.
    unsafe fn load(mask: Self::Mask, p: *const f32) -> Self;
    /// The masked lanes from `base` at `offsets`, zero past them.
    unsafe fn gather(mask: Self::Mask, base: *const f32, offsets: Self::Offsets) -> Self;
    unsafe fn store(self, mask: Self::Mask, p: *mut f32);
}

impl Lanes for __m512 {
    const N: usize = 16;
    type Mask = __mmask16;
    type Offsets = __m512i;
    #[inline(always)]
    unsafe fn mask(rows: usize) -> __mmask16 {
        ((1u32 << rows) - 1) as u16
    }
    #[inline(always)]
    unsafe fn offsets(stride: isize) -> __m512i {
        // SAFETY: as the trait requires.
        unsafe {
            let lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
            _mm512_mullo_epi32(lanes, _mm512_set1_epi32(stride as i32))
        }
    }
    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: as the trait requires.
        unsafe { _mm512_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> Self {
        // SAFETY: as the trait requires.
        unsafe { _mm512_set1_ps(v) }
    }
    #[inline(always)]
    unsafe fn add(self, other: Self) -> Self {
        // SAFETY: as the trait requires.
        unsafe { _mm512_add_ps(self, other) }
    }
    #[inline(always)]
    unsafe fn mul(self, other: Self) -> Self {
        // SAFETY: as the trait requires.
        unsafe { _mm512_mul_ps(self, other) }
    }
    #[inline(always)]
    unsafe fn fmadd(self, b: Self, c: Self) -> Self {
        // SAFETY: as the trait requires.
        unsafe { _mm512_fmadd_ps(self, b, c) }
    }
    #[inline(always)]
    unsafe fn load(mask: __mmask16, p: *const f32) -> Self {
        // SAFETY: as the trait requires.
        unsafe { _mm512_maskz_loadu_ps(mask, p) }
    }
    #[inline(always)]
    unsafe fn gather(mask: __mmask16, base: *const f32, offsets: __m512i) -> Self {
        // SAFETY: as the trait requires.
        unsafe { _mm512_mask_i32gather_ps::<4>(_mm512_setzero_ps(), mask, offsets, base) }
    }
    #[inline(always)]
    unsafe fn store(self, mask: __mmask16, p: *mut f32) {
        // SAFETY: as the trait requires.
        unsafe { _mm512_mask_storeu_ps(p, mask, self) }
    }
}

impl Lanes for __m256 {
    const N: usize = 8;
    /// The sign bit of each kept lane.
    type Mask = __m256i;
    type Offsets = __m256i;
    #[inline(always)]
    unsafe fn mask(rows: usize) -> __m256i {
        // SAFETY: as the trait requires.
        unsafe {
            let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
            _mm256_cmpgt_epi32(_mm256_set1_epi32(rows as i32), lanes)
        }
    }
    #[inline(always)]
    unsafe fn offsets(stride: isize) -> __m256i {
        // SAFETY: as the trait requires.
        unsafe {
            let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
            _mm256_mullo_epi32(lanes, _mm256_set1_epi32(stride as i32))
        }
    }
    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: as the trait requires.
        unsafe { _mm256_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn splat(v: f32) -> Self {
        // SAFETY: as the trait requires.
        unsafe { _mm256_set1_ps(v) }
    }
    #[inline(always)]
    unsafe fn add(self, other: Self) -> Self {
        // SAFETY: as the trait requires.
        unsafe { _mm256_add_ps(self, other) }
    }
    #[inline(always)]
    unsafe fn mul(self, other: Self) -> Self {
        // SAFETY: as the trait requires.
        unsafe { _mm256_mul_ps(self, other) }
    }
    #[inline(always)]
    unsafe fn fmadd(self, b: Self, c: Self) -> Self {
        // SAFETY: as the trait requires.
        unsafe { _mm256_fmadd_ps(self, b, c) }
    }
    #[inline(always)]
    unsafe fn load(mask: __m256i, p: *const f32) -> Self {
        // SAFETY: as the trait requires.
        unsafe { _mm256_maskload_ps(p, mask) }
    }
    #[inline(always)]
    unsafe fn gather(mask: __m256i, base: *const f32, offsets: __m256i) -> Self {
        // SAFETY: as the trait requires.
        unsafe {
            let (zero, mask) = (_mm256_setzero_ps(), _mm256_castsi256_ps(mask));
            _mm256_mask_i32gather_ps::<4>(zero, base, offsets, mask)
        }
    }
    #[inline(always)]
    unsafe fn store(self, mask: __m256i, p: *mut f32) {
        // SAFETY: as the trait requires.
        unsafe { _mm256_maskstore_ps(p, mask, self) }
    }
}

/// `rows` (at most `V::N`) of a one-column forward, `dst[i] = (keep ? dst[i] : 0) + x_i · w`
/// for rows `x_i` of `k` elements `x_rs` apart and a contiguous `w`, in the order of the
/// crate's `mixed_gemv_rowmajor` with its vectors of `V::N` lanes (for `k < 8 V::N`, where it
/// starts from zero vectors): lane `l` sums the products at `l`, `l + V::N`, ... below the last
/// whole vector by fused multiply-adds; the lanes are added in order; the rest of the row is
/// fused onto that one by one; then the destination is added. One register holds the rows'
/// sums.
///
/// # Safety
/// `dst` holds `rows` elements (initialised when `keep`); `x` addresses `rows` rows of `k`;
/// the CPU has `V`'s level.
#[inline(always)]
unsafe fn dots_per_row<V: Lanes>(
    dst: *mut f32,
    rows: usize,
    (x, x_rs): (*const f32, isize),
    (w, k): (*const f32, usize),
    keep: bool,
) {
    // SAFETY (every call): the masked-off rows are not read; d < k is inside each row and
    // inside w; the first `rows` elements of dst are read only when kept (initialised).
    unsafe {
        let (mask, offsets) = (V::mask(rows), V::offsets(x_rs));
        let term =
            |d: usize, sum: V| V::gather(mask, x.add(d), offsets).fmadd(V::splat(*w.add(d)), sum);
        let whole = k / V::N * V::N;
        let mut sum = V::zero();
        if whole > 0 {
            for lane in 0..V::N {
                let chain = (lane..whole)
                    .step_by(V::N)
                    .fold(V::zero(), |c, d| term(d, c));
                sum = if lane == 0 { chain } else { sum.add(chain) };
            }
        }
        sum = (whole..k).fold(sum, |s, d| term(d, s));
        if keep {
            sum = sum.add(V::load(mask, dst));
        }
        sum.store(mask, dst);
    }
}

/// `rows` (at most `V::N`) of a one-column weight gradient, `dst[i] = (keep ? dst[i] : 0) +
/// Σ_d x[d][i] · dz[d]` for `x`'s rows `x_cs` apart, in the order of the crate's
/// `mixed_gemv_colmajor`: a fresh destination starts from the first product, rounded; every
/// later term (and the first onto a kept one) is a fused multiply-add, in order. One register
/// holds the rows' sums.
///
/// # Safety
/// `dst` holds `rows` elements (initialised when `keep`); `x` addresses `rows` elements of each
/// of `k` rows; `dz` addresses `k` elements `dz_rs` apart; the CPU has `V`'s level.
#[inline(always)]
unsafe fn column_chains<V: Lanes>(
    dst: *mut f32,
    rows: usize,
    (x, x_cs): (*const f32, isize),
    (dz, dz_rs, k): (*const f32, isize, usize),
    keep: bool,
) {
    // SAFETY (every call): the masked-off lanes are not read; d < k is inside x and dz; the
    // first `rows` elements of dst are read only when kept (initialised).
    unsafe {
        let mask = V::mask(rows);
        let column = |d: usize| V::load(mask, x.offset(d as isize * x_cs));
        let dz = |d: usize| V::splat(*dz.offset(d as isize * dz_rs));
        let mut sum = match keep {
            true => column(0).fmadd(dz(0), V::load(mask, dst)),
            false => column(0).mul(dz(0)),
        };
        for d in 1..k {
            sum = column(d).fmadd(dz(d), sum);
        }
        sum.store(mask, dst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Activation;
    use crate::testing::same_bits;
    use crate::{gemm::gemm_block, products::gemm_into};

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
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let (dst, operands) = (SendPtr(ours.as_mut_ptr()), (SendView(lhs), SendView(rhs)));
        // SAFETY: both destinations hold m * n initialised elements; the views m x k, k x n.
        pool.install(|| unsafe {
            let operands = (operands.0.get(), operands.1.get());
            gemm_into(
                dst.get(),
                ProductDims::mnk((m, n, k)),
                keep,
                operands,
                identity,
                true,
            )
        });
        unsafe {
            let crates_dst = crates.as_mut_ptr();
            gemm_block(
                crates_dst,
                n,
                ProductDims::mnk((m, n, k)),
                keep,
                (lhs, rhs),
                identity,
                serial,
            );
        }
        [ours, crates]
    }

    #[test]
    fn one_column_products_give_the_gemm_crates_bits() {
        // Where none applies (no AVX2), this compares the crate with itself.
        let applies = lanes().is_some();
        // Forward dot products: rows shorter than a vector, whole vectors, whole vectors and a
        // rest, up to the longest copied; rows in views wider than k; blocks with a rest. The
        // last shape of each list is large enough to be split by rows over the 3 threads.
        for (m, k, l_rs) in [
            (2048, 10, 10),
            (300, 3, 3),
            (257, 8, 8),
            (1000, 16, 20),
            (513, 17, 17),
            (700, 40, 41),
            (400, 63, 63),
            (333, 127, 127),
            (600, 12, 12),
            (8192, 20, 20),
        ] {
            let plain = (
                (std::ptr::null(), l_rs as isize, 1),
                (std::ptr::null(), 1, 1),
            );
            let expected = lanes()
                .filter(|&l| dots_pay(k, l))
                .map(|_| Kernel::DotsPerRow);
            assert_eq!(
                kernel_for(ProductDims::mnk((m, 1, k)), true, plain),
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
        for (m, k) in [
            (10, 2048),
            (16, 300),
            (37, 1000),
            (5, 3),
            (300, 3),
            (64, 4096),
        ] {
            let xt = ((std::ptr::null(), 1, m as isize), (std::ptr::null(), 1, 1));
            let expected = applies.then_some(Kernel::ColumnChains);
            assert_eq!(kernel_for(ProductDims::mnk((m, 1, k)), false, xt), expected);
            for keep in [false, true] {
                let [ours, crates] = both((m, 1, k), keep, true, m);
                assert!(
                    same_bits(&ours, &crates),
                    "({m}, 1, {k}) transposed, {keep}"
                );
            }
        }
        // Input gradients: one term per element, rows narrower and wider than a vector.
        for (m, n) in [(2048, 10), (300, 1), (129, 2), (300, 20), (8192, 20)] {
            let strided = ((std::ptr::null(), 1, 1), (std::ptr::null(), n as isize, 1));
            let expected = applies.then_some(Kernel::Outer);
            assert_eq!(
                kernel_for(ProductDims::mnk((m, n, 1)), false, strided),
                expected,
                "({m}, {n}, 1)"
            );
            let [ours, crates] = both((m, n, 1), false, false, 1);
            assert!(same_bits(&ours, &crates), "({m}, {n}, 1)");
        }
    }

    #[test]
    fn kept_lane_wise_and_flipped_products_stay_with_the_crate() {
        let forwards =
            |l_cs: isize, r_rs: isize| ((std::ptr::null(), 1, l_cs), (std::ptr::null(), r_rs, 1));
        // A kept destination, at most 256 outputs along the sum, a flipped view (which the
        // crate flips back into a lane-wise product), several columns, a sum of two.
        assert_eq!(
            kernel_for(ProductDims::mnk((300, 10, 1)), true, forwards(1, 10)),
            None
        );
        assert_eq!(
            kernel_for(ProductDims::mnk((16, 16, 1)), false, forwards(1, 1)),
            None
        );
        assert_eq!(
            kernel_for(ProductDims::mnk((16, 16, 1)), false, forwards(-1, -1)),
            None
        );
        assert_eq!(
            kernel_for(ProductDims::mnk((300, 10, 40)), false, forwards(1, 10)),
            None
        );
        assert_eq!(
            kernel_for(
                ProductDims::mnk((300, 1, 2)),
                false,
                ((std::ptr::null(), 2, 1), (std::ptr::null(), 1, 1))
            ),
            None
        );
        // Rows where the crate's dot products are as fast (at either width).
        let rows = |k: isize| ((std::ptr::null(), k, 1), (std::ptr::null(), 1, 1));
        assert_eq!(
            kernel_for(ProductDims::mnk((300, 1, 64)), false, rows(64)),
            None
        );
    }

    /// A one-column product `[m, k] · [k, 1]` by the crate's own matrix-vector kernel at
    /// `simd`'s width, and by ember's kernel at `ours`; lhs rows of x `[m, k]` (`DotsPerRow`) or
    /// the transpose of x `[k, m]` (`ColumnChains`).
    fn at_both_ends<S: gemm_common::simd::MixedSimd<f32, f32, f32, f32>>(
        (simd, ours): (S, OursAt),
        kernel: Kernel,
        (m, k): (usize, usize),
        keep: bool,
    ) -> [Vec<f32>; 2] {
        let (x, w) = (values(m * k, 4), values(k, 5));
        let (mut theirs, mut mine) = (values(m, 6), values(m, 6));
        let alpha = if keep { 1.0 } else { 0.0 };
        let (xp, wp) = (x.as_ptr(), w.as_ptr());
        let lhs = match kernel {
            Kernel::DotsPerRow => (xp, k as isize, 1),
            _ => (xp, 1, m as isize),
        };
        // SAFETY: the destinations hold m elements; x m x k elements through either layout,
        // w k elements; the CPU has both levels (checked by the caller).
        unsafe {
            let dst = theirs.as_mut_ptr();
            match kernel {
                Kernel::DotsPerRow => gemm_common::gemv::mixed_gemv_rowmajor(
                    simd, m, 1, k, dst, 1, 1, xp, 1, k as isize, wp, 1, 1, alpha, 1.0,
                ),
                _ => gemm_common::gemv::mixed_gemv_colmajor(
                    simd, m, 1, k, dst, 1, 1, xp, m as isize, 1, wp, 1, 1, alpha, 1.0,
                ),
            }
            ours(
                kernel,
                mine.as_mut_ptr(),
                ProductDims::mnk((m, 1, k)),
                keep,
                (lhs, (wp, 1, 1)),
            );
        }
        [mine, theirs]
    }

    type OursAt = unsafe fn(Kernel, *mut f32, ProductDims, bool, (View, View));

    #[test]
    fn both_widths_follow_the_crates_kernels_at_the_same_width() {
        // The 8-lane kernels against the crate's AVX2 ones on any CPU with AVX2 (AVX-512 ones
        // included, where gemm_into takes the 16 lanes), and the 16-lane ones against its
        // AVX-512 ones where the CPU has them.
        let Some(v3) = gemm_common::simd::V3::try_new() else {
            assert_eq!(lanes(), None, "without AVX2 the crate's kernels run");
            return;
        };
        let v4 = gemm_common::simd::V4::try_new().filter(|_| detected() == Simd::Avx512);
        let rows = [
            (300, 3),
            (257, 7),
            (300, 8),
            (1000, 10),
            (513, 17),
            (700, 40),
            (333, 63),
        ];
        let columns = [(10, 2048), (16, 300), (37, 1000), (5, 3), (300, 3)];
        let cases = rows
            .map(|shape| (Kernel::DotsPerRow, shape))
            .into_iter()
            .chain(columns.map(|shape| (Kernel::ColumnChains, shape)));
        // The outer product at each width against one rounded product per element (gevv's).
        for (m, n) in [(2048, 10), (300, 20)] {
            let (x, w) = (values(m, 4), values(n, 5));
            let products: Vec<f32> = (0..m * n).map(|e| x[e / n] * w[e % n]).collect();
            let operands = ((x.as_ptr(), 1, 1), (w.as_ptr(), n as isize, 1));
            let sixteen = v4.map(|_| (16, at_avx512 as OursAt));
            for (lanes, at) in [(8, at_avx2 as OursAt)].into_iter().chain(sixteen) {
                let mut dst = values(m * n, 6);
                // SAFETY: dst holds m x n elements, x m and w n; the CPU has the level.
                unsafe {
                    at(
                        Kernel::Outer,
                        dst.as_mut_ptr(),
                        ProductDims::mnk((m, n, 1)),
                        false,
                        operands,
                    )
                };
                assert!(
                    same_bits(&dst, &products),
                    "{lanes} lanes, outer ({m}, {n})"
                );
            }
        }
        for (kernel, (m, k)) in cases {
            for keep in [false, true] {
                let [ours, crates] = at_both_ends((v3, at_avx2), kernel, (m, k), keep);
                assert!(
                    same_bits(&ours, &crates),
                    "8 lanes, {kernel:?} ({m}, {k}), {keep}"
                );
                if let Some(v4) = v4 {
                    let [ours, crates] = at_both_ends((v4, at_avx512), kernel, (m, k), keep);
                    assert!(
                        same_bits(&ours, &crates),
                        "16 lanes, {kernel:?} ({m}, {k}), {keep}"
                    );
                }
            }
        }
    }
}
