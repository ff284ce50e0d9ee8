//! Products of f32 matrices on the CPU: ember's own kernels where one applies
//! (`vector_products`, `long_sums`, `short_sums`), else the `gemm` crate in blocks of rows or
//! columns over the pool.

use crate::gemm::gemm_block;
use crate::view::{ProductDims, SendPtr, SendView};
use rayon::prelude::*;

/// The work above which a product is split across the pool by blocks of columns (Burn's own
/// threshold).
pub const PARALLEL_WORK: usize = 192 * 192 * 192;

/// The work above which a product too narrow for column blocks is split by blocks of rows:
/// tabular-mlp's 2,048-row products (61 x 20 and 20 x 10 weights) and fashion-mlp's output
/// layer. About 10 µs of arithmetic, several times a hand-off to the pool.
pub const ROW_BLOCK_WORK: usize = 1 << 17;

/// `dst [m, n] = act((keep ? dst : 0) + lhs [m, k] · rhs [k, n])`, with `dst` row-major; spread
/// over the pool when `split` and the product is large.
///
/// A wide product is split by blocks of columns, a narrow one by blocks of rows; either way
/// each block is a whole single-threaded product on one pool thread. With fashion-mlp's 64-row
/// products, the gemm crate's own split gained about 1.1x at 2 threads, and two column blocks
/// 1.55-1.7x (`make bench-ops`). Each element of `dst` is summed over `k` in the order the
/// whole product would use, so the result is the same bits at any thread count (unit tests
/// check up to 16 and 64 threads); what that takes is written at [`MIN_BLOCK_COLUMNS`] and
/// [`row_blocks`].
/// A product that fits neither is left to the gemm crate's own split when it is large.
///
/// Three kinds of product go to ember's own x86 kernels first, which give the crate's bits:
/// those the crate hands to its matrix-vector and outer-product kernels, a one-unit output
/// layer's (`vector_products`), small outputs over long sums, weight gradients
/// (`long_sums`), and narrow rows over short sums, a small layer's input gradient
/// (`short_sums`).
///
/// # Safety
/// `dst` holds `m * n` writable elements (initialised when `keep`); `lhs` and `rhs` address
/// `m x k` and `k x n` elements through their strides.
pub unsafe fn gemm_into(
    dst: *mut f32,
    dims: ProductDims,
    keep: bool,
    (lhs, rhs): ((*const f32, isize, isize), (*const f32, isize, isize)),
    act: crate::Activation,
    split: bool,
) {
    let threads = rayon::current_num_threads();
    let (serial, pool) = (gemm::Parallelism::None, gemm::Parallelism::Rayon(0));
    let work = dims.work();
    let product = (dst, dims, keep, (lhs, rhs), act);
    // SAFETY (every call): forwarded from the caller.
    #[cfg(target_arch = "x86_64")]
    if act == crate::Activation::Identity
        && let Some(kernel) = crate::vector_products::kernel_for(dims, keep, (lhs, rhs))
    {
        let split = split && work >= crate::vector_products::SPLIT_WORK;
        let operands = (lhs, rhs);
        return unsafe {
            crate::vector_products::product_into(kernel, dst, dims, keep, operands, split)
        };
    }
    #[cfg(target_arch = "x86_64")]
    if act == crate::Activation::Identity && crate::long_sums::applies(dims, (lhs, rhs)) {
        let split = split && work >= ROW_BLOCK_WORK;
        return unsafe { crate::long_sums::product_into(dst, dims, keep, (lhs, rhs), split) };
    }
    #[cfg(target_arch = "x86_64")]
    if act == crate::Activation::Identity && crate::short_sums::applies(dims, (lhs, rhs)) {
        let split = split && work >= ROW_BLOCK_WORK;
        let dst = (dst, dims.cols);
        return unsafe { crate::short_sums::product_into(dst, dims, keep, (lhs, rhs), split) };
    }
    if !split || threads < 2 || work < ROW_BLOCK_WORK {
        return unsafe { gemm_block(dst, dims.cols, dims, keep, (lhs, rhs), act, serial) };
    }
    let columns = threads.min(dims.cols / MIN_BLOCK_COLUMNS);
    if work >= PARALLEL_WORK && columns >= 2 {
        return unsafe { in_blocks(product, Cut::Columns, columns) };
    }
    let rows = row_blocks(dims, threads);
    if rows >= 2 {
        return unsafe { in_blocks(product, Cut::Rows, rows) };
    }
    let parallelism = if work >= PARALLEL_WORK { pool } else { serial };
    unsafe { gemm_block(dst, dims.cols, dims, keep, (lhs, rhs), act, parallelism) }
}

/// A product's operands as [`gemm_into`] takes them: destination, sizes, keep, (lhs, rhs) and
/// the activation.
type Product = (
    *mut f32,
    ProductDims,
    bool,
    ((*const f32, isize, isize), (*const f32, isize, isize)),
    crate::Activation,
);

