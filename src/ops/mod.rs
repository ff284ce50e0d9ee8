//! ember's own tensor operations, added to Burn's backends through a backend extension trait.
//!
//! Two hot paths of small models are slow on Burn 0.21's CPU backend:
//! - `tanh` is one scalar libm call per element, and autodiff computes it a second time in the
//!   backward pass (most of a tabular-mlp step). [`EmberBackend::tanh`] is vectorised and its
//!   backward reuses the forward output.
//! - a linear layer with its activation is four tensor operations forward and more backward,
//!   each with its own allocation and pass over memory. [`EmberBackend::fused_linear`] is one matrix
//!   multiply with the bias and the activation applied in place, and one backward that computes
//!   the three gradients from the saved output.
//!
//! The trait's default methods compose Burn's own operations, so every backend has them (CUDA
//! and wgpu use the defaults, which Burn's fusion compiles into few kernels); the CPU backend overrides
//! them with kernels of its own (`cpu.rs` over `elementwise.rs`, `products.rs`, `linear_layer.rs`,
//! `optimizers.rs`, `replica_layers.rs` and a file per special case), and `autodiff.rs`
//! records their backward.

mod autodiff;
mod batch_norm;
mod bce;
#[cfg(target_arch = "x86_64")]
mod chunked_backward;
pub(crate) mod composed;
mod contiguous;
mod conv;
mod cpu;
pub mod dropout;
mod elementwise;
mod linear_layer;
mod max_pool;
mod optimizers;
mod replica_layers;
mod scalar_mse;
mod shared_input;
mod view;

// The kernel crate's modules, under the names ember's operations have always used.
pub use ember_kernels::simd;
#[cfg(test)]
use ember_kernels::subnormals;
use ember_kernels::{channel_sums, gemm, input_grad, products, row_dots, transpose};
#[cfg(target_arch = "x86_64")]
use ember_kernels::{long_sums, short_sums, tall_products, vector_libm};

use burn::prelude::*;
use burn::tensor::ops::{FloatTensor, IntTensor};
use burn::tensor::{Distribution, Shape, Tensor, TensorMetadata, TensorPrimitive};

/// The activation fused into [`EmberBackend::fused_linear`].
pub use ember_kernels::Activation;

/// A learning rate: one for the whole tensor, or one per replica, as a `[K]` vector on the
/// device whose entries scale the slices of the tensor's first (replica) axis.
#[derive(Debug, Clone)]
pub enum Lr<B: Backend> {
    One(f64),
    PerReplica(FloatTensor<B>),
}

impl<B: Backend> Lr<B> {
    /// `t * lr`, the vector broadcast along the replica axis.
    pub fn scale(&self, t: FloatTensor<B>) -> FloatTensor<B> {
        match self {
            Lr::One(lr) => B::float_mul_scalar(t, (*lr as f32).into()),
            Lr::PerReplica(v) => {
                let rank = t.shape().num_dims();
                let mut dims = vec![1; rank];
                dims[0] = v.shape()[0];
                B::float_mul(t, B::float_reshape(v.clone(), Shape::from(dims)))
            }
        }
    }
}

/// One Adam update's hyper-parameters.
pub use ember_kernels::AdamStep;

/// Operations ember implements itself for some backends, with Burn's as the fallback.
pub trait EmberBackend: Backend {
    /// Whether a model's optimizer step goes to [`sgd_steps`](Self::sgd_steps) and
    /// [`adam_steps`](Self::adam_steps) as one group. Grouping pays where a launch costs (the
    /// GPU); on the CPU the per-tensor kernels are the same and gathering them costs host time
    /// (1.02-1.05x slower steps on linear-scalar), so there Burn's adaptor steps each tensor.
    const GROUPED_UPDATES: bool = false;

    /// A data tensor's `slices` (the loader's batch of rows), which no gradient flows to: Burn's
    /// slice. Burn's autodiff backend registers every slice in its graph, even of a tensor it
    /// does not track, so there it is cut on the inner backend and handed back as a fresh leaf
    /// (`ops::autodiff`): linear-scalar's 20 µs step ran 1.10x faster so.
    fn data_slice(tensor: FloatTensor<Self>, slices: &[burn::tensor::Slice]) -> FloatTensor<Self> {
        Self::float_slice(tensor, slices)
    }

