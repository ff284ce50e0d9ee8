//! The general model: an MLP with any hidden widths and activation, a dropout rate, and a head
//! for the task: K logits and softmax cross-entropy (classification), one logit and binary
//! cross-entropy on logits (binary), or one output per target and mean squared error
//! (regression). The fashion-mlp and tabular-mlp presets are two of its shapes.

use super::{
    EmberModel, PREDICT_CHUNK, Predict, RegressionStep, StepOutput, TorchNames, count_correct,
    embed, init_linear, matrix_rows, rows_of, train_output,
};
use crate::config::{Activation, JobConfig, Task};
use crate::data::loader::{Rows, data_rows, gather_rows};
use crate::data::{HostSplit, Labels};
use crate::device::TrainBackend;
use crate::ops::{self, EmberBackend, linear};
use burn::nn::{Dropout, DropoutConfig, Embedding, Linear};
use burn::prelude::*;
use burn::tensor::TensorData;
use burn::tensor::activation::{gelu, sigmoid, softmax};
use burn::train::{InferenceStep, TrainOutput, TrainStep};

/// What the layers do not hold: the activation, the task, and the names of the outputs (class
/// names, or target columns) for `ember predict`.
#[derive(Debug, Clone)]
pub struct Head {
    pub task: Task,
    pub activation: Activation,
    pub names: Vec<String>,
    /// Each class's weight in the training loss (`class_weight`); none, every row counts 1.
    pub class_weights: Option<Vec<f32>>,
    /// The PyTorch `nn.Sequential` this MLP is saved as: its name and modules per layer.
    torch_stack: &'static str,
    torch_stride: usize,
    /// Where the tables of embedded columns come in; `None` without such columns.
    plan: Option<embed::Plan>,
}

#[derive(Module, Debug)]
pub struct Mlp<B: Backend> {
    /// The tables of the embedded category columns (`model::embed`), in the columns' order;
    /// `None` without such columns. (An `Option`, so that model files written before
    /// embeddings existed, which have no such field, still load.)
    embeddings: Option<Vec<Embedding<B>>>,
    layers: Vec<Linear<B>>,
    dropout: Dropout,
    #[module(skip)]
    head: Head,
}

impl<B: Backend> TorchNames for Mlp<B> {
    /// Layer i is module `stride * i` of the seed's `nn.Sequential` (Linear, activation and,
    /// with dropout, Dropout per hidden layer).
    /// The tables keep their names (`embeddings.N.weight`, a `ModuleList` of `nn.Embedding`).
    fn torch_names(&self) -> Vec<(String, String)> {
        (0..self.layers.len())
            .map(|i| {
                (
                    format!("layers.{i}."),
                    format!("{}.{}.", self.head.torch_stack, i * self.head.torch_stride),
                )
            })
            .collect()
    }
}

impl<B: EmberBackend> Mlp<B> {
    /// An MLP `inputs -> hidden... -> outputs` with weights drawn from `seed`, layer by layer.
    pub fn new(config: &JobConfig, inputs: usize, outputs: usize, device: &B::Device) -> Self {
        let spec = &config.model;
        // With embedded columns, the first layer reads the plan's width, not the inputs'.
        let encodings = config.table().and_then(|t| t.encoding.as_deref());
        let plan = encodings.and_then(embed::Plan::of);
        let embeddings = (plan.as_ref())
            .map(|_| embed::tables(encodings.unwrap_or_default(), config.seed, device));
        let inputs = plan.as_ref().map_or(inputs, |p| p.width);
        let mut rng = crate::rng::stream(config.seed, "init", 0);
        let widths: Vec<usize> = std::iter::once(inputs)
            .chain(spec.hidden.iter().copied())
            .chain(std::iter::once(outputs))
            .collect();
        let layers = widths
            .windows(2)
            .map(|w| init_linear(w[0], w[1], true, spec.init, &mut rng, device))
            .collect();
        Self {
            embeddings,
            layers,
            dropout: DropoutConfig::new(spec.dropout).init(),
            head: Head {
                task: config.task,
                activation: spec.activation,
                names: output_names(config, outputs),
                class_weights: super::loss_weights(config),
                torch_stack: config.torch_stack(),
                torch_stride: if spec.dropout > 0.0 { 3 } else { 2 },
                plan,
            },
        }
    }

