//! `expf` and `log1pf` on 16 floats at once (AVX-512), with the bits of the glibc the
//! project's records were made with (2.36): binary cross-entropy calls both on every row,
//! forward and backward, and glibc's scalar calls were an eighth of a one-thread tabular-mlp
//! step.
//!
//! Each is glibc's own algorithm, operation for operation, so each lane rounds exactly as the
//! scalar call does; any other formula, however accurate, would change the losses' bits.
//! - `expf` is the FMA build glibc picks on any AVX2 machine (`__expf_fma`,
//!   `sysdeps/ieee754/flt-32/e_expf.c`): in double precision, `x·N/ln 2` rounded to an integer
//!   `k` by adding a shift, a 32-entry table of `2^(i/32)`, a cubic in the remainder; the fused
//!   multiply-adds where the compiler fused them. The constants are glibc's `__exp2f_data`.
//! - `log1pf` is fdlibm's (`s_log1pf.c`), which glibc builds without fused multiply-adds: the
//!   reduction `1 + x = 2^k·(1 + f)` with its correction term `c`, then `s = f / (2 + f)` and a
//!   degree-7 polynomial in `s²`, in single precision.
//!
//! Lanes outside the ranges those fast paths cover (`|x| >= 88` for `expf`; for `log1pf`
//! inputs below 2^-29 or above 1, and the few near 1 where fdlibm takes its branch for
//! `|f| < 2^-20`) are handed to the scalar call. The tests compare every float both functions
//! take in binary cross-entropy. A machine whose libm gives other bits (another glibc, another
//! C library) fails [`matches_libm`]'s probe, and ember keeps the scalar calls there.

use std::arch::x86_64::*;

/// glibc's `__exp2f_data.tab`: `2^(i/32)` as f64 bits, less `i << 47` (added back from `k`).
const EXP2_TABLE: [u64; 32] = [
    0x3ff0000000000000,
    0x3fefd9b0d3158574,
    0x3fefb5586cf9890f,
    0x3fef9301d0125b51,
    0x3fef72b83c7d517b,
    0x3fef54873168b9aa,
    0x3fef387a6e756238,
    0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715,
    0x3feef1a7373aa9cb,
    0x3feedea64c123422,
    0x3feece086061892d,
    0x3feebfdad5362a27,
    0x3feeb42b569d4f82,
    0x3feeab07dd485429,
    0x3feea47eb03a5585,
    0x3feea09e667f3bcd,
    0x3fee9f75e8ec5f74,
    0x3feea11473eb0187,
    0x3feea589994cce13,
    0x3feeace5422aa0db,
    0x3feeb737b0cdc5e5,
    0x3feec49182a3f090,
    0x3feed503b23e255d,
    0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47,
    0x3fef199bdd85529c,
    0x3fef3720dcef9069,
    0x3fef5818dcfba487,
    0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da,
    0x3fefd0765b6e4540,
];

/// `32 / ln 2`, the shift `1.5·2^52` that rounds to an integer, and the cubic's coefficients
/// (glibc's `invln2_scaled`, `shift`, `poly_scaled`), as f64 bits.
const INV_LN2_32: u64 = 0x40471547652b82fe;
const SHIFT: u64 = 0x4338000000000000;
const EXP_POLY: [u64; 3] = [0x3ebc6af84b912394, 0x3f2ebfce50fac4f3, 0x3f962e42ff0c52d6];

/// fdlibm's `Lp7` down to `Lp1`, and `ln 2` split in a high and a low part, as f32 bits.
const LOG1P_POLY: [u32; 7] = [
    0x3e178897, 0x3e1cd04f, 0x3e3a3325, 0x3e638e29, 0x3e924925, 0x3ecccccd, 0x3f2aaaab,
];
const LN2_HI: u32 = 0x3f317180;
const LN2_LO: u32 = 0x3717f7d1;

/// Whether this machine's libm gives the bits these copies give (glibc 2.36's, or any with the
/// same algorithms), checked once on a spread of inputs through every branch. Needs AVX-512.
pub fn matches_libm() -> bool {
    use crate::simd::{Simd, detected};
    static MATCHES: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // SAFETY: AVX-512 is present (checked first).
    *MATCHES.get_or_init(|| detected() == Simd::Avx512 && unsafe { probe() })
}