    /// `w - lr * g`.
    fn sgd_step(w: FloatTensor<Self>, g: FloatTensor<Self>, lr: &Lr<Self>) -> FloatTensor<Self> {
        composed::sgd_step::<Self>(w, g, lr)
    }

    /// One Adam update: the new weights and moments.
    fn adam_step(
        w: FloatTensor<Self>,
        g: FloatTensor<Self>,
        m: FloatTensor<Self>,
        v: FloatTensor<Self>,
        s: AdamStep,
        lr: &Lr<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        composed::adam_step::<Self>((w, g, m, v), s, lr)
    }

    /// [`sgd_step`](Self::sgd_step) of every `[w, g]` of a model at learning rate `lr`, which
    /// a backend may run as one operation (the GPU's: one launch for all of an MLP's
    /// parameters).
    fn sgd_steps(params: Vec<[FloatTensor<Self>; 2]>, lr: &Lr<Self>) -> Vec<FloatTensor<Self>> {
        let step = |[w, g]: [FloatTensor<Self>; 2]| Self::sgd_step(w, g, lr);
        params.into_iter().map(step).collect()
    }

    /// [`adam_step`](Self::adam_step) of every `[w, g, m, v]` of a model at one step and
    /// learning rate (each parameter's new `[w, m, v]`), which a backend may run as one
    /// operation.
    fn adam_steps(
        params: Vec<[FloatTensor<Self>; 4]>,
        s: AdamStep,
        lr: &Lr<Self>,
    ) -> Vec<[FloatTensor<Self>; 3]> {
        let step = |[w, g, m, v]: [FloatTensor<Self>; 4]| {
            let (w, m, v) = Self::adam_step(w, g, m, v, s, lr);
            [w, m, v]
        };
        params.into_iter().map(step).collect()
    }

    /// `act(x · w + b)` for `x` `[m, k]`, `w` `[k, n]` (Burn's layout) and `b` `[n]`; or, for
    /// K replicas, `w` `[K, k, n]`, `b` `[K, n]` and `x` `[K, m, k]` (or `[m, k]`, shared by
    /// every replica), giving `[K, m, n]`.
    fn fused_linear(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
        act: Activation,
    ) -> FloatTensor<Self> {
        composed::fused_linear::<Self>(x, w, b, act)
    }

    /// [`fused_linear`](Self::fused_linear) for a hidden layer of an MLP, whose output goes
    /// only to ember's own operations (dropout, the next layer): a backend may hand it on in
    /// another layout than rows where those read it faster, with the same bits.
    fn fused_linear_hidden(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
        act: Activation,
    ) -> FloatTensor<Self> {
        Self::fused_linear(x, w, b, act)
    }

    /// The gradients of [`EmberBackend::fused_linear`] with respect to `x` (when `need_dx`), `w` and
    /// `b`, given its inputs, its output `y` and the gradient of the output.
    fn fused_linear_backward(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        y: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        act: Activation,
        need_dx: bool,
    ) -> LinearGrads<Self> {
        composed::fused_linear_backward::<Self>((x, w, y, grad), act, need_dx)
    }

    /// Whether this backend computes a classifier's cross-entropy and its correct rows in one
    /// operation of its own ([`cross_entropy`](Self::cross_entropy)). Where it does not (the
    /// CPU), the models compose Burn's `CrossEntropyLoss` and `argmax`, whose bits the CPU's
    /// loss pins hold.
    fn fused_cross_entropy() -> bool {
        false
    }

    /// The mean cross-entropy `[1]` of `logits` `[rows, classes]` against class `labels`
    /// `[rows]` (Burn's `CrossEntropyLoss`), and the count `[1]` of rows whose largest logit
    /// is their label's.
    fn cross_entropy(
        logits: FloatTensor<Self>,
        labels: IntTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        composed::cross_entropy::<Self>(logits, labels)
    }

