//! ember's own kernels on Burn's CubeCL backends, as `ops::EmberBackend` for
//! `Fusion<CubeBackend>`: Burn's CUDA and wgpu backends alike, one source (CubeCL compiles it
//! to CUDA and to WGSL). Each operation is one custom operation of Burn's fusion stream
//! (`stream`) that launches one kernel, where Burn's composition of the same operation launches
//! several (a product, then fused element-wise kernels, then reductions):
//! - a dense layer forward and backward (`linear`),
//! - SGD's and Adam's updates of a parameter (`update`), and of all of a model's parameters
//!   together (`group`),
//! - a classifier's cross-entropy (of classes, or binary on one logit) with its correct rows,
//!   and its gradient (`loss`);
//! - linear-scalar's model and mean squared error, a replica per cube (`scalar_mse`);
//! - batch normalisation in training, a channel per cube (`batch_norm`);
//! - dropout, with the CPU kernel's masks (`dropout`);
//! - a convolutional network's train-time shifts and mirrors of its images (`augment`);
//! - a classifier's head: its output layer and loss forward in one operation, which also makes
//!   the logits' gradient for a loss gradient of 1 (`head`: one launch where the logits fit one
//!   cube, else the layer's and the loss's), and backward in one launch, the layer's, which
//!   scales that gradient by the loss's as it reads it.
//!
//! What a kernel does not take (the gradient of an input that replicas share, a per-replica
//! learning rate, a layer too large for one launch's grid) falls back to the composition (`ops::composed`), as
//! everything does with `EMBER_GPU_KERNELS=0` (for comparing the two).

mod augment;
mod batch_norm;
mod dropout;
mod group;
mod head;
mod linear;
mod loss;
pub mod path;
mod scalar_mse;
mod stream;
mod update;

use crate::ops::{
    Activation, AdamStep, EmberBackend, Head, HeadKept, LinearGrads, LossAndCorrect, Lr, composed,
    replicas_of,
};
use burn::tensor::Shape;
use burn::tensor::ops::{FloatTensor, IntTensor};
use burn_cubecl::{BoolElement, CubeBackend, CubeRuntime};
use burn_fusion::Fusion;
use stream::{Handles, register};

/// Burn's CubeCL backend with ember's element types (f32 floats, i32 integers).
type Cube<R, BT> = CubeBackend<R, f32, i32, BT>;

/// Whether ember's kernels run: unless `EMBER_GPU_KERNELS=0`, which runs Burn's compositions
/// of the same operations instead.
fn kernels_on() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("EMBER_GPU_KERNELS").map_or(true, |v| v != "0"))
}

/// The way of an operation whose kernel takes every case: ember's, unless turned off.
fn kernels_way() -> Result<(), path::Reason> {
    if kernels_on() { Ok(()) } else { Err(OFF) }
}

/// The most cubes a launch's first dimension takes on every API (WGSL's limit).
const MAX_CUBES: usize = 65_535;

fn act_code(act: Activation) -> u32 {
    match act {
        Activation::Identity => linear::IDENTITY,
        Activation::Relu => linear::RELU,
        Activation::Tanh => linear::TANH,
    }
}

/// The smallest parameter whose update runs as ember's kernel. Below it, Burn's fusion folds
/// the update's element-wise operations into the kernel that made the gradient (linear-scalar's
/// two small parameters), which one operation of ember's would split into two launches.
const MIN_UPDATE_ELEMENTS: usize = 1024;

/// The way of everything with `EMBER_GPU_KERNELS=0`.
const OFF: path::Reason = "EMBER_GPU_KERNELS=0";

/// The learning rate with which ember's update kernel takes `w` (at a learning rate for the
/// whole tensor), or why it does not.
fn update_way(
    w: &burn_fusion::FusionTensor<impl burn_fusion::FusionRuntime>,
    lr: &Lr<impl burn::tensor::backend::Backend>,
) -> Result<f32, path::Reason> {
    match lr {
        _ if !kernels_on() => Err(OFF),
        Lr::One(_) if w.shape.num_elements() < MIN_UPDATE_ELEMENTS => {
            Err("under 1024 elements, fused by Burn")
        }
        Lr::One(rate) => Ok(*rate as f32),
        _ => Err("a learning rate per replica"),
    }
}

