//! `EmberBackend` for Burn's CPU backend (`Flex`): each operation on ember's CPU kernels.

use super::*;
use burn::backend::Flex;
/// The CPU backend's fused linear: one layer, or replicas; `hand_on_view` as for
/// [`linear_layer::linear`] (replicas always give rows).
fn flex_linear(
    x: FloatTensor<Flex>,
    w: FloatTensor<Flex>,
    b: FloatTensor<Flex>,
    act: Activation,
    hand_on_view: bool,
) -> FloatTensor<Flex> {
    match replicas_of(&w) {
        None => linear_layer::linear(x, w, b, act, hand_on_view),
        Some(_) => replica_layers::linear_replicas(x, w, b, act),
    }
}

impl EmberBackend for Flex {
    fn sgd_step(w: FloatTensor<Self>, g: FloatTensor<Self>, lr: &Lr<Self>) -> FloatTensor<Self> {
        let lrs = optimizers::learning_rates(lr);
        elementwise::zip_f32(g, w, |g, w| {
            let each = (g.len() / lrs.len()).max(1);
            for ((g, w), lr) in g.chunks_mut(each).zip(w.chunks(each)).zip(&lrs) {
                optimizers::sgd(g, w, *lr);
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
        optimizers::adam(w, g, m, v, s, &optimizers::learning_rates(lr))
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
            None => linear_layer::linear_backward(x, w, y, grad, act, need_dx),
            Some(_) => replica_layers::linear_replicas_backward(x, w, y, grad, act, need_dx),
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
        elementwise::map_f32(x, elementwise::tanh_slice)
    }

    fn tanh_backward(y: FloatTensor<Self>, grad: FloatTensor<Self>) -> FloatTensor<Self> {
        elementwise::zip_f32(grad, y, elementwise::tanh_grad_slice)
    }

    fn dropout(x: FloatTensor<Self>, p: f64, seed: u64) -> FloatTensor<Self> {
        let (threshold, scale) = dropout::threshold_and_scale(p);
        elementwise::map_f32(x, |v| elementwise::dropout(v, seed, threshold, scale))
    }
}
