//! Each kernel against Burn's composition of the same operation (`ops::composed`) on this
//! machine's wgpu device (in CI, Mesa's lavapipe): shapes with tails of partial tiles, one row,
//! one column, each activation, with and without the input's gradient.

use super::*;
use burn::backend::Wgpu;
use burn::prelude::*;
use burn::tensor::TensorPrimitive;
use burn::tensor::ops::FloatTensorOps;

type G = Wgpu;

fn device() -> burn::backend::wgpu::WgpuDevice {
    burn::backend::wgpu::WgpuDevice::default()
}

fn random(shape: &[usize], seed: u64) -> FloatTensor<G> {
    let mut rng = crate::rng::stream(seed, "gpu kernel test", 0);
    let n: usize = shape.iter().product();
    let values: Vec<f32> = (0..n)
        .map(|_| (3.0 * crate::rng::uniform(&mut rng) - 1.5) as f32)
        .collect();
    let flat = Tensor::<G, 1>::from_floats(values.as_slice(), &device());
    G::float_reshape(flat.into_primitive().tensor(), Shape::from(shape.to_vec()))
}

fn values(t: FloatTensor<G>) -> Vec<f32> {
    Tensor::<G, 1>::from_primitive(TensorPrimitive::Float(t))
        .into_data()
        .to_vec()
        .unwrap()
}

fn values_nd(t: FloatTensor<G>) -> Vec<f32> {
    let n = t.shape.num_elements();
    values(G::float_reshape(t, Shape::new([n])))
}

/// Asserts that `got` and `want` agree to f32 rounding of sums of this many terms.
fn close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let tol = 1e-5 * w.abs().max(1.0) * 8.0;
        assert!((g - w).abs() <= tol, "{what}[{i}]: {g} against {w}");
    }
}

/// Asserts that a layer's gradients from ember's kernel agree with the composition's.
fn close_grads(got: LinearGrads<G>, want: LinearGrads<G>, what: &str) {
    close(
        &values_nd(got.dw),
        &values_nd(want.dw),
        &format!("dw {what}"),
    );
    close(
        &values_nd(got.db),
        &values_nd(want.db),
        &format!("db {what}"),
    );
    if let (Some(a), Some(b)) = (got.dx, want.dx) {
        assert_eq!(a.shape, b.shape, "dx {what}");
        close(&values_nd(a), &values_nd(b), &format!("dx {what}"));
    }
}

/// Asserts that an Adam update's new weights and moments agree with the composition's.
fn close_adam(
    got: [FloatTensor<G>; 3],
    want: (FloatTensor<G>, FloatTensor<G>, FloatTensor<G>),
    what: &str,
) {
    let [w, m, v] = got;
    close(&values_nd(w), &values_nd(want.0), &format!("adam w {what}"));
    close(&values_nd(m), &values_nd(want.1), &format!("adam m {what}"));
    close(&values_nd(v), &values_nd(want.2), &format!("adam v {what}"));
}

const SHAPES: [(usize, usize, usize); 5] = [
    (1, 1, 1),
    (3, 5, 7),
    (17, 33, 16),
    (37, 70, 29),
    (64, 100, 10),
];
const ACTS: [Activation; 3] = [Activation::Identity, Activation::Relu, Activation::Tanh];

#[test]
fn a_layer_forward_matches_the_composition() {
    for (m, k, n) in SHAPES {
        for act in ACTS {
            let (x, w, b) = (random(&[m, k], 1), random(&[k, n], 2), random(&[n], 3));
            let got = G::fused_linear(x.clone(), w.clone(), b.clone(), act);
            let want = composed::fused_linear::<G>(x, w, b, act);
            close(
                &values_nd(got),
                &values_nd(want),
                &format!("y {m}x{k}x{n} {act:?}"),
            );
        }
    }
}

#[test]
fn a_layer_backward_matches_the_composition() {
    for (m, k, n) in SHAPES {
        for act in ACTS {
            for need_dx in [false, true] {
                let (x, w, b) = (random(&[m, k], 4), random(&[k, n], 5), random(&[n], 6));
                let y = composed::fused_linear::<G>(x.clone(), w.clone(), b, act);
                let g = random(&[m, n], 7);
                let inputs = (x.clone(), w.clone(), y.clone(), g.clone());
                let got = G::fused_linear_backward(x, w, y, g, act, need_dx);
                let want = composed::fused_linear_backward::<G>(inputs, act, need_dx);
                assert_eq!(got.dx.is_some(), need_dx);
                close_grads(got, want, &format!("{m}x{k}x{n} {act:?}"));
            }
        }
    }
}