    /// The linear layers, input to output.
    pub(crate) fn layers(&self) -> &[Linear<B>] {
        &self.layers
    }

    /// The embedded columns' tables and where they come in, when there are any.
    pub(crate) fn embedded(&self) -> Option<(&embed::Plan, &[Embedding<B>])> {
        Some((self.head.plan.as_ref()?, self.embeddings.as_deref()?))
    }

    /// The same model with other tables for its embedded columns (the parameter ids kept).
    pub(crate) fn with_tables(mut self, tables: Vec<Tensor<B, 2>>) -> Self {
        let own = self.embeddings.as_ref().map_or(0, Vec::len);
        assert_eq!(own, tables.len(), "one table per embedded column");
        for (e, t) in self.embeddings.iter_mut().flatten().zip(tables) {
            e.weight = burn::module::Param::initialized(e.weight.id, t);
        }
        self
    }

    /// Its linear layers.
    pub(crate) fn depth(&self) -> usize {
        self.layers.len()
    }

    /// Modules of its `nn.Sequential` per linear layer (Linear, activation, [Dropout]).
    pub(crate) fn torch_stride(&self) -> usize {
        self.head.torch_stride
    }

    /// The same model with other weights and biases, layer by layer (the parameter ids kept).
    pub(crate) fn with_values(mut self, values: Vec<(Tensor<B, 2>, Tensor<B, 1>)>) -> Self {
        for (layer, (w, b)) in self.layers.iter_mut().zip(values) {
            layer.weight = burn::module::Param::initialized(layer.weight.id, w);
            if let Some(bias) = layer.bias.as_mut() {
                *bias = burn::module::Param::initialized(bias.id, b);
            }
        }
        self
    }

    /// Outputs `[n, outputs]`: logits, or predicted targets.
    pub fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let (x, last) = self.features(x);
        linear(x, last, ops::Activation::Identity)
    }

    /// The output layer's input (the last hidden layer's output), and the output layer.
    fn features(&self, x: Tensor<B, 2>) -> (Tensor<B, 2>, &Linear<B>) {
        let (last, hidden) = self
            .layers
            .split_last()
            .expect("an MLP has an output layer");
        let mut x = match (&self.head.plan, &self.embeddings) {
            (Some(plan), Some(tables)) => embed::lookup(tables, plan, x),
            _ => x,
        };
        for layer in hidden {
            // ember's one-pass dropout (ops::dropout), at the rate Burn's Dropout module holds.
            x = ops::dropout::dropout(
                hidden_layer(x, layer, self.head.activation),
                self.dropout.prob,
            );
        }
        (x, last)
    }

    /// The step's loss (and correct rows); with `metrics`, a regression's MAE and R² sums too
    /// (validation passes only: the training loop stays lean). An unweighted classifier's
    /// output layer and loss are one operation where the backend has a loss of its own (the
    /// GPU: `ops::classifier_head`, one launch fewer each step).
    pub(crate) fn step_output(&self, batch: MlpBatch<B>, metrics: bool) -> StepOutput<B> {
        let rows = batch.inputs.dims()[0];
        let unweighted = self.head.class_weights.is_none() || metrics;
        let headed = unweighted && B::fused_cross_entropy();
        let (loss, correct) = match batch.targets {
            Targets::Classes(labels) if headed => {
                let (x, last) = self.features(batch.inputs);
                ops::classifier_head(x, last, labels, false)
            }
            Targets::Binary(labels) if headed => {
                let (x, last) = self.features(batch.inputs);
                ops::classifier_head(x, last, labels, true)
            }
            targets => {
                let out = self.forward(batch.inputs);
                return self.head_output(out, targets, metrics);
            }
        };
        StepOutput::classified(loss, correct, rows)
    }

    /// The step's figures from the network's outputs `out`.
    fn head_output(&self, out: Tensor<B, 2>, targets: Targets<B>, metrics: bool) -> StepOutput<B> {
        let rows = out.dims()[0];
        // Class weights apply to the training loss only; validation stays unweighted (Keras).
        let weights = self.head.class_weights.as_deref().filter(|_| !metrics);
        match targets {
            Targets::Classes(labels) => {
                let (loss, correct) = match weights {
                    Some(w) => {
                        let predicted = out.clone().argmax(1).squeeze_dim(1);
                        let correct = count_correct(predicted, labels.clone());
                        (super::weighting::cross_entropy(out, labels, w), correct)
                    }
                    None => ops::cross_entropy(out, labels),
                };
                StepOutput::classified(loss, correct, rows)
            }
            Targets::Binary(labels) => {
                let (loss, correct) = match weights {
                    Some(w) => {
                        let predicted = out.clone().greater_elem(0.0).int();
                        let correct = predicted.equal(labels.clone()).float().sum();
                        let loss = super::weighting::binary_cross_entropy(out, labels.float(), w);
                        (loss.mean(), correct)
                    }
                    None => ops::binary_cross_entropy(out, labels),
                };
                StepOutput::classified(loss, correct, rows)
            }
            Targets::Values(y) => {
                let error = out - y.clone();
                let regression = metrics.then(|| RegressionStep {
                    abs_error_sum: error.clone().detach().abs().sum(),
                    targets: y,
                    mask: None,
                });
                StepOutput {
                    loss: error.square().mean(),
                    correct: None,
                    rows,
                    replica_rows: None,
                    regression,
                }
            }
        }
    }
}

