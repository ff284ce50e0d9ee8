//! K MLPs (or linear-scalar models) of one shape as one batched model: each layer's weights
//! stacked on a leading replica axis (`[K, in, out]`, biases `[K, out]`), every product a
//! batched one (`[K, B, in] · [K, in, out]`), an MLP's through ember's fused linear. Each replica starts from the weights its own
//! seed draws, exactly as a single run's, and keeps its own loss: the train step backpropagates
//! the sum of the replicas' finite losses, so a replica that goes NaN stops contributing, and
//! no gradient of one replica touches another's weights.

use crate::config::{Activation, JobConfig, ModelKind, Task};
use crate::device::TrainBackend;
use crate::error::Result;
use crate::export;
use crate::model::linear_scalar::LinearScalar;
use crate::model::mlp::{Mlp, MlpBatch, Targets};
use crate::model::{EmberModel, RegressionStep, StepOutput, embed, train_output_of, weighting};
use crate::ops::{self, EmberBackend, linear_replicas};
use burn::module::{Param, ParamId};
use burn::nn::{Dropout, DropoutConfig};
use burn::prelude::*;
use burn::tensor::activation::{gelu, log_softmax, sigmoid};
use burn::train::{InferenceStep, TrainOutput, TrainStep};
use std::path::Path;

/// One layer of every replica.
#[derive(Module, Debug)]
pub struct ReplicaLinear<B: Backend> {
    pub weight: Param<Tensor<B, 3>>,
    pub bias: Param<Tensor<B, 2>>,
}

impl<B: EmberBackend> ReplicaLinear<B> {
    /// `act(x · w + b)` for every replica: `[K, n, out]`.
    fn forward<const D: usize>(&self, x: Tensor<B, D>, act: ops::Activation) -> Tensor<B, 3> {
        linear_replicas(x, &self.weight, &self.bias, act)
    }

    /// Replica `r`'s weight `[in, out]` and bias `[out]`.
    fn of(&self, r: usize) -> (Tensor<B, 2>, Tensor<B, 1>) {
        let [_, fan_in, fan_out] = self.weight.dims();
        let w = self.weight.val().narrow(0, r, 1).reshape([fan_in, fan_out]);
        (w, self.bias.val().narrow(0, r, 1).reshape([fan_out]))
    }
}

/// linear-scalar's replicas: `x · w + p · f`, with `w` `[K, in, 1]` and `p` `[K]`. Their inputs
/// arrive as `[x | f]` (the unit appends `f` to the data).
#[derive(Module, Debug)]
pub struct ReplicaScalar<B: Backend> {
    pub weight: Param<Tensor<B, 3>>,
    pub p: Param<Tensor<B, 1>>,
}

impl<B: EmberBackend> ReplicaScalar<B> {
    /// Each replica's weights as its single run draws them.
    fn new(configs: &[JobConfig], device: &B::Device) -> Self {
        let singles: Vec<LinearScalar<B>> = (configs.iter())
            .map(|c| LinearScalar::init(c, device))
            .collect();
        let (w, p) = singles[0].parts();
        let ws = singles.iter().map(|m| m.parts().0.val()).collect();
        let ps = singles.iter().map(|m| m.parts().1.val()).collect();
        Self {
            weight: leaf(w.id, Tensor::stack(ws, 0)),
            p: leaf(p.id, Tensor::cat(ps, 0)),
        }
    }

    /// `[K, n, 1]`, computed op for op as the single model does (Burn's product, without bias),
    /// for inputs `[n, in + 1]` shared by every replica or `[K, n, in + 1]`.
    fn forward<const D: usize>(&self, x: Tensor<B, D>) -> Tensor<B, 3> {
        let [k, cols, _] = self.weight.dims();
        let n = x.dims()[D - 2];
        let f = x.clone().narrow(D - 1, cols, 1).reshape([-1, 1]);
        let x = x.narrow(D - 1, 0, cols);
        // A shared `x` broadcast to every replica. (One wide product, `[n, in] · [in, K]`,
        // rounds differently from the single model's `[n, in] · [in, 1]`.)
        let x = match D {
            2 => x.reshape([1, n, cols]).expand([k, n, cols]),
            _ => x.reshape([k, n, cols]),
        };
        // Both factors of `p · f` whole `[K, n, 1]` tensors: Burn's CPU backend walks
        // broadcast ones element by element, forward and backward.
        let f = per_replica_rows(f, k, n, D == 2);
        x.matmul(self.weight.val()) + f * self.p.val().reshape([k, 1, 1]).repeat_dim(1, n)
    }