    /// The gradient of [`cross_entropy`](Self::cross_entropy)'s loss with respect to the
    /// logits, given the loss's gradient `grad` `[1]`.
    fn cross_entropy_backward(
        logits: FloatTensor<Self>,
        labels: IntTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        composed::cross_entropy_backward::<Self>(logits, labels, grad)
    }

    /// A binary classifier's mean cross-entropy on `logits` `[rows, 1]` against 0/1 `labels`
    /// `[rows, 1]` ([`bce_logits`](Self::bce_logits)), and the count `[1]` of rows whose logit
    /// is on their label's side of 0; one operation where
    /// [`fused_cross_entropy`](Self::fused_cross_entropy) says so.
    fn binary_cross_entropy(
        logits: FloatTensor<Self>,
        labels: IntTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        composed::binary_cross_entropy::<Self>(logits, labels)
    }

    /// The gradient of [`binary_cross_entropy`](Self::binary_cross_entropy)'s loss with
    /// respect to the logits, given the loss's gradient `grad` `[1]`.
    fn binary_cross_entropy_backward(
        logits: FloatTensor<Self>,
        labels: IntTensor<Self>,
        grad: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        composed::binary_cross_entropy_backward::<Self>(logits, labels, grad)
    }

    /// Each image of the data `maps` `[n, c, h, w]` shifted and mirrored by its row of `draws`
    /// `[n, 3]` (`dy`, `dx`, `flip`; `model::augment`), zeros where a shift leaves the image.
    /// No gradient flows to data.
    fn augment(maps: FloatTensor<Self>, draws: IntTensor<Self>) -> FloatTensor<Self> {
        composed::augment::<Self>(maps, draws)
    }

    /// A classifier's output layer and loss as one operation: `logits = x · w + b` (`x`
    /// `[m, k]`, `w` `[k, n]`, `b` `[n]`), then [`cross_entropy`](Self::cross_entropy) against
    /// class `labels` `[m]` or, `binary`, [`binary_cross_entropy`](Self::binary_cross_entropy)
    /// against 0/1 `labels` `[m, 1]`. It also gives the logits and their gradient for a loss
    /// gradient of 1, which [`classifier_head_backward`](Self::classifier_head_backward) scales
    /// by the loss's (the GPU's: the loss's launch makes that gradient, and the layer's
    /// backward scales it as it reads it, where the loss's gradient took a launch of its own).
    fn classifier_head(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
        labels: IntTensor<Self>,
        binary: bool,
    ) -> Head<Self> {
        composed::classifier_head::<Self>((x, w, b), labels, binary)
    }

    /// The gradients of [`classifier_head`](Self::classifier_head)'s loss with respect to `x`
    /// (when `need_dx`), `w` and `b`, from what the head kept and the loss's gradient `grad`
    /// `[1]`.
    fn classifier_head_backward(
        kept: HeadKept<Self>,
        grad: FloatTensor<Self>,
        need_dx: bool,
    ) -> LinearGrads<Self> {
        composed::classifier_head_backward::<Self>(kept, grad, need_dx)
    }

    /// Whether this backend computes linear-scalar's model and loss in one operation of its
    /// own ([`scalar_mse_replicas`](Self::scalar_mse_replicas)), so that a single run takes it
    /// as one replica. Where it does not (the CPU), a single run composes Burn's `Linear` and
    /// `MseLoss`, whose bits the CPU's loss pins hold.
    fn fused_scalar_mse() -> bool {
        false
    }

    /// linear-scalar's K replicas and their mean squared errors in one operation: each replica's
    /// loss `[K]`. `x` is `[n, c + 1]` (shared by every replica) or `[K, n, c + 1]`, its last
    /// column the scalar input `f`; `y` `[n, 1]` or `[K·n, 1]`; `w` `[K, c, 1]`; `p` `[K]`.
    fn scalar_mse_replicas(
        x: FloatTensor<Self>,
        y: FloatTensor<Self>,
        w: FloatTensor<Self>,
        p: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        Self::scalar_mse_replicas_forward(x, y, w, p).0
    }