#[test]
fn the_updates_match_the_composition() {
    // Below MIN_UPDATE_ELEMENTS the composition runs; the kernel from 1,024 elements, of any
    // rank (a convolution's weights have four).
    for shape in [
        vec![1],
        vec![1100],
        vec![70, 29],
        vec![4, 3, 5, 5],
        vec![8, 3, 9, 9],
    ] {
        let (w, g) = (random(&shape, 8), random(&shape, 9));
        let lr = Lr::One(0.01);
        let got = G::sgd_step(w.clone(), g.clone(), &lr);
        close(
            &values_nd(got),
            &values_nd(composed::sgd_step::<G>(w.clone(), g.clone(), &lr)),
            "sgd",
        );
        let (m, v) = (random(&shape, 10), random(&shape, 11));
        let v = G::float_abs(v);
        let s = AdamStep {
            beta1: 0.9,
            beta2: 0.999,
            epsilon: 1e-8,
            time: 3,
        };
        let got = G::adam_step(w.clone(), g.clone(), m.clone(), v.clone(), s, &lr);
        let want = composed::adam_step::<G>((w, g, m, v), s, &lr);
        close_adam([got.0, got.1, got.2], want, &format!("{shape:?}"));
    }
}

/// K replicas of a layer, one launch each way: an input of each replica's own (with its
/// gradient) and an input they share (whose gradient the composition makes).
#[test]
fn replicas_layers_match_the_composition() {
    for (m, k, n) in [(1, 1, 1), (17, 33, 16), (37, 70, 29)] {
        for (replicas, shared) in [(1, false), (3, false), (4, true)] {
            let act = Activation::Tanh;
            let x = match shared {
                true => random(&[m, k], 21),
                false => random(&[replicas, m, k], 21),
            };
            let (w, b) = (random(&[replicas, k, n], 22), random(&[replicas, n], 23));
            let what = format!("{replicas} replicas {m}x{k}x{n} shared {shared}");
            let y = G::fused_linear(x.clone(), w.clone(), b.clone(), act);
            let want = composed::fused_linear::<G>(x.clone(), w.clone(), b, act);
            assert_eq!(y.shape, want.shape, "y {what}");
            close(
                &values_nd(y.clone()),
                &values_nd(want),
                &format!("y {what}"),
            );
            let g = random(&[replicas, m, n], 24);
            let need_dx = !shared;
            let inputs = (x.clone(), w.clone(), y.clone(), g.clone());
            let got = G::fused_linear_backward(x, w, y, g, act, need_dx);
            let want = composed::fused_linear_backward::<G>(inputs, act, need_dx);
            assert_eq!(got.dx.is_some(), need_dx);
            close_grads(got, want, &what);
        }
    }
}

/// A model's parameters: shapes of one to four dimensions, one of them transposed (read
/// through strides that are not row-major), and more than one launch takes (17).
fn model_params(seed: u64) -> Vec<FloatTensor<G>> {
    let mut shapes = vec![
        vec![1],
        vec![1100],
        vec![70, 29],
        vec![8, 3, 9, 9],
        vec![3, 5],
    ];
    shapes.extend((0..12).map(|i| vec![i + 1, 40]));
    let mut params: Vec<_> = (shapes.iter().zip(seed..))
        .map(|(shape, s)| random(shape, s * 31))
        .collect();
    params[4] = G::float_swap_dims(params[4].clone(), 0, 1);
    params
}

#[test]
fn grouped_updates_match_each_parameter_s_own() {
    let (ws, gs) = (model_params(20), model_params(40));
    let pairs = ws.iter().cloned().zip(gs.iter().cloned());
    let got = G::sgd_steps(pairs.map(|(w, g)| [w, g]).collect(), &Lr::One(0.01));
    for (i, (got, (w, g))) in got.into_iter().zip(ws.iter().zip(&gs)).enumerate() {
        let want = composed::sgd_step::<G>(w.clone(), g.clone(), &Lr::One(0.01));
        assert_eq!(got.shape, want.shape, "sgd {i}: shape");
        close(&values_nd(got), &values_nd(want), &format!("sgd {i}"));
    }
    let (ms, vs) = (model_params(60), model_params(80));
    let s = AdamStep {
        beta1: 0.9,
        beta2: 0.999,
        epsilon: 1e-8,
        time: 7,
    };
    let quads: Vec<[FloatTensor<G>; 4]> = (0..ws.len())
        .map(|i| [&ws[i], &gs[i], &ms[i], &G::float_abs(vs[i].clone())].map(Clone::clone))
        .collect();
    let got = G::adam_steps(quads.clone(), s, &Lr::One(0.01));
    for (i, (got, [w, g, m, v])) in got.into_iter().zip(quads).enumerate() {
        let want = composed::adam_step::<G>((w, g, m, v), s, &Lr::One(0.01));
        close_adam(got, want, &i.to_string());
    }
}