/// A hidden layer: ember's fused kernel where the activation has one, Burn's op after the
/// fused product otherwise.
fn hidden_layer<B: EmberBackend>(
    x: Tensor<B, 2>,
    layer: &Linear<B>,
    act: Activation,
) -> Tensor<B, 2> {
    match act {
        Activation::Relu => ops::hidden_linear(x, layer, ops::Activation::Relu),
        Activation::Tanh => ops::hidden_linear(x, layer, ops::Activation::Tanh),
        Activation::Identity => ops::hidden_linear(x, layer, ops::Activation::Identity),
        Activation::Gelu => gelu(linear(x, layer, ops::Activation::Identity)),
        Activation::Sigmoid => sigmoid(linear(x, layer, ops::Activation::Identity)),
    }
}

/// Class names for a classifier, target columns for a regression.
fn output_names(config: &JobConfig, outputs: usize) -> Vec<String> {
    match (config.task, &config.classes, config.table()) {
        (Task::Regression, _, Some(t)) => t.targets.clone(),
        (_, Some(classes), _) => classes.clone(),
        _ => (0..outputs).map(|i| i.to_string()).collect(),
    }
}

/// What a row is asked to predict, on the device.
#[derive(Clone, Debug)]
pub enum Targets<B: Backend> {
    /// Class indices `[n]`.
    Classes(Tensor<B, 1, Int>),
    /// 0/1 labels `[n, 1]`.
    Binary(Tensor<B, 2, Int>),
    /// Real targets `[n, k]`.
    Values(Tensor<B, 2>),
}

/// Inputs `[n, k]` and their targets.
#[derive(Clone, Debug)]
pub struct MlpBatch<B: Backend> {
    pub inputs: Tensor<B, 2>,
    pub targets: Targets<B>,
}

impl<B: Backend> MlpBatch<B> {
    pub fn from_host(split: &HostSplit, device: &B::Device) -> Self {
        let n = split.rows();
        let m = &split.features;
        let inputs = Tensor::from_data(TensorData::new(m.values.clone(), [n, m.cols]), device);
        let targets = match &split.labels {
            Labels::Classes(l) => {
                Targets::Classes(Tensor::from_data(TensorData::new(l.clone(), [n]), device))
            }
            Labels::Binary(l) => Targets::Binary(Tensor::from_data(
                TensorData::new(l.clone(), [n, 1]),
                device,
            )),
            Labels::Values(v) => Targets::Values(Tensor::from_data(
                TensorData::new(v.values.clone(), [n, v.cols]),
                device,
            )),
        };
        Self { inputs, targets }
    }

    fn map_targets(
        &self,
        classes: impl Fn(&Tensor<B, 1, Int>) -> Tensor<B, 1, Int>,
        binary: impl Fn(&Tensor<B, 2, Int>) -> Tensor<B, 2, Int>,
        values: impl Fn(&Tensor<B, 2>) -> Tensor<B, 2>,
    ) -> Targets<B> {
        match &self.targets {
            Targets::Classes(t) => Targets::Classes(classes(t)),
            Targets::Binary(t) => Targets::Binary(binary(t)),
            Targets::Values(t) => Targets::Values(values(t)),
        }
    }
}

