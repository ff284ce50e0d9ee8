//! Each CPU kernel and composition of `ops` against Burn's own operations.

use super::*;
use burn::backend::{Autodiff, Flex};
use burn::tensor::{Distribution, Tolerance};

use burn::tensor::ops::FloatTensorOps;

type A = Autodiff<Flex>;
/// An activation of Burn's on replica outputs.
type Act3 = fn(Tensor<A, 3>) -> Tensor<A, 3>;

#[test]
fn tanh_matches_burns_on_a_dense_range() {
    let device = Default::default();
    let n = 200_001;
    let values: Vec<f32> = (0..n)
        .map(|i| -20.0 + 40.0 * i as f32 / (n - 1) as f32)
        .collect();
    let x = Tensor::<Flex, 1>::from_floats(values.as_slice(), &device);
    let ours: Vec<f32> = tanh(x.clone()).into_data().to_vec().unwrap();
    let burns: Vec<f32> = x.tanh().into_data().to_vec().unwrap();
    for ((v, a), b) in values.iter().zip(&ours).zip(&burns) {
        // A few ulp: 3e-7 absolute near ±1, 1e-6 relative near 0.
        let ok = (a - b).abs() <= 3e-7 && (a - b).abs() <= 1e-6 * b.abs().max(1e-3);
        assert!(ok, "tanh({v}): ours {a}, Burn's {b}");
    }
}

#[test]
fn tanh_of_special_values() {
    let device = Default::default();
    let x = Tensor::<Flex, 1>::from_floats(
        [0.0, -0.0, 1e-30, f32::INFINITY, f32::NEG_INFINITY],
        &device,
    );
    let y: Vec<f32> = tanh(x).into_data().to_vec().unwrap();
    assert_eq!(y[0], 0.0);
    assert_eq!(y[2], 1e-30);
    assert_eq!(y[3], 1.0);
    assert_eq!(y[4], -1.0);
    let nan: Vec<f32> = tanh(Tensor::<Flex, 1>::from_floats([f32::NAN], &device))
        .into_data()
        .to_vec()
        .unwrap();
    assert!(nan[0].is_nan());
}

/// ember's fused linear against Burn's own composition, forward and all three gradients,
/// for each activation, with a non-contiguous input (a transposed view) as well.
#[test]
fn fused_linear_matches_burns_forward_and_backward() {
    use burn::nn::LinearConfig;
    let device = Default::default();
    for act in [Activation::Identity, Activation::Relu, Activation::Tanh] {
        for transposed_input in [false, true] {
            let layer = LinearConfig::new(37, 23).init::<A>(&device);
            let x = if transposed_input {
                Tensor::<A, 2>::random([37, 50], Distribution::Normal(0.0, 1.5), &device)
                    .transpose()
            } else {
                Tensor::<A, 2>::random([50, 37], Distribution::Normal(0.0, 1.5), &device)
            };
            let x = x.require_grad();
            let w = Tensor::<A, 2>::random([50, 23], Distribution::Default, &device);
            let ours = linear(x.clone(), &layer, act);
            let z = layer.forward(x.clone());
            let burns = match act {
                Activation::Identity => z,
                Activation::Relu => burn::tensor::activation::relu(z),
                Activation::Tanh => z.tanh(),
            };
            ours.clone()
                .into_data()
                .assert_approx_eq::<f32>(&burns.clone().into_data(), Tolerance::absolute(2e-5));
            let g_ours = (ours * w.clone()).sum().backward();
            let g_burn = (burns * w).sum().backward();
            let pairs = [
                (x.grad(&g_ours).unwrap(), x.grad(&g_burn).unwrap()),
                (
                    layer.weight.grad(&g_ours).unwrap(),
                    layer.weight.grad(&g_burn).unwrap(),
                ),
            ];
            for (a, b) in pairs {
                a.into_data()
                    .assert_approx_eq::<f32>(&b.into_data(), Tolerance::absolute(5e-5));
            }
            let bias = layer.bias.as_ref().unwrap();
            bias.grad(&g_ours)
                .unwrap()
                .into_data()
                .assert_approx_eq::<f32>(
                    &bias.grad(&g_burn).unwrap().into_data(),
                    Tolerance::absolute(5e-5),
                );
        }
    }
}

