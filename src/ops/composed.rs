//! The compositions of Burn's operations that ember's operations default to: what every
//! backend without a kernel of ember's runs (Burn's fusion compiles them on the GPU), and what
//! a backend whose kernel declines a case (replicas, a size it does not take) falls back to.

use super::{Activation, AdamStep, EmberBackend, LinearGrads, Lr, per_replica, replicas_of};
use burn::prelude::*;
use burn::tensor::ops::{FloatTensor, IntTensor};
use burn::tensor::{Shape, TensorMetadata, TensorPrimitive};

/// `w - lr * g`.
pub fn sgd_step<B: Backend>(w: FloatTensor<B>, g: FloatTensor<B>, lr: &Lr<B>) -> FloatTensor<B> {
    B::float_sub(w, lr.scale(g))
}

/// One Adam update of `w` from `g` and the moments `m`, `v`: the new weights and moments.
pub fn adam_step<B: Backend>(
    (w, g, m, v): (
        FloatTensor<B>,
        FloatTensor<B>,
        FloatTensor<B>,
        FloatTensor<B>,
    ),
    s: AdamStep,
    lr: &Lr<B>,
) -> (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>) {
    let (factor, eps) = s.corrections();
    let m = B::float_add(
        B::float_mul_scalar(m, s.beta1.into()),
        B::float_mul_scalar(g.clone(), (1.0 - s.beta1).into()),
    );
    let v = B::float_add(
        B::float_mul_scalar(v, s.beta2.into()),
        B::float_mul_scalar(B::float_mul(g.clone(), g), (1.0 - s.beta2).into()),
    );
    let update = B::float_div(
        B::float_mul_scalar(m.clone(), factor.into()),
        B::float_add_scalar(B::float_sqrt(v.clone()), eps.into()),
    );
    let w = B::float_sub(w, lr.scale(update));
    (w, m, v)
}

/// `act(x · w + b)`, one model or K replicas (`EmberBackend::fused_linear`).
pub fn fused_linear<B: EmberBackend>(
    x: FloatTensor<B>,
    w: FloatTensor<B>,
    b: FloatTensor<B>,
    act: Activation,
) -> FloatTensor<B> {
    let z = match replicas_of(&w) {
        None => {
            let n = b.shape()[0];
            B::float_add(
                B::float_matmul(x, w),
                B::float_reshape(b, Shape::new([1, n])),
            )
        }
        Some(r) => {
            let n = w.shape()[2];
            B::float_add(
                B::float_matmul(per_replica::<B>(x, r), w),
                B::float_reshape(b, Shape::new([r, 1, n])),
            )
        }
    };
    match act {
        Activation::Identity => z,
        Activation::Relu => B::relu(z),
        Activation::Tanh => B::tanh(z),
    }
}

/// The gradients of [`fused_linear`] from its inputs `x`, `w`, its output `y` and the output's
/// gradient `grad`; `dx` only when `need_dx`.
pub fn fused_linear_backward<B: EmberBackend>(
    (x, w, y, grad): (
        FloatTensor<B>,
        FloatTensor<B>,
        FloatTensor<B>,
        FloatTensor<B>,
    ),
    act: Activation,
    need_dx: bool,
) -> LinearGrads<B> {
    let dz = match act {
        Activation::Identity => grad,
        Activation::Relu => B::relu_backward(y, grad),
        Activation::Tanh => B::tanh_backward(y, grad),
    };
    let Some(r) = replicas_of(&w) else {
        let n = dz.shape()[1];
        let db = B::float_reshape(B::float_sum_dim(dz.clone(), 0), Shape::new([n]));
        let dx = need_dx.then(|| B::float_matmul(dz.clone(), B::float_transpose(w)));
        let dw = B::float_matmul(B::float_transpose(x), dz);
        return LinearGrads { dx, dw, db };
    };
    let n = dz.shape()[2];
    let db = B::float_reshape(B::float_sum_dim(dz.clone(), 1), Shape::new([r, n]));
    let shared = x.shape().num_dims() == 2;
    let dx = need_dx.then(|| {
        let dx = B::float_matmul(dz.clone(), B::float_swap_dims(w, 1, 2));
        if shared {
            let [_, m, k] = dx.shape().dims();
            B::float_reshape(B::float_sum_dim(dx, 0), Shape::new([m, k]))
        } else {
            dx
        }
    });
    let x = per_replica::<B>(x, r);
    let dw = B::float_matmul(B::float_swap_dims(x, 1, 2), dz);
    LinearGrads { dx, dw, db }
}

fn float<B: Backend, const D: usize>(t: FloatTensor<B>) -> Tensor<B, D> {
    Tensor::from_primitive(TensorPrimitive::Float(t))
}

/// Burn's `CrossEntropyLoss` of `logits` against `labels`, and the rows `argmax` gets right.
pub fn cross_entropy<B: Backend>(
    logits: FloatTensor<B>,
    labels: IntTensor<B>,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let (z, labels) = (
        float::<B, 2>(logits),
        Tensor::<B, 1, Int>::from_primitive(labels),
    );
    let predicted = z.clone().argmax(1).squeeze_dim::<1>(1);
    let correct = predicted.equal(labels.clone()).float().sum();
    let loss = burn::nn::loss::CrossEntropyLossConfig::new()
        .init(&z.device())
        .forward(z, labels);
    (
        loss.into_primitive().tensor(),
        correct.into_primitive().tensor(),
    )
}

/// `(softmax(z) - onehot(labels)) · grad / rows`: [`cross_entropy`]'s gradient.
pub fn cross_entropy_backward<B: Backend>(
    logits: FloatTensor<B>,
    labels: IntTensor<B>,
    grad: FloatTensor<B>,
) -> FloatTensor<B> {
    let z = float::<B, 2>(logits);
    let [rows, classes] = z.dims();
    let labels = Tensor::<B, 1, Int>::from_primitive(labels).reshape([rows, 1]);
    let classes = Tensor::<B, 1, Int>::arange(0..classes as i64, &z.device()).reshape([1, classes]);
    let onehot = classes.equal(labels).float();
    let scale = float::<B, 1>(grad).div_scalar(rows as f32).reshape([1, 1]);
    let dz = (burn::tensor::activation::softmax(z, 1) - onehot) * scale;
    dz.into_primitive().tensor()
}

/// A binary classifier's mean cross-entropy on logits `[n, 1]` against 0/1 `labels` `[n, 1]`
/// (the backend's `bce_logits`), and the count `[1]` of rows whose logit is on their label's
/// side of 0.
pub fn binary_cross_entropy<B: EmberBackend>(
    logits: FloatTensor<B>,
    labels: IntTensor<B>,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let (z, labels) = (
        float::<B, 2>(logits),
        Tensor::<B, 2, Int>::from_primitive(labels),
    );
    let predicted = z.clone().greater_elem(0.0).int();
    let correct = predicted.equal(labels.clone()).float().sum();
    let y = labels.float().into_primitive().tensor();
    let loss = B::bce_logits(z.into_primitive().tensor(), y);
    (loss, correct.into_primitive().tensor())
}

/// `(sigmoid(z) - y) · grad / n`: [`binary_cross_entropy`]'s gradient (the backend's
/// `bce_logits_backward`).
pub fn binary_cross_entropy_backward<B: EmberBackend>(
    logits: FloatTensor<B>,
    labels: IntTensor<B>,
    grad: FloatTensor<B>,
) -> FloatTensor<B> {
    let y = Tensor::<B, 2, Int>::from_primitive(labels).float();
    B::bce_logits_backward(logits, y.into_primitive().tensor(), grad)
}