    /// Each replica's mean squared error `[K]` on inputs `[n, in + 1]` shared by every replica
    /// or `[K, n, in + 1]`, in one operation forward and one backward. It rounds differently
    /// from [`ReplicaScalar::forward`], which validation keeps, since that matches the single
    /// model's op for op.
    fn mse<const D: usize>(&self, x: Tensor<B, D>, y: Tensor<B, 2>) -> Tensor<B, 1> {
        ops::scalar_mse_replicas(x, y, &self.weight, &self.p)
    }

    /// Replica `r` as its single model.
    fn single(&self, r: usize, config: &JobConfig, device: &B::Device) -> LinearScalar<B> {
        let [_, cols, _] = self.weight.dims();
        let w = self.weight.val().narrow(0, r, 1).reshape([cols, 1]);
        let p = self.p.val().narrow(0, r, 1);
        LinearScalar::init(config, device).with_parts(w, p)
    }
}

/// K models of one shape: MLPs (`layers`), or linear-scalar's (`scalar`).
#[derive(Module, Debug)]
pub struct ReplicaMlp<B: Backend> {
    /// Each embedded column's table, the replicas' stacked: `[K, rows, width]`; `None` without
    /// such columns (and in group checkpoints from before embeddings).
    tables: Option<Vec<Param<Tensor<B, 3>>>>,
    layers: Vec<ReplicaLinear<B>>,
    scalar: Option<ReplicaScalar<B>>,
    dropout: Dropout,
    #[module(skip)]
    task: Task,
    #[module(skip)]
    activation: Activation,
    /// `class_weight`'s per-class weights (the same for every replica of a unit).
    #[module(skip)]
    class_weights: Option<Vec<f32>>,
    #[module(skip)]
    replicas: usize,
    /// Where the tables come in (`model::embed`).
    #[module(skip)]
    plan: Option<embed::Plan>,
}

/// A batch: the same rows for every replica (file order), or each replica's own rows
/// (shuffled), replica after replica.
#[derive(Clone, Debug)]
pub struct ReplicaBatch<B: Backend> {
    pub rows: MlpBatch<B>,
    pub shared: bool,
    /// With rows of each replica's own split (folds as replicas), whose counts differ.
    pub ragged: Option<Ragged<B>>,
}

/// Each replica's rows of a batch where their counts differ: every replica has `L` rows, of
/// which its first `counts[r]` are real and the rest padding. The padding adds nothing to a
/// replica's loss, gradients or metrics.
#[derive(Clone, Debug)]
pub struct Ragged<B: Backend> {
    /// `[K, L]`: 1 on the real rows, 0 on the padding.
    pub mask: Tensor<B, 2>,
    pub counts: Vec<usize>,
}

impl<B: Backend> ReplicaBatch<B> {
    /// Rows every replica sees.
    pub fn shared(rows: MlpBatch<B>) -> Self {
        Self {
            rows,
            shared: true,
            ragged: None,
        }
    }
}

