//! The models, one file each (the general MLP, a convolutional network before that MLP, and
//! linear-scalar's own), and what they share: the step output whose statistics stay on the device, and weight initialisation drawn
//! on the host.

pub mod augment;
pub mod cnn;
pub mod embed;
pub mod linear_scalar;
pub mod mlp;
pub mod network;
pub mod weighting;

use crate::config::{Init, ModelKind};
use crate::device::TrainBackend;
use burn::module::AutodiffModule;
use burn::module::{Param, ParamId};
use burn::nn::Linear;
use burn::prelude::*;
use burn::tensor::TensorData;
use burn::tensor::backend::AutodiffBackend;
use burn::train::{ItemLazy, TrainOutput, TrainStep};
use rand_mt::Mt64;

/// What a train or valid step hands back: the batch's mean loss and, for classifiers, the
/// number of rows it got right, both still on the device. Nothing here is read per step: the
/// training strategy adds them into per-epoch totals on the device and reads those rarely.
pub struct StepOutput<B: Backend> {
    /// Mean loss over the batch (detached from the graph once the step is done).
    pub loss: Tensor<B, 1>,
    /// Correctly classified rows in the batch, as a float count.
    pub correct: Option<Tensor<B, 1>>,
    /// Rows in the batch.
    pub rows: usize,
    /// Each replica's rows, where each replica has rows of its own whose counts may differ
    /// (folds as replicas); the loss and the correct rows are then each over its own rows.
    pub replica_rows: Option<Vec<usize>>,
    /// A regression's figures for MAE and R².
    pub regression: Option<RegressionStep<B>>,
}

/// A regression batch's summed absolute error and its targets `[n, k]`.
pub struct RegressionStep<B: Backend> {
    pub abs_error_sum: Tensor<B, 1>,
    pub targets: Tensor<B, 2>,
    /// With each replica's own rows (folds as replicas): `[K, L]`, 1 on the real rows of each
    /// replica's `L` (the targets are then `[K * L, k]`), 0 on the padding.
    pub mask: Option<Tensor<B, 2>>,
}

impl<B: Backend> StepOutput<B> {
    /// A classifier's step: loss and correct rows.
    pub fn classified(loss: Tensor<B, 1>, correct: Tensor<B, 1>, rows: usize) -> Self {
        Self {
            loss,
            correct: Some(correct),
            rows,
            replica_rows: None,
            regression: None,
        }
    }
}

/// A train step's result: the gradients of the step's loss for `model`, and the step's
/// figures detached from the graph.
pub fn train_output<B: AutodiffBackend, M: AutodiffModule<B>>(
    model: &M,
    out: StepOutput<B>,
) -> TrainOutput<StepOutput<B>> {
    let loss = out.loss.clone();
    train_output_of(model, out, loss)
}

/// [`train_output`] with the gradients of `objective` (replicas: the sum of their losses).
pub fn train_output_of<B: AutodiffBackend, M: AutodiffModule<B>>(
    model: &M,
    out: StepOutput<B>,
    objective: Tensor<B, 1>,
) -> TrainOutput<StepOutput<B>> {
    let grads = objective.backward();
    let output = StepOutput {
        loss: out.loss.detach(),
        correct: out.correct.map(Tensor::detach),
        rows: out.rows,
        replica_rows: out.replica_rows,
        regression: out.regression.map(|r| RegressionStep {
            abs_error_sum: r.abs_error_sum.detach(),
            targets: r.targets.detach(),
            mask: r.mask,
        }),
    };
    TrainOutput::new(model, grads, output)
}

/// A [`StepOutput`] read back to the host.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepStats {
    /// Mean loss.
    pub loss: f64,
    /// Accuracy in [0, 1], for classifiers.
    pub accuracy: Option<f64>,
    /// Mean absolute error and coefficient of determination, for regressions (whole passes).
    pub mae: Option<f64>,
    pub r2: Option<f64>,
    pub rows: usize,
}

impl<B: Backend> StepOutput<B> {
    /// Reads the values (one device read); used for the rare progress reports.
    pub fn read(self) -> StepStats {
        let rows = self.rows;
        let loss = scalar(self.loss);
        let accuracy = self.correct.map(|c| scalar(c) / rows.max(1) as f64);
        StepStats {
            loss,
            accuracy,
            mae: None,
            r2: None,
            rows,
        }
    }
}