impl<B: EmberBackend> Rows<B> for MlpBatch<B> {
    fn rows(&self) -> usize {
        self.inputs.dims()[0]
    }
    fn narrow(&self, start: usize, len: usize) -> Self {
        Self {
            inputs: data_rows(&self.inputs, start, len),
            targets: self.map_targets(
                |t| t.clone().narrow(0, start, len),
                |t| t.clone().narrow(0, start, len),
                |t| data_rows(t, start, len),
            ),
        }
    }
    fn select(&self, indices: Tensor<B, 1, Int>) -> Self {
        Self {
            inputs: gather_rows(&self.inputs, &indices),
            targets: self.map_targets(
                |t| gather_rows(t, &indices),
                |t| gather_rows(t, &indices),
                |t| gather_rows(t, &indices),
            ),
        }
    }
    fn cat(parts: Vec<Self>) -> Self {
        let inputs = Tensor::cat(parts.iter().map(|p| p.inputs.clone()).collect(), 0);
        let targets = match &parts[0].targets {
            Targets::Classes(_) => Targets::Classes(Tensor::cat(
                parts
                    .iter()
                    .map(|p| match &p.targets {
                        Targets::Classes(t) => t.clone(),
                        _ => unreachable!("the parts of one split have one kind of target"),
                    })
                    .collect(),
                0,
            )),
            Targets::Binary(_) => Targets::Binary(Tensor::cat(
                parts
                    .iter()
                    .map(|p| match &p.targets {
                        Targets::Binary(t) => t.clone(),
                        _ => unreachable!("the parts of one split have one kind of target"),
                    })
                    .collect(),
                0,
            )),
            Targets::Values(_) => Targets::Values(Tensor::cat(
                parts
                    .iter()
                    .map(|p| match &p.targets {
                        Targets::Values(t) => t.clone(),
                        _ => unreachable!("the parts of one split have one kind of target"),
                    })
                    .collect(),
                0,
            )),
        };
        Self { inputs, targets }
    }
    fn to_device(&self, device: &B::Device) -> Self {
        Self {
            inputs: self.inputs.clone().to_device(device),
            targets: self.map_targets(
                |t| t.clone().to_device(device),
                |t| t.clone().to_device(device),
                |t| t.clone().to_device(device),
            ),
        }
    }
}

impl<B: EmberBackend> EmberModel<B> for Mlp<B> {
    type Batch = MlpBatch<B>;

    fn init(config: &JobConfig, device: &B::Device) -> Self {
        let spec = &config.model;
        let inputs = spec
            .inputs
            .expect("the input width is resolved from the data before a model is built");
        let outputs = spec
            .outputs
            .expect("the output width is resolved from the data before a model is built");
        Self::new(config, inputs, outputs, device)
    }

    fn batch(split: &HostSplit, device: &B::Device) -> Self::Batch {
        MlpBatch::from_host(split, device)
    }

    fn fits_record(&self, record: &MlpRecord<B>) -> std::result::Result<(), String> {
        // The tables first (a table fewer changes the first layer too), their count only: their
        // rows and widths once loaded (`check_weights`, which names data.encoding's levels).
        let wanted = self.embeddings.as_ref().map_or(0, Vec::len);
        let found = record.embeddings.as_ref().map_or(0, Vec::len);
        if wanted != found {
            let tables = if found == 1 { "table" } else { "tables" };
            return Err(format!(
                "the model file has {found} embedding {tables} where the config (data.embed) \
                 gives {wanted}"
            ));
        }
        let shape = |w: &burn::module::Param<Tensor<B, 2>>| w.lazy_shape().to_vec();
        let layers = |l: &[Linear<B>]| l.iter().map(|l| shape(&l.weight)).collect::<Vec<_>>();
        let found: Vec<_> = record.layers.iter().map(|l| shape(&l.weight)).collect();
        let keys = "model.hidden, and the data's inputs and outputs";
        super::shapes_fit("layer", keys, &layers(&self.layers), &found)
    }

    fn check_weights(&self) -> std::result::Result<(), String> {
        match &self.head.plan {
            Some(plan) => plan.check(self.embeddings.as_deref()),
            None => Ok(()),
        }
    }

    fn network(&self) -> crate::model::network::Network {
        crate::model::network::Network::Mlp(self.mlp_net())
    }
}

