//! K MLPs (or linear-scalar models) of one shape as one batched model: each layer's weights
//! stacked on a leading replica axis (`[K, in, out]`, biases `[K, out]`), every product a
//! batched one (`[K, B, in] · [K, in, out]`) through ember's fused linear. Each replica starts from the weights its own
//! seed draws, exactly as a single run's, and keeps its own loss: the train step backpropagates
//! the sum of the replicas' finite losses, so a replica that goes NaN stops contributing, and
//! no gradient of one replica touches another's weights.

use crate::config::{Activation, JobConfig, ModelKind, Task};
use crate::device::TrainBackend;
use crate::error::Result;
use crate::export;
use crate::model::linear_scalar::LinearScalar;
use crate::model::mlp::{Mlp, MlpBatch, Targets};
use crate::model::{EmberModel, RegressionStep, StepOutput, train_output_of};
use crate::ops::{self, EmberBackend, linear_replicas};
use burn::module::{Param, ParamId};
use burn::nn::{Dropout, DropoutConfig};
use burn::prelude::*;
use burn::tensor::activation::{gelu, log_softmax, relu, sigmoid};
use burn::train::{InferenceStep, TrainOutput, TrainStep};
use std::path::Path;

/// One layer of every replica (linear-scalar's has no bias).
#[derive(Module, Debug)]
pub struct ReplicaLinear<B: Backend> {
    pub weight: Param<Tensor<B, 3>>,
    pub bias: Option<Param<Tensor<B, 2>>>,
}

impl<B: EmberBackend> ReplicaLinear<B> {
    /// `act(x · w + b)` for every replica: `[K, n, out]`.
    fn forward<const D: usize>(&self, x: Tensor<B, D>, act: ops::Activation) -> Tensor<B, 3> {
        let Some(bias) = &self.bias else {
            let z = product(x, self.weight.val());
            return match act {
                ops::Activation::Identity => z,
                ops::Activation::Relu => relu(z),
                ops::Activation::Tanh => ops::tanh(z),
            };
        };
        linear_replicas(x, &self.weight, bias.val(), act)
    }

    /// Replica `r`'s weight `[in, out]` and bias `[out]`.
    fn of(&self, r: usize) -> (Tensor<B, 2>, Option<Tensor<B, 1>>) {
        let [_, fan_in, fan_out] = self.weight.dims();
        let w = self.weight.val().narrow(0, r, 1).reshape([fan_in, fan_out]);
        let b = (self.bias.as_ref()).map(|b| b.val().narrow(0, r, 1).reshape([fan_out]));
        (w, b)
    }
}

/// K models of one shape: an MLP's layers, or linear-scalar's `x · w + p · f` as one layer
/// without bias and the scalars `p`. linear-scalar's inputs arrive as `[x | f]` (the unit
/// appends `f` to the data).
#[derive(Module, Debug)]
pub struct ReplicaMlp<B: Backend> {
    layers: Vec<ReplicaLinear<B>>,
    /// linear-scalar's `p` of each replica, `[K]`.
    scalar: Option<Param<Tensor<B, 1>>>,
    dropout: Dropout,
    #[module(skip)]
    kind: ModelKind,
    #[module(skip)]
    task: Task,
    #[module(skip)]
    activation: Activation,
    #[module(skip)]
    replicas: usize,
}

/// A training batch: the same rows for every replica (file order), or each replica's own rows
/// (shuffled), replica after replica.
#[derive(Clone, Debug)]
pub struct ReplicaBatch<B: Backend> {
    pub rows: MlpBatch<B>,
    pub shared: bool,
}

impl<B: EmberBackend> ReplicaMlp<B> {
    /// The replicas of `configs` (one config each, of one shape), each with the initial weights
    /// of a single run of its config.
    pub fn new(configs: &[JobConfig], device: &B::Device) -> Self {
        let spec = &configs[0].model;
        let (layers, scalar) = match spec.kind {
            ModelKind::Mlp => (mlp_layers(configs, device), None),
            ModelKind::LinearScalar => {
                let (layer, p) = linear_scalars(configs, device);
                (vec![layer], Some(p))
            }
        };
        Self {
            layers,
            scalar,
            dropout: DropoutConfig::new(spec.dropout).init(),
            kind: spec.kind,
            task: configs[0].task,
            activation: spec.activation,
            replicas: configs.len(),
        }
    }

    /// Writes replica `r` as the single model its config describes: its trial's model files.
    pub fn save_replica(
        &self,
        r: usize,
        config: &JobConfig,
        files: (&Path, &Path),
        device: &B::Device,
    ) -> Result<()> {
        match self.kind {
            ModelKind::Mlp => {
                let values = self.layers.iter().map(|l| l.of(r)).collect();
                let single = single(config, device).with_values(values);
                export::save_model(&single, files, config.name())
            }
            ModelKind::LinearScalar => {
                let (w, _) = self.layers[0].of(r);
                let p = (self.scalar.as_ref()).map(|p| p.val().narrow(0, r, 1));
                let p = p.expect("linear-scalar replicas hold their scalars");
                let single = LinearScalar::init(config, device).with_parts(w, p);
                export::save_model(&single, files, config.name())
            }
        }
    }