    /// [`EmberBackend::scalar_mse_replicas`], with the residuals its backward reads (in a
    /// layout of the backend's choosing: a backend that overrides this overrides
    /// [`EmberBackend::scalar_mse_replicas_backward`] too).
    fn scalar_mse_replicas_forward(
        x: FloatTensor<Self>,
        y: FloatTensor<Self>,
        w: FloatTensor<Self>,
        p: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        composed::scalar_mse::<Self>(x, y, w, p)
    }

    /// The gradients of [`EmberBackend::scalar_mse_replicas`] with respect to `w` and `p`, given
    /// its input, the residuals of its forward and the gradient of the losses `[K]`. (The inputs
    /// and targets are data: no gradient flows to them.)
    fn scalar_mse_replicas_backward(
        x: FloatTensor<Self>,
        residuals: FloatTensor<Self>,
        dloss: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        composed::scalar_mse_backward::<Self>(x, residuals, dloss)
    }

    /// Binary cross-entropy on logits, one model's mean loss `[1]` for logits and 0/1 targets
    /// of the same shape: Burn's `BinaryCrossEntropyLoss` with logits. By default its
    /// operations, composed here (a GPU backend's fusion may group them otherwise than
    /// through Burn's loss); the CPU backend's kernel keeps the bits of Burn's loss.
    fn bce_logits(logits: FloatTensor<Self>, y: FloatTensor<Self>) -> FloatTensor<Self> {
        composed::bce_burn::<Self>(logits, y)
    }

    /// The logits' gradient of [`EmberBackend::bce_logits`], given the loss's gradient `[1]`.
    fn bce_logits_backward(
        logits: FloatTensor<Self>,
        y: FloatTensor<Self>,
        dloss: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        composed::bce_burn_backward::<Self>(logits, y, dloss)
    }

    /// Binary cross-entropy on logits for K replicas: each replica's mean loss `[K]`, for
    /// logits `[K, n, 1]` and 0/1 targets of the same shape.
    fn bce_logits_replicas(logits: FloatTensor<Self>, y: FloatTensor<Self>) -> FloatTensor<Self> {
        composed::bce::<Self>(logits, y)
    }

    /// The logits' gradient of [`EmberBackend::bce_logits_replicas`], given the gradient of the
    /// losses `[K]`.
    fn bce_logits_replicas_backward(
        logits: FloatTensor<Self>,
        y: FloatTensor<Self>,
        dloss: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        composed::bce_backward::<Self>(logits, y, dloss)
    }

    /// The 2-d convolution of `x` `[n, cin, h, w]` with `weight` `[cout, cin, k, k]` at `stride`,
    /// `padding` zeros on every side, plus `bias` `[cout]`: Burn's `conv2d`.
    fn conv(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        (stride, padding): (usize, usize),
    ) -> FloatTensor<Self> {
        Self::conv2d(x, weight, bias, composed::conv_options(stride, padding))
    }

