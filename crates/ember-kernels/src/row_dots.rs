//! Dot products of two matrices' rows, `a_i · b_j` for row-major `a [m, len]` and `b [n, len]`,
//! kept as `LANES` partial sums each (one per vector lane) across several calls, and added up
//! once at the end ([`reduce`]).
//!
//! Why: a convolution's weight gradient is `dz [cout, pixels] · col [patch, pixels]ᵀ`, both
//! operands running along the pixels. Where the patch is a few rows (a first layer over grey
//! or RGB images: 9 or 27 for a 3x3 kernel), the gemm crate's blocked kernels run mostly in
//! their edges and their packing, and `col` had to be transposed for them first: fashion-cnn's
//! first layer's weight gradient ran at about 24 GFLOP/s on an AVX-512 Xeon that way. Here a
//! block of `b`'s rows is held against one row of `a` in registers, one vector of lanes each,
//! and the lanes keep accumulating across the images of a chunk: the horizontal sums, which
//! would cost as much as a short row's products, come once per chunk.
//!
//! The order of every sum is fixed by `len` and the calls' order (lane `l` adds the products
//! at `l`, `l + LANES`, ..., then the lanes are added in order), so the bits do not depend on
//! the thread count. They do depend on the CPU level: the vector levels fuse each multiply-add.

use crate::{elementwise::dispatch, elementwise::madd};

/// Partial sums per dot product: a 512-bit vector of f32 (two 256-bit ones on AVX2).
pub const LANES: usize = 16;

/// One dot product's partial sums.
pub(crate) type Lanes = [f32; LANES];

/// `acc[i·n + j] += a_i · b_j`, lane by lane, for `a [m, len]` and `b [n, len]` row-major.
#[inline(always)]
fn accumulate_generic<const FMA: bool>(
    acc: &mut [Lanes],
    a: &[f32],
    b: &[f32],
    (m, n, len): (usize, usize, usize),
) {
    assert!(
        acc.len() >= m * n && a.len() >= m * len && b.len() >= n * len,
        "row dots: an operand is short"
    );
    if len == 0 {
        // Empty rows: every dot is zero (and `chunks_exact` takes no size 0).
        return;
    }
    for (i, row) in a.chunks_exact(len).take(m).enumerate() {
        let sums = &mut acc[i * n..][..n];
        let mut j = 0;
        while j < n {
            let (sums, rows) = (&mut sums[j..], &b[j * len..]);
            // A 3x3 kernel's patch is 9 rows a channel; other patches go 8 rows a block.
            j += match n - j {
                r if n % 9 == 0 && r >= 9 => block::<FMA, 9>(sums, row, rows),
                r if r >= 8 => block::<FMA, 8>(sums, row, rows),
                r if r >= 4 => block::<FMA, 4>(sums, row, rows),
                r if r >= 2 => block::<FMA, 2>(sums, row, rows),
                _ => block::<FMA, 1>(sums, row, rows),
            };
        }
    }
}

/// `sums[g] += row · b_g` for `G` rows of `b` from its start, each `row.len()` long; returns
/// `G`. The sums stay in registers over the whole row; a last partial vector is read through a
/// zero-padded copy, so it adds `+0.0` products to its unused lanes.
#[inline(always)]
fn block<const FMA: bool, const G: usize>(sums: &mut [Lanes], row: &[f32], b: &[f32]) -> usize {
    let len = row.len();
    assert!(
        sums.len() >= G && b.len() >= G * len,
        "row dots: a block is short"
    );
    let mut acc = [[0.0; LANES]; G];
    acc.copy_from_slice(&sums[..G]);
    let whole = len / LANES;
    // Unchecked reads: with a bounds check per vector the compiler kept the sums in memory.
    let read = |p: *const f32, at: usize| -> Lanes {
        // SAFETY: the callers read `at..at + LANES` inside `row` or inside row g of `b`, which
        // holds `len` elements from `g·len` (asserted above).
        unsafe { p.add(at).cast::<Lanes>().read_unaligned() }
    };
    for v in 0..whole {
        let x = read(row.as_ptr(), v * LANES);
        for (g, s) in acc.iter_mut().enumerate() {
            madd_lanes::<FMA>(s, &x, &read(b.as_ptr(), g * len + v * LANES));
        }
    }
    if whole * LANES < len {
        // Element by element: a copy of the tail (a `memcpy` call with its spills) cost more
        // than the row's products.
        let padded = |r: &[f32]| -> Lanes {
            std::array::from_fn(|l| r.get(whole * LANES + l).copied().unwrap_or(0.0))
        };
        let x = padded(row);
        for (g, s) in acc.iter_mut().enumerate() {
            madd_lanes::<FMA>(s, &x, &padded(&b[g * len..][..len]));
        }
    }
    sums[..G].copy_from_slice(&acc);
    G
}