/// Every 65,521st float (a prime step, so the low bits vary; about 1 ms), both functions, by
/// both routes.
///
/// # Safety
/// The CPU has AVX-512F.
#[target_feature(enable = "avx512f")]
unsafe fn probe() -> bool {
    let inputs = (0..=u32::MAX / 65521).map(|i| f32::from_bits(i * 65521));
    let mut batch = [0f32; 16];
    let mut ours = [[0f32; 16]; 2];
    for (i, x) in inputs.enumerate() {
        batch[i % 16] = x;
        if i % 16 != 15 {
            continue;
        }
        // SAFETY: AVX-512F as the caller vouches; 16 floats in and out.
        unsafe {
            let v = _mm512_loadu_ps(batch.as_ptr());
            _mm512_storeu_ps(ours[0].as_mut_ptr(), exp(v));
            _mm512_storeu_ps(ours[1].as_mut_ptr(), log1p(v));
        }
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits();
        let mut lanes = batch.iter().zip(ours[0].iter().zip(&ours[1]));
        if !lanes.all(|(x, (e, l))| same(x.exp(), *e) && same(x.ln_1p(), *l)) {
            return false;
        }
    }
    true
}

/// `expf` of each lane.
///
/// # Safety
/// The CPU has AVX-512F.
#[target_feature(enable = "avx512f")]
pub unsafe fn exp(x: __m512) -> __m512 {
    let bits = _mm512_castps_si512(x);
    let abstop = _mm512_and_si512(_mm512_srli_epi32(bits, 20), _mm512_set1_epi32(0x7ff));
    // |x| >= 88, infinities and NaN: overflow, underflow and special values, by the scalar call.
    let special = _mm512_cmpgt_epi32_mask(abstop, _mm512_set1_epi32(0x42a));
    let high = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1));
    let (low, high) = (exp_of_8(_mm512_castps512_ps256(x)), exp_of_8(high));
    let both = _mm512_insertf64x4(
        _mm512_castps_pd(_mm512_castps256_ps512(low)),
        _mm256_castps_pd(high),
        1,
    );
    // SAFETY: AVX-512F as the caller vouches.
    unsafe { scalar_lanes(_mm512_castpd_ps(both), x, special, f32::exp) }
}

/// `__expf_fma`'s fast path on 8 floats, in f64 lanes.
#[target_feature(enable = "avx512f")]
fn exp_of_8(x: __m256) -> __m256 {
    let f64s = |b: u64| _mm512_set1_pd(f64::from_bits(b));
    // SAFETY: 8 entries from i, inside the 32.
    let table = |i: usize| unsafe { _mm512_loadu_pd(EXP2_TABLE.as_ptr().add(i).cast()) };
    let x = _mm512_cvtps_pd(x);
    // k = round(x·32/ln 2) in the shifted value's low bits, r = x·32/ln 2 - k.
    let shifted = _mm512_fmadd_pd(f64s(INV_LN2_32), x, f64s(SHIFT));
    let k = _mm512_castpd_si512(shifted);
    let r = _mm512_fmsub_pd(f64s(INV_LN2_32), x, _mm512_sub_pd(shifted, f64s(SHIFT)));
    // s = 2^(k/32): the table's entry k mod 32 (two lookups of 16, bit 4 choosing), k/32 added
    // to its exponent.
    let i = _mm512_and_si512(k, _mm512_set1_epi64(31));
    let low = _mm512_permutex2var_pd(table(0), i, table(8));
    let high = _mm512_permutex2var_pd(table(16), i, table(24));
    let entry = _mm512_mask_blend_pd(_mm512_test_epi64_mask(i, _mm512_set1_epi64(16)), low, high);
    let s = _mm512_add_epi64(_mm512_castpd_si512(entry), _mm512_slli_epi64(k, 47));
    // (C0·r + C1)·r² + (C2·r + 1), times s.
    let z = _mm512_fmadd_pd(r, f64s(EXP_POLY[0]), f64s(EXP_POLY[1]));
    let y = _mm512_fmadd_pd(r, f64s(EXP_POLY[2]), _mm512_set1_pd(1.0));
    let y = _mm512_fmadd_pd(z, _mm512_mul_pd(r, r), y);
    _mm512_cvtpd_ps(_mm512_mul_pd(y, _mm512_castsi512_pd(s)))
}

