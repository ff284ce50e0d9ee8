//! Gradient clipping by the global norm, as PyTorch's `clip_grad_norm_`: every gradient is
//! scaled by `min(1, max_norm / (‖g‖ + 1e-6))`, where ‖g‖ is the L2 norm of all gradients
//! together. Burn 0.21's `GradientClipping::Norm` clips each tensor on its own (its optimizer
//! adaptor sees one tensor at a time), so ember clips between the train step and the optimizer
//! step. The norm and the factor stay on the device: no host read per step.

use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;

/// `grads` of `model`'s parameters, scaled to a global norm of at most `max_norm`.
pub fn clip_global_norm<B: AutodiffBackend, M: AutodiffModule<B>>(
    model: &M,
    grads: GradientsParams,
    max_norm: f64,
) -> GradientsParams {
    let mut squares = SquaredNorm::<B> {
        grads: &grads,
        sum: None,
    };
    model.visit(&mut squares);
    let Some(sum) = squares.sum else {
        return grads;
    };
    let factor = scale_factor(sum, max_norm);
    let mut scale = Scale::<B> { grads, factor };
    model.visit(&mut scale);
    scale.grads
}

/// The factor that brings a gradient of squared norm `sum` down to at most `max_norm` (1 when
/// it is within), as PyTorch's `clip_grad_norm_` computes it.
fn scale_factor<B: Backend>(sum: Tensor<B, 1>, max_norm: f64) -> Tensor<B, 1> {
    sum.sqrt()
        .add_scalar(1e-6)
        .recip()
        .mul_scalar(max_norm)
        .clamp_max(1.0)
}

/// Adds up the squares of every gradient, on the device.
struct SquaredNorm<'a, B: AutodiffBackend> {
    grads: &'a GradientsParams,
    sum: Option<Tensor<B::InnerBackend, 1>>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for SquaredNorm<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if let Some(g) = self.grads.get::<B::InnerBackend, D>(param.id) {
            let s = g.square().sum();
            self.sum = Some(match self.sum.take() {
                Some(acc) => acc + s,
                None => s,
            });
        }
    }
}

/// Multiplies every gradient by the clip factor.
struct Scale<B: AutodiffBackend> {
    grads: GradientsParams,
    factor: Tensor<B::InnerBackend, 1>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Scale<B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if let Some(g) = self.grads.remove::<B::InnerBackend, D>(param.id) {
            let factor = self.factor.clone().unsqueeze::<D>();
            self.grads.register(param.id, g * factor);
        }
    }
}

/// [`clip_global_norm`] for K replicas stacked on each parameter's first axis: each replica's
/// gradients are scaled by the norm of its own, so that one replica's gradients never change
/// another's.
pub fn clip_per_replica<B: AutodiffBackend, M: AutodiffModule<B>>(
    model: &M,
    grads: GradientsParams,
    max_norm: f64,
    replicas: usize,
) -> GradientsParams {
    let mut squares = ReplicaSquares::<B> {
        grads: &grads,
        replicas,
        sum: None,
    };
    model.visit(&mut squares);
    let Some(sum) = squares.sum else {
        return grads;
    };
    let factor = scale_factor(sum, max_norm);
    let mut scale = ReplicaScale::<B> { grads, factor };
    model.visit(&mut scale);
    scale.grads
}

/// Adds up the squares of each replica's gradients, `[K]`, on the device.
struct ReplicaSquares<'a, B: AutodiffBackend> {
    grads: &'a GradientsParams,
    replicas: usize,
    sum: Option<Tensor<B::InnerBackend, 1>>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for ReplicaSquares<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if let Some(g) = self.grads.get::<B::InnerBackend, D>(param.id) {
            let k = self.replicas;
            let s = g.square().reshape([k as i32, -1]).sum_dim(1).reshape([k]);
            self.sum = Some(match self.sum.take() {
                Some(acc) => acc + s,
                None => s,
            });
        }
    }
}

/// Multiplies each replica's gradients by its clip factor.
struct ReplicaScale<B: AutodiffBackend> {
    grads: GradientsParams,
    factor: Tensor<B::InnerBackend, 1>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for ReplicaScale<B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if let Some(g) = self.grads.remove::<B::InnerBackend, D>(param.id) {
            let mut dims = [1; D];
            dims[0] = self.factor.dims()[0];
            let factor = self.factor.clone().reshape(dims);
            self.grads.register(param.id, g * factor);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{Autodiff, Flex};
    use burn::nn::LinearConfig;
    use burn::tensor::Distribution;

    type A = Autodiff<Flex>;

    fn norm(model: &burn::nn::Linear<A>, grads: &GradientsParams) -> f64 {
        let mut n = SquaredNorm::<A> { grads, sum: None };
        model.visit(&mut n);
        f64::from(n.sum.unwrap().into_scalar()).sqrt()
    }

    #[test]
    fn a_large_gradient_is_scaled_to_the_norm_and_a_small_one_is_left() {
        let device = Default::default();
        let layer = LinearConfig::new(5, 3).init::<A>(&device);
        let x = Tensor::<A, 2>::random([4, 5], Distribution::Normal(0.0, 10.0), &device);
        let grads = GradientsParams::from_grads(layer.forward(x).sum().backward(), &layer);
        let before = norm(&layer, &grads);
        assert!(before > 1.0, "{before}");
        let clipped = clip_global_norm(&layer, grads, 1.0);
        assert!((norm(&layer, &clipped) - 1.0).abs() < 1e-4);
        let bias: Tensor<Flex, 1> = clipped.get(layer.bias.as_ref().unwrap().id).unwrap();
        let kept = clip_global_norm(&layer, clipped, 10.0);
        let bias_kept: Tensor<Flex, 1> = kept.get(layer.bias.as_ref().unwrap().id).unwrap();
        assert_eq!(bias.into_data(), bias_kept.into_data());
    }
}
