//! Binary cross-entropy on logits for K replicas on the CPU: each replica's mean loss in one
//! pass, and the logits' gradient in one more. Through Burn's operations the stable form
//! `relu(z) - z·y + log1p(exp(-|z|))` and its mean are eight operations on `[K, n, 1]` tensors
//! forward and more backward, each a serial pass with its own allocation; here the rows' terms
//! are one pass, spread over the pool when there are enough rows, then each replica's sum in
//! row order; the gradient is one more pass, then each replica's scale.
//!
//! One model's loss ([`mean_forward`], [`mean_backward`]) keeps the bits of Burn's own
//! `BinaryCrossEntropyLoss` on logits: each row's term by the same operations, then Burn's mean.
//!
//! On AVX-512 every pass takes 16 rows at a time ([`lanes`]) with copies of glibc's `expf` and
//! `log1pf` that give its bits (`ops::vector_libm`), where a probe finds this machine's libm
//! does.

use super::contiguous::contiguous;
use burn::backend::Flex;
use burn::backend::flex::FlexTensor;
use burn::tensor::TensorData;
use burn::tensor::ops::FloatTensorOps;
use rayon::prelude::*;

/// Elements above which the rows are spread over the pool: each costs an `exp` and a `log1p`
/// (tens of ns), so far fewer than an element-wise kernel's threshold. tabular-mlp's batch of
/// 2,048 rows is above it.
const PARALLEL_ELEMENTS: usize = 1024;

/// Elements per piece of work on the pool.
const CHUNK: usize = 512;

/// Whether `elements` are worth spreading over the pool.
fn parallel(elements: usize) -> bool {
    elements >= PARALLEL_ELEMENTS && rayon::current_num_threads() > 1
}

/// `(replicas, rows per replica)` of logits `[K, n, ...]`.
fn dims(logits: &FlexTensor) -> (usize, usize) {
    let shape = logits.layout().shape();
    let reps = shape[0];
    (reps, shape.num_elements() / reps.max(1))
}

/// `log1p(exp(-|z|))` and `exp(-|z|)`.
fn softplus_of_minus_abs(z: f32) -> (f32, f32) {
    let s = (-z.abs()).exp();
    (s.ln_1p(), s)
}

/// One row's term of a replica's loss: `max(z, 0) - z·y + log1p(exp(-|z|))`.
fn replica_term(z: f32, t: f32) -> f32 {
    z.max(0.0) - z * t + softplus_of_minus_abs(z).0
}

/// One row's `sigmoid(z) - y`, the replicas' gradient before its scale.
fn sigmoid_less_target(z: f32, t: f32) -> f32 {
    let s = softplus_of_minus_abs(z).1;
    let sigmoid = if z >= 0.0 {
        1.0 / (1.0 + s)
    } else {
        s / (1.0 + s)
    };
    sigmoid - t
}

/// Each replica's mean loss `[K]` for logits `[K, n, 1]` and 0/1 targets of the same shape.
pub fn forward(logits: FlexTensor, y: FlexTensor) -> FlexTensor {
    assert_eq!(logits.layout().shape(), y.layout().shape(), "shapes differ");
    let (reps, n) = dims(&logits);
    // Each row's term on any thread; each replica's sum in row order, in f64, on one.
    let terms = rows_of(logits, y, replica_term, lanes::replica_terms());
    let losses: Vec<f32> = (0..reps)
        .map(|r| {
            let sum: f64 = terms[r * n..][..n].iter().map(|&v| f64::from(v)).sum();
            (sum / n as f64) as f32
        })
        .collect();
    FlexTensor::from_data(TensorData::new(losses, [reps]))
}

/// The logits' gradient, `(sigmoid(z) - y) / n` times each replica's incoming gradient `[K]`.
pub fn backward(logits: FlexTensor, y: FlexTensor, dloss: FlexTensor) -> FlexTensor {
    let shape = logits.layout().shape().clone();
    let (reps, n) = dims(&logits);
    let (dloss, dl_range) = contiguous(dloss, reps);
    let dloss = &dloss.storage::<f32>()[dl_range];
    let scales: Vec<f32> = dloss.iter().map(|&dl| dl / n as f32).collect();
    let mut grads = rows_of(
        logits,
        y,
        sigmoid_less_target,
        lanes::sigmoids_less_targets(),
    );
    for (replica, &scale) in grads.chunks_mut(n.max(1)).zip(&scales) {
        replica.iter_mut().for_each(|g| *g *= scale);
    }
    FlexTensor::from_data(TensorData::new(grads, shape))
}