impl<B: EmberBackend> ReplicaMlp<B> {
    /// The replicas of `configs` (one config each, of one shape), each with the initial weights
    /// of a single run of its config.
    pub fn new(configs: &[JobConfig], device: &B::Device) -> Self {
        let spec = &configs[0].model;
        let (layers, tables, scalar) = match spec.kind {
            ModelKind::Mlp => {
                let singles: Vec<Mlp<B>> = configs.iter().map(|c| single(c, device)).collect();
                (mlp_layers(&singles), mlp_tables(&singles), None)
            }
            ModelKind::LinearScalar => {
                let scalar = ReplicaScalar::new(configs, device);
                (Vec::new(), None, Some(scalar))
            }
            ModelKind::Cnn => unreachable!("replicas::why_not keeps convolutional networks out"),
        };
        let encodings = configs[0].table().and_then(|t| t.encoding.as_deref());
        Self {
            tables,
            plan: encodings.and_then(embed::Plan::of),
            layers,
            scalar,
            dropout: DropoutConfig::new(spec.dropout).init(),
            task: configs[0].task,
            activation: spec.activation,
            class_weights: crate::model::loss_weights(&configs[0]),
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
        match &self.scalar {
            None => {
                let values = self.layers.iter().map(|l| l.of(r)).collect();
                let tables = (self.tables.iter().flatten())
                    .map(|t| {
                        let [_, rows, width] = t.dims();
                        t.val().narrow(0, r, 1).reshape([rows, width])
                    })
                    .collect();
                let single = single(config, device).with_values(values);
                export::save_model(&single.with_tables(tables), files, config.name())
            }
            Some(s) => export::save_model(&s.single(r, config, device), files, config.name()),
        }
    }

    pub fn replicas(&self) -> usize {
        self.replicas
    }

    /// Outputs `[K, n, outputs]` for inputs `[n, in]` shared by every replica, or `[K, n, in]`.
    fn forward<const D: usize>(&self, x: Tensor<B, D>) -> Tensor<B, 3> {
        if let Some(s) = &self.scalar {
            return s.forward(x);
        }
        match &self.plan {
            Some(plan) => {
                let tables = self
                    .tables
                    .as_deref()
                    .expect("a plan comes with its tables");
                let x = embed::lookup_replicas(tables, plan, self.each_replicas(x));
                self.network(x)
            }
            None => self.network(x),
        }
    }

    /// Inputs `[n, in]` shared by every replica, or `[K * n, in]` or `[K, n, in]`, as
    /// `[K, n, in]`.
    fn each_replicas<const D: usize>(&self, x: Tensor<B, D>) -> Tensor<B, 3> {
        let dims = x.dims();
        let width = dims[D - 1];
        match D {
            2 => per_replica_rows(x.reshape([dims[0], width]), self.replicas, dims[0], true),
            _ => x.reshape([self.replicas as i32, -1, width as i32]),
        }
    }

    /// The layers on the first layer's inputs (`[n, in]` shared, or `[K, n, in]`).
    fn network<const D: usize>(&self, x: Tensor<B, D>) -> Tensor<B, 3> {
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
    /// regression's absolute errors `[K]` beside its targets (shared, or each replica's own).
    fn step_output(&self, batch: ReplicaBatch<B>, metrics: bool) -> StepOutput<B> {
        match batch.ragged {
            // A training batch of as many rows for every replica takes the even path; a
            // validation batch keeps its mask, for each replica's own regression moments.
            Some(r) if metrics || r.counts.iter().any(|c| *c != r.counts[0]) => {
                self.ragged_output(batch.rows, r, metrics)
            }
            _ => self.even_output(batch, metrics),
        }
    }

    /// [`ReplicaMlp::step_output`] where every replica has as many rows.
    fn even_output(&self, batch: ReplicaBatch<B>, metrics: bool) -> StepOutput<B> {
        let k = self.replicas;
        let n = batch.rows.inputs.dims()[0] / if batch.shared { 1 } else { k };
        if let (Some(s), Targets::Values(y), false) = (&self.scalar, &batch.rows.targets, metrics) {
            let loss = match batch.shared {
                true => s.mse(batch.rows.inputs, y.clone()),
                false => {
                    let width = batch.rows.inputs.dims()[1];
                    s.mse(batch.rows.inputs.reshape([k, n, width]), y.clone())
                }
            };
            let (correct, regression) = (None, None);
            return StepOutput {
                loss,
                correct,
                rows: n,
                replica_rows: None,
                regression,
            };
        }
        let out = if batch.shared {
            self.forward(batch.rows.inputs)
        } else {
            let width = batch.rows.inputs.dims()[1];
            self.forward(batch.rows.inputs.reshape([k, n, width]))
        };
        let per_replica = |t: Tensor<B, 3>| t.reshape([k as i32, -1]);
        // Class weights apply to the training loss only, as in the single model.
        let weights = self.class_weights.as_deref().filter(|_| !metrics);
        match batch.rows.targets {
            Targets::Classes(labels) => {
                let labels = match batch.shared {
                    true => labels.unsqueeze_dim::<2>(0).repeat_dim(0, k),
                    false => labels.reshape([k, n]),
                };
                let correct = out.clone().argmax(2).reshape([k, n]).equal(labels.clone());
                let loss = class_losses(out, labels, weights).mean_dim(1).reshape([k]);
                let correct = correct.float().sum_dim(1).reshape([k]);
                StepOutput::classified(loss, correct, n)
            }
            Targets::Binary(labels) => {
                let y = self.rows(labels.float(), batch.shared, n);
                let correct = out.clone().greater_elem(0.0).float().equal(y.clone());
                let loss = match weights {
                    Some(w) => per_replica(weighting::binary_cross_entropy(out, y, w))
                        .mean_dim(1)
                        .reshape([k]),
                    None => ops::bce_logits_replicas(out, y),
                };
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
                    mask: None,
                });
                StepOutput {
                    loss: per_replica(error.square()).mean_dim(1).reshape([k]),
                    correct: None,
                    rows: n,
                    replica_rows: None,
                    regression,
                }
            }
        }
    }

