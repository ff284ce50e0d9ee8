//! ember's CPU operations on `Flex`'s tensors against the `gemm` crate's products and Burn's
//! own operations, bit for bit where they promise it (the kernels' own tests are the kernel
//! crate's); the forced turn of a forward product that `linear_layer` reads in tests.

use super::contiguous::to_contiguous;
use super::elementwise::PARALLEL_ELEMENTS;
use super::input_grad;
use super::linear_layer::{linear, linear_backward, turns_over};
use super::optimizers::adam;
use super::view::{LayerDims, SendView, tensor};
use burn::backend::flex::FlexTensor;
#[cfg(target_arch = "x86_64")]
pub(in crate::ops) use ember_kernels::testing::salted_values;
pub(in crate::ops) use ember_kernels::testing::same_bits;
use ember_kernels::testing::{gemm_on_pool, values};

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

/// A layer of a batch of `m` rows, `k` inputs and `n` outputs, as the tests' tables list them.
fn layer(m: usize, k: usize, n: usize) -> LayerDims {
    LayerDims {
        batch: m,
        inputs: k,
        outputs: n,
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
        let strided = gemm_on_pool(1, (m, k, n), (false, false, true));
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
        let strided = gemm_on_pool(1, (m, k, n), (false, false, true));
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

/// The first `len` values of a tensor (the kernels' `values`, which the test values hide).
fn tensor_values(t: FlexTensor, len: usize) -> Vec<f32> {
    super::contiguous::values(t, len)
}