/// Whether the layer kernels take `x` `[m, k]` and `w` `[k, n]`, or K replicas' (`w`
/// `[K, k, n]`, `x` `[K, m, k]` or shared `[m, k]`), in one launch each way, or why they do
/// not. The kernels make no gradient of an input the replicas share (a sum over replicas).
fn layer_way<F: burn_fusion::FusionRuntime>(
    x: &burn_fusion::FusionTensor<F>,
    w: &burn_fusion::FusionTensor<F>,
    need_dx: bool,
) -> Result<(), path::Reason> {
    if !kernels_on() {
        return Err(OFF);
    }
    let (xd, wd) = (x.shape.num_dims(), w.shape.num_dims());
    let paired =
        matches!((xd, wd), (2, 2) | (2, 3)) || (xd == 3 && wd == 3 && x.shape[0] == w.shape[0]);
    if !paired {
        return Err("not a matrix product");
    }
    if xd == 2 && wd == 3 && need_dx {
        return Err("the gradient of an input the replicas share");
    }
    let (m, k, n) = (x.shape[xd - 2], x.shape[xd - 1], w.shape[wd - 1]);
    let replicas = if wd == 3 { w.shape[0] } else { 1 };
    let spans = linear::spans;
    let fits = m > 0
        && k > 0
        && n > 0
        && spans(k) * spans(n) + spans(m) * spans(k) <= MAX_CUBES
        && spans(m) <= MAX_CUBES
        && (1..=MAX_CUBES).contains(&replicas);
    if fits {
        Ok(())
    } else {
        Err("too large for one launch")
    }
}

fn float<R: CubeRuntime, BT: BoolElement>(
    h: &mut Handles<Cube<R, BT>>,
    ir: &burn::backend::ir::TensorIr,
) -> burn_cubecl::tensor::CubeTensor<R> {
    h.get_float_tensor::<Cube<R, BT>>(ir)
}

fn put<R: CubeRuntime, BT: BoolElement>(
    h: &mut Handles<Cube<R, BT>>,
    ir: &burn::backend::ir::TensorIr,
    t: burn_cubecl::tensor::CubeTensor<R>,
) {
    h.register_float_tensor::<Cube<R, BT>>(&ir.id, t);
}

impl<R: CubeRuntime, BT: BoolElement> EmberBackend for Fusion<Cube<R, BT>> {
    const GROUPED_UPDATES: bool = true;

    fn sgd_step(w: FloatTensor<Self>, g: FloatTensor<Self>, lr: &Lr<Self>) -> FloatTensor<Self> {
        let Ok(lr) = path::chosen("sgd_step", update_way(&w, lr)) else {
            return composed::sgd_step::<Self>(w, g, lr);
        };
        let shape = w.shape.clone();
        let run: stream::Run<Cube<R, BT>> = Box::new(move |ins, outs, h| {
            let (w, g) = (float::<R, BT>(h, &ins[0]), float::<R, BT>(h, &ins[1]));
            put::<R, BT>(h, &outs[0], update::sgd::<R>(w, g, lr));
        });
        let mut out = register::<Cube<R, BT>>("sgd_step", vec![w, g], vec![shape], run);
        out.remove(0)
    }

    fn sgd_steps(params: Vec<[FloatTensor<Self>; 2]>, lr: &Lr<Self>) -> Vec<FloatTensor<Self>> {
        if path::chosen("sgd_steps", group::way(&params)).is_err() {
            let step = |[w, g]: [FloatTensor<Self>; 2]| Self::sgd_step(w, g, lr);
            return params.into_iter().map(step).collect();
        }
        group::sgd::<R, BT>(params, lr)
    }

    fn adam_steps(
        params: Vec<[FloatTensor<Self>; 4]>,
        s: AdamStep,
        lr: &Lr<Self>,
    ) -> Vec<[FloatTensor<Self>; 3]> {
        if path::chosen("adam_steps", group::way(&params)).is_err() {
            let step = |[w, g, m, v]: [FloatTensor<Self>; 4]| {
                let (w, m, v) = Self::adam_step(w, g, m, v, s, lr);
                [w, m, v]
            };
            return params.into_iter().map(step).collect();
        }
        let (factor, eps) = s.corrections();
        group::adam::<R, BT>(params, [s.beta1, s.beta2, factor, eps], lr)
    }