/// A regression pass's sums, on the device: absolute errors, and the targets' first and second
/// moments about the first batch's mean (a shift that keeps the variance exact in f32). The
/// moments are `[1, k]`, or `[K, k]` when each replica has its own rows (folds as replicas).
struct RegressionTotals<B: Backend> {
    abs_error: Tensor<B, 1>,
    shift: Tensor<B, 2>,
    sum: Tensor<B, 2>,
    sum_sq: Tensor<B, 2>,
}

/// Each replica's moments `[K, k]` of its real rows (`mask` `[K, L]`) of `targets`
/// `[K * L, k]` about `shift` (`None`: the rows' own mean), with that shift.
fn masked_moments<B: Backend>(
    targets: Tensor<B, 2>,
    mask: Tensor<B, 2>,
    shift: Option<Tensor<B, 2>>,
) -> [Tensor<B, 2>; 3] {
    let [k, l] = mask.dims();
    let cols = targets.dims()[1];
    let y = targets.reshape([k, l, cols]);
    let m = mask.reshape([k, l, 1]);
    let shift = shift.unwrap_or_else(|| {
        let count = m.clone().sum_dim(1).clamp_min(1.0);
        ((y.clone() * m.clone()).sum_dim(1) / count).reshape([k, cols])
    });
    let d = (y - shift.clone().reshape([k, 1, cols])) * m;
    let sum = d.clone().sum_dim(1).reshape([k, cols]);
    let sum_sq = (d.clone() * d).sum_dim(1).reshape([k, cols]);
    [shift, sum, sum_sq]
}

impl<B: Backend> RegressionTotals<B> {
    fn add(acc: Option<Self>, step: RegressionStep<B>) -> Self {
        let shift = acc.as_ref().map(|a| a.shift.clone());
        let [shift, sum, sum_sq] = match step.mask {
            Some(mask) => masked_moments(step.targets, mask, shift),
            None => {
                let shift = shift.unwrap_or_else(|| step.targets.clone().mean_dim(0));
                let d = step.targets - shift.clone();
                [shift, d.clone().sum_dim(0), (d.clone() * d).sum_dim(0)]
            }
        };
        match acc {
            None => Self {
                abs_error: step.abs_error_sum,
                shift,
                sum,
                sum_sq,
            },
            Some(a) => Self {
                abs_error: a.abs_error + step.abs_error_sum,
                sum: a.sum + sum,
                sum_sq: a.sum_sq + sum_sq,
                ..a
            },
        }
    }

    /// MAE and R² (one device read), from the pass's mean loss (the mean squared error).
    fn read(&self, mse: f64, rows: usize) -> (f64, Option<f64>) {
        let all = Tensor::cat(
            vec![
                self.abs_error.clone().reshape([1, 1]),
                self.sum.clone(),
                self.sum_sq.clone(),
            ],
            1,
        );
        let v: Vec<f64> = crate::device::host_read::read(all)
            .convert::<f64>()
            .to_vec()
            .expect("a float tensor reads back");
        fit(v[0], &v[1..], mse, rows)
    }

    /// Whether each replica has moments of its own (`[K, k]`).
    fn per_replica(&self, replicas: usize) -> bool {
        replicas > 1 && self.sum.dims()[0] == replicas
    }
}

/// MAE and R² from a pass's summed absolute error, its targets' sums then sums of squares
/// (`sums`, two per target column) and its mean squared error.
fn fit(abs_error: f64, sums: &[f64], mse: f64, rows: usize) -> (f64, Option<f64>) {
    let k = sums.len() / 2;
    let n = rows.max(1) as f64;
    let sst: f64 = (0..k).map(|c| sums[k + c] - sums[c] * sums[c] / n).sum();
    let mae = abs_error / (n * k as f64);
    // Pooled over the targets (1 - total SSE / total SST); none where the targets do not vary.
    let r2 = (rows >= 2 && sst > 0.0)
        .then(|| 1.0 - mse * n * k as f64 / sst)
        .filter(|r| r.is_finite());
    (mae, r2)
}