impl<B: EmberBackend> Mlp<B> {
    /// The layers' weights on the host and the head, for ONNX export.
    pub(crate) fn mlp_net(&self) -> crate::model::network::MlpNet {
        let host = |t: Tensor<B, 2>| -> Vec<f32> { rows_of(t).concat() };
        let layers = self
            .layers
            .iter()
            .map(|l| {
                let [inputs, outputs] = l.weight.dims();
                let bias = l.bias.as_ref().map(|b| b.val().unsqueeze_dim(0));
                crate::model::network::Layer {
                    inputs,
                    outputs,
                    weight: host(l.weight.val()),
                    bias: bias.map_or_else(|| vec![0.0; outputs], host),
                }
            })
            .collect();
        let lookup = self
            .head
            .plan
            .as_ref()
            .map(|plan| crate::model::network::Lookup {
                plan: plan.clone(),
                tables: (self.embeddings.iter().flatten())
                    .map(|t| {
                        let [rows, width] = t.weight.dims();
                        (rows, width, host(t.weight.val()))
                    })
                    .collect(),
            });
        crate::model::network::MlpNet {
            layers,
            activation: self.head.activation,
            task: self.head.task,
            names: self.head.names.clone(),
            lookup,
        }
    }
}

impl<B: EmberBackend> Predict<B> for Mlp<B> {
    fn header(&self) -> Vec<String> {
        let names = &self.head.names;
        match self.head.task {
            Task::Classification => std::iter::once("class".to_string())
                .chain(names.iter().map(|n| probability_column(n)))
                .collect(),
            Task::Binary => vec!["probability".to_string(), "label".to_string()],
            Task::Regression => names.clone(),
        }
    }

    fn predict(&self, inputs: &HostSplit, device: &B::Device) -> Vec<Vec<String>> {
        let mut out = Vec::with_capacity(inputs.rows());
        for start in (0..inputs.rows()).step_by(PREDICT_CHUNK) {
            let len = PREDICT_CHUNK.min(inputs.rows() - start);
            let x = self.forward(matrix_rows::<B>(&inputs.features, start, len, device));
            out.extend(self.predicted_rows(x));
        }
        out
    }
}

/// `p3` for class "3", `p_cat` for class "cat".
fn probability_column(name: &str) -> String {
    if name.starts_with(|c: char| c.is_ascii_digit() || c == '-') {
        format!("p{name}")
    } else {
        format!("p_{name}")
    }
}

impl<B: EmberBackend> Mlp<B> {
    /// CSV cells for a chunk of outputs.
    pub(crate) fn predicted_rows(&self, out: Tensor<B, 2>) -> Vec<Vec<String>> {
        let names = &self.head.names;
        match self.head.task {
            Task::Classification => rows_of(softmax(out, 1))
                .into_iter()
                .map(|p| {
                    let class = (0..p.len())
                        .max_by(|a, b| p[*a].total_cmp(&p[*b]))
                        .unwrap_or(0);
                    std::iter::once(names[class].clone())
                        .chain(p.iter().map(|v| v.to_string()))
                        .collect()
                })
                .collect(),
            Task::Binary => rows_of(sigmoid(out))
                .into_iter()
                .map(|p| vec![p[0].to_string(), names[usize::from(p[0] > 0.5)].clone()])
                .collect(),
            Task::Regression => rows_of(out)
                .into_iter()
                .map(|r| r.iter().map(|v| v.to_string()).collect())
                .collect(),
        }
    }
}

impl<B: TrainBackend> TrainStep for Mlp<B> {
    type Input = MlpBatch<B>;
    type Output = StepOutput<B>;

    fn step(&self, batch: MlpBatch<B>) -> TrainOutput<StepOutput<B>> {
        train_output(self, self.step_output(batch, false))
    }
}

impl<B: EmberBackend> InferenceStep for Mlp<B> {
    type Input = MlpBatch<B>;
    type Output = StepOutput<B>;