    /// The gradients of [`EmberBackend::conv`] for `x` (when `need_dx`), the weights, and the
    /// bias (when `need_bias`), given the output's gradient: Burn's backward operations.
    fn conv_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        (stride, padding): (usize, usize),
        (need_dx, need_bias): (bool, bool),
    ) -> ConvGrads<Self> {
        composed::conv_backward::<Self>(x, weight, grad, (stride, padding), (need_dx, need_bias))
    }

    /// The max-pool of `x` `[n, c, h, w]` over `k`×`k` windows at stride `k`, no padding:
    /// Burn's `max_pool2d`.
    fn max_pool(x: FloatTensor<Self>, k: usize) -> FloatTensor<Self> {
        Self::max_pool2d(x, [k, k], [k, k], [0, 0], [1, 1], false)
    }

    /// [`EmberBackend::max_pool`] in training: the output and, where the backend keeps them
    /// for the backward, the positions of the maxima (Burn's indices).
    fn max_pool_for_backward(
        x: FloatTensor<Self>,
        k: usize,
    ) -> (FloatTensor<Self>, Option<IntTensor<Self>>) {
        let pool = Self::max_pool2d_with_indices(x, [k, k], [k, k], [0, 0], [1, 1], false);
        (pool.output, Some(pool.indices))
    }

    /// The gradient of [`EmberBackend::max_pool`] for `x`, given the output's gradient and
    /// the indices [`EmberBackend::max_pool_for_backward`] kept (found again when it kept none).
    fn max_pool_backward(
        x: FloatTensor<Self>,
        k: usize,
        grad: FloatTensor<Self>,
        indices: Option<IntTensor<Self>>,
    ) -> FloatTensor<Self> {
        let (p, none, one) = ([k, k], [0, 0], [1, 1]);
        let indices = indices.unwrap_or_else(|| {
            Self::max_pool2d_with_indices(x.clone(), p, p, none, one, false).indices
        });
        Self::max_pool2d_with_indices_backward(x, p, p, none, one, false, grad, indices).x_grad
    }

    /// Batch normalisation in training of `x` `[n, c, s]` with `gamma` and `beta` `[c]`: the
    /// output, and the batch's mean and biased variance `[c]` (for the running statistics).
    fn batch_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        composed::batch_norm::<Self>(x, gamma, beta, epsilon)
    }

    /// The gradients `(dx, dgamma, dbeta)` of [`EmberBackend::batch_norm`], given its input,
    /// `gamma`, the batch's mean and variance, and the output's gradient.
    fn batch_norm_backward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        mean: FloatTensor<Self>,
        var: FloatTensor<Self>,
        epsilon: f64,
        grad: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        composed::batch_norm_backward::<Self>(x, gamma, mean, var, epsilon, grad)
    }

    /// `x · scale + shift` per channel of `x` `[n, c, s]`, `scale` and `shift` `[c]`: batch
    /// norm at inference, with the running statistics folded in.
    fn channel_affine(
        x: FloatTensor<Self>,
        scale: FloatTensor<Self>,
        shift: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        composed::channel_affine::<Self>(x, scale, shift)
    }

    /// Element-wise hyperbolic tangent.
    fn tanh(x: FloatTensor<Self>) -> FloatTensor<Self> {
        Self::float_tanh(x)
    }

    /// `grad * (1 - y^2)`: the gradient of tanh given its output `y`.
    fn tanh_backward(y: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        let y2 = Self::float_mul(y.clone(), y);
        let one_minus = Self::float_add_scalar(Self::float_neg(y2), 1f32.into());
        Self::float_mul(grad, one_minus)
    }

    /// Inverted dropout at rate `p`: each element kept and scaled by 1/(1-p), or zeroed, by the
    /// mask that `seed` decides (see [`dropout`](self::dropout)).
    fn dropout(x: FloatTensor<Self>, p: f64, seed: u64) -> FloatTensor<Self> {
        Self::dropout_by_composition(x, p, seed)
    }

    /// The gradient through `dropout(·, p, seed)`: the same mask and scale, on `grad`.
    fn dropout_backward(grad: FloatTensor<Self>, p: f64, seed: u64) -> FloatTensor<Self> {
        Self::dropout(grad, p, seed)
    }

    /// Burn's composition, as its `Dropout` computes it: a Bernoulli mask drawn from the
    /// backend's generator, seeded with `seed` first so that the backward draws it again.
    fn dropout_by_composition(x: FloatTensor<Self>, p: f64, seed: u64) -> FloatTensor<Self> {
        let device = Self::float_device(&x);
        Self::seed(&device, seed);
        let dtype = x.dtype().into();
        let mask = Self::float_random(x.shape(), Distribution::Bernoulli(1.0 - p), &device, dtype);
        let x = Self::float_mul(x, mask);
        Self::float_mul_scalar(x, (1.0 / (1.0 - p)).into())
    }
}

/// The gradients of a convolution: input (when asked), weights, bias (when asked).
pub type ConvGrads<B> = (
    Option<FloatTensor<B>>,
    FloatTensor<B>,
    Option<FloatTensor<B>>,
);

/// A classifier's mean cross-entropy (Burn's `CrossEntropyLoss`) and its correct rows (as a
/// float count): one operation of the backend's where it has one
/// ([`EmberBackend::fused_cross_entropy`]), else Burn's `argmax` and `CrossEntropyLoss` on this
/// backend (`composed::cross_entropy`), whose bits the CPU's loss pins hold.
pub fn cross_entropy<B: EmberBackend>(
    logits: Tensor<B, 2>,
    labels: Tensor<B, 1, Int>,
) -> (Tensor<B, 1>, Tensor<B, 1>) {
    let (logits, labels) = (logits.into_primitive().tensor(), labels.into_primitive());
    let (loss, correct) = match B::fused_cross_entropy() {
        true => B::cross_entropy(logits, labels),
        false => composed::cross_entropy::<B>(logits, labels),
    };
    (float_tensor(loss), float_tensor(correct))
}