/// `log1pf` of each lane.
///
/// # Safety
/// The CPU has AVX-512F.
#[target_feature(enable = "avx512f")]
pub unsafe fn log1p(x: __m512) -> __m512 {
    let f32s = |b: u32| _mm512_set1_ps(f32::from_bits(b));
    let ints = _mm512_set1_epi32;
    let one = _mm512_set1_ps(1.0);
    let hx = _mm512_castps_si512(x);
    let in_range = _mm512_cmpge_epi32_mask(hx, ints(0x31000000))
        & _mm512_cmple_epi32_mask(hx, ints(0x3f800000));
    // Above sqrt(2) - 1: 1 + x = 2^k·(1 + f), with c the rounding error of 1 + x over it.
    let reduced = _mm512_cmpgt_epi32_mask(hx, ints(0x3ed413d6));
    let u = _mm512_add_ps(x, one);
    let k = _mm512_sub_epi32(_mm512_srai_epi32(_mm512_castps_si512(u), 23), ints(127));
    let c_above = _mm512_sub_ps(one, _mm512_sub_ps(u, x));
    let c_below = _mm512_sub_ps(x, _mm512_sub_ps(u, one));
    let k_positive = _mm512_cmpgt_epi32_mask(k, _mm512_setzero_si512());
    let c = _mm512_div_ps(_mm512_mask_blend_ps(k_positive, c_below, c_above), u);
    let hu = _mm512_and_si512(_mm512_castps_si512(u), ints(0x7fffff));
    // A mantissa above sqrt(2) is halved into [sqrt(2)/2, 1), and k counts it.
    let halved = _mm512_cmpgt_epi32_mask(hu, ints(0x3504f6));
    let k = _mm512_maskz_mov_epi32(reduced, _mm512_mask_add_epi32(k, halved, k, ints(1)));
    let exponent = _mm512_mask_blend_epi32(halved, ints(0x3f800000), ints(0x3f000000));
    let f_reduced = _mm512_sub_ps(_mm512_castsi512_ps(_mm512_or_si512(hu, exponent)), one);
    // fdlibm's own branch where its hu is 0: 1 + x a power of two (f = 0), or a halved mantissa
    // of 0x7ffffd and up (|f| < 2^-20), by the scalar call.
    let near_one = _mm512_srli_epi32(_mm512_sub_epi32(ints(0x800000), hu), 2);
    let hu_after = _mm512_mask_blend_epi32(halved, hu, near_one);
    let small_f = reduced & _mm512_cmpeq_epi32_mask(hu_after, _mm512_setzero_si512());
    let f = _mm512_mask_blend_ps(reduced, x, f_reduced);
    let hfsq = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5), f), f);
    let s = _mm512_div_ps(f, _mm512_add_ps(_mm512_set1_ps(2.0), f));
    let z = _mm512_mul_ps(s, s);
    let mut r = f32s(LOG1P_POLY[0]);
    for &lp in &LOG1P_POLY[1..] {
        r = _mm512_add_ps(_mm512_mul_ps(r, z), f32s(lp));
    }
    let t = _mm512_mul_ps(_mm512_add_ps(_mm512_mul_ps(r, z), hfsq), s);
    // k = 0: f - (hfsq - s·(hfsq + R)); else k·ln2_hi - ((hfsq - (s·(hfsq + R) + (k·ln2_lo +
    // c))) - f).
    let without_k = _mm512_sub_ps(f, _mm512_sub_ps(hfsq, t));
    let kf = _mm512_cvtepi32_ps(k);
    let low = _mm512_add_ps(_mm512_mul_ps(kf, f32s(LN2_LO)), c);
    let rest = _mm512_sub_ps(_mm512_sub_ps(hfsq, _mm512_add_ps(low, t)), f);
    let with_k = _mm512_sub_ps(_mm512_mul_ps(f32s(LN2_HI), kf), rest);
    let has_k = _mm512_test_epi32_mask(k, k);
    let out = _mm512_mask_blend_ps(has_k, without_k, with_k);
    // SAFETY: AVX-512F as the caller vouches.
    unsafe { scalar_lanes(out, x, !in_range | small_f, f32::ln_1p) }
}