    pub fn replicas(&self) -> usize {
        self.replicas
    }

    /// Outputs `[K, n, outputs]` for inputs `[n, in]` shared by every replica, or `[K, n, in]`.
    fn forward<const D: usize>(&self, x: Tensor<B, D>) -> Tensor<B, 3> {
        if let Some(p) = &self.scalar {
            return linear_scalar(x, &self.layers[0], p);
        }
        let (first, rest) = self.layers.split_first().expect("a model has layers");
        if rest.is_empty() {
            return first.forward(x, ops::Activation::Identity);
        }
        let mut h = self.hidden(x, first);
        let (last, hidden) = rest.split_last().expect("checked above");
        for layer in hidden {
            h = self.hidden(h, layer);
        }
        last.forward(h, ops::Activation::Identity)
    }

    /// A hidden layer with its activation (fused where the kernel has it) and dropout.
    fn hidden<const D: usize>(&self, x: Tensor<B, D>, l: &ReplicaLinear<B>) -> Tensor<B, 3> {
        let fused = |act| l.forward(x.clone(), act);
        let h = match self.activation {
            Activation::Relu => fused(ops::Activation::Relu),
            Activation::Tanh => fused(ops::Activation::Tanh),
            Activation::Identity => fused(ops::Activation::Identity),
            Activation::Gelu => gelu(fused(ops::Activation::Identity)),
            Activation::Sigmoid => sigmoid(fused(ops::Activation::Identity)),
        };
        self.dropout.forward(h)
    }

    /// Each replica's mean loss `[K]`, correct rows `[K]` (classifiers) and, with `metrics`, a
    /// regression's absolute errors `[K]` beside its shared targets.
    fn step_output(&self, batch: ReplicaBatch<B>, metrics: bool) -> StepOutput<B> {
        let k = self.replicas;
        let n = batch.rows.inputs.dims()[0] / if batch.shared { 1 } else { k };
        let out = if batch.shared {
            self.forward(batch.rows.inputs)
        } else {
            let width = batch.rows.inputs.dims()[1];
            self.forward(batch.rows.inputs.reshape([k, n, width]))
        };
        let per_replica = |t: Tensor<B, 3>| t.reshape([k as i32, -1]);
        match batch.rows.targets {
            Targets::Classes(labels) => {
                let labels = match batch.shared {
                    true => Tensor::cat(vec![labels; k], 0).reshape([k, n]),
                    false => labels.reshape([k, n]),
                };
                let correct = out.clone().argmax(2).reshape([k, n]).equal(labels.clone());
                let picked = log_softmax(out, 2).gather(2, labels.reshape([k, n, 1]));
                let loss = per_replica(picked).mean_dim(1).neg().reshape([k]);
                let correct = correct.float().sum_dim(1).reshape([k]);
                StepOutput::classified(loss, correct, n)
            }
            Targets::Binary(labels) => {
                let y = self.rows(labels.float(), batch.shared, n);
                let correct = out.clone().greater_elem(0.0).float().equal(y.clone());
                // Binary cross-entropy on logits, in its stable form.
                let loss = relu(out.clone()) - out.clone() * y + out.abs().neg().exp().log1p();
                let loss = per_replica(loss).mean_dim(1).reshape([k]);
                let correct = per_replica(correct.float()).sum_dim(1).reshape([k]);
                StepOutput::classified(loss, correct, n)
            }
            Targets::Values(y) => {
                let error = out - self.rows(y.clone(), batch.shared, n);
                let regression = metrics.then(|| RegressionStep {
                    abs_error_sum: per_replica(error.clone().detach().abs())
                        .sum_dim(1)
                        .reshape([k]),
                    targets: y,
                });
                StepOutput {
                    loss: per_replica(error.square()).mean_dim(1).reshape([k]),
                    correct: None,
                    rows: n,
                    regression,
                }
            }
        }
    }

    /// Per-row targets `[rows, t]` as `[K, n, t]`: copied for each replica when shared (a
    /// broadcast view would make every later element-wise op a strided one).
    fn rows(&self, t: Tensor<B, 2>, shared: bool, n: usize) -> Tensor<B, 3> {
        let (k, width) = (self.replicas, t.dims()[1]);
        match shared {
            true => Tensor::cat(vec![t; k], 0).reshape([k, n, width]),
            false => t.reshape([k, n, width]),
        }
    }
}

/// A trainable parameter of a stacked tensor (a new leaf of the graph, as `Param::from_data`
/// makes), under the id of the first replica's.
fn leaf<B: Backend, const D: usize>(id: ParamId, t: Tensor<B, D>) -> Param<Tensor<B, D>> {
    Param::initialized(id, t.detach().require_grad())
}