    fn adam_step(
        w: FloatTensor<Self>,
        g: FloatTensor<Self>,
        m: FloatTensor<Self>,
        v: FloatTensor<Self>,
        s: AdamStep,
        lr: &Lr<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        let Ok(rate) = path::chosen("adam_step", update_way(&w, lr)) else {
            return composed::adam_step::<Self>((w, g, m, v), s, lr);
        };
        let (factor, eps) = s.corrections();
        let consts = [s.beta1, s.beta2, factor, eps, rate];
        let shape = w.shape.clone();
        let run: stream::Run<Cube<R, BT>> = Box::new(move |ins, outs, h| {
            let inputs = [0, 1, 2, 3].map(|i| float::<R, BT>(h, &ins[i]));
            let [w, m, v] = update::adam::<R>(inputs, consts);
            put::<R, BT>(h, &outs[0], w);
            put::<R, BT>(h, &outs[1], m);
            put::<R, BT>(h, &outs[2], v);
        });
        let shapes = vec![shape.clone(), shape.clone(), shape];
        let mut out = register::<Cube<R, BT>>("adam_step", vec![w, g, m, v], shapes, run);
        let (w, m) = (out.remove(0), out.remove(0));
        (w, m, out.remove(0))
    }

    fn fused_linear(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
        act: Activation,
    ) -> FloatTensor<Self> {
        if path::chosen("linear", layer_way(&x, &w, false)).is_err() {
            return composed::fused_linear::<Self>(x, w, b, act);
        }
        let (xd, wd) = (x.shape.num_dims(), w.shape.num_dims());
        let (m, n) = (x.shape[xd - 2], w.shape[wd - 1]);
        let shape = match replicas_of(&w) {
            Some(k) => Shape::new([k, m, n]),
            None => Shape::new([m, n]),
        };
        let act = act_code(act);
        let run: stream::Run<Cube<R, BT>> = Box::new(move |ins, outs, h| {
            let (x, w, b) = (
                float::<R, BT>(h, &ins[0]),
                float::<R, BT>(h, &ins[1]),
                float::<R, BT>(h, &ins[2]),
            );
            put::<R, BT>(h, &outs[0], linear::forward::<R>(x, w, b, act));
        });
        let mut out = register::<Cube<R, BT>>("linear", vec![x, w, b], vec![shape], run);
        out.remove(0)
    }

    fn fused_linear_backward(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        y: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        act: Activation,
        need_dx: bool,
    ) -> LinearGrads<Self> {
        if path::chosen("linear_backward", layer_way(&x, &w, need_dx)).is_err() {
            return composed::fused_linear_backward::<Self>((x, w, y, grad), act, need_dx);
        }
        layer_backward::<R, BT>(
            "linear_backward",
            vec![x, w, y, grad],
            act_code(act),
            need_dx,
        )
    }

    fn fused_cross_entropy() -> bool {
        path::chosen("classifier_loss", kernels_way()).is_ok()
    }

    fn cross_entropy(
        logits: FloatTensor<Self>,
        labels: IntTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        classifier_loss::<R, BT>(logits, labels, false)
    }

    fn cross_entropy_backward(
        logits: FloatTensor<Self>,
        labels: IntTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        classifier_loss_backward::<R, BT>(logits, labels, grad, false)
    }

    fn binary_cross_entropy(
        logits: FloatTensor<Self>,
        labels: IntTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        classifier_loss::<R, BT>(logits, labels, true)
    }

    fn binary_cross_entropy_backward(
        logits: FloatTensor<Self>,
        labels: IntTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        classifier_loss_backward::<R, BT>(logits, labels, grad, true)
    }

    fn augment(maps: FloatTensor<Self>, draws: IntTensor<Self>) -> FloatTensor<Self> {
        if path::chosen("augment", kernels_way()).is_err() {
            return composed::augment::<Self>(maps, draws);
        }
        let shape = maps.shape.clone();
        let run: stream::Run<Cube<R, BT>> = Box::new(move |ins, outs, h| {
            let maps = float::<R, BT>(h, &ins[0]);
            let draws = h.get_int_tensor::<Cube<R, BT>>(&ins[1]);
            put::<R, BT>(h, &outs[0], augment::augment::<R>(maps, draws));
        });
        let mut out = register::<Cube<R, BT>>("augment", vec![maps, draws], vec![shape], run);
        out.remove(0)
    }