/// A binary classifier's mean cross-entropy on logits `[rows, 1]` (Burn's
/// `BinaryCrossEntropyLoss` with logits) and its correct rows (as a float count): one operation
/// of the backend's where it has one ([`EmberBackend::fused_cross_entropy`]), else Burn's
/// comparisons and [`EmberBackend::bce_logits`] on this backend
/// (`composed::binary_cross_entropy`), whose bits the CPU's loss pins hold.
pub fn binary_cross_entropy<B: EmberBackend>(
    logits: Tensor<B, 2>,
    labels: Tensor<B, 2, Int>,
) -> (Tensor<B, 1>, Tensor<B, 1>) {
    assert_eq!(
        logits.dims(),
        labels.dims(),
        "logits and targets differ in shape"
    );
    let (logits, labels) = (logits.into_primitive().tensor(), labels.into_primitive());
    let (loss, correct) = match B::fused_cross_entropy() {
        true => B::binary_cross_entropy(logits, labels),
        false => composed::binary_cross_entropy::<B>(logits, labels),
    };
    (float_tensor(loss), float_tensor(correct))
}

/// A classifier's output `layer` on `x` and its loss against `labels` in one operation
/// ([`EmberBackend::classifier_head`]): the mean loss and the correct rows, as
/// [`linear`] then [`cross_entropy`] (`binary`: [`binary_cross_entropy`]) give them. For
/// backends with a loss of their own ([`EmberBackend::fused_cross_entropy`]).
pub fn classifier_head<B: EmberBackend, const D: usize>(
    x: Tensor<B, 2>,
    layer: &burn::nn::Linear<B>,
    labels: Tensor<B, D, Int>,
    binary: bool,
) -> (Tensor<B, 1>, Tensor<B, 1>) {
    let bias = layer
        .bias
        .as_ref()
        .expect("a classifier's output layer has a bias");
    let head = B::classifier_head(
        x.into_primitive().tensor(),
        layer.weight.val().into_primitive().tensor(),
        bias.val().into_primitive().tensor(),
        labels.into_primitive(),
        binary,
    );
    (float_tensor(head.loss), float_tensor(head.correct))
}

/// [`EmberBackend::augment`] on tensors.
pub fn augment<B: EmberBackend>(maps: Tensor<B, 4>, draws: Tensor<B, 2, Int>) -> Tensor<B, 4> {
    let maps = B::augment(maps.into_primitive().tensor(), draws.into_primitive());
    float_tensor(maps)
}

/// A float primitive as a tensor.
fn float_tensor<B: Backend, const D: usize>(t: FloatTensor<B>) -> Tensor<B, D> {
    Tensor::from_primitive(TensorPrimitive::Float(t))
}

/// A classifier's mean loss `[1]` and its count `[1]` of correct rows.
pub type LossAndCorrect<B> = (FloatTensor<B>, FloatTensor<B>);

/// What [`EmberBackend::classifier_head`] gives: the mean loss `[1]`, the correct rows `[1]`,
/// the logits, and the logits' gradient for a loss gradient of 1.
pub struct Head<B: Backend> {
    pub loss: FloatTensor<B>,
    pub correct: FloatTensor<B>,
    pub logits: FloatTensor<B>,
    pub dlogits: FloatTensor<B>,
}

/// What a classifier's head keeps for its backward: the layer's input `x` and weight `w`, the
/// logits, and their gradient for a loss gradient of 1.
pub type HeadKept<B> = (
    FloatTensor<B>,
    FloatTensor<B>,
    FloatTensor<B>,
    FloatTensor<B>,
);

/// The gradients of a linear layer.
pub struct LinearGrads<B: Backend> {
    pub dx: Option<FloatTensor<B>>,
    pub dw: FloatTensor<B>,
    pub db: FloatTensor<B>,
}

