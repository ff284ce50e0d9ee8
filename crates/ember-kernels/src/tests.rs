//! The kernels at every SIMD level against the portable loop, and products, dropout and Adam
//! split over pools of threads against one thread: the same bits.

use crate::elementwise::{
    DROPOUT_PARALLEL_ELEMENTS, column_sums_in_memory_at, dropout, dropout_slice, dropout_slice_at,
    relu_grad_slice_at, relu_slice_at, tanh_grad_slice_at, tanh_slice_at, threshold_and_scale,
};
use crate::optimizers::{adam_slice_at, sgd_slice_at};
use crate::products::{ROW_BLOCK_WORK, row_blocks};
use crate::simd::{Simd, detected};
use crate::testing::{gemm_on_pool, same_bits, values};
use crate::view::ProductDims;
#[cfg(target_arch = "x86_64")]
use crate::view::even_tiles;

/// Bit patterns, for comparisons that tell -0.0 from 0.0 and compare NaNs.
fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Inputs that reach every branch of the kernels: tiny, large, signed zeros, NaN, and a
/// length that leaves a remainder after any vector width.
fn kernel_inputs() -> Vec<f32> {
    let mut v: Vec<f32> = values(1003, 7).iter().map(|x| x * 12.0).collect();
    v.extend([0.0, -0.0, 1e-5, -3e-4, 9.5, -40.0, f32::NAN, 1e-40]);
    v
}

/// `kernel`'s output at every level this CPU has.
fn at_each_level(kernel: impl Fn(Simd) -> Vec<f32>) -> Vec<(Simd, Vec<u32>)> {
    detected().up_to().map(|l| (l, bits(&kernel(l)))).collect()
}

/// Every level with FMA gives the same bits as the first one; the portable level gives the
/// same bits too, except where the kernel itself fuses multiply-adds (`tanh`'s polynomial),
/// where it is within `ulps` units in the last place of it.
fn check_levels(name: &str, results: &[(Simd, Vec<u32>)], ulps: i64) {
    let portable = &results[0].1;
    let fma = results.iter().find(|(l, _)| *l >= Simd::Avx2);
    for (level, got) in results.iter().skip(1) {
        let want = &fma.expect("a level with FMA").1;
        assert_eq!(
            got, want,
            "{name} at {level} differs from the first level with FMA"
        );
    }
    let Some((_, fma)) = fma else { return };
    let worst = portable
        .iter()
        .zip(fma)
        .map(|(p, f)| (*p as i64 - *f as i64).abs())
        .max();
    assert!(
        worst <= Some(ulps),
        "{name}: portable and fma {worst:?} ulp apart"
    );
}

#[test]
fn every_kernel_level_gives_the_portable_result() {
    let (x, y) = (kernel_inputs(), values(1011, 9));
    let y = &y[..x.len()];
    // `a` written in place, `b` read.
    let run = |a: &[f32], f: &dyn Fn(&mut [f32])| {
        let mut a = a.to_vec();
        f(&mut a);
        a
    };
    let tanh = at_each_level(|l| run(&x, &|a| tanh_slice_at(l, a)));
    // The polynomial rounds differently without FMA: 5 ulp apart at most on these inputs.
    check_levels("tanh", &tanh, 8);
    let relu = at_each_level(|l| run(&x, &|a| relu_slice_at(l, a)));
    check_levels("relu", &relu, 0);
    let tg = at_each_level(|l| run(y, &|a| tanh_grad_slice_at(l, a, &x)));
    check_levels("tanh_grad", &tg, 0);
    let rg = at_each_level(|l| run(y, &|a| relu_grad_slice_at(l, a, &x)));
    check_levels("relu_grad", &rg, 0);
    let sgd = at_each_level(|l| run(y, &|a| sgd_slice_at(l, a, &x, 0.01)));
    check_levels("sgd", &sgd, 0);
    let sums = at_each_level(|l| run(&y[..7], &|a| column_sums_in_memory_at(l, a, &x[..1001])));
    check_levels("column_sums", &sums, 0);
    let adam = at_each_level(|l| {
        let (mut g, mut m) = (y.to_vec(), values(y.len(), 11));
        let mut v: Vec<f32> = values(y.len(), 12).iter().map(|v| v.abs()).collect();
        adam_slice_at(l, &mut g, &x, &mut m, &mut v, 0.9, 0.999, 0.3, 1e-8, 1e-3);
        [g, m, v].concat()
    });
    check_levels("adam", &adam, 0);
    let (threshold, scale) = threshold_and_scale(0.3);
    let drop = at_each_level(|l| run(&x, &|a| dropout_slice_at(l, a, 5, 77, threshold, scale)));
    check_levels("dropout", &drop, 0);
}