/// The MLPs' layers, stacked: each replica's weights as its single run draws them.
fn mlp_layers<B: EmberBackend>(configs: &[JobConfig], device: &B::Device) -> Vec<ReplicaLinear<B>> {
    let singles: Vec<Mlp<B>> = configs.iter().map(|c| single(c, device)).collect();
    let first = &singles[0];
    (0..first.layers().len())
        .map(|i| {
            let weights = singles.iter().map(|m| m.layers()[i].weight.val()).collect();
            let like = &first.layers()[i];
            let bias = like.bias.as_ref().map(|b| {
                let biases = singles.iter().map(|m| bias(&m.layers()[i])).collect();
                leaf(b.id, Tensor::stack(biases, 0))
            });
            ReplicaLinear {
                weight: leaf(like.weight.id, Tensor::stack(weights, 0)),
                bias,
            }
        })
        .collect()
}

/// linear-scalar's replicas: the weights `w` as one layer without bias, `[K, inputs, 1]`, and
/// the scalars `p`, `[K]`.
fn linear_scalars<B: EmberBackend>(
    configs: &[JobConfig],
    device: &B::Device,
) -> (ReplicaLinear<B>, Param<Tensor<B, 1>>) {
    let singles: Vec<LinearScalar<B>> = (configs.iter())
        .map(|c| LinearScalar::init(c, device))
        .collect();
    let (w, p) = singles[0].parts();
    let ws = singles.iter().map(|m| m.parts().0.val()).collect();
    let ps = singles.iter().map(|m| m.parts().1.val()).collect();
    let layer = ReplicaLinear {
        weight: leaf(w.id, Tensor::stack(ws, 0)),
        bias: None,
    };
    (layer, leaf(p.id, Tensor::cat(ps, 0)))
}

/// linear-scalar's `x · w + p · f` for every replica, as its single model computes it, with
/// `f` the inputs' last column.
fn linear_scalar<B: EmberBackend, const D: usize>(
    x: Tensor<B, D>,
    layer: &ReplicaLinear<B>,
    p: &Param<Tensor<B, 1>>,
) -> Tensor<B, 3> {
    let cols = x.dims()[D - 1] - 1;
    let f = x.clone().narrow(D - 1, cols, 1);
    let z = layer.forward(x.narrow(D - 1, 0, cols), ops::Activation::Identity);
    let [k, n, _] = z.dims();
    // Both factors whole `[K, n, 1]` tensors: Burn's CPU backend walks broadcast ones element
    // by element, forward and backward.
    let f = match D {
        2 => Tensor::cat(vec![f; k], 0).reshape([k, n, 1]),
        _ => f.reshape([k, n, 1]),
    };
    z + f * p.val().reshape([k, 1, 1]).repeat_dim(1, n)
}

/// `x · w` for every replica, `[K, n, out]`, as a single model's `Linear` without bias
/// computes it: Burn's product, a shared `x` broadcast to every replica. (One wide product,
/// `[n, in] · [in, K·out]`, rounds differently from the single model's.)
fn product<B: Backend, const D: usize>(x: Tensor<B, D>, w: Tensor<B, 3>) -> Tensor<B, 3> {
    let [k, fan_in, _] = w.dims();
    let n = x.dims()[D - 2];
    let x = match D {
        2 => x.reshape([1, n, fan_in]).expand([k, n, fan_in]),
        _ => x.reshape([k, n, fan_in]),
    };
    x.matmul(w)
}

/// The single MLP of one replica's config.
fn single<B: EmberBackend>(config: &JobConfig, device: &B::Device) -> Mlp<B> {
    let (inputs, outputs) = (config.model.inputs, config.model.outputs);
    let (Some(inputs), Some(outputs)) = (inputs, outputs) else {
        unreachable!("the widths are resolved from the data before a model is built")
    };
    Mlp::new(config, inputs, outputs, device)
}

fn bias<B: Backend>(l: &burn::nn::Linear<B>) -> Tensor<B, 1> {
    match &l.bias {
        Some(b) => b.val(),
        None => Tensor::zeros([l.weight.dims()[1]], &l.weight.device()),
    }
}

impl<B: TrainBackend> TrainStep for ReplicaMlp<B> {
    type Input = ReplicaBatch<B>;
    type Output = StepOutput<B>;

    /// Backpropagates the sum of the finite losses: a replica whose loss is NaN or infinite
    /// gets no gradient from it, and the others train on.
    fn step(&self, batch: ReplicaBatch<B>) -> TrainOutput<StepOutput<B>> {
        let out = self.step_output(batch, false);
        let finite = out.loss.clone().is_finite();
        let total = out.loss.clone().mask_fill(finite.bool_not(), 0.0).sum();
        train_output_of(self, out, total)
    }
}

impl<B: EmberBackend> InferenceStep for ReplicaMlp<B> {
    type Input = MlpBatch<B>;
    type Output = StepOutput<B>;

    fn step(&self, rows: MlpBatch<B>) -> StepOutput<B> {
        self.step_output(ReplicaBatch { rows, shared: true }, true)
    }
}
