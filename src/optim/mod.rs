//! ember's optimizers: SGD (momentum, dampening, Nesterov, weight decay), Adam and AdamW, as
//! Burn `SimpleOptimizer`s (so Burn's `OptimizerAdaptor` and the Learner drive them, and their
//! state goes into Burn records), whose update is one fused pass per parameter through
//! [`EmberBackend`] instead of Burn's chain of a dozen tensor operations, and where the
//! settings allow, one pass for all of a module's parameters ([`grouped`]). Same formulas as
//! PyTorch's `SGD`, `Adam` and `AdamW` (and Burn's): tests check each against Burn's optimizer.

pub mod grouped;

pub use grouped::Grouped;

use crate::config::OptimizerSpec;
use crate::ops::{EmberBackend, Lr};
use burn::module::AutodiffModule;
use burn::optim::SimpleOptimizer;
use burn::prelude::*;
use burn::record::Record;
use burn::tensor::TensorPrimitive;
use burn::tensor::backend::AutodiffBackend;

fn prim<B: Backend, const D: usize>(t: Tensor<B, D>) -> burn::tensor::ops::FloatTensor<B> {
    t.into_primitive().tensor()
}

fn tensor<B: Backend, const D: usize>(p: burn::tensor::ops::FloatTensor<B>) -> Tensor<B, D> {
    Tensor::from_primitive(TensorPrimitive::Float(p))
}

/// Burn's `SimpleOptimizer` for one of ember's optimizers, whose step at the Learner's one
/// learning rate is its [`StepAt::step_at`] at [`Lr::One`], and its `init` as a Burn
/// optimizer of a module ([`Grouped`]). A macro, since Rust allows no blanket impl of Burn's
/// trait.
macro_rules! simple_optimizer {
    ($optimizer:ident, $state:ident) => {
        impl<B: EmberBackend> SimpleOptimizer<B> for $optimizer {
            type State<const D: usize> = $state<B, D>;

            fn step<const D: usize>(
                &self,
                lr: f64,
                tensor: Tensor<B, D>,
                grad: Tensor<B, D>,
                state: Option<Self::State<D>>,
            ) -> (Tensor<B, D>, Option<Self::State<D>>) {
                self.step_at(&Lr::One(lr), tensor, grad, state)
            }

            fn to_device<const D: usize>(
                state: Self::State<D>,
                device: &B::Device,
            ) -> Self::State<D> {
                state.moved_to(device)
            }
        }

        impl $optimizer {
            pub fn init<B: AutodiffBackend, M: AutodiffModule<B>>(self) -> Grouped<$optimizer, M, B>
            where
                B::InnerBackend: EmberBackend,
            {
                Grouped::new(self)
            }
        }
    };
}

/// SGD as PyTorch's: `g += weight_decay * w`; with momentum `v = momentum * v + (1 -
/// dampening) * g` (the first step `v = g`) and `g = v`, or `g += momentum * v` (Nesterov);
/// then `w -= lr * g`.
#[derive(Clone, Debug, Default)]
pub struct Sgd {
    pub momentum: f64,
    pub dampening: f64,
    pub nesterov: bool,
    pub weight_decay: f64,
}

/// SGD's state: the velocity, when momentum is on.
#[derive(Record, Clone, Debug)]
pub struct SgdState<B: Backend, const D: usize> {
    pub velocity: Tensor<B, D>,
}

simple_optimizer!(Sgd, SgdState);

impl Sgd {
    /// The gradient with the weight decay's term.
    fn decayed<B: Backend, const D: usize>(
        &self,
        w: &Tensor<B, D>,
        g: Tensor<B, D>,
    ) -> Tensor<B, D> {
        match self.weight_decay {
            0.0 => g,
            decay => g + w.clone().mul_scalar(decay),
        }
    }
}

impl<B: Backend, const D: usize> SgdState<B, D> {
    fn moved_to(self, device: &B::Device) -> Self {
        SgdState {
            velocity: self.velocity.to_device(device),
        }
    }
}

/// An optimizer that updates at a learning rate given as [`Lr`]: one, or one per replica.
pub trait StepAt<B: EmberBackend>: SimpleOptimizer<B> {
    /// One update at learning rate `lr`.
    fn step_at<const D: usize>(
        &self,
        lr: &Lr<B>,
        tensor: Tensor<B, D>,
        grad: Tensor<B, D>,
        state: Option<Self::State<D>>,
    ) -> (Tensor<B, D>, Option<Self::State<D>>);
}