/// `log(sigmoid(z))` as Burn's CPU backend computes it (`log_sigmoid`).
fn log_sigmoid(z: f32) -> f32 {
    if z >= 0.0 {
        -((-z).exp().ln_1p())
    } else {
        z - z.exp().ln_1p()
    }
}

/// `sigmoid(x)` as Burn's CPU backend computes it inside `log_sigmoid`'s backward.
fn sigmoid(x: f32) -> f32 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// A pass that writes the first rows of `out` (a multiple of 16) from logits and targets, 16
/// rows at a time, each with the bits of the pass's one-row function, and returns how many;
/// with the pass's constant (the gradient's `g`; the loss has none).
type Lanes = (fn(&[f32], &[f32], &mut [f32], f32) -> usize, f32);

/// One row's term of [`mean_forward`]: `(1 - y)·z - log_sigmoid(z)`, as Burn's operations
/// compute it.
fn term(z: f32, t: f32) -> f32 {
    (-t + 1.0) * z - log_sigmoid(z)
}

/// One row's gradient of [`mean_backward`], given `g = dloss / n`.
fn gradient(g: f32, z: f32, t: f32) -> f32 {
    g * (-t + 1.0) + -g * sigmoid(-z)
}

/// `f(z, y)` of each of the `n` rows of logits and targets into a new `[n]` buffer, the rows
/// that `lanes` takes by it; spread over the pool when there are enough rows.
fn rows_of(
    logits: FlexTensor,
    y: FlexTensor,
    f: impl Fn(f32, f32) -> f32 + Sync,
    lanes: Option<Lanes>,
) -> Vec<f32> {
    let n = logits.layout().num_elements();
    let (z, z_range) = contiguous(logits, n);
    let (y, y_range) = contiguous(y, n);
    let (z, y) = (&z.storage::<f32>()[z_range], &y.storage::<f32>()[y_range]);
    let mut out = vec![0f32; n];
    let each = |(piece, out): (usize, &mut [f32])| {
        let first = piece * CHUNK;
        let (z, y) = (&z[first..][..out.len()], &y[first..][..out.len()]);
        let done = lanes.map_or(0, |(lanes, constant)| lanes(z, y, out, constant));
        for ((o, &z), &t) in out[done..].iter_mut().zip(&z[done..]).zip(&y[done..]) {
            *o = f(z, t);
        }
    };
    match parallel(n) {
        true => out.par_chunks_mut(CHUNK).enumerate().for_each(each),
        false => out.chunks_mut(CHUNK).enumerate().for_each(each),
    }
    out
}

/// One model's mean loss `[1]` for logits and 0/1 targets of the same shape, with the bits of
/// Burn's `BinaryCrossEntropyLoss` on logits (`burn::nn::loss`): each row's term
/// `(1 - y)·z - log_sigmoid(z)` by the same operations in one pass, then Burn's own mean, so
/// the sum runs in the same order. Burn's version is six passes on the driving thread, each
/// with its own allocation (a tenth of a one-thread tabular-mlp step).
pub fn mean_forward(logits: FlexTensor, y: FlexTensor) -> FlexTensor {
    assert_eq!(logits.layout().shape(), y.layout().shape(), "shapes differ");
    let n = logits.layout().num_elements();
    let terms = rows_of(logits, y, term, lanes::terms());
    Flex::float_mean(FlexTensor::from_data(TensorData::new(terms, [n])))
}