/// The replicas' fused linear (`[K, m, k]` or shared `[m, k]` inputs) against Burn's
/// batched matmul, forward and all three gradients, for each activation.
#[test]
fn replica_linear_matches_burns_batched_matmul() {
    use burn::module::Param;
    let device = Default::default();
    let (k, m, i, n) = (3, 9, 7, 5);
    for act in [Activation::Identity, Activation::Relu, Activation::Tanh] {
        for shared in [false, true] {
            let dist = Distribution::Normal(0.0, 1.0);
            let rows = if shared { m } else { k * m };
            let (xd, wd, bd) = (
                Tensor::<Flex, 2>::random([rows, i], dist, &device).into_data(),
                Tensor::<Flex, 3>::random([k, i, n], dist, &device).into_data(),
                Tensor::<Flex, 2>::random([k, n], dist, &device).into_data(),
            );
            // Each side has leaves of its own: a backward consumes the graph it walks.
            let leaves = || {
                (
                    Tensor::<A, 2>::from_data(xd.clone(), &device).require_grad(),
                    Param::from_data(wd.clone(), &device),
                    Param::from_data(bd.clone(), &device),
                )
            };
            let ((x, w, b), (xb, wb, bb)) = (leaves(), leaves());
            // A shared input goes in as it is, 2-d.
            let ours = match shared {
                true => linear_replicas(x.clone(), &w, &b, act),
                false => linear_replicas(x.clone().reshape([k, m, i]), &w, &b, act),
            };
            let x3 = match shared {
                true => xb.clone().reshape([1, m, i]).expand([k, m, i]),
                false => xb.clone().reshape([k, m, i]),
            };
            let z = x3.matmul(wb.val()) + bb.val().reshape([k, 1, n]);
            let burns = match act {
                Activation::Identity => z,
                Activation::Relu => burn::tensor::activation::relu(z),
                Activation::Tanh => z.tanh(),
            };
            let tol = Tolerance::absolute(5e-5);
            ours.clone()
                .into_data()
                .assert_approx_eq::<f32>(&burns.clone().into_data(), tol);
            let g = Tensor::<A, 3>::random([k, m, n], Distribution::Default, &device);
            let ga = (ours * g.clone()).sum().backward();
            let gb = (burns * g).sum().backward();
            let grads = [
                (x.grad(&ga), xb.grad(&gb)),
                (
                    w.grad(&ga).map(|t| t.reshape([k * i, n])),
                    wb.grad(&gb).map(|t| t.reshape([k * i, n])),
                ),
                (b.grad(&ga), bb.grad(&gb)),
            ];
            for (a, b) in grads {
                let (a, b) = (a.expect("our gradient"), b.expect("Burn's gradient"));
                a.into_data().assert_approx_eq::<f32>(&b.into_data(), tol);
            }
        }
    }
}

/// Two replica layers on a shared input, as tabular-mlp's hidden layers run: the first one
/// wide product with its output side by side, the second reading it through its strides and
/// writing the input gradient back side by side. Against Burn's batched matmuls, forward and
/// every gradient, for each fused activation and for one of Burn's between the layers
/// (whose backward hands the first layer a gradient that is not side by side).
#[test]
fn side_by_side_replica_layers_match_burns_batched_matmul() {
    let relu = burn::tensor::activation::relu;
    let gelu = burn::tensor::activation::gelu;
    let cases: [(Activation, Act3); 3] = [
        (Activation::Tanh, |t| t.tanh()),
        (Activation::Relu, relu),
        (Activation::Identity, gelu),
    ];
    for (act, burns_act) in cases {
        let between = match act {
            Activation::Identity => gelu,
            _ => |t| t,
        };
        side_by_side_layers_case(act, between, burns_act);
    }
}