impl<B: EmberBackend> StepAt<B> for Sgd {
    fn step_at<const D: usize>(
        &self,
        lr: &Lr<B>,
        tensor: Tensor<B, D>,
        grad: Tensor<B, D>,
        state: Option<SgdState<B, D>>,
    ) -> (Tensor<B, D>, Option<SgdState<B, D>>) {
        let grad = self.decayed(&tensor, grad);
        if self.momentum == 0.0 {
            let w = B::sgd_step(prim(tensor), prim(grad), lr);
            return (self::tensor(w), None);
        }
        // The first step starts the velocity at the gradient, as PyTorch does.
        let velocity = match (state, self.dampening) {
            (Some(s), 0.0) => s.velocity.mul_scalar(self.momentum) + grad.clone(),
            (Some(s), d) => s.velocity.mul_scalar(self.momentum) + grad.clone().mul_scalar(1.0 - d),
            (None, _) => grad.clone(),
        };
        let direction = if self.nesterov {
            grad + velocity.clone().mul_scalar(self.momentum)
        } else {
            velocity.clone()
        };
        let w = B::sgd_step(prim(tensor), prim(direction), lr);
        (self::tensor(w), Some(SgdState { velocity }))
    }
}

/// Adam with PyTorch's update (bias-corrected moments, `eps` added to `sqrt(v_hat)`). Weight
/// decay is an L2 term in the gradient (`Adam`), or with `decoupled` a shrink of the weights
/// by `lr * weight_decay` beside the Adam step (`AdamW`).
#[derive(Clone, Debug)]
pub struct Adam {
    pub beta1: f32,
    pub beta2: f32,
    pub epsilon: f32,
    pub weight_decay: f32,
    pub decoupled: bool,
}

/// Adam's state: the step count and the two moments.
#[derive(Record, Clone, Debug)]
pub struct AdamState<B: Backend, const D: usize> {
    pub time: usize,
    pub moment_1: Tensor<B, D>,
    pub moment_2: Tensor<B, D>,
}

simple_optimizer!(Adam, AdamState);

impl<B: Backend, const D: usize> AdamState<B, D> {
    fn moved_to(self, device: &B::Device) -> Self {
        AdamState {
            time: self.time,
            moment_1: self.moment_1.to_device(device),
            moment_2: self.moment_2.to_device(device),
        }
    }
}

impl Adam {
    /// The weights and gradient with the weight decay: a shrink of the weights (AdamW) or a
    /// term of the gradient (Adam).
    fn decayed<B: Backend, const D: usize>(
        &self,
        lr: &Lr<B>,
        w: Tensor<B, D>,
        g: Tensor<B, D>,
    ) -> (Tensor<B, D>, Tensor<B, D>) {
        match (self.weight_decay, self.decoupled, lr) {
            (0.0, _, _) => (w, g),
            (decay, true, Lr::One(lr)) => (w.mul_scalar(1.0 - lr * f64::from(decay)), g),
            (decay, true, lr) => {
                let shrink = self::tensor::<B, D>(lr.scale(prim(w.clone()))).mul_scalar(decay);
                (w - shrink, g)
            }
            (decay, false, _) => (w.clone(), g + w.mul_scalar(decay)),
        }
    }

    /// The update's constants at step `time`.
    fn at(&self, time: usize) -> crate::ops::AdamStep {
        crate::ops::AdamStep {
            beta1: self.beta1,
            beta2: self.beta2,
            epsilon: self.epsilon,
            time,
        }
    }
}

/// This step's count and the moments it starts from: the state's, or zeros at the first.
fn moments<B: Backend, const D: usize>(
    state: Option<AdamState<B, D>>,
    grad: &Tensor<B, D>,
) -> (usize, Tensor<B, D>, Tensor<B, D>) {
    match state {
        Some(s) => (s.time + 1, s.moment_1, s.moment_2),
        None => (1, grad.zeros_like(), grad.zeros_like()),
    }
}

impl<B: EmberBackend> StepAt<B> for Adam {
    fn step_at<const D: usize>(
        &self,
        lr: &Lr<B>,
        tensor: Tensor<B, D>,
        grad: Tensor<B, D>,
        state: Option<AdamState<B, D>>,
    ) -> (Tensor<B, D>, Option<AdamState<B, D>>) {
        let (tensor, grad) = self.decayed(lr, tensor, grad);
        let (time, m, v) = moments(state, &grad);
        let step = self.at(time);
        let (w, m, v) = B::adam_step(prim(tensor), prim(grad), prim(m), prim(v), step, lr);
        (
            self::tensor(w),
            Some(AdamState {
                time,
                moment_1: self::tensor(m),
                moment_2: self::tensor(v),
            }),
        )
    }
}