/// Replicas' parameters (stacked on the first axis) at a learning rate per replica.
#[test]
fn grouped_updates_at_a_rate_per_replica_match_each_parameter_s_own() {
    let shapes = [vec![4, 300], vec![4, 33, 17], vec![4, 2]];
    let ws: Vec<_> = (shapes.iter().zip(50..))
        .map(|(s, i)| random(s, i))
        .collect();
    let gs: Vec<_> = (shapes.iter().zip(60..))
        .map(|(s, i)| random(s, i))
        .collect();
    let rates = Tensor::<G, 1>::from_floats([0.01, 0.1, 0.001, 0.05], &device());
    let lr = Lr::PerReplica(rates.into_primitive().tensor());
    let pairs = ws
        .iter()
        .zip(&gs)
        .map(|(w, g)| [w.clone(), g.clone()])
        .collect();
    for (i, got) in G::sgd_steps(pairs, &lr).into_iter().enumerate() {
        let want = composed::sgd_step::<G>(ws[i].clone(), gs[i].clone(), &lr);
        close(&values_nd(got), &values_nd(want), &format!("sgd {i}"));
    }
    let s = AdamStep {
        beta1: 0.9,
        beta2: 0.99,
        epsilon: 1e-8,
        time: 2,
    };
    let quad = |i: usize| [&ws[i], &gs[i], &gs[i], &G::float_abs(ws[i].clone())].map(Clone::clone);
    let got = G::adam_steps((0..3).map(quad).collect(), s, &lr);
    for (i, got) in got.into_iter().enumerate() {
        let [w0, g0, m0, v0] = quad(i);
        let want = composed::adam_step::<G>((w0, g0, m0, v0), s, &lr);
        close_adam(got, want, &format!("{i} per replica"));
    }
}

#[test]
fn the_cross_entropy_matches_the_composition() {
    for (rows, classes) in [(1, 1), (1, 10), (64, 10), (300, 3), (1000, 7)] {
        let z = random(&[rows, classes], 12);
        let labels: Vec<i32> = (0..rows).map(|r| ((r * 7 + 3) % classes) as i32).collect();
        let labels = Tensor::<G, 1, Int>::from_ints(labels.as_slice(), &device()).into_primitive();
        let (loss, correct) = G::cross_entropy(z.clone(), labels.clone());
        let (want_loss, want_correct) = composed::cross_entropy::<G>(z.clone(), labels.clone());
        let what = format!("{rows}x{classes}");
        close(&values(loss), &values(want_loss), &format!("loss {what}"));
        assert_eq!(values(correct), values(want_correct), "correct {what}");
        let grad = random(&[1], 13);
        let got = G::cross_entropy_backward(z.clone(), labels.clone(), grad.clone());
        let want = composed::cross_entropy_backward::<G>(z, labels, grad);
        close(&values_nd(got), &values_nd(want), &format!("dz {what}"));
    }
}

#[test]
fn the_binary_cross_entropy_matches_the_composition() {
    for rows in [1, 2, 255, 2048, 5000] {
        let z = random(&[rows, 1], 14);
        let labels: Vec<i32> = (0..rows).map(|r| ((r * 5 + 1) % 3 % 2) as i32).collect();
        let labels = Tensor::<G, 1, Int>::from_ints(labels.as_slice(), &device())
            .reshape([rows, 1])
            .into_primitive();
        let (loss, correct) = G::binary_cross_entropy(z.clone(), labels.clone());
        let (want_loss, want_correct) =
            composed::binary_cross_entropy::<G>(z.clone(), labels.clone());
        close(&values(loss), &values(want_loss), &format!("loss {rows}"));
        assert_eq!(values(correct), values(want_correct), "correct {rows}");
        let grad = random(&[1], 15);
        let got = G::binary_cross_entropy_backward(z.clone(), labels.clone(), grad.clone());
        let want = composed::binary_cross_entropy_backward::<G>(z, labels, grad);
        close(&values_nd(got), &values_nd(want), &format!("dz {rows}"));
    }
}