/// [`side_by_side_replica_layers_match_burns_batched_matmul`] with the first layer's fused
/// activation `act`, then `between` applied, against Burn's layer with `burns_act`.
fn side_by_side_layers_case(act: Activation, between: Act3, burns_act: Act3) {
    use burn::module::Param;
    let device = Default::default();
    let (k, m, i, h, o) = (5, 33, 7, 20, 3);
    let dist = Distribution::Normal(0.0, 1.0);
    let xd = Tensor::<Flex, 2>::random([m, i], dist, &device).into_data();
    let datas = (
        Tensor::<Flex, 3>::random([k, i, h], dist, &device).into_data(),
        Tensor::<Flex, 2>::random([k, h], dist, &device).into_data(),
        Tensor::<Flex, 3>::random([k, h, o], dist, &device).into_data(),
        Tensor::<Flex, 2>::random([k, o], dist, &device).into_data(),
    );
    let leaves = || {
        let x = Tensor::<A, 2>::from_data(xd.clone(), &device).require_grad();
        let (w1, b1, w2, b2) = datas.clone();
        let (w1, w2) = (Param::from_data(w1, &device), Param::from_data(w2, &device));
        let (b1, b2) = (Param::from_data(b1, &device), Param::from_data(b2, &device));
        (x, w1, b1, w2, b2)
    };
    let ((x, w1, b1, w2, b2), (xb, w1b, b1b, w2b, b2b)) = (leaves(), leaves());
    let hidden = linear_replicas(x.clone(), &w1, &b1, act);
    let layout = hidden.clone().inner().into_primitive().tensor();
    assert!(shared_input::is_side_by_side(&layout), "not side by side");
    let ours = linear_replicas(between(hidden), &w2, &b2, Activation::Identity);
    let x3 = xb.clone().reshape([1, m, i]).expand([k, m, i]);
    let hb = burns_act(x3.matmul(w1b.val()) + b1b.val().reshape([k, 1, h]));
    let burns = hb.matmul(w2b.val()) + b2b.val().reshape([k, 1, o]);
    let tol = Tolerance::absolute(1e-4);
    ours.clone()
        .into_data()
        .assert_approx_eq::<f32>(&burns.clone().into_data(), tol);
    let g = Tensor::<A, 3>::random([k, m, o], Distribution::Default, &device);
    let (ga, gb) = (
        (ours * g.clone()).sum().backward(),
        (burns * g).sum().backward(),
    );
    let flat = |t: Option<Tensor<Flex, 3>>| t.expect("a gradient").reshape([-1]).into_data();
    let flat2 = |t: Option<Tensor<Flex, 2>>| t.expect("a gradient").reshape([-1]).into_data();
    let pairs = [
        (flat2(x.grad(&ga)), flat2(xb.grad(&gb))),
        (flat(w1.grad(&ga)), flat(w1b.grad(&gb))),
        (flat2(b1.grad(&ga)), flat2(b1b.grad(&gb))),
        (flat(w2.grad(&ga)), flat(w2b.grad(&gb))),
        (flat2(b2.grad(&ga)), flat2(b2b.grad(&gb))),
    ];
    for (a, b) in pairs {
        a.assert_approx_eq::<f32>(&b, tol);
    }
}