/// An optimizer over K replicas stacked on each parameter's first axis, each at its own
/// learning rate: the Learner's scheduled rate times the replica's factor (`factors`, `[K]`,
/// on the device). The Learner has one learning rate; the per-replica ones live here.
#[derive(Clone, Debug)]
pub struct PerReplica<O, B: Backend> {
    pub inner: O,
    pub factors: Tensor<B, 1>,
}

impl<O, B: Backend> PerReplica<O, B> {
    fn lr(&self, lr: f64) -> Lr<B> {
        Lr::PerReplica(prim(self.factors.clone().mul_scalar(lr)))
    }
}

impl<B: EmberBackend, O: StepAt<B>> SimpleOptimizer<B> for PerReplica<O, B> {
    type State<const D: usize> = O::State<D>;

    fn step<const D: usize>(
        &self,
        lr: f64,
        tensor: Tensor<B, D>,
        grad: Tensor<B, D>,
        state: Option<Self::State<D>>,
    ) -> (Tensor<B, D>, Option<Self::State<D>>) {
        self.inner.step_at(&self.lr(lr), tensor, grad, state)
    }

    fn to_device<const D: usize>(state: Self::State<D>, device: &B::Device) -> Self::State<D> {
        O::to_device(state, device)
    }
}

/// Work that needs the concrete optimizer type (a Learner, a bare step loop).
pub trait WithOptimizer<B: AutodiffBackend, M: AutodiffModule<B>> {
    type Output;
    fn run<O: burn::optim::Optimizer<M, B> + 'static>(self, optimizer: O, lr: f64) -> Self::Output;
}

/// The optimizer that a config's `[sgd]` or `[adam]` section names, with its learning rate.
/// [`Chosen::run`] hands the concrete optimizer type to generic code.
pub enum Chosen {
    Sgd(Sgd, f64),
    Adam(Adam, f64),
}

impl Chosen {
    /// Runs `task` with this optimizer: the one match on the optimizer kind.
    pub fn run<B, M, T>(self, task: T) -> T::Output
    where
        B: AutodiffBackend,
        B::InnerBackend: EmberBackend,
        M: AutodiffModule<B> + 'static,
        T: WithOptimizer<B, M>,
    {
        match self {
            Chosen::Sgd(sgd, lr) => task.run(sgd.init(), lr),
            Chosen::Adam(adam, lr) => task.run(adam.init(), lr),
        }
    }

