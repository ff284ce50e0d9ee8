//! The CPU kernels against the `gemm` crate and Burn's own operations, bit for bit where
//! they promise it, and the helpers other kernels' tests share.

use super::contiguous::to_contiguous;
use super::elementwise::{
    DROPOUT_PARALLEL_ELEMENTS, PARALLEL_ELEMENTS, column_sums_in_memory_at, dropout, dropout_slice,
    dropout_slice_at, relu_grad_slice_at, relu_slice_at, tanh_grad_slice_at, tanh_slice_at,
};
use super::gemm::gemm_block;
use super::input_grad;
use super::linear_layer::{linear, linear_backward, turns_over};
use super::optimizers::{adam, adam_slice_at, sgd_slice_at};
use super::products::{ROW_BLOCK_WORK, gemm_into, row_blocks};
use super::view::{LayerDims, ProductDims, SendPtr, SendView, View, even_tiles, tensor};
use crate::ops::simd::{Simd, detected};
use burn::backend::flex::FlexTensor;

thread_local! {
    /// Whether [`turn_pays`] says yes or no on this thread, in place of the CPU's answer.
    pub(super) static FORCED_TURN: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

/// `f` with the forward's turn allowed (or not) on this CPU, whichever kernel the gemm
/// crate runs here: the turned path is tested on every machine, not only where it is taken.
pub(super) fn with_turn<R>(turn: bool, f: impl FnOnce() -> R) -> R {
    FORCED_TURN.set(Some(turn));
    let result = f();
    FORCED_TURN.set(None);
    result
}

/// Values in [-1, 1) from a fixed linear congruential sequence.
fn values(len: usize, seed: u64) -> Vec<f32> {
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
fn gemm(threads: usize, (m, n, k): (usize, usize, usize), keep_t: (bool, bool, bool)) -> Vec<f32> {
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
        let identity = crate::ops::Activation::Identity;
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

/// A layer of a batch of `m` rows, `k` inputs and `n` outputs, as the tests' tables list them.
fn layer(m: usize, k: usize, n: usize) -> LayerDims {
    LayerDims {
        batch: m,
        inputs: k,
        outputs: n,
    }
}

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
    let (threshold, scale) = super::dropout::threshold_and_scale(0.3);
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
    for level in crate::ops::simd::detected().up_to() {
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

/// The same through `adam` split across a pool of 2 threads, whose threads each get their
/// own flags back.
#[test]
#[cfg(target_arch = "x86_64")]
fn adam_over_the_pool_flushes_on_every_thread_and_restores_each() {
    let n = PARALLEL_ELEMENTS + 77;
    let t = |value: f32| tensor(vec![value; n], 1, n);
    let step = super::AdamStep {
        beta1: 0.9,
        beta2: 0.999,
        epsilon: 1e-8,
        time: 3,
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let (w, g) = (t(0.5), t(0.0));
    let (m, v) = (t(f32::MIN_POSITIVE), t(f32::MIN_POSITIVE));
    let (_, m, v) = pool.install(|| adam(w, g, m, v, step, &[1e-3]));
    for moment in [m, v] {
        let values = &moment.storage::<f32>()[..n];
        assert!(values.iter().all(|x| x.to_bits() == 0));
    }
    use super::subnormals::{FLUSH, read_mxcsr};
    let flags = pool.broadcast(|_| read_mxcsr() & FLUSH);
    assert_eq!(flags, vec![0, 0], "a pool thread kept the flags");
}

/// fashion-mlp's hidden layer (64 x 512), split across pools of 2 to 5 threads, and an
/// uneven length: the same bits as one pass on one thread.
#[test]
fn dropout_over_the_pool_gives_the_one_thread_bits() {
    let (threshold, scale) = super::dropout::threshold_and_scale(0.1);
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
        let one = gemm(1, shape, keep_t);
        for threads in [2, 3, 4, 5, 7, 8, 16, 32, 64] {
            let split = gemm(threads, shape, keep_t);
            assert!(
                same_bits(&one, &split),
                "{shape:?} on {threads} threads differs from 1 thread"
            );
        }
    }
}

#[test]
fn every_input_gradient_plan_keeps_the_strided_products_bits() {
    // (batch, inputs, outputs, plan): fashion-mlp's layers, odd sizes, a layer just at the
    // copy's width, sums longer than the gemm crate's 512-element chunk (with an output of
    // at most 64 x 64, whose chunks are set another way), and products that keep the view
    // because the crate takes another kernel for them (one row; at most 256 outputs).
    for (m, k, n, plan) in [
        (64, 512, 512, "turned over"),
        (64, 784, 512, "turned over"),
        (64, 512, 10, "strided"),
        (37, 100, 70, "turned over"),
        (2048, 20, 64, "copied weight"),
        (300, 200, 100, "copied weight"),
        (64, 300, 1100, "turned over"),
        (40, 60, 1100, "turned over"),
        (1, 300, 64, "strided"),
        (2, 100, 64, "strided"),
        (4, 64, 64, "strided"),
        (5, 64, 64, "turned over"),
    ] {
        let (dz, w) = (values(m * n, 1), values(k * n, 2));
        let views = ((dz.as_ptr(), n as isize, 1), (w.as_ptr(), n as isize, 1));
        let prepared = unsafe { input_grad::prepare(views.0, views.1, layer(m, k, n), false) };
        assert_eq!(prepared.kind(), plan, "{m}x{k}x{n}");
        // The strided product on one thread, as dx was computed before any copy.
        let strided = gemm(1, (m, k, n), (false, false, true));
        for threads in [1, 2, 3] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build();
            let grads = pool.unwrap().install(|| {
                let (x, y) = (tensor(values(m * k, 3), m, k), tensor(dz.clone(), m, n));
                let (w, grad) = (tensor(w.clone(), k, n), tensor(dz.clone(), m, n));
                linear_backward(x, w, y, grad, crate::ops::Activation::Identity, true)
            });
            let dx = tensor_values(grads.dx.expect("dx was asked for"), m * k);
            assert!(
                same_bits(&dx, &strided),
                "dx of {m}x{k}x{n} on {threads} threads"
            );
        }
    }
}

#[test]
fn a_forward_turned_over_keeps_the_bits_of_the_product_as_written() {
    use burn::tensor::ops::FloatTensorOps;
    // (batch, inputs, outputs, x stored transposed): fashion-mlp's first two layers, a
    // sum longer than one 512-element chunk, an odd size. One thread turns them over, two
    // do not.
    for (m, k, n, x_t) in [
        (64, 784, 512, false),
        (64, 512, 512, true),
        (5, 1100, 64, false),
        (37, 100, 70, false),
    ] {
        for act in [
            crate::ops::Activation::Identity,
            crate::ops::Activation::Relu,
            crate::ops::Activation::Tanh,
        ] {
            let run = |threads| {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build();
                pool.unwrap().install(|| {
                    let x_view = match x_t {
                        false => (std::ptr::null(), k as isize, 1),
                        true => (std::ptr::null(), 1, m as isize),
                    };
                    let w_view = (std::ptr::null(), n as isize, 1);
                    let turns = with_turn(true, || turns_over((x_view, w_view), layer(m, k, n)));
                    assert_eq!(turns, threads == 1);
                    let x = match x_t {
                        false => tensor(values(m * k, 1), m, k),
                        true => burn::backend::Flex::float_swap_dims(
                            tensor(values(m * k, 1), k, m),
                            0,
                            1,
                        ),
                    };
                    let (w, b) = (tensor(values(k * n, 2), k, n), values(n, 3));
                    let b = FlexTensor::from_data(burn::tensor::TensorData::new(b, [n]));
                    with_turn(true, || tensor_values(linear(x, w, b, act, true), m * n))
                })
            };
            let (turned, as_written) = (run(1), run(2));
            assert!(same_bits(&turned, &as_written), "{m}x{k}x{n} {act:?}");
        }
    }
}

#[test]
fn a_transposed_view_is_copied_out_as_burn_copies_it() {
    use burn::tensor::ops::FloatTensorOps;
    for (rows, cols) in [(64, 512), (3, 5), (17, 1), (2, 100)] {
        let t = tensor(values(rows * cols, 1), cols, rows);
        let view = burn::backend::Flex::float_swap_dims(t, 0, 1);
        assert!(same_bits(
            &tensor_values(to_contiguous(&view), rows * cols),
            &view.to_contiguous().storage::<f32>()[..rows * cols],
        ));
    }
}

#[test]
fn a_turned_layers_output_feeds_the_next_layer_and_the_backward_with_the_bits_of_its_rows() {
    // fashion-mlp's three layers at one thread: the first two turn over and hand on views.
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build();
    pool.unwrap().install(|| {
        with_turn(true, || {
            let (m, relu) = (64, crate::ops::Activation::Relu);
            let layer = |k: usize, n: usize, seed: u64| {
                let w = tensor(values(k * n, seed), k, n);
                let b = burn::tensor::TensorData::new(values(n, seed + 1), [n]);
                (w, FlexTensor::from_data(b))
            };
            let (l1, l2, l3) = (layer(784, 512, 2), layer(512, 512, 4), layer(512, 10, 6));
            // A one-output head: the gemm crate's matrix-vector kernels, which go by strides.
            let l4 = layer(512, 1, 10);
            let x = tensor(values(m * 784, 1), m, 784);
            let h1 = linear(x, l1.0, l1.1, relu, true);
            assert_eq!(h1.layout().strides(), [1, m as isize], "a view of yᵀ");
            let h1_rows = tensor(tensor_values(h1.clone(), m * 512), m, 512);
            // The second layer (turned over) and the third (not) from the view and from rows.
            let through = |h: FlexTensor| {
                let h2 = linear(h.clone(), l2.0.clone(), l2.1.clone(), relu, true);
                let out = linear(h2.clone(), l3.0.clone(), l3.1.clone(), relu, false);
                let one = linear(h.clone(), l4.0.clone(), l4.1.clone(), relu, false);
                let grad = tensor(values(m * 512, 8), m, 512);
                let g = linear_backward(h.clone(), l2.0.clone(), h2.clone(), grad, relu, true);
                let dx = g.dx.expect("dx was asked for");
                let one_grad = tensor(values(m, 12), m, 1);
                let g1 = linear_backward(h, l4.0.clone(), one.clone(), one_grad, relu, true);
                [
                    tensor_values(h2, m * 512),
                    tensor_values(out, m * 10),
                    tensor_values(one, m),
                    tensor_values(g.dw, 512 * 512),
                    tensor_values(g.db, 512),
                    tensor_values(dx, m * 512),
                    tensor_values(g1.dw, 512),
                ]
            };
            for (i, (a, b)) in through(h1).iter().zip(through(h1_rows)).enumerate() {
                assert!(same_bits(a, &b), "result {i}");
            }
        })
    });
}

#[test]
fn a_view_running_backwards_along_the_sum_is_not_turned_over() {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build();
    pool.unwrap().install(|| {
        let (m, k, n, null) = (64, 784, 512, std::ptr::null());
        let (x, w) = ((null, k as isize, 1), (null, n as isize, 1));
        with_turn(true, || {
            assert!(turns_over((x, w), layer(m, k, n)));
            // An input flipped along its features, and a weight flipped along its rows.
            assert!(!turns_over(((null, k as isize, -1), w), layer(m, k, n)));
            assert!(!turns_over((x, (null, -(n as isize), 1)), layer(m, k, n)));
        });
    });
}

#[test]
fn the_forward_turns_over_only_where_the_gemm_crate_runs_its_avx512_kernel() {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build();
    pool.unwrap().install(|| {
        let (m, k, n, null) = (64, 784, 512, std::ptr::null());
        let (x, w) = ((null, k as isize, 1), (null, n as isize, 1));
        let avx512 = crate::ops::simd::gemm_kernel() == "avx512f";
        assert_eq!(turns_over((x, w), layer(m, k, n)), avx512);
        assert!(!with_turn(false, || turns_over((x, w), layer(m, k, n))));
        // A layer handed on from the first: a view of yᵀ where it turned, else rows.
        let x = tensor(values(m * k, 1), m, k);
        let (w, b) = (tensor(values(k * n, 2), k, n), values(n, 3));
        let b = FlexTensor::from_data(burn::tensor::TensorData::new(b, [n]));
        let h = linear(x, w, b, crate::ops::Activation::Relu, true);
        let strides = if avx512 {
            [1, m as isize]
        } else {
            [n as isize, 1]
        };
        assert_eq!(h.layout().strides(), strides);
    });
}

#[test]
fn input_gradients_split_over_the_pool_keep_the_strided_products_bits() {
    // Each plan's copy and product spread over the pool (in a step, dx of so large a
    // product runs whole beside dW, so linear_backward does not split these), and written
    // into rows wider than dx's, as the replicas' side-by-side layout has them.
    for (m, k, n, plan) in [
        (64, 784, 512, "turned over"),
        (600, 200, 128, "copied weight"),
    ] {
        let (dz, w) = (values(m * n, 1), values(k * n, 2));
        let views = ((dz.as_ptr(), n as isize, 1), (w.as_ptr(), n as isize, 1));
        let strided = gemm(1, (m, k, n), (false, false, true));
        for threads in [2, 3, 8] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build();
            let (dz_view, w_view) = (SendView(views.0), SendView(views.1));
            let dx = pool.unwrap().install(|| unsafe {
                let (dz_view, w_view) = (dz_view.get(), w_view.get());
                let prepared = input_grad::prepare(dz_view, w_view, layer(m, k, n), true);
                assert_eq!(prepared.kind(), plan);
                let mut dx = vec![0f32; m * k];
                prepared.write(dx.as_mut_ptr(), k, true);
                dx
            });
            assert!(same_bits(&dx, &strided), "{m}x{k}x{n} on {threads} threads");
        }
        let wide = unsafe {
            let prepared = input_grad::prepare(views.0, views.1, layer(m, k, n), false);
            let mut wide = vec![f32::NAN; m * (k + 3)];
            prepared.write(wide.as_mut_ptr(), k + 3, false);
            wide
        };
        let rows: Vec<f32> = wide.chunks(k + 3).flat_map(|r| r[..k].to_vec()).collect();
        assert!(same_bits(&rows, &strided), "{m}x{k}x{n} into wider rows");
        assert!(
            wide.chunks(k + 3)
                .all(|r| r[k..].iter().all(|v| v.is_nan()))
        );
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

/// Whether two results are the same floats, bit for bit.
pub(in crate::ops) fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// Values with many bits set, of both signs, different for each `salt` (the x86 kernels'
/// tests).
#[cfg(target_arch = "x86_64")]
pub(in crate::ops) fn salted_values(len: usize, salt: u32) -> Vec<f32> {
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
pub(in crate::ops) fn ours_and_crates(
    threads: usize,
    dims: ProductDims,
    keep: bool,
    layouts: (bool, bool),
) -> [Vec<f32>; 2] {
    let identity = crate::ops::Activation::Identity;
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
pub(in crate::ops) fn ours_and_crates_by(
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
    let (identity, dst) = (crate::ops::Activation::Identity, SendPtr(ours.as_mut_ptr()));
    pool.install(|| ours_into(dst.get(), (lhs.get(), rhs.get())));
    let (operands, serial) = ((lhs.get(), rhs.get()), gemm::Parallelism::None);
    // SAFETY: crates holds m * n initialised elements; the views m x k and k x n.
    unsafe {
        let crates = crates.as_mut_ptr();
        gemm_block(crates, n, dims, keep, operands, identity, serial)
    };
    [ours, crates]
}

/// The first `len` values of a tensor (the kernels' `values`, which the test values hide).
fn tensor_values(t: FlexTensor, len: usize) -> Vec<f32> {
    super::contiguous::values(t, len)
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
        let one = gemm(1, shape, (keep, lhs_t, false));
        for threads in 2..=16 {
            let split = gemm(threads, shape, (keep, lhs_t, false));
            assert!(
                same_bits(&one, &split),
                "{shape:?} on {threads} threads differs from 1 thread"
            );
        }
    }
}