/// `act(x · weight + bias)` through ember's backend extension, for one of Burn's `Linear`
/// layers (which must have a bias).
pub fn linear<B: EmberBackend>(
    x: Tensor<B, 2>,
    layer: &burn::nn::Linear<B>,
    act: Activation,
) -> Tensor<B, 2> {
    layer_with(B::fused_linear, x, layer, act)
}

/// [`linear`] for a hidden layer of an MLP, whose output goes only to ember's dropout and the
/// next layer ([`EmberBackend::fused_linear_hidden`]).
pub fn hidden_linear<B: EmberBackend>(
    x: Tensor<B, 2>,
    layer: &burn::nn::Linear<B>,
    act: Activation,
) -> Tensor<B, 2> {
    layer_with(B::fused_linear_hidden, x, layer, act)
}

/// A fused linear operation `op` on one of Burn's `Linear` layers.
fn layer_with<B: EmberBackend>(
    op: LinearOp<B>,
    x: Tensor<B, 2>,
    layer: &burn::nn::Linear<B>,
    act: Activation,
) -> Tensor<B, 2> {
    let bias = layer
        .bias
        .as_ref()
        .expect("ember's fused linear is used on layers with a bias");
    Tensor::from_primitive(TensorPrimitive::Float(op(
        x.into_primitive().tensor(),
        layer.weight.val().into_primitive().tensor(),
        bias.val().into_primitive().tensor(),
        act,
    )))
}

/// [`EmberBackend::fused_linear`] or [`EmberBackend::fused_linear_hidden`].
pub type LinearOp<B> =
    fn(FloatTensor<B>, FloatTensor<B>, FloatTensor<B>, Activation) -> FloatTensor<B>;

/// `act(x · weight + bias)` for K replicas: `weight` `[K, k, n]`, `bias` `[K, n]`, and `x`
/// `[K, m, k]` or, shared by every replica, `[m, k]`; gives `[K, m, n]`.
pub fn linear_replicas<B: EmberBackend, const D: usize>(
    x: Tensor<B, D>,
    weight: &burn::module::Param<Tensor<B, 3>>,
    bias: &burn::module::Param<Tensor<B, 2>>,
    act: Activation,
) -> Tensor<B, 3> {
    Tensor::from_primitive(TensorPrimitive::Float(B::fused_linear(
        x.into_primitive().tensor(),
        weight.val().into_primitive().tensor(),
        bias.val().into_primitive().tensor(),
        act,
    )))
}

/// Each of linear-scalar's K replicas' mean squared error `[K]`, through ember's backend
/// extension: `x` `[n, c + 1]` (shared) or `[K, n, c + 1]` with the scalar input `f` as its last
/// column, `y` `[n, 1]` or `[K·n, 1]`, `w` `[K, c, 1]`, `p` `[K]`.
pub fn scalar_mse_replicas<B: EmberBackend, const D: usize>(
    x: Tensor<B, D>,
    y: Tensor<B, 2>,
    w: &burn::module::Param<Tensor<B, 3>>,
    p: &burn::module::Param<Tensor<B, 1>>,
) -> Tensor<B, 1> {
    Tensor::from_primitive(TensorPrimitive::Float(B::scalar_mse_replicas(
        x.into_primitive().tensor(),
        y.into_primitive().tensor(),
        w.val().into_primitive().tensor(),
        p.val().into_primitive().tensor(),
    )))
}

/// Binary cross-entropy on logits `[n, 1]` against 0/1 targets, through ember's backend
/// extension: Burn's `BinaryCrossEntropyLoss` with logits, its value and gradient bit for bit.
pub fn bce_logits<B: EmberBackend>(
    logits: Tensor<B, 2>,
    targets: Tensor<B, 2, Int>,
) -> Tensor<B, 1> {
    assert_eq!(
        logits.dims(),
        targets.dims(),
        "logits and targets differ in shape"
    );
    Tensor::from_primitive(TensorPrimitive::Float(B::bce_logits(
        logits.into_primitive().tensor(),
        targets.float().into_primitive().tensor(),
    )))
}