/// Replica `r`'s sums then sums of squares out of `moments`, which holds every replica's sums
/// `[K, k]` then every replica's sums of squares `[K, k]`.
fn replica_moments(moments: &[f64], replicas: usize, r: usize) -> Vec<f64> {
    let cols = moments.len() / (2 * replicas);
    let (sums, squares) = moments.split_at(replicas * cols);
    let row = |m: &[f64]| m[r * cols..(r + 1) * cols].to_vec();
    [row(sums), row(squares)].concat()
}

/// Steps whose outputs wait to be added to the totals together: on the GPU the additions of
/// that many steps are issued back to back and fuse into one kernel, where adding each step as
/// it comes took a launch of its own (the optimizer's update, a custom operation, comes
/// between two steps' additions and keeps them apart).
const STEPS_ADDED_TOGETHER: usize = 8;

/// Running totals of the step outputs of one pass over a split, kept on the device: two
/// additions per step, issued [`STEPS_ADDED_TOGETHER`] steps at a time, and a read only when
/// asked. The additions are the same in the same order whenever they are issued.
pub struct StepTotals<B: Backend> {
    waiting: Vec<StepOutput<B>>,
    loss_sum: Option<Tensor<B, 1>>,
    correct: Option<Tensor<B, 1>>,
    regression: Option<RegressionTotals<B>>,
    rows: usize,
    /// Each replica's rows, when they differ (folds as replicas).
    replica_rows: Option<Vec<usize>>,
}

impl<B: Backend> Default for StepTotals<B> {
    fn default() -> Self {
        Self::new()
    }
}

impl<B: Backend> StepTotals<B> {
    pub fn new() -> Self {
        Self {
            waiting: Vec::with_capacity(STEPS_ADDED_TOGETHER),
            loss_sum: None,
            correct: None,
            regression: None,
            rows: 0,
            replica_rows: None,
        }
    }

    pub fn add(&mut self, out: StepOutput<B>) {
        self.waiting.push(out);
        if self.waiting.len() == STEPS_ADDED_TOGETHER {
            self.add_waiting();
        }
    }

    fn add_waiting(&mut self) {
        let waiting = std::mem::take(&mut self.waiting);
        waiting.into_iter().for_each(|out| self.add_now(out));
    }

    fn add_now(&mut self, out: StepOutput<B>) {
        fn sum<B: Backend>(acc: Option<Tensor<B, 1>>, v: Tensor<B, 1>) -> Tensor<B, 1> {
            match acc {
                Some(a) => a + v,
                None => v,
            }
        }
        let weighted = match &out.replica_rows {
            None => out.loss.mul_scalar(out.rows as f32),
            Some(rows) => {
                let rows: Vec<f32> = rows.iter().map(|r| *r as f32).collect();
                out.loss.clone() * Tensor::from_floats(rows.as_slice(), &out.loss.device())
            }
        };
        // Each replica's rows, once a step has given them: until then, every replica's are the
        // steps' rows; after, a step without them gave every replica its rows.
        match (&mut self.replica_rows, &out.replica_rows) {
            (None, None) => {}
            (None, Some(each)) => {
                let totals = each.iter().map(|r| self.rows + r).collect();
                self.replica_rows = Some(totals);
            }
            (Some(totals), None) => totals.iter_mut().for_each(|t| *t += out.rows),
            (Some(totals), Some(each)) => {
                totals.iter_mut().zip(each).for_each(|(t, r)| *t += r);
            }
        }
        self.loss_sum = Some(sum(self.loss_sum.take(), weighted));
        if let Some(c) = out.correct {
            self.correct = Some(sum(self.correct.take(), c));
        }
        if let Some(r) = out.regression {
            self.regression = Some(RegressionTotals::add(self.regression.take(), r));
        }
        self.rows += out.rows;
    }

    /// The running means, with one device read (two for a regression).
    pub fn read(&mut self) -> StepStats {
        self.add_waiting();
        let n = self.rows.max(1) as f64;
        let loss = self.loss_sum.clone().map_or(f64::NAN, scalar) / n;
        let regression = self.regression.as_ref().map(|r| r.read(loss, self.rows));
        StepStats {
            loss,
            accuracy: self.correct.clone().map(|c| scalar(c) / n),
            mae: regression.map(|r| r.0),
            r2: regression.and_then(|r| r.1),
            rows: self.rows,
        }
    }