/// How [`in_blocks`] cuts a product: into blocks of whole columns or of whole rows.
#[derive(Clone, Copy)]
enum Cut {
    Columns,
    Rows,
}

/// [`gemm_into`] as `blocks` blocks cut as `cut`, one whole single-threaded product per pool
/// thread.
///
/// # Safety
/// As for [`gemm_into`].
unsafe fn in_blocks((dst, dims, keep, (lhs, rhs), act): Product, cut: Cut, blocks: usize) {
    let (m, n) = (dims.rows, dims.cols);
    let start = |b: usize| match cut {
        // Column block b starts at b·n/blocks rounded down to whole vectors, so each is more
        // than MIN_BLOCK_COLUMNS - BLOCK_COLUMNS wide, and the last at least n / blocks.
        Cut::Columns => (b * n / blocks) / BLOCK_COLUMNS * BLOCK_COLUMNS,
        Cut::Rows => b * m / blocks,
    };
    let end = match cut {
        Cut::Columns => n,
        Cut::Rows => m,
    };
    let (dst, lhs, rhs) = (SendPtr(dst), SendView(lhs), SendView(rhs));
    (0..blocks).into_par_iter().for_each(|b| {
        let first = start(b);
        let len = if b + 1 == blocks { end } else { start(b + 1) } - first;
        let ((l, l_rs, l_cs), (r, r_rs, r_cs)) = (lhs.get(), rhs.get());
        // SAFETY: block b writes columns (rows) first..first + len of dst, which no other block
        // writes, and reads the same columns of rhs (rows of lhs).
        unsafe {
            let (block_dst, size, operands) = match cut {
                Cut::Columns => {
                    let block_rhs = (r.offset(first as isize * r_cs), r_rs, r_cs);
                    let size = ProductDims { cols: len, ..dims };
                    (dst.get().add(first), size, (lhs.get(), block_rhs))
                }
                Cut::Rows => {
                    let block_lhs = (l.offset(first as isize * l_rs), l_rs, l_cs);
                    let size = ProductDims { rows: len, ..dims };
                    (dst.get().add(first * n), size, (block_lhs, rhs.get()))
                }
            };
            let serial = gemm::Parallelism::None;
            gemm_block(block_dst, n, size, keep, operands, act, serial);
        }
    });
}

/// Rows per block at least: a block of one row would take the gemm crate's vector path, which
/// sums in another order, and a few rows are not worth a hand-off.
const MIN_BLOCK_ROWS: usize = 8;

/// How many blocks of rows an `m x k · k x n` product (`dims`) splits into on `threads` (fewer than 2:
/// not split). Each block must take the gemm crate's path for the whole product, since the
/// paths sum in different orders. A product of at most 64 rows and 64 columns is summed over
/// `k` in chunks of 512, and a larger one in chunks set by the cache; the two agree when
/// `k <= 512`. So where `k` is longer, the blocks of a product that takes the larger path keep
/// more than 64 rows each, and take it too. Likewise for the 256-element kernel below.
pub fn row_blocks(dims: ProductDims, threads: usize) -> usize {
    let ProductDims {
        rows: m,
        cols: n,
        inner: k,
    } = dims;
    let mut least = if k > 512 && m > 64 && n <= 64 {
        MIN_BLOCK_ROWS.max(65)
    } else {
        MIN_BLOCK_ROWS
    };
    // A product of at most 256 elements whose operands both run along `k` takes a kernel
    // that sums in vector lanes; so the blocks of a larger one stay larger.
    if m * n > 256 {
        least = least.max(256 / n.max(1) + 1);
    }
    threads.min(m / least)
}

/// Column blocks start on multiples of this many f32 columns (two 8-lane AVX registers).
const BLOCK_COLUMNS: usize = 16;

/// Columns per block at least, before block edges are rounded to BLOCK_COLUMNS: so every
/// block is wider than 64 columns. The gemm crate sums a product of at most 64 rows and 64
/// columns over `k` in other chunks than a wider one, and narrower blocks would make the
/// result depend on the thread count.
const MIN_BLOCK_COLUMNS: usize = 80;

/// A matrix product into a fresh buffer that the product overwrites whole.
pub fn product(
    dims: ProductDims,
    lhs: (*const f32, isize, isize),
    rhs: (*const f32, isize, isize),
    split: bool,
) -> Vec<f32> {
    let len = dims.rows * dims.cols;
    let mut out: Vec<f32> = Vec::with_capacity(len);
    // SAFETY: `out` has room for m * n elements, which gemm writes without reading (keep is
    // false), so every element is initialised before `set_len`; lhs and rhs come from `view`.
    unsafe {
        let identity = crate::Activation::Identity;
        gemm_into(out.as_mut_ptr(), dims, false, (lhs, rhs), identity, split);
        out.set_len(len);
    }
    out
}
