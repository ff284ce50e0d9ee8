//! The compositions of Burn's operations that ember's operations default to: what every
//! backend without a kernel of ember's runs (Burn's fusion compiles them on the GPU), and what
//! a backend whose kernel declines a case (replicas, a size it does not take) falls back to.

use super::{
    Activation, AdamStep, ConvGrads, EmberBackend, Head, HeadKept, LinearGrads, Lr, per_replica,
    replicas_of,
};
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

/// A classifier's output layer then its loss, and the logits' gradient for a loss gradient of
/// 1, by the backend's own layer and loss.
pub fn classifier_head<B: EmberBackend>(
    (x, w, b): (FloatTensor<B>, FloatTensor<B>, FloatTensor<B>),
    labels: IntTensor<B>,
    binary: bool,
) -> Head<B> {
    let logits = B::fused_linear(x, w, b, Activation::Identity);
    let one = Tensor::<B, 1>::ones([1], &B::float_device(&logits));
    let one = one.into_primitive().tensor();
    let ((loss, correct), dlogits) = match binary {
        true => (
            B::binary_cross_entropy(logits.clone(), labels.clone()),
            B::binary_cross_entropy_backward(logits.clone(), labels, one),
        ),
        false => (
            B::cross_entropy(logits.clone(), labels.clone()),
            B::cross_entropy_backward(logits.clone(), labels, one),
        ),
    };
    Head {
        loss,
        correct,
        logits,
        dlogits,
    }
}

/// The output layer's gradients for the logits' gradient `dlogits · grad`.
pub fn classifier_head_backward<B: EmberBackend>(
    (x, w, logits, dlogits): HeadKept<B>,
    grad: FloatTensor<B>,
    need_dx: bool,
) -> LinearGrads<B> {
    let g = float::<B, 2>(dlogits) * float::<B, 1>(grad).reshape([1, 1]);
    let g = g.into_primitive().tensor();
    B::fused_linear_backward(x, w, logits, g, Activation::Identity, need_dx)
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

/// Burn's options for ember's convolutions: square stride and padding, no dilation or groups.
pub fn conv_options(stride: usize, padding: usize) -> burn::tensor::ops::ConvOptions<2> {
    burn::tensor::ops::ConvOptions::new([stride; 2], [padding; 2], [1, 1], 1)
}

/// [`EmberBackend::conv_backward`] in Burn's operations (what CUDA and wgpu run).
pub fn conv_backward<B: Backend>(
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
pub fn batch_norm<B: Backend>(
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
pub fn batch_norm_backward<B: Backend>(
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
pub fn channel_affine<B: Backend>(
    x: FloatTensor<B>,
    scale: FloatTensor<B>,
    shift: FloatTensor<B>,
) -> FloatTensor<B> {
    let c = scale.shape()[0];
    let per_channel = |t: FloatTensor<B>| B::float_reshape(t, Shape::new([1, c, 1]));
    B::float_add(B::float_mul(x, per_channel(scale)), per_channel(shift))
}

/// [`EmberBackend::scalar_mse_replicas_forward`] in Burn's operations: a batched product with
/// `p` appended to `w`; the residuals are `[K, n, 1]`.
pub fn scalar_mse<B: Backend>(
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
pub fn scalar_mse_backward<B: Backend>(
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
pub fn bce_burn<B: Backend>(z: FloatTensor<B>, y: FloatTensor<B>) -> FloatTensor<B> {
    let kept = B::float_add_scalar(B::float_neg(y), 1.0.into());
    let terms = B::float_sub(B::float_mul(kept, z.clone()), B::log_sigmoid(z));
    B::float_mean(terms)
}

/// [`EmberBackend::bce_logits_backward`] in Burn's operations, as its autodiff runs
/// [`bce_burn`]'s backward: `g = dloss / n` for each row, then `g·(1 - y) - g·sigmoid(-z)`.
pub fn bce_burn_backward<B: Backend>(
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
pub fn bce<B: Backend>(z: FloatTensor<B>, y: FloatTensor<B>) -> FloatTensor<B> {
    let k = z.shape()[0];
    let soft = B::float_log1p(B::float_exp(B::float_neg(B::float_abs(z.clone()))));
    let loss = B::float_add(B::float_sub(B::relu(z.clone()), B::float_mul(z, y)), soft);
    let n = loss.shape().num_elements() / k;
    let loss = B::float_reshape(loss, Shape::new([k, n]));
    B::float_reshape(B::float_mean_dim(loss, 1), Shape::new([k]))
}

/// [`EmberBackend::bce_logits_replicas_backward`] in Burn's operations.
pub fn bce_backward<B: Backend>(
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

/// Each image of `maps` `[n, c, h, w]` shifted and mirrored by its row of `draws` `[n, 3]`
/// (`dy`, `dx`, `flip`): output pixel (r, c) of image i is input pixel (r + dy, c' + dx), with
/// c' = w-1-c where `flip` is 1 and c elsewhere, or 0 outside the image. One gather of the maps
/// by an index built on the device, and a mask for the zeros.
pub fn augment<B: Backend>(maps: FloatTensor<B>, draws: IntTensor<B>) -> FloatTensor<B> {
    let maps = float::<B, 4>(maps);
    let draws = Tensor::<B, 2, Int>::from_primitive(draws);
    let [n, c, h, w] = maps.dims();
    let device = maps.device();
    let column = |j: usize| draws.clone().slice([0..n, j..j + 1]);
    let (dy, dx, flip) = (column(0), column(1), column(2));
    let (h, w) = (h as i64, w as i64);
    let pixel = Tensor::<B, 1, Int>::arange(0..h * w, &device).reshape([1, h * w]);
    let row = pixel.clone().div_scalar(w);
    let col = pixel.remainder_scalar(w);
    // c + flip·(w-1-2c): the mirrored column where flip is 1.
    let col = col.clone() + flip * col.mul_scalar(-2).add_scalar(w - 1);
    let (src_row, src_col) = (row + dy, col + dx);
    let (row_in, col_in) = (
        src_row.clone().clamp(0, h - 1),
        src_col.clone().clamp(0, w - 1),
    );
    let inside = src_row.equal(row_in.clone()).float() * src_col.equal(col_in.clone()).float();
    let index = (row_in.mul_scalar(w) + col_in)
        .unsqueeze_dim::<3>(1)
        .repeat_dim(1, c);
    let hw = (h * w) as usize;
    let out = (maps.reshape([n, c, hw]).gather(2, index) * inside.unsqueeze_dim::<3>(1))
        .reshape([n, c, h as usize, w as usize]);
    out.into_primitive().tensor()
}