    /// [`ReplicaMlp::step_output`] on each replica's own rows, `L` of them, of which the first
    /// `counts[r]` are real: each replica's loss and metrics are over its real rows alone.
    fn ragged_output(&self, rows: MlpBatch<B>, ragged: Ragged<B>, metrics: bool) -> StepOutput<B> {
        let Ragged { mask, counts } = ragged;
        let [k, l] = mask.dims();
        let width = rows.inputs.dims()[1];
        let out = self.forward(rows.inputs.reshape([k, l, width]));
        let divisors: Vec<f32> = counts.iter().map(|c| (*c).max(1) as f32).collect();
        let divisors = Tensor::<B, 1>::from_floats(divisors.as_slice(), &mask.device());
        // Filled, not multiplied: a padding row's non-finite loss must not reach the sum.
        let padding = mask.clone().equal_elem(0.0);
        let sum = |per_row: Tensor<B, 2>| {
            let real = per_row.mask_fill(padding.clone(), 0.0);
            real.sum_dim(1).reshape([k])
        };
        let mean = |per_row: Tensor<B, 2>| sum(per_row) / divisors.clone();
        let weights = self.class_weights.as_deref().filter(|_| !metrics);
        let mut step = match rows.targets {
            Targets::Classes(labels) => {
                let labels = labels.reshape([k, l]);
                let correct = out.clone().argmax(2).reshape([k, l]).equal(labels.clone());
                let losses = class_losses(out, labels, weights);
                StepOutput::classified(mean(losses), sum(correct.float()), l)
            }
            Targets::Binary(labels) => {
                let y = labels.float().reshape([k, l, 1]);
                let correct = out.clone().greater_elem(0.0).float().equal(y.clone());
                let losses = weighting::binary_cross_entropy(out, y, weights.unwrap_or(&[1.0; 2]));
                let correct = sum(correct.float().reshape([k, l]));
                StepOutput::classified(mean(losses.reshape([k, l])), correct, l)
            }
            Targets::Values(y) => {
                let cols = y.dims()[1];
                let error = out - y.clone().reshape([k, l, cols]);
                let regression = metrics.then(|| RegressionStep {
                    abs_error_sum: sum(error.clone().detach().abs().sum_dim(2).reshape([k, l])),
                    targets: y,
                    mask: Some(mask.clone()),
                });
                StepOutput {
                    loss: mean(error.square().mean_dim(2).reshape([k, l])),
                    correct: None,
                    rows: l,
                    replica_rows: None,
                    regression,
                }
            }
        };
        step.replica_rows = Some(counts);
        step
    }