/// A weight whose gradient stayed zero: its moments decay into subnormals, which the Adam
/// pass flushes to zero at every level (see `subnormals`); the caller's arithmetic keeps
/// its subnormals after the pass.
#[test]
#[cfg(target_arch = "x86_64")]
fn adam_flushes_decayed_moments_to_zero_at_every_level() {
    let tiny = f32::MIN_POSITIVE;
    for level in detected().up_to() {
        let (mut g, w) = (vec![0.0; 40], vec![0.5; 40]);
        let (mut m, mut v) = (vec![tiny; 40], vec![tiny; 40]);
        adam_slice_at(
            level, &mut g, &w, &mut m, &mut v, 0.9, 0.999, 1.0, 1e-8, 1e-3,
        );
        let zero = m.iter().chain(&v).all(|x| x.to_bits() == 0);
        assert!(zero, "{level}: {m:?} {v:?}");
        let after = std::hint::black_box(tiny) * std::hint::black_box(0.5);
        assert!(
            after.to_bits() != 0,
            "{level}: the caller's flags were not restored"
        );
    }
}

/// fashion-mlp's hidden layer (64 x 512), split across pools of 2 to 5 threads, and an
/// uneven length: the same bits as one pass on one thread.
#[test]
fn dropout_over_the_pool_gives_the_one_thread_bits() {
    let (threshold, scale) = threshold_and_scale(0.1);
    for n in [64 * 512, DROPOUT_PARALLEL_ELEMENTS + 77] {
        let mut one = values(n, 4);
        dropout_slice(&mut one, 0, 99, threshold, scale);
        for threads in 2..=5 {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build();
            let mut split = values(n, 4);
            pool.unwrap()
                .install(|| dropout(&mut split, 99, threshold, scale));
            assert!(same_bits(&one, &split), "{n} elements on {threads} threads");
        }
    }
}

#[test]
fn row_blocks_give_the_same_bits_as_one_product_at_any_thread_count() {
    // (keep, lhs transposed, rhs transposed) of a forward product, a dW and a dx.
    let (fwd, dw, dx) = (
        (true, false, false),
        (false, true, false),
        (false, false, true),
    );
    for (shape, keep_t) in [
        // tabular-mlp: the forward products, dW of the first two layers, dx of the second.
        ((2048, 20, 61), fwd),
        ((2048, 10, 20), fwd),
        ((61, 20, 2048), dw),
        ((20, 10, 2048), dw),
        ((2048, 20, 10), dx),
        // fashion-mlp's output layer: forward and dW.
        ((64, 10, 512), fwd),
        ((512, 10, 64), dw),
        // One column (the gemm crate's vector path); a long sum over k through the
        // cache-sized chunks, rows splitting unevenly.
        ((16384, 1, 10), fwd),
        ((300, 16, 1500), dw),
        ((140, 48, 700), fwd),
        // Operands both along k, whose blocks of 256 elements or fewer would take the
        // gemm crate's lane-wise kernel.
        ((128, 16, 64), dx),
        ((2048, 1, 64), (true, false, true)),
    ] {
        let (m, n, k) = shape;
        assert!(m * n * k >= ROW_BLOCK_WORK && row_blocks(ProductDims::mnk(shape), 2) == 2);
        let one = gemm_on_pool(1, shape, keep_t);
        for threads in [2, 3, 4, 5, 7, 8, 16, 32, 64] {
            let split = gemm_on_pool(threads, shape, keep_t);
            assert!(
                same_bits(&one, &split),
                "{shape:?} on {threads} threads differs from 1 thread"
            );
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn even_tiles_share_columns_as_evenly_as_their_number_allows() {
    let tiles = |n, widest| even_tiles(n, widest).collect::<Vec<_>>();
    assert_eq!(tiles(20, 12), vec![(0, 10), (10, 10)]);
    assert_eq!(tiles(30, 24), vec![(0, 15), (15, 15)]);
    assert_eq!(tiles(25, 12), vec![(0, 9), (9, 8), (17, 8)]);
    assert_eq!(tiles(7, 24), vec![(0, 7)]);
}

#[test]
fn column_blocks_give_the_same_bits_as_one_product_at_any_thread_count() {
    // fashion-mlp's forward, dW and dx shapes, and a width that splits unevenly.
    for (shape, keep, lhs_t) in [
        ((64, 512, 784), true, false),
        ((784, 512, 64), false, true),
        ((64, 784, 512), false, false),
        ((64, 200, 700), true, false),
        // tabular-mlp's 8 replicas side by side: forward and dW.
        ((2048, 160, 61), true, false),
        ((61, 160, 2048), false, true),
    ] {
        let one = gemm_on_pool(1, shape, (keep, lhs_t, false));
        for threads in 2..=16 {
            let split = gemm_on_pool(threads, shape, (keep, lhs_t, false));
            assert!(
                same_bits(&one, &split),
                "{shape:?} on {threads} threads differs from 1 thread"
            );
        }
    }
}