/// Class labels `[rows]`, or 0/1 labels `[rows, 1]` (`binary`), cycling through `classes`.
fn labels(rows: usize, classes: usize, binary: bool) -> IntTensor<G> {
    labels_on::<G>(rows, classes, binary)
}

/// [`labels`] on backend `B` (a wgpu one).
fn labels_on<B: Backend<Device = burn::backend::wgpu::WgpuDevice>>(
    rows: usize,
    classes: usize,
    binary: bool,
) -> IntTensor<B> {
    let classes = if binary { 2 } else { classes };
    let labels: Vec<i32> = (0..rows).map(|r| ((r * 7 + 3) % classes) as i32).collect();
    let labels = Tensor::<B, 1, Int>::from_ints(labels.as_slice(), &device());
    match binary {
        true => labels.reshape([rows, 1]).into_primitive(),
        false => labels.into_primitive(),
    }
}

/// A classifier's head (its output layer and loss in one operation, the logits' gradient made
/// by the loss's launch and scaled in the layer's backward) against Burn's compositions of the
/// layer and the loss, each way; its logits' gradient is the loss kernel's for a loss gradient
/// of 1, bit for bit.
#[test]
fn a_classifier_head_matches_the_layer_and_the_loss_composed() {
    for (m, k, n, binary) in [(1, 3, 1, true), (37, 70, 1, true), (64, 100, 10, false)] {
        let (x, w, b) = (random(&[m, k], 16), random(&[k, n], 17), random(&[n], 18));
        let y = labels(m, n, binary);
        let head = G::classifier_head(x.clone(), w.clone(), b.clone(), y.clone(), binary);
        let z = composed::fused_linear::<G>(x.clone(), w.clone(), b, Activation::Identity);
        let (loss, correct) = match binary {
            true => composed::binary_cross_entropy::<G>(z.clone(), y.clone()),
            false => composed::cross_entropy::<G>(z.clone(), y.clone()),
        };
        let what = format!("{m}x{k}x{n}");
        close(&values(head.loss), &values(loss), &format!("loss {what}"));
        assert_eq!(values(head.correct), values(correct), "correct {what}");
        close(
            &values_nd(head.logits.clone()),
            &values_nd(z.clone()),
            &what,
        );
        let one = Tensor::<G, 1>::ones([1], &device())
            .into_primitive()
            .tensor();
        let unit = match binary {
            true => G::binary_cross_entropy_backward(head.logits.clone(), y.clone(), one),
            false => G::cross_entropy_backward(head.logits.clone(), y.clone(), one),
        };
        assert_eq!(values_nd(head.dlogits.clone()), values_nd(unit), "{what}");
        let grad = random(&[1], 19);
        let dz = match binary {
            true => composed::binary_cross_entropy_backward::<G>(z.clone(), y, grad.clone()),
            false => composed::cross_entropy_backward::<G>(z.clone(), y, grad.clone()),
        };
        for need_dx in [false, true] {
            let kept = (
                x.clone(),
                w.clone(),
                head.logits.clone(),
                head.dlogits.clone(),
            );
            let got = G::classifier_head_backward(kept, grad.clone(), need_dx);
            let inputs = (x.clone(), w.clone(), z.clone(), dz.clone());
            let want = composed::fused_linear_backward::<G>(inputs, Activation::Identity, need_dx);
            assert_eq!(got.dx.is_some(), need_dx);
            close_grads(got, want, &format!("head {what}"));
        }
    }
}

/// The augmentation's kernel gives the composition's pixels exactly: shifts both ways past
/// the edges, mirrored and not, on several channels.
#[test]
fn the_augmentation_matches_the_composition() {
    let (n, c, h, w) = (6, 3, 5, 7);
    let maps = random(&[n, c, h, w], 20);
    let draws: Vec<i32> = (0..n as i32)
        .flat_map(|i| [i % 5 - 2, 3 - i % 7, i % 2])
        .collect();
    let draws = Tensor::<G, 1, Int>::from_ints(draws.as_slice(), &device()).reshape([n, 3]);
    let draws = draws.into_primitive();
    let got = G::augment(maps.clone(), draws.clone());
    let want = composed::augment::<G>(maps, draws);
    assert_eq!(values_nd(got), values_nd(want));
}