    fn batch_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        let shape = x.shape.clone();
        if path::chosen("batch_norm", channels_way(&shape)).is_err() {
            return composed::batch_norm::<Self>(x, gamma, beta, epsilon);
        }
        let run: stream::Run<Cube<R, BT>> = Box::new(move |ins, outs, h| {
            let [x, gamma, beta] = [0, 1, 2].map(|i| float::<R, BT>(h, &ins[i]));
            let outputs = batch_norm::forward::<R>(x, gamma, beta, epsilon as f32);
            for (out, t) in outs.iter().zip(outputs) {
                put::<R, BT>(h, out, t);
            }
        });
        let stats = Shape::new([shape[1]]);
        let shapes = vec![shape, stats.clone(), stats];
        let mut out = register::<Cube<R, BT>>("batch_norm", vec![x, gamma, beta], shapes, run);
        let (y, mean) = (out.remove(0), out.remove(0));
        (y, mean, out.remove(0))
    }

    fn batch_norm_backward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        mean: FloatTensor<Self>,
        var: FloatTensor<Self>,
        epsilon: f64,
        grad: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        let shape = x.shape.clone();
        if path::chosen("batch_norm_backward", channels_way(&shape)).is_err() {
            return composed::batch_norm_backward::<Self>(x, gamma, mean, var, epsilon, grad);
        }
        let run: stream::Run<Cube<R, BT>> = Box::new(move |ins, outs, h| {
            let inputs = [0, 1, 2, 3, 4].map(|i| float::<R, BT>(h, &ins[i]));
            let outputs = batch_norm::backward::<R>(inputs, epsilon as f32);
            for (out, t) in outs.iter().zip(outputs) {
                put::<R, BT>(h, out, t);
            }
        });
        let stats = Shape::new([shape[1]]);
        let shapes = vec![shape, stats.clone(), stats];
        let inputs = vec![x, gamma, mean, var, grad];
        let mut out = register::<Cube<R, BT>>("batch_norm_backward", inputs, shapes, run);
        let (dx, dgamma) = (out.remove(0), out.remove(0));
        (dx, dgamma, out.remove(0))
    }

    fn dropout(x: FloatTensor<Self>, p: f64, seed: u64) -> FloatTensor<Self> {
        let shape = x.shape.clone();
        if path::chosen("dropout", dropout_way(&shape)).is_err() {
            return Self::dropout_by_composition(x, p, seed);
        }
        let (threshold, scale) = crate::ops::dropout::threshold_and_scale(p);
        let run: stream::Run<Cube<R, BT>> = Box::new(move |ins, outs, h| {
            let x = float::<R, BT>(h, &ins[0]);
            put::<R, BT>(
                h,
                &outs[0],
                dropout::dropout::<R>(x, seed, threshold, scale),
            );
        });
        register::<Cube<R, BT>>("dropout", vec![x], vec![shape], run).remove(0)
    }

    fn scalar_mse_replicas_forward(
        x: FloatTensor<Self>,
        y: FloatTensor<Self>,
        w: FloatTensor<Self>,
        p: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (k, n) = (w.shape[0], x.shape[x.shape.num_dims() - 2]);
        if path::chosen("scalar_mse", scalar_mse_way(k)).is_err() {
            return composed::scalar_mse::<Self>(x, y, w, p);
        }
        let run: stream::Run<Cube<R, BT>> = Box::new(move |ins, outs, h| {
            let [x, y, w, p] = [0, 1, 2, 3].map(|i| float::<R, BT>(h, &ins[i]));
            let (loss, e) = scalar_mse::forward::<R>(x, y, w, p);
            put::<R, BT>(h, &outs[0], loss);
            put::<R, BT>(h, &outs[1], e);
        });
        let shapes = vec![Shape::new([k]), Shape::new([k, n, 1])];
        let mut out = register::<Cube<R, BT>>("scalar_mse", vec![x, y, w, p], shapes, run);
        let loss = out.remove(0);
        (loss, out.remove(0))
    }

    fn scalar_mse_replicas_backward(
        x: FloatTensor<Self>,
        residuals: FloatTensor<Self>,
        dloss: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (k, c) = (residuals.shape[0], x.shape[x.shape.num_dims() - 1] - 1);
        if path::chosen("scalar_mse_backward", scalar_mse_way(k)).is_err() {
            return composed::scalar_mse_backward::<Self>(x, residuals, dloss);
        }
        let run: stream::Run<Cube<R, BT>> = Box::new(move |ins, outs, h| {
            let [x, e, dloss] = [0, 1, 2].map(|i| float::<R, BT>(h, &ins[i]));
            let (dw, dp) = scalar_mse::backward::<R>(x, e, dloss);
            put::<R, BT>(h, &outs[0], dw);
            put::<R, BT>(h, &outs[1], dp);
        });
        let shapes = vec![Shape::new([k, c, 1]), Shape::new([k])];
        let inputs = vec![x, residuals, dloss];
        let mut out = register::<Cube<R, BT>>("scalar_mse_backward", inputs, shapes, run);
        let dw = out.remove(0);
        (dw, out.remove(0))
    }

    fn fused_scalar_mse() -> bool {
        path::chosen("scalar_mse", kernels_way()).is_ok()
    }

    fn classifier_head(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
        labels: IntTensor<Self>,
        binary: bool,
    ) -> Head<Self> {
        if path::chosen("classifier_head", head_way(&x, &w, false)).is_err() {
            return composed::classifier_head::<Self>((x, w, b), labels, binary);
        }
        let logits = Shape::new([x.shape[0], w.shape[1]]);
        let run: stream::Run<Cube<R, BT>> = Box::new(move |ins, outs, h| {
            let [x, w, b] = [0, 1, 2].map(|i| float::<R, BT>(h, &ins[i]));
            let labels = h.get_int_tensor::<Cube<R, BT>>(&ins[3]);
            for (out, t) in outs.iter().zip(head::forward::<R>(x, w, b, labels, binary)) {
                put::<R, BT>(h, out, t);
            }
        });
        let shapes = vec![Shape::new([1]), Shape::new([1]), logits.clone(), logits];
        let inputs = vec![x, w, b, labels];
        let out = register::<Cube<R, BT>>("classifier_head", inputs, shapes, run);
        let mut out = out.into_iter();
        let mut next = || out.next().expect("the head's four outputs");
        Head {
            loss: next(),
            correct: next(),
            logits: next(),
            dlogits: next(),
        }
    }

    fn classifier_head_backward(
        (x, w, logits, dlogits): HeadKept<Self>,
        grad: FloatTensor<Self>,
        need_dx: bool,
    ) -> LinearGrads<Self> {
        if path::chosen("classifier_head_backward", head_way(&x, &w, need_dx)).is_err() {
            let kept = (x, w, logits, dlogits);
            return composed::classifier_head_backward::<Self>(kept, grad, need_dx);
        }
        let inputs = vec![x, w, logits, dlogits, grad];
        layer_backward::<R, BT>(
            "classifier_head_backward",
            inputs,
            linear::IDENTITY,
            need_dx,
        )
    }
}