/// linear-scalar's fused replica loss against Burn's own composition of each replica's
/// `x · w + p · f` and mean squared error: the losses and both gradients, for inputs shared
/// by every replica and for each replica's own.
#[test]
fn scalar_mse_replicas_matches_burns_composition() {
    use burn::module::Param;
    let device = Default::default();
    let (k, n, c) = (4, 37, 6);
    for shared in [true, false] {
        let rows = if shared { n } else { k * n };
        let dist = Distribution::Normal(0.0, 1.0);
        // Views into larger tensors, with a start offset and strided rows, as batches are.
        let x = Tensor::<A, 2>::random([rows + 3, c + 3], dist, &device);
        let x = x.narrow(0, 2, rows).narrow(1, 1, c + 1);
        let y = Tensor::<A, 2>::random([rows + 2, 1], dist, &device).narrow(0, 1, rows);
        let wd = Tensor::<Flex, 3>::random([k, c, 1], dist, &device).into_data();
        let pd = Tensor::<Flex, 1>::random([k], dist, &device).into_data();
        let (w, p) = (
            Param::from_data(wd.clone(), &device),
            Param::from_data(pd.clone(), &device),
        );
        let (wb, pb) = (
            Param::<Tensor<A, 3>>::from_data(wd, &device),
            Param::<Tensor<A, 1>>::from_data(pd, &device),
        );
        let ours = match shared {
            true => scalar_mse_replicas(x.clone(), y.clone(), &w, &p),
            false => scalar_mse_replicas(x.clone().reshape([k, n, c + 1]), y.clone(), &w, &p),
        };
        let burns: Vec<Tensor<A, 1>> = (0..k)
            .map(|r| {
                let (xr, yr) = match shared {
                    true => (x.clone(), y.clone()),
                    false => (x.clone().narrow(0, r * n, n), y.clone().narrow(0, r * n, n)),
                };
                let wr = wb.val().narrow(0, r, 1).reshape([c, 1]);
                let pr = pb.val().narrow(0, r, 1).reshape([1, 1]);
                let pred = xr.clone().narrow(1, 0, c).matmul(wr) + xr.narrow(1, c, 1) * pr;
                (pred - yr).square().mean()
            })
            .collect();
        let burns = Tensor::cat(burns, 0);
        let tol = Tolerance::relative(1e-5);
        ours.clone()
            .into_data()
            .assert_approx_eq::<f32>(&burns.clone().into_data(), tol);
        // Unequal weights on the losses, as the backward of a sum with a masked one sees.
        let scale = Tensor::<A, 1>::from_floats([1.0, 0.0, 2.5, -1.0], &device);
        let ga = (ours * scale.clone()).sum().backward();
        let gb = (burns * scale).sum().backward();
        let tol = Tolerance::absolute(1e-4);
        let (dw, dwb) = (w.grad(&ga).unwrap(), wb.grad(&gb).unwrap());
        dw.into_data()
            .assert_approx_eq::<f32>(&dwb.into_data(), tol);
        let (dp, dpb) = (p.grad(&ga).unwrap(), pb.grad(&gb).unwrap());
        dp.into_data()
            .assert_approx_eq::<f32>(&dpb.into_data(), tol);
    }
}

/// The composition of Burn's operations that GPU backends run for linear-scalar's replica
/// loss, against the CPU kernel: losses and both gradients.
#[test]
fn scalar_mse_composition_matches_the_cpu_kernel() {
    let device = Default::default();
    let (k, n, c) = (3, 29, 5);
    let prim = |t: Tensor<Flex, 2>| t.into_primitive().tensor();
    let dist = Distribution::Normal(0.0, 1.0);
    for shared in [true, false] {
        let rows = if shared { n } else { k * n };
        let x = Tensor::<Flex, 2>::random([rows, c + 1], dist, &device);
        let x = match shared {
            true => prim(x),
            false => Flex::float_reshape(prim(x), Shape::new([k, n, c + 1])),
        };
        let y = prim(Tensor::random([rows, 1], dist, &device));
        let w = Tensor::<Flex, 3>::random([k, c, 1], dist, &device)
            .into_primitive()
            .tensor();
        let p = Tensor::<Flex, 1>::random([k], dist, &device)
            .into_primitive()
            .tensor();
        let dloss = Tensor::<Flex, 1>::from_floats([0.5, 0.0, -2.0], &device);
        let dloss = dloss.into_primitive().tensor();
        let (l1, e1) =
            Flex::scalar_mse_replicas_forward(x.clone(), y.clone(), w.clone(), p.clone());
        let (l2, e2) = composed::scalar_mse::<Flex>(x.clone(), y, w, p);
        let (dw1, dp1) = Flex::scalar_mse_replicas_backward(x.clone(), e1, dloss.clone());
        let (dw2, dp2) = composed::scalar_mse_backward::<Flex>(x, e2, dloss);
        let tol = Tolerance::absolute(1e-4);
        let data = |t: FloatTensor<Flex>| {
            let flat = Shape::new([t.shape().num_elements()]);
            let t = TensorPrimitive::Float(Flex::float_reshape(t, flat));
            Tensor::<Flex, 1>::from_primitive(t).into_data()
        };
        for (a, b) in [(l1, l2), (dw1, dw2), (dp1, dp2)] {
            data(a).assert_approx_eq::<f32>(&data(b), tol);
        }
    }
}