/// The head's one launch (logits within one cube) gives the bits of the layer's launch
/// followed by the loss's: logits, loss, correct rows and the logits' gradient.
#[test]
fn the_one_launch_head_gives_the_two_launches_bits() {
    type Inner = burn_cubecl::CubeBackend<burn::backend::wgpu::WgpuRuntime, f32, i32, u32>;
    let cube = |t: FloatTensor<G>| -> FloatTensor<Inner> {
        let data = Tensor::<G, 1>::from_primitive(TensorPrimitive::Float(G::float_reshape(
            t.clone(),
            Shape::new([t.shape.num_elements()]),
        )))
        .into_data();
        let flat = Tensor::<Inner, 1>::from_data(data, &device())
            .into_primitive()
            .tensor();
        Inner::float_reshape(flat, t.shape.clone())
    };
    let read = |t: FloatTensor<Inner>| -> Vec<f32> {
        let n = t.meta.shape().num_elements();
        let flat = Inner::float_reshape(t, Shape::new([n]));
        let t = Tensor::<Inner, 1>::from_primitive(TensorPrimitive::Float(flat));
        t.into_data().to_vec().unwrap()
    };
    for (m, k, n, binary) in [
        (1, 3, 1, true),
        (64, 5, 1, true),
        (2, 1, 3, false),
        (37, 70, 64, false),
        (64, 100, 10, false),
    ] {
        assert!(head::fits(m, n));
        let (x, w, b) = (random(&[m, k], 21), random(&[k, n], 22), random(&[n], 23));
        let y = labels_on::<Inner>(m, n, binary);
        let (x, w, b) = (cube(x), cube(w), cube(b));
        let one = head::forward::<burn::backend::wgpu::WgpuRuntime>(
            x.clone(),
            w.clone(),
            b.clone(),
            y.clone(),
            binary,
        );
        let z = linear::forward(x, w, b, linear::IDENTITY);
        let [l, c, dz] = loss::forward_with_grad(z.clone(), y, binary);
        let what = format!("{m}x{k}x{n} binary {binary}");
        let [l1, c1, z1, dz1] = one;
        assert_eq!(read(z1), read(z), "logits {what}");
        assert_eq!(read(l1), read(l), "loss {what}");
        assert_eq!(read(c1), read(c), "correct {what}");
        assert_eq!(read(dz1), read(dz), "gradient {what}");
    }
}

/// linear-scalar's model and loss, each way, against the composition: replicas sharing the
/// inputs and each with its own, one row, more rows than the cube's units.
#[test]
fn the_scalar_mse_matches_the_composition() {
    for (k, n, c, shared) in [(1, 1, 3, true), (1, 128, 40, true), (3, 300, 5, false)] {
        let x = match shared {
            true => random(&[n, c + 1], 24),
            false => random(&[k, n, c + 1], 24),
        };
        let y_rows = if shared { n } else { k * n };
        let (y, w, p) = (
            random(&[y_rows, 1], 25),
            random(&[k, c, 1], 26),
            random(&[k], 27),
        );
        let what = format!("{k} replicas of {n}x{c} shared {shared}");
        let (loss, e) = G::scalar_mse_replicas_forward(x.clone(), y.clone(), w.clone(), p.clone());
        let (want_loss, want_e) = composed::scalar_mse::<G>(x.clone(), y, w, p);
        close(
            &values_nd(loss),
            &values_nd(want_loss),
            &format!("loss {what}"),
        );
        close(
            &values_nd(e.clone()),
            &values_nd(want_e.clone()),
            &format!("e {what}"),
        );
        let dloss = random(&[k], 28);
        let (dw, dp) = G::scalar_mse_replicas_backward(x.clone(), e, dloss.clone());
        let (want_dw, want_dp) = composed::scalar_mse_backward::<G>(x, want_e, dloss);
        close(&values_nd(dw), &values_nd(want_dw), &format!("dw {what}"));
        close(&values_nd(dp), &values_nd(want_dp), &format!("dp {what}"));
    }
}