/// Whether dropout of a tensor of `shape` takes the kernel (a unit per element), or why not.
fn dropout_way(shape: &Shape) -> Result<(), path::Reason> {
    kernels_way()?;
    match shape.num_elements() <= dropout::MAX_ELEMENTS {
        true => Ok(()),
        false => Err("too many elements for one launch"),
    }
}

/// Whether batch norm of maps `[n, c, s]` takes the kernels (a cube per channel), or why not.
fn channels_way(shape: &Shape) -> Result<(), path::Reason> {
    kernels_way()?;
    match (1..=MAX_CUBES).contains(&shape[1]) && shape[0] * shape[2] > 0 {
        true => Ok(()),
        false => Err("no rows, or too many channels for one launch"),
    }
}

/// Whether linear-scalar's K replicas take the kernels (a cube each), or why not.
fn scalar_mse_way(k: usize) -> Result<(), path::Reason> {
    kernels_way()?;
    match k <= MAX_CUBES {
        true => Ok(()),
        false => Err("too many replicas for one launch"),
    }
}

/// Whether a classifier's head takes ember's kernels: a layer they take, of one model (not
/// replicas), whose loss they compute.
fn head_way<F: burn_fusion::FusionRuntime>(
    x: &burn_fusion::FusionTensor<F>,
    w: &burn_fusion::FusionTensor<F>,
    need_dx: bool,
) -> Result<(), path::Reason> {
    layer_way(x, w, need_dx)?;
    match x.shape.num_dims() == 2 && w.shape.num_dims() == 2 {
        true => Ok(()),
        false => Err("replicas"),
    }
}