    pub fn from_spec(spec: &OptimizerSpec) -> Self {
        match *spec {
            OptimizerSpec::Sgd {
                lr,
                momentum,
                dampening,
                nesterov,
                weight_decay,
            } => Chosen::Sgd(
                Sgd {
                    momentum,
                    dampening,
                    nesterov,
                    weight_decay,
                },
                lr,
            ),
            OptimizerSpec::Adam {
                lr,
                beta1,
                beta2,
                epsilon,
                weight_decay,
                decoupled,
            } => Chosen::Adam(
                Adam {
                    beta1: beta1 as f32,
                    beta2: beta2 as f32,
                    epsilon: epsilon as f32,
                    weight_decay: weight_decay as f32,
                    decoupled,
                },
                lr,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{Autodiff, Flex};
    use burn::nn::{Linear, LinearConfig};
    use burn::optim::{GradientsParams, Optimizer};
    use burn::tensor::{Distribution, Tolerance};

    type A = Autodiff<Flex>;

    /// Five steps of each optimizer against Burn's, on the same layer and batches.
    fn same_as_burn<O1: Optimizer<Linear<A>, A>, O2: Optimizer<Linear<A>, A>>(
        mut ours: O1,
        mut burns: O2,
        lr: f64,
    ) {
        let device = Default::default();
        let mut a = LinearConfig::new(13, 7).init::<A>(&device);
        // A separate copy with parameters of its own (a clone would share autodiff nodes).
        let copy = |p: &burn::module::Param<Tensor<A, 2>>| {
            burn::module::Param::from_data(p.val().into_data(), &device)
        };
        let mut b = Linear {
            weight: copy(&a.weight),
            bias: a
                .bias
                .as_ref()
                .map(|p| burn::module::Param::from_data(p.val().into_data(), &device)),
        };
        for _ in 0..5 {
            let x = Tensor::<A, 2>::random([9, 13], Distribution::Normal(0.0, 1.0), &device);
            let ga = GradientsParams::from_grads(
                a.forward(x.clone()).powf_scalar(2.0).sum().backward(),
                &a,
            );
            let gb =
                GradientsParams::from_grads(b.forward(x).powf_scalar(2.0).sum().backward(), &b);
            a = ours.step(lr, a, ga);
            b = burns.step(lr, b, gb);
        }
        a.weight
            .val()
            .into_data()
            .assert_approx_eq::<f32>(&b.weight.val().into_data(), Tolerance::absolute(1e-5));
        a.bias.unwrap().val().into_data().assert_approx_eq::<f32>(
            &b.bias.unwrap().val().into_data(),
            Tolerance::absolute(1e-5),
        );
    }

    #[test]
    fn sgd_matches_burns() {
        same_as_burn(
            Sgd::default().init::<A, Linear<A>>(),
            burn::optim::SgdConfig::new().init::<A, Linear<A>>(),
            0.05,
        );
    }

    #[test]
    fn sgd_with_momentum_matches_burns() {
        let momentum = burn::optim::momentum::MomentumConfig::new()
            .with_momentum(0.9)
            .with_dampening(0.0);
        same_as_burn(
            Sgd {
                momentum: 0.9,
                ..Sgd::default()
            }
            .init::<A, Linear<A>>(),
            burn::optim::SgdConfig::new()
                .with_momentum(Some(momentum))
                .init::<A, Linear<A>>(),
            0.05,
        );
    }

    #[test]
    fn adam_matches_burns() {
        same_as_burn(
            adam(0.0, false).init::<A, Linear<A>>(),
            burn::optim::AdamConfig::new()
                .with_epsilon(1e-8)
                .init::<A, Linear<A>>(),
            0.01,
        );
    }

    fn adam(weight_decay: f32, decoupled: bool) -> Adam {
        Adam {
            beta1: 0.9,
            beta2: 0.999,
            epsilon: 1e-8,
            weight_decay,
            decoupled,
        }
    }

    /// Burn's momentum dampening defaults to 0.1 and PyTorch's to 0: each is set explicitly.
    #[test]
    fn sgd_with_dampening_nesterov_and_weight_decay_matches_burns() {
        use burn::optim::decay::WeightDecayConfig;
        use burn::optim::momentum::MomentumConfig;
        for (dampening, nesterov) in [(0.3, false), (0.0, true)] {
            let momentum = MomentumConfig::new()
                .with_momentum(0.8)
                .with_dampening(dampening)
                .with_nesterov(nesterov);
            same_as_burn(
                Sgd {
                    momentum: 0.8,
                    dampening,
                    nesterov,
                    weight_decay: 0.05,
                }
                .init::<A, Linear<A>>(),
                burn::optim::SgdConfig::new()
                    .with_momentum(Some(momentum))
                    .with_weight_decay(Some(WeightDecayConfig::new(0.05)))
                    .init::<A, Linear<A>>(),
                0.05,
            );
        }
    }

    #[test]
    fn adam_with_l2_weight_decay_matches_burns() {
        same_as_burn(
            adam(0.1, false).init::<A, Linear<A>>(),
            burn::optim::AdamConfig::new()
                .with_epsilon(1e-8)
                .with_weight_decay(Some(burn::optim::decay::WeightDecayConfig::new(0.1)))
                .init::<A, Linear<A>>(),
            0.01,
        );
    }

    /// Burn's AdamW defaults to epsilon 1e-5 and weight decay 1e-4; PyTorch's to 1e-8 and 0.01.
    #[test]
    fn adamw_matches_burns() {
        same_as_burn(
            adam(0.01, true).init::<A, Linear<A>>(),
            burn::optim::AdamWConfig::new()
                .with_epsilon(1e-8)
                .with_weight_decay(0.01)
                .init::<A, Linear<A>>(),
            0.01,
        );
        same_as_burn(
            adam(0.5, true).init::<A, Linear<A>>(),
            burn::optim::AdamWConfig::new()
                .with_epsilon(1e-8)
                .with_weight_decay(0.5)
                .init::<A, Linear<A>>(),
            0.01,
        );
    }
}