    /// Each replica's running means (the totals of a replica group, `[K]` each), with one
    /// device read. The regression targets' moments are shared where every replica sees the
    /// same validation rows, and each replica's own where it has its own rows (folds).
    pub fn read_replicas(&mut self, replicas: usize) -> Vec<StepStats> {
        self.add_waiting();
        let flat = |t: &Tensor<B, 2>| t.clone().reshape([-1]);
        let mut parts: Vec<Tensor<B, 1>> = self.loss_sum.iter().cloned().collect();
        parts.extend(self.correct.clone());
        if let Some(r) = &self.regression {
            parts.extend([r.abs_error.clone(), flat(&r.sum), flat(&r.sum_sq)]);
        }
        if parts.is_empty() {
            let none = StepStats {
                loss: f64::NAN,
                accuracy: None,
                mae: None,
                r2: None,
                rows: 0,
            };
            return vec![none; replicas];
        }
        let v: Vec<f64> = crate::device::host_read::read(Tensor::cat(parts, 0))
            .convert::<f64>()
            .to_vec()
            .expect("a float tensor reads back");
        let correct_at = self.correct.is_some().then_some(replicas);
        let abs_at = replicas * (1 + usize::from(self.correct.is_some()));
        let moments = &v[(abs_at + replicas).min(v.len())..];
        (0..replicas)
            .map(|r| {
                let rows = self.replica_rows.as_ref().map_or(self.rows, |each| each[r]);
                let n = rows.max(1) as f64;
                let loss = v[r] / n;
                let fitted = self.regression.as_ref().map(|totals| {
                    let sums = match totals.per_replica(replicas) {
                        true => replica_moments(moments, replicas, r),
                        false => moments.to_vec(),
                    };
                    fit(v[abs_at + r], &sums, loss, rows)
                });
                StepStats {
                    loss,
                    accuracy: correct_at.map(|c| v[c + r] / n),
                    mae: fitted.map(|f| f.0),
                    r2: fitted.and_then(|f| f.1),
                    rows,
                }
            })
            .collect()
    }

    /// A report for Burn's metrics: the running means as tiny tensors.
    pub fn report(stats: StepStats, device: &B::Device) -> StepOutput<B> {
        let one = |v: f64| Tensor::<B, 1>::from_floats([v as f32], device);
        StepOutput {
            loss: one(stats.loss),
            correct: stats.accuracy.map(|a| one(a * stats.rows as f64)),
            rows: stats.rows,
            replica_rows: None,
            regression: None,
        }
    }
}

pub use crate::device::host_read::scalar;

impl<B: Backend> ItemLazy for StepOutput<B> {
    type ItemSync = StepStats;

    fn sync(self) -> StepStats {
        self.read()
    }
}

/// Number of rows whose predicted class equals the label.
pub fn count_correct<B: Backend>(
    predicted: Tensor<B, 1, Int>,
    labels: Tensor<B, 1, Int>,
) -> Tensor<B, 1> {
    predicted.equal(labels).float().sum()
}

/// The training loss's class weights of `config`, as the model's f32.
pub fn loss_weights(config: &crate::config::JobConfig) -> Option<Vec<f32>> {
    let weights = config.class_weights.as_ref()?;
    Some(weights.iter().map(|&w| w as f32).collect())
}

/// A linear layer (`[in, out]` weights, Burn's layout) with weights drawn on the host:
/// `Torch` is `nn.Linear`'s uniform(±1/sqrt(fan_in)) for weights and biases, `Keras` is
/// Glorot-uniform weights and zero biases.
pub fn init_linear<B: Backend>(
    fan_in: usize,
    fan_out: usize,
    bias: bool,
    init: Init,
    rng: &mut Mt64,
    device: &B::Device,
) -> Linear<B> {
    let bound = init_bound(init, fan_in, fan_out);
    let mut draw = |n: usize| draw_uniform(n, bound, rng);
    let weight = draw(fan_in * fan_out);
    let bias = bias.then(|| match init {
        Init::Torch => draw(fan_out),
        Init::Keras => vec![0.0; fan_out],
    });
    Linear {
        weight: param(TensorData::new(weight, [fan_in, fan_out]), rng, device),
        bias: bias.map(|b| param(TensorData::new(b, [fan_out]), rng, device)),
    }
}