/// The logits' gradient of [`mean_forward`] given the loss's gradient `[1]`, with the bits of
/// Burn's autodiff through its operations: the mean hands each row `g = (1/n)·dloss`; the
/// product `(1 - y)·z` passes back `g·(1 - y)`, and `log_sigmoid` under the subtraction
/// `-g·sigmoid(-z)`; the two are added (in either order: the same bits).
pub fn mean_backward(logits: FlexTensor, y: FlexTensor, dloss: FlexTensor) -> FlexTensor {
    let shape = logits.layout().shape().clone();
    let n = shape.num_elements();
    let (dloss, dl_range) = contiguous(dloss, 1);
    // Burn's mean scales by 1/n as an f64 scalar, which its CPU backend applies as f32.
    let g = (1.0 / n as f64) as f32 * dloss.storage::<f32>()[dl_range][0];
    let grads = rows_of(logits, y, |z, t| gradient(g, z, t), lanes::gradients(g));
    FlexTensor::from_data(TensorData::new(grads, shape))
}

/// [`term`] and [`gradient`] on 16 rows at a time, on AVX-512 where `ops::vector_libm`'s
/// copies of `expf` and `log1pf` give this machine's libm bits: the same operations lane by
/// lane, each branch's `exp` argument chosen as the scalar code chooses it, the branches'
/// results as blends.
mod lanes {
    use super::Lanes;
    #[cfg(target_arch = "x86_64")]
    use {super::super::vector_libm, std::arch::x86_64::*};

    /// The pass of a 16-row `kernel` with its `constant` where the copies give this machine's
    /// libm bits (AVX-512 then), else `None`.
    macro_rules! pass {
        ($kernel:ident, $constant:expr) => {{
            #[cfg(target_arch = "x86_64")]
            if vector_libm::matches_libm() {
                // SAFETY: AVX-512F, as matches_libm found.
                let lanes: fn(&[f32], &[f32], &mut [f32], f32) -> usize =
                    |z, t, out, c| unsafe { each_16(z, t, out, c, $kernel) };
                return Some((lanes, $constant));
            }
            #[cfg(not(target_arch = "x86_64"))]
            let _ = $constant;
            None
        }};
    }

    /// The pass of [`super::term`], where it can run.
    pub(super) fn terms() -> Option<Lanes> {
        pass!(term_16, 0.0)
    }

    /// The pass of [`super::gradient`] with `g`, where it can run.
    pub(super) fn gradients(g: f32) -> Option<Lanes> {
        pass!(gradient_16, g)
    }

    /// The pass of [`super::replica_term`], where it can run.
    pub(super) fn replica_terms() -> Option<Lanes> {
        pass!(replica_term_16, 0.0)
    }

    /// The pass of [`super::sigmoid_less_target`], where it can run.
    pub(super) fn sigmoids_less_targets() -> Option<Lanes> {
        pass!(sigmoid_less_target_16, 0.0)
    }

    /// `f` on each 16 rows of `z` and `t` into `out`; how many rows that was.
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn each_16(
        z: &[f32],
        t: &[f32],
        out: &mut [f32],
        constant: f32,
        f: unsafe fn(__m512, __m512, f32) -> __m512,
    ) -> usize {
        let rows = out.len().min(z.len()).min(t.len()) / 16 * 16;
        for i in (0..rows).step_by(16) {
            // SAFETY: rows i..i + 16 of each slice; AVX-512F as the caller vouches.
            unsafe {
                let (z, t) = (
                    _mm512_loadu_ps(z.as_ptr().add(i)),
                    _mm512_loadu_ps(t.as_ptr().add(i)),
                );
                _mm512_storeu_ps(out.as_mut_ptr().add(i), f(z, t, constant));
            }
        }
        rows
    }