    fn step(&self, batch: MlpBatch<B>) -> StepOutput<B> {
        self.step_output(batch, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{RawConfig, parse};
    use burn::backend::{Autodiff, Flex};
    use burn::tensor::Distribution;

    type A = Autodiff<Flex>;

    fn config(activation: &str, dropout: f64) -> JobConfig {
        let text = format!(
            "task = \"classification\"\n[data]\ncsv = \"t.csv\"\nlabel = \"y\"\n\
             [model]\nhidden = [7, 5]\nactivation = \"{activation}\"\ndropout = {dropout}\n[sgd]\nlr = 0.1\n"
        );
        let raw: RawConfig = parse(std::path::Path::new("t.toml"), &text).unwrap();
        raw.check().unwrap()
    }

    /// Each activation, fused or not, against Burn's own `Linear` and activation functions.
    #[test]
    fn every_activation_matches_burns_own_layers() {
        let device = Default::default();
        let x = Tensor::<Flex, 2>::random([6, 4], Distribution::Uniform(-2.0, 2.0), &device);
        for name in ["relu", "tanh", "gelu", "sigmoid", "identity"] {
            let model = Mlp::<Flex>::new(&config(name, 0.0), 4, 3, &device);
            let act = |t: Tensor<Flex, 2>| match name {
                "relu" => burn::tensor::activation::relu(t),
                "tanh" => burn::tensor::activation::tanh(t),
                "gelu" => gelu(t),
                "sigmoid" => sigmoid(t),
                _ => t,
            };
            let mut want = x.clone();
            for layer in &model.layers[..2] {
                want = act(layer.forward(want));
            }
            want = model.layers[2].forward(want);
            let got = model.forward(x.clone());
            let diff: f32 = (got - want).abs().max().into_scalar();
            assert!(diff < 1e-5, "{name}: {diff}");
        }
    }

    /// With dropout, a train-mode forward depends on the generator's seed alone; inference
    /// (no autodiff) leaves every unit in.
    #[test]
    fn dropout_masks_follow_the_seed_and_vanish_in_inference() {
        let device = Default::default();
        let model = Mlp::<A>::new(&config("relu", 0.5), 4, 3, &device);
        let x = Tensor::<A, 2>::ones([8, 4], &device);
        let run = |seed: u64| {
            ops::dropout::seed_step::<A>(&device, seed);
            model.forward(x.clone()).into_data()
        };
        assert_eq!(run(3), run(3));
        assert_ne!(run(3), run(4));
        let plain = Mlp::<A>::new(&config("relu", 0.0), 4, 3, &device);
        let inference = burn::module::AutodiffModule::valid(&model);
        let xi = Tensor::<Flex, 2>::ones([8, 4], &device);
        let a = inference.forward(xi.clone()).into_data();
        let b = burn::module::AutodiffModule::valid(&plain)
            .forward(xi)
            .into_data();
        assert_eq!(a, b);
    }

    /// A model file written before embeddings existed (an MLP record without the field) loads,
    /// weights and all.
    #[test]
    fn model_files_from_before_embeddings_load() {
        #[derive(Module, Debug)]
        struct Before<B: Backend> {
            layers: Vec<Linear<B>>,
            dropout: Dropout,
        }
        let device = Default::default();
        let model = Mlp::<Flex>::new(&config("relu", 0.0), 4, 3, &device);
        let before = Before {
            layers: model.layers.clone(),
            dropout: model.dropout.clone(),
        };
        let path = crate::data::test_dir("before-embeddings").join("model.mpk");
        crate::export::save_burn(&before, &path).unwrap();
        let mut other = config("relu", 0.0);
        other.seed = 9;
        let other = Mlp::<Flex>::new(&other, 4, 3, &device);
        let loaded = crate::export::load_burn(other, &path, &device).unwrap();
        std::fs::remove_file(&path).unwrap();
        let x = Tensor::<Flex, 2>::random([5, 4], Distribution::Uniform(-1.0, 1.0), &device);
        let (a, b) = (loaded.forward(x.clone()), model.forward(x));
        assert_eq!(a.into_data(), b.into_data());
        assert!(loaded.embeddings.is_none());
    }

    #[test]
    fn torch_names_follow_the_sequential_and_never_chain() {
        let device = Default::default();
        let names = Mlp::<Flex>::new(&config("relu", 0.0), 4, 3, &device).torch_names();
        assert_eq!(names[2], ("layers.2.".to_string(), "net.4.".to_string()));
        let names = Mlp::<Flex>::new(&config("relu", 0.2), 4, 3, &device).torch_names();
        assert_eq!(names[1], ("layers.1.".to_string(), "net.3.".to_string()));
    }
}