/// The bound `b` of initial weights drawn from uniform(-b, b): PyTorch's `1/sqrt(fan_in)`
/// (`nn.Linear`, `nn.Conv2d`), or Keras' Glorot `sqrt(6 / (fan_in + fan_out))`.
pub fn init_bound(init: Init, fan_in: usize, fan_out: usize) -> f64 {
    match init {
        Init::Torch => 1.0 / (fan_in as f64).sqrt(),
        Init::Keras => (6.0 / (fan_in + fan_out) as f64).sqrt(),
    }
}

/// `n` values from uniform(-bound, bound), drawn in order from `rng`.
pub fn draw_uniform(n: usize, bound: f64, rng: &mut Mt64) -> Vec<f32> {
    (0..n)
        .map(|_| ((2.0 * crate::rng::uniform(rng) - 1.0) * bound) as f32)
        .collect()
}

/// A parameter whose id comes from the seeded generator too: Burn's ids are random, and they
/// are stored in the model record, which would make two runs with one seed differ byte by byte.
pub fn param<B: Backend, const D: usize>(
    data: TensorData,
    rng: &mut Mt64,
    device: &B::Device,
) -> Param<Tensor<B, D>> {
    let mut p = Param::from_data(data, device);
    p.id = ParamId::from(rng.next_u64());
    p
}

/// What ember needs of a model, whatever the backend: its initial weights from a config, its
/// batch built from host rows, Burn's inference step, predictions and PyTorch names.
pub trait EmberModel<B: crate::ops::EmberBackend>:
    Module<B>
    + Predict<B>
    + TorchNames
    + burn::train::InferenceStep<Input = Self::Batch, Output = StepOutput<B>>
    + Sized
{
    type Batch: crate::data::loader::Rows<B>;

    /// The model `config` describes, with initial weights drawn from its seed.
    fn init(config: &crate::config::JobConfig, device: &B::Device) -> Self;

    /// A split's rows on the device, as this model's batch.
    fn batch(split: &crate::data::HostSplit, device: &B::Device) -> Self::Batch;

    /// The weights and head on the host, for ONNX export.
    fn network(&self) -> crate::model::network::Network;

    /// Whether weights loaded from a file fit the config where Burn's loading does not check
    /// (an embedding table's rows); an error says what differs.
    fn check_weights(&self) -> std::result::Result<(), String> {
        Ok(())
    }

    /// Whether a record read from a file fits this model (the config's) before it is loaded:
    /// Burn's loading stops the process where the counts of layers differ, and takes other
    /// shapes as they come. An error says what differs.
    fn fits_record(
        &self,
        _record: &<Self as Module<B>>::Record,
    ) -> std::result::Result<(), String> {
        Ok(())
    }
}

/// Whether the weight shapes a file holds (`found`) are those the config gives (`wanted`), in
/// order: an error names the first that differs, as a `what` ("layer"), and the config's
/// `keys` that decide it.
pub fn shapes_fit(
    what: &str,
    keys: &str,
    wanted: &[Vec<usize>],
    found: &[Vec<usize>],
) -> std::result::Result<(), String> {
    if wanted.len() != found.len() {
        return Err(format!(
            "the model file has {} {what}s where the config ({keys}) gives {}",
            found.len(),
            wanted.len()
        ));
    }
    match wanted.iter().zip(found).position(|(w, f)| w != f) {
        Some(i) => Err(format!(
            "the model file's {what} {} is {:?} where the config ({keys}) gives {:?}",
            i + 1,
            found[i],
            wanted[i]
        )),
        None => Ok(()),
    }
}

/// The bounds every ember model meets in training: Burn's train step over device-cut batches
/// with ember's step output, and an inference form that is an [`EmberModel`] itself.
pub trait TrainableModel<B: TrainBackend>:
    EmberModel<B>
    + TrainStep<Input = <Self as EmberModel<B>>::Batch, Output = StepOutput<B>>
    + AutodiffModule<B, InnerModule = Self::Inference>
    + core::fmt::Display
    + 'static
{
    type Inference: EmberModel<B::Inference>;
}