/// The loss and the logits' gradient of `bce_logits` on `threads`, and of Burn's
/// `BinaryCrossEntropyLoss` with logits, as bits: logits of both signs and every size,
/// zeros of both signs, a loss gradient other than 1, and inputs that are views into
/// larger tensors (as a batch's targets are a slice of the device-resident set's).
fn bce_logits_and_burns(threads: usize, n: usize) -> [(Vec<u32>, Vec<u32>); 2] {
    let device = Default::default();
    let mut zd = Tensor::<Flex, 2>::random([n, 1], Distribution::Normal(0.0, 6.0), &device)
        .into_data()
        .to_vec::<f32>()
        .unwrap();
    zd[..4].copy_from_slice(&[0.0, -0.0, 90.0, -90.0]);
    let all = Tensor::<Flex, 2, Int>::random([n + 7, 1], Distribution::Bernoulli(0.4), &device);
    let yd = all.narrow(0, 3, n);
    let bits = |t: Tensor<A, 2>| {
        t.into_data()
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect::<Vec<_>>()
    };
    let run = |ours: bool| {
        let z =
            Tensor::<A, 2>::from_data(TensorData::new(zd.clone(), [n, 1]), &device).require_grad();
        let y = Tensor::<A, 2, Int>::from_inner(yd.clone());
        // The logits seen through a transpose of a transpose: a view, not their own rows.
        let logits = z.clone().transpose().transpose();
        let loss = match ours {
            true => bce_logits(logits, y),
            false => burn::nn::loss::BinaryCrossEntropyLossConfig::new()
                .with_logits(true)
                .init(&device)
                .forward(logits, y),
        };
        let grads = (loss.clone() * 3.0).backward();
        let grad = Tensor::<A, 2>::from_inner(z.grad(&grads).unwrap());
        (bits(loss.unsqueeze_dim(1)), bits(grad))
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    pool.install(|| [run(true), run(false)])
}

#[test]
fn bce_logits_gives_burns_bits_on_any_thread_count() {
    // Below and above the rows spread over the pool, tabular-mlp's batch, an odd size.
    for n in [5, 1000, 2048, 4099] {
        for threads in [1, 2, 3] {
            let [ours, burns] = bce_logits_and_burns(threads, n);
            assert_eq!(ours.0, burns.0, "loss, {n} rows on {threads} threads");
            assert_eq!(ours.1, burns.1, "gradient, {n} rows on {threads} threads");
        }
    }
}

/// The composition the GPU backends run, against the CPU kernel.
#[test]
fn bce_logits_composed_matches_the_cpu_kernel() {
    let device = Default::default();
    let z = Tensor::<Flex, 2>::random([3000, 1], Distribution::Normal(0.0, 6.0), &device);
    let y = Tensor::<Flex, 2>::random([3000, 1], Distribution::Bernoulli(0.4), &device);
    let d = Tensor::<Flex, 1>::from_floats([0.5], &device);
    let prim = |t: Tensor<Flex, 2>| t.into_primitive().tensor();
    let as_tensor = |t| Tensor::<Flex, 2>::from_primitive(TensorPrimitive::Float(t));
    let loss = |f: fn(FloatTensor<Flex>, FloatTensor<Flex>) -> FloatTensor<Flex>| {
        as_tensor(B2::float_reshape(
            f(prim(z.clone()), prim(y.clone())),
            Shape::new([1, 1]),
        ))
    };
    type B2 = Flex;
    loss(composed::bce_burn::<Flex>)
        .into_data()
        .assert_approx_eq::<f32>(
            &loss(bce::mean_forward).into_data(),
            Tolerance::relative(1e-6),
        );
    let d = || d.clone().into_primitive().tensor();
    let composed = as_tensor(composed::bce_burn_backward::<Flex>(
        prim(z.clone()),
        prim(y.clone()),
        d(),
    ));
    let kernel = as_tensor(bce::mean_backward(prim(z.clone()), prim(y.clone()), d()));
    composed
        .into_data()
        .assert_approx_eq::<f32>(&kernel.into_data(), Tolerance::absolute(1e-9));
}

/// The replicas' binary cross-entropy on logits against Burn's own composition (the loss
/// and the logits' gradient), and the composition the GPU backends run against the CPU
/// kernel's backward, with large logits of both signs.
#[test]
fn bce_logits_replicas_matches_burns() {
    let device = Default::default();
    let (k, n) = (3, 5000);
    let zd = Tensor::<Flex, 3>::random([k, n, 1], Distribution::Normal(0.0, 8.0), &device);
    let yd = Tensor::<Flex, 3>::random([k, n, 1], Distribution::Bernoulli(0.4), &device);
    let z = Tensor::<A, 3>::from_data(zd.to_data(), &device).require_grad();
    let zb = Tensor::<A, 3>::from_data(zd.to_data(), &device).require_grad();
    let y = Tensor::<A, 3>::from_data(yd.to_data(), &device);
    let ours = bce_logits_replicas(z.clone(), y.clone());
    let stable = burn::tensor::activation::relu(zb.clone()) - zb.clone() * y.clone()
        + zb.clone().abs().neg().exp().log1p();
    let burns = stable.reshape([k, n]).mean_dim(1).reshape([k]);
    let tol = Tolerance::relative(1e-5);
    ours.clone()
        .into_data()
        .assert_approx_eq::<f32>(&burns.clone().into_data(), tol);
    let scale = Tensor::<A, 1>::from_floats([1.0, 0.0, -3.0], &device);
    let ga = (ours * scale.clone()).sum().backward();
    let gb = (burns * scale.clone()).sum().backward();
    let tol = Tolerance::absolute(1e-7);
    let (da, db) = (z.grad(&ga).unwrap(), zb.grad(&gb).unwrap());
    da.clone()
        .into_data()
        .assert_approx_eq::<f32>(&db.into_data(), tol);
    let prim = |t: Tensor<Flex, 3>| t.into_primitive().tensor();
    let scale = scale.inner().into_primitive().tensor();
    let composed = composed::bce_backward::<Flex>(prim(zd.clone()), prim(yd.clone()), scale);
    let composed = Tensor::<Flex, 3>::from_primitive(TensorPrimitive::Float(composed));
    composed
        .into_data()
        .assert_approx_eq::<f32>(&da.into_data(), tol);
    let loss = composed::bce::<Flex>(prim(zd), prim(yd));
    let loss = Tensor::<Flex, 1>::from_primitive(TensorPrimitive::Float(loss));
    let ours = bce_logits_replicas(z.inner(), y.inner());
    loss.into_data()
        .assert_approx_eq::<f32>(&ours.into_data(), Tolerance::relative(1e-5));
}

#[test]
fn tanh_gradient_matches_burns() {
    let device = Default::default();
    let x = Tensor::<A, 2>::random([300, 37], Distribution::Normal(0.0, 2.0), &device);
    let w = Tensor::<A, 2>::random([300, 37], Distribution::Default, &device);
    // A non-contiguous input too: the transpose of a parameter.
    for input in [x.clone(), x.clone().transpose().transpose()] {
        let a = input.clone().require_grad();
        let b = input.require_grad();
        let ga = (tanh(a.clone()) * w.clone()).sum().backward();
        let gb = (b.clone().tanh() * w.clone()).sum().backward();
        let da = a.grad(&ga).unwrap().into_data();
        let db = b.grad(&gb).unwrap().into_data();
        da.assert_approx_eq::<f32>(&db, Tolerance::absolute(1e-6));
    }
}

/// The CPU kernels of batch norm against the composition of Burn's operations that CUDA
/// and wgpu run: forward, the statistics, the three gradients and the inference form.
#[test]
fn batch_norm_kernels_match_the_composition() {
    let device = Default::default();
    let f = |t: Tensor<Flex, 3>| t.into_primitive().tensor();
    let v = |t: Tensor<Flex, 1>| t.into_primitive().tensor();
    let back3 = |t| Tensor::<Flex, 3>::from_primitive(TensorPrimitive::Float(t));
    let back1 = |t| Tensor::<Flex, 1>::from_primitive(TensorPrimitive::Float(t));
    let tol = Tolerance::<f32>::absolute(2e-5);
    let x = Tensor::<Flex, 3>::random([5, 3, 7], Distribution::Normal(1.5, 3.0), &device);
    let gamma = Tensor::<Flex, 1>::random([3], Distribution::Uniform(0.5, 2.0), &device);
    let beta = Tensor::<Flex, 1>::random([3], Distribution::Uniform(-1.0, 1.0), &device);
    let grad = Tensor::<Flex, 3>::random([5, 3, 7], Distribution::Default, &device);
    let ours = Flex::batch_norm(f(x.clone()), v(gamma.clone()), v(beta.clone()), 1e-5);
    let theirs =
        composed::batch_norm::<Flex>(f(x.clone()), v(gamma.clone()), v(beta.clone()), 1e-5);
    back3(ours.0)
        .into_data()
        .assert_approx_eq(&back3(theirs.0).into_data(), tol);
    back1(ours.1.clone())
        .into_data()
        .assert_approx_eq(&back1(theirs.1).into_data(), tol);
    back1(ours.2.clone())
        .into_data()
        .assert_approx_eq(&back1(theirs.2).into_data(), tol);
    let (mean, var) = (back1(ours.1), back1(ours.2));
    let args = || {
        (
            f(x.clone()),
            v(gamma.clone()),
            v(mean.clone()),
            v(var.clone()),
        )
    };
    let (a, b, c, d) = args();
    let ours = Flex::batch_norm_backward(a, b, c, d, 1e-5, f(grad.clone()));
    let (a, b, c, d) = args();
    let theirs = composed::batch_norm_backward::<Flex>(a, b, c, d, 1e-5, f(grad.clone()));
    let tol = Tolerance::<f32>::absolute(1e-4);
    back3(ours.0)
        .into_data()
        .assert_approx_eq(&back3(theirs.0).into_data(), tol);
    back1(ours.1)
        .into_data()
        .assert_approx_eq(&back1(theirs.1).into_data(), tol);
    back1(ours.2)
        .into_data()
        .assert_approx_eq(&back1(theirs.2).into_data(), tol);
    let ours = Flex::channel_affine(f(x.clone()), v(gamma.clone()), v(beta.clone()));
    let theirs = composed::channel_affine::<Flex>(f(x), v(gamma), v(beta));
    back3(ours)
        .into_data()
        .assert_approx_eq(&back3(theirs).into_data(), tol);
}

/// A classifier's head (its output layer and loss as one autodiff node, through the
/// compositions every backend without its own head runs) against ember's layer then Burn's
/// loss: the same loss and correct rows, and the same gradients of the layer's input, weight
/// and bias, for classes and for a binary classifier.
#[test]
fn a_classifier_head_matches_the_layer_then_the_loss() {
    use burn::nn::LinearConfig;
    let device = Default::default();
    for (classes, binary) in [(7, false), (1, true)] {
        let layer = LinearConfig::new(13, classes).init::<A>(&device);
        let x = Tensor::<A, 2>::random([29, 13], Distribution::Normal(0.0, 1.5), &device);
        let labels: Vec<i64> = (0..29)
            .map(|r| (r * 5 + 2) % classes.max(2) as i64)
            .collect();
        let labels = Tensor::<A, 1, Int>::from_ints(labels.as_slice(), &device);
        let grads_of = |head: bool| {
            let x = x.clone().require_grad();
            let (loss, correct) = match (head, binary) {
                (true, false) => classifier_head(x.clone(), &layer, labels.clone(), false),
                (true, true) => classifier_head(
                    x.clone(),
                    &layer,
                    labels.clone().unsqueeze_dim::<2>(1),
                    true,
                ),
                (false, false) => cross_entropy(
                    linear(x.clone(), &layer, Activation::Identity),
                    labels.clone(),
                ),
                (false, true) => binary_cross_entropy(
                    linear(x.clone(), &layer, Activation::Identity),
                    labels.clone().unsqueeze_dim(1),
                ),
            };
            let grads = (loss.clone() * 3.0).backward();
            let grad = |t: Tensor<A, 2>| t.grad(&grads).expect("a gradient").into_data();
            let bias = layer.bias.as_ref().expect("a bias").val();
            let db = bias.grad(&grads).expect("a gradient").into_data();
            (
                loss.into_data(),
                correct.into_data(),
                [grad(x), grad(layer.weight.val())],
                db,
            )
        };
        let (head, composed) = (grads_of(true), grads_of(false));
        let tolerance = Tolerance::<f32>::default();
        head.0.assert_approx_eq(&composed.0, tolerance);
        assert_eq!(head.1, composed.1, "correct rows");
        for (got, want) in head.2.iter().zip(&composed.2) {
            got.assert_approx_eq::<f32>(want, tolerance);
        }
        head.3.assert_approx_eq::<f32>(&composed.3, tolerance);
    }
}