/// `s += x · y`, lane by lane, fused where `FMA`.
#[inline(always)]
fn madd_lanes<const FMA: bool>(s: &mut Lanes, x: &Lanes, y: &Lanes) {
    for l in 0..LANES {
        s[l] = madd::<FMA>(x[l], y[l], s[l]);
    }
}

#[rustfmt::skip]
dispatch!(accumulate, accumulate_at, accumulate_generic, (acc: &mut [Lanes], a: &[f32], b: &[f32], dims: (usize, usize, usize)));

/// `dst[k] += Σ acc[k]`, the lanes added in order from +0.0.
pub fn reduce(acc: &[Lanes], dst: &mut [f32]) {
    for (d, lanes) in dst.iter_mut().zip(acc) {
        *d += lanes.iter().fold(0.0, |s, v| s + v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::{Simd, detected};

    /// Values of mixed signs and magnitudes from the index alone.
    fn values(len: usize, salt: usize) -> Vec<f32> {
        (0..len)
            .map(|i| (((i * 7919 + salt * 104_729) % 2003) as f32 / 1001.0 - 1.0) * 1.7)
            .collect()
    }

    /// Two calls' accumulated dots, reduced, against f64 dot products, at every level this CPU
    /// has: block widths of 9, 8, 4, 2 and 1 rows, and rows with and without a partial vector.
    #[test]
    fn accumulated_dots_are_the_sums_of_products() {
        for (m, n, len) in [
            (3, 9, 49),
            (2, 27, 16),
            (4, 15, 33),
            (1, 1, 5),
            (5, 7, 160),
            (2, 3, 0),
        ] {
            let (a, b) = (values(m * len, 1), values(n * len, 2));
            let (a2, b2) = (values(m * len, 3), values(n * len, 4));
            let exact = |i: usize, j: usize| -> f64 {
                let dot = |a: &[f32], b: &[f32]| -> f64 {
                    let (a, b) = (&a[i * len..][..len], &b[j * len..][..len]);
                    a.iter()
                        .zip(b)
                        .map(|(x, y)| f64::from(*x) * f64::from(*y))
                        .sum()
                };
                dot(&a, &b) + dot(&a2, &b2)
            };
            for level in detected().up_to() {
                let mut acc = vec![[0.0; LANES]; m * n];
                accumulate_at(level, &mut acc, &a, &b, (m, n, len));
                accumulate_at(level, &mut acc, &a2, &b2, (m, n, len));
                let mut dst = vec![0.5; m * n];
                reduce(&acc, &mut dst);
                for (k, got) in dst.iter().enumerate() {
                    let want = 0.5 + exact(k / n, k % n);
                    let close = (f64::from(*got) - want).abs() <= 1e-5 * (1.0 + want.abs());
                    assert!(
                        close,
                        "{m}x{n}x{len} at {level}, dot {k}: {got} against {want}"
                    );
                }
            }
        }
    }

    /// At every level this CPU has, each lane adds its products in order, `l`, `l + LANES`,
    /// ...: fused at the vector levels (so AVX2 and AVX-512 give the same bits), unfused at the
    /// portable one. Blocks of 9 and 8 rows, and rows with a partial last vector.
    #[test]
    fn every_level_adds_each_lanes_products_in_order() {
        for (m, n, len) in [(2, 9, 37), (3, 18, 53), (2, 12, 32)] {
            let (a, b) = (values(m * len, 5), values(n * len, 6));
            for level in detected().up_to() {
                let mut acc = vec![[0.0; LANES]; m * n];
                accumulate_at(level, &mut acc, &a, &b, (m, n, len));
                let add = |s: f32, x: f32, y: f32| match level {
                    Simd::Portable => s + x * y,
                    _ => x.mul_add(y, s),
                };
                for (k, lanes) in acc.iter().enumerate() {
                    let (i, j) = (k / n, k % n);
                    for (l, got) in lanes.iter().enumerate() {
                        let terms = (l..len).step_by(LANES);
                        let want =
                            terms.fold(0.0f32, |s, p| add(s, a[i * len + p], b[j * len + p]));
                        let at = format!("{m}x{n}x{len} at {level}, dot {k}, lane {l}");
                        assert_eq!(got.to_bits(), want.to_bits(), "{at}");
                    }
                }
            }
        }
    }
}
