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
//! them with kernels of its own (`kernels.rs`), and `autodiff.rs` records their backward.

mod autodiff;
mod batch_norm;
mod bce;
mod channel_sums;
#[cfg(target_arch = "x86_64")]
mod chunked_backward;
#[cfg(target_arch = "x86_64")]
mod column_sums;
pub(crate) mod composed;
mod conv;
pub mod dropout;
mod input_grad;
pub mod kernels;
#[cfg(target_arch = "x86_64")]
mod long_sums;
mod max_pool;
mod row_dots;
mod scalar_mse;
mod shared_input;
#[cfg(target_arch = "x86_64")]
mod short_sums;
mod subnormals;
#[cfg(target_arch = "x86_64")]
mod tall_products;
mod transpose;
#[cfg(target_arch = "x86_64")]
mod vector_libm;
#[cfg(target_arch = "x86_64")]
mod vector_products;

use burn::backend::Flex;
use burn::prelude::*;
use burn::tensor::ops::{FloatTensor, IntTensor};
use burn::tensor::{Distribution, Shape, Tensor, TensorMetadata, TensorPrimitive};

/// The activation fused into [`EmberBackend::fused_linear`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    Identity,
    Relu,
    Tanh,
}

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

/// One Adam update's hyper-parameters (the learning rate aside); `time` counts steps from 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamStep {
    pub beta1: f32,
    pub beta2: f32,
    pub epsilon: f32,
    pub time: usize,
}

impl AdamStep {
    /// `sqrt(1 - beta2^t) / (1 - beta1^t)` and `epsilon * sqrt(1 - beta2^t)`: Burn's (and, up to
    /// rounding, PyTorch's) bias correction folded into two constants.
    pub fn corrections(&self) -> (f32, f32) {
        let t = self.time as i32;
        let bc2 = (1.0 - self.beta2.powi(t)).sqrt();
        (bc2 / (1.0 - self.beta1.powi(t)), self.epsilon * bc2)
    }
}