/// Each replica's binary cross-entropy `[K]` on logits `[K, n, 1]` against 0/1 targets of the
/// same shape, through ember's backend extension.
pub fn bce_logits_replicas<B: EmberBackend>(logits: Tensor<B, 3>, y: Tensor<B, 3>) -> Tensor<B, 1> {
    Tensor::from_primitive(TensorPrimitive::Float(B::bce_logits_replicas(
        logits.into_primitive().tensor(),
        y.into_primitive().tensor(),
    )))
}

/// Batch normalisation in training of `[n, c, s]` maps through ember's backend extension: the
/// output, and the batch's mean and biased variance `[c]` (constants: no gradient flows back
/// through them).
pub fn batch_norm<B: EmberBackend>(
    x: Tensor<B, 3>,
    gamma: Tensor<B, 1>,
    beta: Tensor<B, 1>,
    epsilon: f64,
) -> (Tensor<B, 3>, Tensor<B, 1>, Tensor<B, 1>) {
    let (y, mean, var) = B::batch_norm(
        x.into_primitive().tensor(),
        gamma.into_primitive().tensor(),
        beta.into_primitive().tensor(),
        epsilon,
    );
    let float = |t| TensorPrimitive::Float(t);
    (
        Tensor::from_primitive(float(y)),
        Tensor::from_primitive(float(mean)),
        Tensor::from_primitive(float(var)),
    )
}

/// The 2-d convolution of `x` `[n, cin, h, w]` through ember's backend extension: `weight`
/// `[cout, cin, k, k]`, optional `bias` `[cout]`, square `stride` and zero `padding`.
pub fn conv<B: EmberBackend>(
    x: Tensor<B, 4>,
    weight: Tensor<B, 4>,
    bias: Option<Tensor<B, 1>>,
    stride: usize,
    padding: usize,
) -> Tensor<B, 4> {
    Tensor::from_primitive(TensorPrimitive::Float(B::conv(
        x.into_primitive().tensor(),
        weight.into_primitive().tensor(),
        bias.map(|b| b.into_primitive().tensor()),
        (stride, padding),
    )))
}

/// The max-pool of `x` `[n, c, h, w]` over `k`×`k` windows at stride `k`, through ember's
/// backend extension.
pub fn max_pool<B: EmberBackend>(x: Tensor<B, 4>, k: usize) -> Tensor<B, 4> {
    Tensor::from_primitive(TensorPrimitive::Float(B::max_pool(
        x.into_primitive().tensor(),
        k,
    )))
}

/// `x · scale + shift` per channel of `[n, c, s]` maps, through ember's backend extension.
pub fn channel_affine<B: EmberBackend>(
    x: Tensor<B, 3>,
    scale: Tensor<B, 1>,
    shift: Tensor<B, 1>,
) -> Tensor<B, 3> {
    Tensor::from_primitive(TensorPrimitive::Float(B::channel_affine(
        x.into_primitive().tensor(),
        scale.into_primitive().tensor(),
        shift.into_primitive().tensor(),
    )))
}

/// Element-wise tanh through ember's backend extension.
pub fn tanh<B: EmberBackend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    Tensor::from_primitive(TensorPrimitive::Float(B::tanh(x.into_primitive().tensor())))
}

#[cfg(test)]
mod kernel_tests;
#[cfg(test)]
mod tests;

/// The replica count of a stacked `[K, k, n]` weight; `None` for a plain `[k, n]` one.
pub fn replicas_of<T: TensorMetadata>(w: &T) -> Option<usize> {
    let shape = w.shape();
    (shape.num_dims() == 3).then(|| shape[0])
}

/// `x` as `[K, m, k]`: itself, or a shared `[m, k]` input repeated for each of the `r` replicas.
fn per_replica<B: Backend>(x: FloatTensor<B>, r: usize) -> FloatTensor<B> {
    let shape = x.shape();
    if shape.num_dims() == 3 {
        return x;
    }
    let (m, k) = (shape[0], shape[1]);
    B::float_expand(
        B::float_reshape(x, Shape::new([1, m, k])),
        Shape::new([r, m, k]),
    )
}