/// A model whose parameters are all small (linear-scalar's `w` `[40, 1]` and `p` `[1]`) takes
/// the grouped update too, with the per-parameter composition's values.
#[test]
fn grouped_updates_of_small_parameters_match_each_parameter_s_own() {
    let shapes = [vec![40, 1], vec![1]];
    let quads: Vec<[FloatTensor<G>; 4]> = (shapes.iter().zip(70..))
        .map(|(s, i)| [i, i + 10, i + 20, i + 30].map(|seed| random(s, seed)))
        .map(|[w, g, m, v]| [w, g, m, G::float_abs(v)])
        .collect();
    let s = AdamStep {
        beta1: 0.9,
        beta2: 0.999,
        epsilon: 1e-8,
        time: 3,
    };
    assert!(group::way(&quads).is_ok());
    let got = G::adam_steps(quads.clone(), s, &Lr::One(5e-4));
    for (i, (got, [w, g, m, v])) in got.into_iter().zip(quads).enumerate() {
        let want = composed::adam_step::<G>((w, g, m, v), s, &Lr::One(5e-4));
        close_adam(got, want, &format!("small {i}"));
    }
}

/// Batch norm in training, each way, against the composition: one element, a channel of more
/// elements than the cube's units, maps whose layout is not contiguous.
#[test]
fn batch_norm_matches_the_composition() {
    for (n, c, s, strided) in [(1, 1, 1, false), (3, 4, 300, false), (5, 3, 7, true)] {
        let x = match strided {
            true => G::float_swap_dims(random(&[n, s, c], 29), 1, 2),
            false => random(&[n, c, s], 29),
        };
        let (gamma, beta, grad) = (random(&[c], 30), random(&[c], 31), random(&[n, c, s], 32));
        let what = format!("{n}x{c}x{s} strided {strided}");
        let (y, mean, var) = G::batch_norm(x.clone(), gamma.clone(), beta.clone(), 1e-5);
        let want = composed::batch_norm::<G>(x.clone(), gamma.clone(), beta, 1e-5);
        close(&values_nd(y), &values_nd(want.0), &format!("y {what}"));
        close(
            &values_nd(mean.clone()),
            &values_nd(want.1),
            &format!("mean {what}"),
        );
        close(
            &values_nd(var.clone()),
            &values_nd(want.2),
            &format!("var {what}"),
        );
        let got = G::batch_norm_backward(
            x.clone(),
            gamma.clone(),
            mean.clone(),
            var.clone(),
            1e-5,
            grad.clone(),
        );
        let want = composed::batch_norm_backward::<G>(x, gamma, mean, var, 1e-5, grad);
        close(&values_nd(got.0), &values_nd(want.0), &format!("dx {what}"));
        close(
            &values_nd(got.1),
            &values_nd(want.1),
            &format!("dgamma {what}"),
        );
        close(
            &values_nd(got.2),
            &values_nd(want.2),
            &format!("dbeta {what}"),
        );
    }
}

/// Dropout draws the CPU kernel's masks (the same hash of the element's index and the seed),
/// on a contiguous tensor and on a transposed one (whose elements count in its own row-major
/// order), and its backward applies the forward's mask.
#[test]
fn dropout_draws_the_cpu_s_masks() {
    use burn::backend::Flex;
    for (shape, seed, p) in [(vec![64, 512], 7u64, 0.3), (vec![3, 5, 7], 1 << 40, 0.5)] {
        let x = random(&shape, 33);
        let cpu_x =
            Tensor::<Flex, 1>::from_floats(values_nd(x.clone()).as_slice(), &Default::default());
        let cpu_x =
            Flex::float_reshape(cpu_x.into_primitive().tensor(), Shape::from(shape.clone()));
        let want = Tensor::<Flex, 1>::from_primitive(TensorPrimitive::Float(Flex::float_reshape(
            Flex::dropout(cpu_x, p, seed),
            Shape::new([shape.iter().product()]),
        )));
        let want: Vec<f32> = want.into_data().to_vec().unwrap();
        assert_eq!(values_nd(G::dropout(x.clone(), p, seed)), want, "{shape:?}");
        assert_eq!(
            values_nd(G::dropout_backward(x, p, seed)),
            want,
            "backward {shape:?}"
        );
    }
    let x = G::float_swap_dims(random(&[6, 9], 34), 0, 1);
    let contiguous = G::float_add_scalar(x.clone(), 0.0.into());
    assert_eq!(
        values_nd(G::dropout(x, 0.4, 3)),
        values_nd(G::dropout(contiguous, 0.4, 3))
    );
}