/// A dense layer's backward (`linear::backward`) as one operation: `inputs` are `x`,
/// `w`, the output `y` and its gradient `g`, and, where a fifth is given, the scale `[1]` that
/// `g` is read times. Gives `dw`, `db` and (`need_dx`) `dx`.
fn layer_backward<R: CubeRuntime, BT: BoolElement>(
    name: &'static str,
    inputs: Vec<FloatTensor<Fusion<Cube<R, BT>>>>,
    act: u32,
    need_dx: bool,
) -> LinearGrads<Fusion<Cube<R, BT>>> {
    let (x_shape, w_shape) = (inputs[0].shape.clone(), inputs[1].shape.clone());
    let b_shape = match replicas_of(&inputs[1]) {
        Some(k) => Shape::new([k, w_shape[2]]),
        None => Shape::new([w_shape[1]]),
    };
    let run: stream::Run<Cube<R, BT>> = Box::new(move |ins, outs, h| {
        let [x, w, y, g] = [0, 1, 2, 3].map(|i| float::<R, BT>(h, &ins[i]));
        let scale = ins.get(4).map(|s| float::<R, BT>(h, s));
        let (dx, dw, db) = linear::backward::<R>((x, w, y, g), scale, act, need_dx);
        put::<R, BT>(h, &outs[0], dw);
        put::<R, BT>(h, &outs[1], db);
        if let Some(dx) = dx {
            put::<R, BT>(h, &outs[2], dx);
        }
    });
    let mut shapes = vec![w_shape, b_shape];
    if need_dx {
        shapes.push(x_shape);
    }
    let mut out = register::<Cube<R, BT>>(name, inputs, shapes, run);
    let (dw, db) = (out.remove(0), out.remove(0));
    LinearGrads {
        dx: need_dx.then(|| out.remove(0)),
        dw,
        db,
    }
}

/// A classifier's mean loss and correct rows (`loss::forward`), as one operation.
fn classifier_loss<R: CubeRuntime, BT: BoolElement>(
    logits: FloatTensor<Fusion<Cube<R, BT>>>,
    labels: IntTensor<Fusion<Cube<R, BT>>>,
    binary: bool,
) -> LossAndCorrect<Fusion<Cube<R, BT>>> {
    let run: stream::Run<Cube<R, BT>> = Box::new(move |ins, outs, h| {
        let logits = float::<R, BT>(h, &ins[0]);
        let labels = h.get_int_tensor::<Cube<R, BT>>(&ins[1]);
        let (loss, correct) = loss::forward::<R>(logits, labels, binary);
        put::<R, BT>(h, &outs[0], loss);
        put::<R, BT>(h, &outs[1], correct);
    });
    let shapes = vec![Shape::new([1]), Shape::new([1])];
    let mut out = register::<Cube<R, BT>>("classifier_loss", vec![logits, labels], shapes, run);
    let loss = out.remove(0);
    (loss, out.remove(0))
}

/// The logits' gradient of [`classifier_loss`], as one operation.
fn classifier_loss_backward<R: CubeRuntime, BT: BoolElement>(
    logits: FloatTensor<Fusion<Cube<R, BT>>>,
    labels: IntTensor<Fusion<Cube<R, BT>>>,
    grad: FloatTensor<Fusion<Cube<R, BT>>>,
    binary: bool,
) -> FloatTensor<Fusion<Cube<R, BT>>> {
    let shape = logits.shape.clone();
    let run: stream::Run<Cube<R, BT>> = Box::new(move |ins, outs, h| {
        let logits = float::<R, BT>(h, &ins[0]);
        let labels = h.get_int_tensor::<Cube<R, BT>>(&ins[1]);
        let grad = float::<R, BT>(h, &ins[2]);
        put::<R, BT>(
            h,
            &outs[0],
            loss::backward::<R>(logits, labels, grad, binary),
        );
    });
    let inputs = vec![logits, labels, grad];
    let mut out = register::<Cube<R, BT>>("classifier_loss_backward", inputs, vec![shape], run);
    out.remove(0)
}

#[cfg(all(test, feature = "wgpu"))]
mod tests;