impl<B, M, I> TrainableModel<B> for M
where
    B: TrainBackend,
    I: EmberModel<B::Inference>,
    M: EmberModel<B>
        + TrainStep<Input = <M as EmberModel<B>>::Batch, Output = StepOutput<B>>
        + AutodiffModule<B, InnerModule = I>
        + core::fmt::Display
        + 'static,
{
    type Inference = I;
}

/// Work that needs the model type of a job (train it, time it, load it).
pub trait WithModel<B: TrainBackend> {
    type Output;
    fn run<M: TrainableModel<B>>(self) -> Self::Output;
}

/// The one place that maps a job to its model type.
pub fn for_model<B: TrainBackend, T: WithModel<B>>(kind: ModelKind, task: T) -> T::Output {
    match kind {
        ModelKind::Mlp => task.run::<mlp::Mlp<B>>(),
        ModelKind::Cnn => task.run::<cnn::Cnn<B>>(),
        ModelKind::LinearScalar => task.run::<linear_scalar::LinearScalar<B>>(),
    }
}

/// Per-row outputs for `ember predict`: a CSV header and one row of cells per input row.
pub trait Predict<B: Backend> {
    fn header(&self) -> Vec<String>;
    fn predict(&self, inputs: &crate::data::HostSplit, device: &B::Device) -> Vec<Vec<String>>;
}

/// Rows per forward pass when predicting: bounds memory on large inputs.
pub const PREDICT_CHUNK: usize = 8192;

/// The rows of a row-major `[n, k]` tensor.
pub fn rows_of<B: Backend>(t: Tensor<B, 2>) -> Vec<Vec<f32>> {
    let [_, k] = t.dims();
    let v: Vec<f32> = crate::device::host_read::read(t)
        .convert::<f32>()
        .to_vec()
        .expect("a float tensor reads back as f32");
    v.chunks(k.max(1)).map(<[f32]>::to_vec).collect()
}

/// A slice of a host matrix as a device tensor.
pub fn matrix_rows<B: Backend>(
    m: &crate::data::Matrix,
    start: usize,
    len: usize,
    device: &B::Device,
) -> Tensor<B, 2> {
    let values = m.values[start * m.cols..(start + len) * m.cols].to_vec();
    Tensor::from_data(TensorData::new(values, [len, m.cols]), device)
}

/// How a model's parameters are named in PyTorch's state_dict of the seed's own module:
/// (Burn path prefix, PyTorch name prefix) pairs; paths not listed keep their name.
pub trait TorchNames {
    fn torch_names(&self) -> Vec<(String, String)>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;

    #[test]
    fn torch_init_is_bounded_by_one_over_sqrt_fan_in() {
        let mut rng = crate::rng::stream(1, "init", 0);
        let l = init_linear::<Flex>(100, 7, true, Init::Torch, &mut rng, &Default::default());
        let w: Vec<f32> = l.weight.val().into_data().to_vec().unwrap();
        let b: Vec<f32> = l.bias.unwrap().val().into_data().to_vec().unwrap();
        assert_eq!(l.weight.dims(), [100, 7]);
        for v in w.iter().chain(&b) {
            assert!(v.abs() <= 0.1, "{v}");
        }
        let max = w.iter().fold(0f32, |m, v| m.max(v.abs()));
        assert!(max > 0.09, "{max}");
    }

    #[test]
    fn keras_init_has_zero_bias_and_glorot_bound() {
        let mut rng = crate::rng::stream(1, "init", 0);
        let l = init_linear::<Flex>(10, 20, true, Init::Keras, &mut rng, &Default::default());
        let b: Vec<f32> = l.bias.unwrap().val().into_data().to_vec().unwrap();
        assert!(b.iter().all(|v| *v == 0.0));
        let bound = (6.0f32 / 30.0).sqrt();
        let w: Vec<f32> = l.weight.val().into_data().to_vec().unwrap();
        assert!(w.iter().all(|v| v.abs() <= bound));
    }
}