    /// `-x` of each lane, as Rust's negation: the sign bit flipped.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    fn negated(x: __m512) -> __m512 {
        let sign = _mm512_set1_epi32(i32::MIN);
        _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), sign))
    }

    /// [`super::term`] of 16 rows.
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn term_16(z: __m512, t: __m512, _: f32) -> __m512 {
        // log_sigmoid: -log1p(exp(-z)) where z >= 0, z - log1p(exp(z)) elsewhere (NaN included).
        let non_negative = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(z, _mm512_setzero_ps());
        let exp_of = _mm512_mask_blend_ps(non_negative, z, negated(z));
        // SAFETY: AVX-512F as the caller vouches.
        let softplus = unsafe { vector_libm::log1p(vector_libm::exp(exp_of)) };
        let log_sigmoid =
            _mm512_mask_blend_ps(non_negative, _mm512_sub_ps(z, softplus), negated(softplus));
        let one_minus_t = _mm512_add_ps(negated(t), _mm512_set1_ps(1.0));
        _mm512_sub_ps(_mm512_mul_ps(one_minus_t, z), log_sigmoid)
    }

    /// `exp(-|z|)` of each lane, as [`super::softplus_of_minus_abs`] takes it (the sign bit
    /// set).
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn exp_of_minus_abs(z: __m512) -> __m512 {
        let sign = _mm512_set1_epi32(i32::MIN);
        let minus_abs = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(z), sign));
        // SAFETY: AVX-512F as the caller vouches.
        unsafe { vector_libm::exp(minus_abs) }
    }

    /// [`super::replica_term`] of 16 rows. `max(z, 0)` gives 0 for a NaN z, as Rust's `max`
    /// does; its zero's sign can't show in the term, whose `log1p(exp(-0))` is ln 2.
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn replica_term_16(z: __m512, t: __m512, _: f32) -> __m512 {
        // SAFETY: AVX-512F as the caller vouches.
        let softplus = unsafe { vector_libm::log1p(exp_of_minus_abs(z)) };
        let relu = _mm512_max_ps(z, _mm512_setzero_ps());
        _mm512_add_ps(_mm512_sub_ps(relu, _mm512_mul_ps(z, t)), softplus)
    }

    /// [`super::sigmoid_less_target`] of 16 rows.
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn sigmoid_less_target_16(z: __m512, t: __m512, _: f32) -> __m512 {
        // SAFETY: AVX-512F as the caller vouches.
        let s = unsafe { exp_of_minus_abs(z) };
        let one = _mm512_set1_ps(1.0);
        let non_negative = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(z, _mm512_setzero_ps());
        let numerator = _mm512_mask_blend_ps(non_negative, s, one);
        _mm512_sub_ps(_mm512_div_ps(numerator, _mm512_add_ps(one, s)), t)
    }

    /// [`super::gradient`] of 16 rows with `g`.
    ///
    /// # Safety
    /// The CPU has AVX-512F.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn gradient_16(z: __m512, t: __m512, g: f32) -> __m512 {
        // sigmoid(x) at x = -z: 1 / (1 + exp(-x)) where x >= 0, e / (1 + e) with e = exp(x)
        // elsewhere.
        let x = negated(z);
        let x_non_negative = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(x, _mm512_setzero_ps());
        // SAFETY: AVX-512F as the caller vouches.
        let e = unsafe { vector_libm::exp(_mm512_mask_blend_ps(x_non_negative, x, z)) };
        let one = _mm512_set1_ps(1.0);
        let numerator = _mm512_mask_blend_ps(x_non_negative, e, one);
        let sigmoid = _mm512_div_ps(numerator, _mm512_add_ps(one, e));
        let g = _mm512_set1_ps(g);
        let kept = _mm512_mul_ps(g, _mm512_add_ps(negated(t), one));
        _mm512_add_ps(kept, _mm512_mul_ps(negated(g), sigmoid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(values: Vec<f32>, reps: usize) -> FlexTensor {
        let n = values.len() / reps;
        FlexTensor::from_data(TensorData::new(values, [reps, n, 1]))
    }

    fn bits(t: FlexTensor) -> Vec<u32> {
        let n = t.layout().num_elements();
        let (t, range) = contiguous(t, n);
        t.storage::<f32>()[range]
            .iter()
            .map(|v| v.to_bits())
            .collect()
    }

    /// Loss and gradient bits of 3 replicas of 1,500 rows on a pool of `threads`.
    fn run(threads: usize) -> (Vec<u32>, Vec<u32>) {
        let (reps, n) = (3, 1500);
        let logits: Vec<f32> = (0..reps * n)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        let targets: Vec<f32> = (0..reps * n).map(|i| (i % 3 == 0) as u8 as f32).collect();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let loss = forward(tensor(logits.clone(), reps), tensor(targets.clone(), reps));
            let dloss = FlexTensor::from_data(TensorData::new(vec![1.0f32, 0.5, 2.0], [reps]));
            let grad = backward(tensor(logits, reps), tensor(targets, reps), dloss);
            (bits(loss), bits(grad))
        })
    }

    #[test]
    fn sixteen_rows_at_a_time_give_each_rows_bits() {
        // Zeros and NaNs of both signs, infinities, the edges of expf's and log1pf's fast
        // paths, a subnormal, and ordinary logits; targets 0 and 1.
        let special = [
            0.0,
            -0.0,
            f32::NAN,
            -f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ];
        let edges = [
            88.0, -88.0, 87.99, -87.99, 104.0, -104.0, 1e-40, -1e-40, 1e-8, -1e-8,
        ];
        let ordinary = (0..32).map(|i| (i as f32 - 15.5) * 0.77);
        let z: Vec<f32> = special.into_iter().chain(edges).chain(ordinary).collect();
        let t: Vec<f32> = (0..z.len()).map(|i| (i % 2) as f32).collect();
        let g = 0.37f32;
        let (Some(terms), Some(gradients)) = (lanes::terms(), lanes::gradients(g)) else {
            // No AVX-512, or a libm with other bits: the scalar functions do every row.
            #[cfg(target_arch = "x86_64")]
            assert!(!crate::ops::vector_libm::matches_libm());
            return;
        };
        let (replica_terms, sigmoids) = (lanes::replica_terms(), lanes::sigmoids_less_targets());
        let (Some(replica_terms), Some(sigmoids)) = (replica_terms, sigmoids) else {
            panic!("one model's passes run here, the replicas' too");
        };
        for ((pass, constant), one) in [
            (terms, &(|z, t| term(z, t)) as &dyn Fn(f32, f32) -> f32),
            (gradients, &|z, t| gradient(g, z, t)),
            (replica_terms, &replica_term),
            (sigmoids, &sigmoid_less_target),
        ] {
            let mut out = vec![0f32; z.len()];
            assert_eq!(pass(&z, &t, &mut out, constant), z.len() / 16 * 16);
            for ((&z, &t), &o) in z.iter().zip(&t).zip(&out).take(z.len() / 16 * 16) {
                // Which NaN an operation on two NaNs returns is the compiler's choice (it may
                // swap an addition's operands), so NaNs match any NaN; every other bit must.
                let want = one(z, t);
                let same = o.to_bits() == want.to_bits() || (o.is_nan() && want.is_nan());
                assert!(
                    same,
                    "z {z} ({:#x}), y {t}: {o} against {want}",
                    z.to_bits()
                );
            }
        }
    }

    #[test]
    fn rows_over_the_pool_give_the_one_thread_bits() {
        let one = run(1);
        // The first replica's loss, summed here in f64 in row order.
        let z = |i: usize| ((i * 37 % 101) as f32 - 50.0) / 7.0;
        let sum: f64 = (0..1500)
            .map(|i| {
                let (z, t) = (z(i), (i % 3 == 0) as u8 as f32);
                f64::from(z.max(0.0) - z * t + softplus_of_minus_abs(z).0)
            })
            .sum();
        assert_eq!(one.0[0], ((sum / 1500.0) as f32).to_bits());
        // Each row's gradient, as the one-row loop computed it in place.
        let dloss = [1.0f32, 0.5, 2.0];
        for (i, &got) in one.1.iter().enumerate() {
            let (z, t, scale) = (z(i), (i % 3 == 0) as u8 as f32, dloss[i / 1500] / 1500.0);
            let s = (-z.abs()).exp();
            let sigmoid = if z >= 0.0 {
                1.0 / (1.0 + s)
            } else {
                s / (1.0 + s)
            };
            assert_eq!(got, ((sigmoid - t) * scale).to_bits(), "row {i}");
        }
        for threads in [2, 3, 7] {
            assert_eq!(run(threads), one, "{threads} threads");
        }
    }
}