/// Operations ember implements itself for some backends, with Burn's as the fallback.
pub trait EmberBackend: Backend {
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
        scalar_mse_composed::<Self>(x, y, w, p)
    }

    /// The gradients of [`EmberBackend::scalar_mse_replicas`] with respect to `w` and `p`, given
    /// its input, the residuals of its forward and the gradient of the losses `[K]`. (The inputs
    /// and targets are data: no gradient flows to them.)
    fn scalar_mse_replicas_backward(
        x: FloatTensor<Self>,
        residuals: FloatTensor<Self>,
        dloss: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        scalar_mse_composed_backward::<Self>(x, residuals, dloss)
    }

    /// Binary cross-entropy on logits, one model's mean loss `[1]` for logits and 0/1 targets
    /// of the same shape: Burn's `BinaryCrossEntropyLoss` with logits. By default its
    /// operations, composed here (a GPU backend's fusion may group them otherwise than
    /// through Burn's loss); the CPU backend's kernel keeps the bits of Burn's loss.
    fn bce_logits(logits: FloatTensor<Self>, y: FloatTensor<Self>) -> FloatTensor<Self> {
        bce_burn::<Self>(logits, y)
    }

    /// The logits' gradient of [`EmberBackend::bce_logits`], given the loss's gradient `[1]`.
    fn bce_logits_backward(
        logits: FloatTensor<Self>,
        y: FloatTensor<Self>,
        dloss: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        bce_burn_backward::<Self>(logits, y, dloss)
    }

    /// Binary cross-entropy on logits for K replicas: each replica's mean loss `[K]`, for
    /// logits `[K, n, 1]` and 0/1 targets of the same shape.
    fn bce_logits_replicas(logits: FloatTensor<Self>, y: FloatTensor<Self>) -> FloatTensor<Self> {
        bce_composed::<Self>(logits, y)
    }

    /// The logits' gradient of [`EmberBackend::bce_logits_replicas`], given the gradient of the
    /// losses `[K]`.
    fn bce_logits_replicas_backward(
        logits: FloatTensor<Self>,
        y: FloatTensor<Self>,
        dloss: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        bce_composed_backward::<Self>(logits, y, dloss)
    }

    /// The 2-d convolution of `x` `[n, cin, h, w]` with `weight` `[cout, cin, k, k]` at `stride`,
    /// `padding` zeros on every side, plus `bias` `[cout]`: Burn's `conv2d`.
    fn conv(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        (stride, padding): (usize, usize),
    ) -> FloatTensor<Self> {
        Self::conv2d(x, weight, bias, conv_options(stride, padding))
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
        conv_backward_composed::<Self>(x, weight, grad, (stride, padding), (need_dx, need_bias))
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
        batch_norm_composed::<Self>(x, gamma, beta, epsilon)
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
        batch_norm_backward_composed::<Self>(x, gamma, mean, var, epsilon, grad)
    }

    /// `x · scale + shift` per channel of `x` `[n, c, s]`, `scale` and `shift` `[c]`: batch
    /// norm at inference, with the running statistics folded in.
    fn channel_affine(
        x: FloatTensor<Self>,
        scale: FloatTensor<Self>,
        shift: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        channel_affine_composed::<Self>(x, scale, shift)
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

/// Burn's options for ember's convolutions: square stride and padding, no dilation or groups.
fn conv_options(stride: usize, padding: usize) -> burn::tensor::ops::ConvOptions<2> {
    burn::tensor::ops::ConvOptions::new([stride; 2], [padding; 2], [1, 1], 1)
}

/// [`EmberBackend::conv_backward`] in Burn's operations (what CUDA and wgpu run).
pub(crate) fn conv_backward_composed<B: Backend>(
    x: FloatTensor<B>,
    weight: FloatTensor<B>,
    grad: FloatTensor<B>,
    (stride, padding): (usize, usize),
    (need_dx, need_bias): (bool, bool),
) -> ConvGrads<B> {
    let options = || conv_options(stride, padding);
    let dx =
        need_dx.then(|| B::conv2d_x_backward(x.clone(), weight.clone(), grad.clone(), options()));
    let cout = grad.shape()[1];
    let db = need_bias.then(|| {
        let sum = B::float_sum_dim(B::float_sum_dim(grad.clone(), 3), 2);
        B::float_reshape(B::float_sum_dim(sum, 0), Shape::new([cout]))
    });
    let dw = B::conv2d_weight_backward(x, weight, grad, options());
    (dx, dw, db)
}

/// [`EmberBackend::batch_norm`] in Burn's operations (what CUDA and wgpu run).
fn batch_norm_composed<B: Backend>(
    x: FloatTensor<B>,
    gamma: FloatTensor<B>,
    beta: FloatTensor<B>,
    epsilon: f64,
) -> (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>) {
    let [n, c, s] = x.shape().dims();
    let count = (n * s) as f32;
    let per_channel = |t: FloatTensor<B>| B::float_reshape(t, Shape::new([1, c, 1]));
    let channel_mean = |t: FloatTensor<B>| {
        let sum = B::float_sum_dim(B::float_sum_dim(t, 2), 0);
        B::float_div_scalar(sum, count.into())
    };
    let mean = channel_mean(x.clone());
    let centred = B::float_sub(x, mean.clone());
    let var = channel_mean(B::float_mul(centred.clone(), centred.clone()));
    let inv = B::float_recip(B::float_sqrt(B::float_add_scalar(
        var.clone(),
        (epsilon as f32).into(),
    )));
    let scaled = B::float_mul(B::float_mul(centred, inv), per_channel(gamma));
    let y = B::float_add(scaled, per_channel(beta));
    let vector = |t: FloatTensor<B>| B::float_reshape(t, Shape::new([c]));
    (y, vector(mean), vector(var))
}

/// [`EmberBackend::batch_norm_backward`] in Burn's operations.
fn batch_norm_backward_composed<B: Backend>(
    x: FloatTensor<B>,
    gamma: FloatTensor<B>,
    mean: FloatTensor<B>,
    var: FloatTensor<B>,
    epsilon: f64,
    grad: FloatTensor<B>,
) -> (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>) {
    let [n, c, s] = x.shape().dims();
    let count = (n * s) as f32;
    let per_channel = |t: FloatTensor<B>| B::float_reshape(t, Shape::new([1, c, 1]));
    let channel_sum = |t: FloatTensor<B>| {
        let sum = B::float_sum_dim(B::float_sum_dim(t, 2), 0);
        B::float_reshape(sum, Shape::new([c]))
    };
    let inv = B::float_recip(B::float_sqrt(B::float_add_scalar(
        var,
        (epsilon as f32).into(),
    )));
    let centred = B::float_sub(x, per_channel(mean));
    let xhat = B::float_mul(centred, per_channel(inv.clone()));
    let dbeta = channel_sum(grad.clone());
    let dgamma = channel_sum(B::float_mul(grad.clone(), xhat.clone()));
    let inner = B::float_sub(
        B::float_sub(
            B::float_mul_scalar(grad, count.into()),
            per_channel(dbeta.clone()),
        ),
        B::float_mul(xhat, per_channel(dgamma.clone())),
    );
    let factor = B::float_div_scalar(B::float_mul(gamma, inv), count.into());
    (B::float_mul(inner, per_channel(factor)), dgamma, dbeta)
}

/// [`EmberBackend::channel_affine`] in Burn's operations.
fn channel_affine_composed<B: Backend>(
    x: FloatTensor<B>,
    scale: FloatTensor<B>,
    shift: FloatTensor<B>,
) -> FloatTensor<B> {
    let c = scale.shape()[0];
    let per_channel = |t: FloatTensor<B>| B::float_reshape(t, Shape::new([1, c, 1]));
    B::float_add(B::float_mul(x, per_channel(scale)), per_channel(shift))
}

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

/// [`EmberBackend::scalar_mse_replicas_forward`] in Burn's operations: a batched product with
/// `p` appended to `w`; the residuals are `[K, n, 1]`.
fn scalar_mse_composed<B: Backend>(
    x: FloatTensor<B>,
    y: FloatTensor<B>,
    w: FloatTensor<B>,
    p: FloatTensor<B>,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let [k, c, _] = w.shape().dims();
    let shared = x.shape().num_dims() == 2;
    let x = per_replica::<B>(x, k);
    let n = x.shape()[1];
    // `x · w + p · f` as one product with `p` appended to `w`.
    let coefs = B::float_cat(vec![w, B::float_reshape(p, Shape::new([k, 1, 1]))], 1);
    let y = match shared {
        true => B::float_expand(
            B::float_reshape(y, Shape::new([1, n, 1])),
            Shape::new([k, n, 1]),
        ),
        false => B::float_reshape(y, Shape::new([k, n, 1])),
    };
    debug_assert_eq!(x.shape()[2], c + 1);
    let e = B::float_sub(B::float_matmul(x, coefs), y);
    let squares = B::float_mul(e.clone(), e.clone());
    let loss = B::float_reshape(B::float_mean_dim(squares, 1), Shape::new([k]));
    (loss, e)
}

/// [`EmberBackend::scalar_mse_replicas_backward`] in Burn's operations.
fn scalar_mse_composed_backward<B: Backend>(
    x: FloatTensor<B>,
    residuals: FloatTensor<B>,
    dloss: FloatTensor<B>,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let [k, n, _] = residuals.shape().dims();
    let x = per_replica::<B>(x, k);
    let c = x.shape()[2] - 1;
    let scale = B::float_mul_scalar(
        B::float_reshape(dloss, Shape::new([k, 1, 1])),
        (2.0 / n as f32).into(),
    );
    let g = B::float_mul(residuals, scale);
    let grads = B::float_matmul(B::float_swap_dims(x, 1, 2), g);
    let dw = B::float_slice(
        grads.clone(),
        &[(0..k).into(), (0..c).into(), (0..1).into()],
    );
    let dp = B::float_slice(grads, &[(0..k).into(), (c..c + 1).into(), (0..1).into()]);
    (dw, B::float_reshape(dp, Shape::new([k])))
}

/// [`EmberBackend::bce_logits`] in Burn's operations, as `burn::nn::loss` writes it:
/// `mean((1 - y)·z - log_sigmoid(z))`.
fn bce_burn<B: Backend>(z: FloatTensor<B>, y: FloatTensor<B>) -> FloatTensor<B> {
    let kept = B::float_add_scalar(B::float_neg(y), 1.0.into());
    let terms = B::float_sub(B::float_mul(kept, z.clone()), B::log_sigmoid(z));
    B::float_mean(terms)
}

/// [`EmberBackend::bce_logits_backward`] in Burn's operations, as its autodiff runs
/// [`bce_burn`]'s backward: `g = dloss / n` for each row, then `g·(1 - y) - g·sigmoid(-z)`.
fn bce_burn_backward<B: Backend>(
    z: FloatTensor<B>,
    y: FloatTensor<B>,
    dloss: FloatTensor<B>,
) -> FloatTensor<B> {
    let shape = z.shape();
    let n = shape.num_elements();
    let ones = B::float_ones(shape.clone(), &B::float_device(&z), z.dtype().into());
    let scale = B::float_mul_scalar(ones, (1.0 / n as f64).into());
    let g = B::float_mul(
        scale,
        B::float_reshape(dloss, Shape::from(vec![1; shape.num_dims()])),
    );
    let kept = B::float_add_scalar(B::float_neg(y), 1.0.into());
    let through_product = B::float_mul(g.clone(), kept);
    let through_log_sigmoid = B::log_sigmoid_backward(z, B::float_neg(g));
    B::float_add(through_product, through_log_sigmoid)
}

/// [`EmberBackend::bce_logits_replicas`] in Burn's operations, in its stable form
/// `relu(z) - z·y + log1p(exp(-|z|))`.
fn bce_composed<B: Backend>(z: FloatTensor<B>, y: FloatTensor<B>) -> FloatTensor<B> {
    let k = z.shape()[0];
    let soft = B::float_log1p(B::float_exp(B::float_neg(B::float_abs(z.clone()))));
    let loss = B::float_add(B::float_sub(B::relu(z.clone()), B::float_mul(z, y)), soft);
    let n = loss.shape().num_elements() / k;
    let loss = B::float_reshape(loss, Shape::new([k, n]));
    B::float_reshape(B::float_mean_dim(loss, 1), Shape::new([k]))
}

/// [`EmberBackend::bce_logits_replicas_backward`] in Burn's operations.
fn bce_composed_backward<B: Backend>(
    z: FloatTensor<B>,
    y: FloatTensor<B>,
    dloss: FloatTensor<B>,
) -> FloatTensor<B> {
    let shape = z.shape();
    let (k, n) = (shape[0], shape.num_elements() / shape[0]);
    let mut dims = vec![1; shape.num_dims()];
    dims[0] = k;
    let scale = B::float_mul_scalar(
        B::float_reshape(dloss, Shape::from(dims)),
        (1.0 / n as f32).into(),
    );
    B::float_mul(B::float_sub(B::sigmoid(z), y), scale)
}

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

/// A float primitive as a tensor.
fn float_tensor<B: Backend, const D: usize>(t: FloatTensor<B>) -> Tensor<B, D> {
    Tensor::from_primitive(TensorPrimitive::Float(t))
}

/// A classifier's mean loss `[1]` and its count `[1]` of correct rows.
pub type LossAndCorrect<B> = (FloatTensor<B>, FloatTensor<B>);

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

/// The CPU backend's fused linear: one layer, or replicas; `hand_on_view` as for
/// [`kernels::linear`] (replicas always give rows).
fn flex_linear(
    x: FloatTensor<Flex>,
    w: FloatTensor<Flex>,
    b: FloatTensor<Flex>,
    act: Activation,
    hand_on_view: bool,
) -> FloatTensor<Flex> {
    match replicas_of(&w) {
        None => kernels::linear(x, w, b, act, hand_on_view),
        Some(_) => kernels::linear_replicas(x, w, b, act),
    }
}

impl EmberBackend for Flex {
    fn sgd_step(w: FloatTensor<Self>, g: FloatTensor<Self>, lr: &Lr<Self>) -> FloatTensor<Self> {
        let lrs = kernels::learning_rates(lr);
        kernels::zip_f32(g, w, |g, w| {
            let each = (g.len() / lrs.len()).max(1);
            for ((g, w), lr) in g.chunks_mut(each).zip(w.chunks(each)).zip(&lrs) {
                kernels::sgd(g, w, *lr);
            }
        })
    }

    fn adam_step(
        w: FloatTensor<Self>,
        g: FloatTensor<Self>,
        m: FloatTensor<Self>,
        v: FloatTensor<Self>,
        s: AdamStep,
        lr: &Lr<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        kernels::adam(w, g, m, v, s, &kernels::learning_rates(lr))
    }

    fn fused_linear(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
        act: Activation,
    ) -> FloatTensor<Self> {
        flex_linear(x, w, b, act, false)
    }

    fn fused_linear_hidden(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
        act: Activation,
    ) -> FloatTensor<Self> {
        flex_linear(x, w, b, act, true)
    }

    fn fused_linear_backward(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        y: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        act: Activation,
        need_dx: bool,
    ) -> LinearGrads<Self> {
        match replicas_of(&w) {
            None => kernels::linear_backward(x, w, y, grad, act, need_dx),
            Some(_) => kernels::linear_replicas_backward(x, w, y, grad, act, need_dx),
        }
    }

    fn scalar_mse_replicas_forward(
        x: FloatTensor<Self>,
        y: FloatTensor<Self>,
        w: FloatTensor<Self>,
        p: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        scalar_mse::forward(x, y, w, p)
    }

    fn scalar_mse_replicas_backward(
        x: FloatTensor<Self>,
        residuals: FloatTensor<Self>,
        dloss: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        scalar_mse::backward(x, residuals, dloss)
    }

    fn bce_logits(logits: FloatTensor<Self>, y: FloatTensor<Self>) -> FloatTensor<Self> {
        bce::mean_forward(logits, y)
    }

    fn bce_logits_backward(
        logits: FloatTensor<Self>,
        y: FloatTensor<Self>,
        dloss: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        bce::mean_backward(logits, y, dloss)
    }

    fn bce_logits_replicas(logits: FloatTensor<Self>, y: FloatTensor<Self>) -> FloatTensor<Self> {
        bce::forward(logits, y)
    }

    fn bce_logits_replicas_backward(
        logits: FloatTensor<Self>,
        y: FloatTensor<Self>,
        dloss: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        bce::backward(logits, y, dloss)
    }

    fn conv(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        (stride, padding): (usize, usize),
    ) -> FloatTensor<Self> {
        conv::forward(x, weight, bias, stride, padding)
    }

    fn conv_backward(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        grad: FloatTensor<Self>,
        geometry: (usize, usize),
        (need_dx, need_bias): (bool, bool),
    ) -> ConvGrads<Self> {
        conv::backward(x, weight, grad, geometry, need_dx, need_bias)
    }

    fn max_pool(x: FloatTensor<Self>, k: usize) -> FloatTensor<Self> {
        max_pool::forward(x, k)
    }

    fn max_pool_for_backward(
        x: FloatTensor<Self>,
        k: usize,
    ) -> (FloatTensor<Self>, Option<IntTensor<Self>>) {
        (max_pool::forward(x, k), None)
    }

    fn max_pool_backward(
        x: FloatTensor<Self>,
        k: usize,
        grad: FloatTensor<Self>,
        _: Option<IntTensor<Self>>,
    ) -> FloatTensor<Self> {
        max_pool::backward(x, k, grad)
    }

    fn batch_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        epsilon: f64,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        batch_norm::forward(x, gamma, beta, epsilon)
    }

    fn batch_norm_backward(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        mean: FloatTensor<Self>,
        var: FloatTensor<Self>,
        epsilon: f64,
        grad: FloatTensor<Self>,
    ) -> (FloatTensor<Self>, FloatTensor<Self>, FloatTensor<Self>) {
        batch_norm::backward(x, gamma, mean, var, epsilon, grad)
    }

    fn channel_affine(
        x: FloatTensor<Self>,
        scale: FloatTensor<Self>,
        shift: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        batch_norm::channel_affine(x, scale, shift)
    }

    fn tanh(x: FloatTensor<Self>) -> FloatTensor<Self> {
        kernels::map_f32(x, kernels::tanh_slice)
    }

    fn tanh_backward(y: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        kernels::zip_f32(grad, y, kernels::tanh_grad_slice)
    }

    fn dropout(x: FloatTensor<Self>, p: f64, seed: u64) -> FloatTensor<Self> {
        let (threshold, scale) = dropout::threshold_and_scale(p);
        kernels::map_f32(x, |v| kernels::dropout(v, seed, threshold, scale))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Autodiff;
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
            let (l2, e2) = scalar_mse_composed::<Flex>(x.clone(), y, w, p);
            let (dw1, dp1) = Flex::scalar_mse_replicas_backward(x.clone(), e1, dloss.clone());
            let (dw2, dp2) = scalar_mse_composed_backward::<Flex>(x, e2, dloss);
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
            let z = Tensor::<A, 2>::from_data(TensorData::new(zd.clone(), [n, 1]), &device)
                .require_grad();
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
        loss(bce_burn::<Flex>).into_data().assert_approx_eq::<f32>(
            &loss(bce::mean_forward).into_data(),
            Tolerance::relative(1e-6),
        );
        let d = || d.clone().into_primitive().tensor();
        let composed = as_tensor(bce_burn_backward::<Flex>(
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
        let composed = bce_composed_backward::<Flex>(prim(zd.clone()), prim(yd.clone()), scale);
        let composed = Tensor::<Flex, 3>::from_primitive(TensorPrimitive::Float(composed));
        composed
            .into_data()
            .assert_approx_eq::<f32>(&da.into_data(), tol);
        let loss = bce_composed::<Flex>(prim(zd), prim(yd));
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
            batch_norm_composed::<Flex>(f(x.clone()), v(gamma.clone()), v(beta.clone()), 1e-5);
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
        let theirs = batch_norm_backward_composed::<Flex>(a, b, c, d, 1e-5, f(grad.clone()));
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
        let theirs = channel_affine_composed::<Flex>(f(x), v(gamma), v(beta));
        back3(ours)
            .into_data()
            .assert_approx_eq(&back3(theirs).into_data(), tol);
    }
}