    fn rows(&self, t: Tensor<B, 2>, shared: bool, n: usize) -> Tensor<B, 3> {
        per_replica_rows(t, self.replicas, n, shared)
    }
}

/// Each row's softmax cross-entropy `[K, n]` of logits `[K, n, C]` and class indices `[K, n]`,
/// weighted by its class with `weights`. (Negated before the mean, not after: the same bits.)
fn class_losses<B: Backend>(
    out: Tensor<B, 3>,
    labels: Tensor<B, 2, Int>,
    weights: Option<&[f32]>,
) -> Tensor<B, 2> {
    let [k, n] = labels.dims();
    match weights {
        Some(w) => weighting::cross_entropy_rows(out, labels, w),
        None => (log_softmax(out, 2).gather(2, labels.reshape([k, n, 1])))
            .reshape([k, n])
            .neg(),
    }
}

/// Per-row values `[rows, t]` as `[K, n, t]`: copied for each replica when shared (a broadcast
/// view would make every later element-wise op a strided one), in one copy (a GPU's
/// `repeat_dim` is one launch, where `cat` is one per replica).
fn per_replica_rows<B: Backend>(t: Tensor<B, 2>, k: usize, n: usize, shared: bool) -> Tensor<B, 3> {
    let width = t.dims()[1];
    match shared {
        true => t.unsqueeze_dim::<3>(0).repeat_dim(0, k),
        false => t.reshape([k, n, width]),
    }
}

/// A trainable parameter of a stacked tensor (a new leaf of the graph, as `Param::from_data`
/// makes), under the id of the first replica's.
fn leaf<B: Backend, const D: usize>(id: ParamId, t: Tensor<B, D>) -> Param<Tensor<B, D>> {
    Param::initialized(id, t.detach().require_grad())
}

/// The embedded columns' tables, stacked: each replica's as its single run draws them.
fn mlp_tables<B: EmberBackend>(singles: &[Mlp<B>]) -> Option<Vec<Param<Tensor<B, 3>>>> {
    let (_, first) = singles[0].embedded()?;
    let stacked = (0..first.len())
        .map(|t| {
            let tables = (singles.iter())
                .map(|m| {
                    m.embedded().expect("replicas share one shape").1[t]
                        .weight
                        .val()
                })
                .collect();
            leaf(first[t].weight.id, Tensor::stack(tables, 0))
        })
        .collect();
    Some(stacked)
}

/// The MLPs' layers, stacked: each replica's weights as its single run draws them.
fn mlp_layers<B: EmberBackend>(singles: &[Mlp<B>]) -> Vec<ReplicaLinear<B>> {
    let first = &singles[0];
    (0..first.layers().len())
        .map(|i| {
            let weights = singles.iter().map(|m| m.layers()[i].weight.val()).collect();
            let biases = singles.iter().map(|m| bias(&m.layers()[i])).collect();
            let like = &first.layers()[i];
            let bias_id = like.bias.as_ref().map_or_else(ParamId::new, |b| b.id);
            ReplicaLinear {
                weight: leaf(like.weight.id, Tensor::stack(weights, 0)),
                bias: leaf(bias_id, Tensor::stack(biases, 0)),
            }
        })
        .collect()
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
    /// adds nothing to the others' gradients (its own may be NaN: it stops), and the others
    /// train on.
    fn step(&self, batch: ReplicaBatch<B>) -> TrainOutput<StepOutput<B>> {
        let out = self.step_output(batch, false);
        let finite = out.loss.clone().is_finite();
        let total = out.loss.clone().mask_fill(finite.bool_not(), 0.0).sum();
        train_output_of(self, out, total)
    }
}

impl<B: EmberBackend> InferenceStep for ReplicaMlp<B> {
    type Input = ReplicaBatch<B>;
    type Output = StepOutput<B>;

    fn step(&self, batch: ReplicaBatch<B>) -> StepOutput<B> {
        self.step_output(batch, true)
    }
}