/// `out` with the lanes in `lanes` replaced by `f` of `x`'s.
///
/// # Safety
/// The CPU has AVX-512F.
#[target_feature(enable = "avx512f")]
unsafe fn scalar_lanes(out: __m512, x: __m512, lanes: __mmask16, f: fn(f32) -> f32) -> __m512 {
    if lanes == 0 {
        return out;
    }
    let (mut xs, mut outs) = ([0f32; 16], [0f32; 16]);
    // SAFETY: 16 floats each way.
    unsafe {
        _mm512_storeu_ps(xs.as_mut_ptr(), x);
        _mm512_storeu_ps(outs.as_mut_ptr(), out);
    }
    for (lane, (o, &x)) in outs.iter_mut().zip(&xs).enumerate() {
        if lanes >> lane & 1 == 1 {
            *o = f(x);
        }
    }
    // SAFETY: 16 floats.
    unsafe { _mm512_loadu_ps(outs.as_ptr()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::{Simd, detected};
    use rayon::prelude::*;

    /// How many of the floats whose bits `bits` gives for 0..count differ between `ours` and
    /// `scalar` (NaNs too: sign and payload), 16 at a time over the pool.
    fn mismatches(
        count: u64,
        bits: impl Fn(u64) -> u32 + Sync,
        ours: unsafe fn(__m512) -> __m512,
        scalar: fn(f32) -> f32,
    ) -> usize {
        let same = |x: f32, o: f32| scalar(x).to_bits() == o.to_bits();
        (0..count.div_ceil(16))
            .into_par_iter()
            .map(|b| {
                let lane = |l: u64| f32::from_bits(bits((b * 16 + l).min(count - 1)));
                let lanes: [f32; 16] = std::array::from_fn(|l| lane(l as u64));
                let mut out = [0f32; 16];
                // SAFETY: the test runs this only with AVX-512F; 16 floats each way.
                unsafe {
                    _mm512_storeu_ps(out.as_mut_ptr(), ours(_mm512_loadu_ps(lanes.as_ptr())))
                };
                lanes.iter().zip(out).filter(|&(&x, o)| !same(x, o)).count()
            })
            .sum()
    }

    #[test]
    fn every_float_binary_cross_entropy_takes_gets_the_libm_bits() {
        if detected() != Simd::Avx512 {
            // Without AVX-512 nothing calls these copies, and the probe says so.
            assert!(!matches_libm());
            return;
        }
        assert!(
            matches_libm(),
            "this libm's expf or log1pf is not glibc 2.36's"
        );
        // exp(-|z|) of every logit: every float from -0 down, infinity and NaNs included.
        let from = |first: u32| move |i: u64| first + i as u32;
        assert_eq!(mismatches(1 << 31, from(1 << 31), exp, f32::exp), 0, "expf");
        // log1p(exp(-|z|)): every float from 0 to 1.
        assert_eq!(
            mismatches(0x3f80_0001, from(0), log1p, f32::ln_1p),
            0,
            "log1pf"
        );
        // Every 997th float of the rest, through the scalar lanes.
        let step = |i: u64| (i * 997) as u32;
        assert_eq!(
            mismatches((1 << 31) / 997, step, exp, f32::exp),
            0,
            "expf, x >= 0"
        );
        let above_one = |i: u64| 0x3f80_0001 + (i * 997) as u32;
        let count = (u32::MAX - 0x3f80_0001) as u64 / 997;
        assert_eq!(
            mismatches(count, above_one, log1p, f32::ln_1p),
            0,
            "log1pf, x > 1"
        );
    }
}
