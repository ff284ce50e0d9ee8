//! tabular-mlp: the seed's `MLP`, Linear(61,20), Tanh, Linear(20,10), Tanh, Linear(10,1) giving a
//! logit; binary cross-entropy on logits; accuracy with the logit thresholded at 0.

use super::{
    EmberModel, PREDICT_CHUNK, Predict, StepOutput, TorchNames, init_linear, matrix_rows, rows_of,
    train_output,
};
use crate::config::Init;
use crate::data::loader::{Rows, gather_rows};
use crate::data::{HostSplit, Labels};
use crate::device::TrainBackend;
use crate::ops::{Activation, EmberBackend, linear};
use burn::nn::Linear;
use burn::nn::loss::BinaryCrossEntropyLossConfig;
use burn::prelude::*;
use burn::tensor::TensorData;
use burn::tensor::activation::sigmoid;
use burn::train::{InferenceStep, TrainOutput, TrainStep};

#[derive(Module, Debug)]
pub struct TabularMlp<B: Backend> {
    fc0: Linear<B>,
    fc2: Linear<B>,
    fc4: Linear<B>,
}

impl<B: Backend> TorchNames for TabularMlp<B> {
    const TORCH_NAMES: &'static [(&'static str, &'static str)] =
        &[("fc0.", "fc.0."), ("fc2.", "fc.2."), ("fc4.", "fc.4.")];
}

impl<B: EmberBackend> TabularMlp<B> {
    pub fn new(inputs: usize, init: Init, seed: u64, device: &B::Device) -> Self {
        let mut rng = crate::rng::stream(seed, "init", 0);
        Self {
            fc0: init_linear(inputs, 20, true, init, &mut rng, device),
            fc2: init_linear(20, 10, true, init, &mut rng, device),
            fc4: init_linear(10, 1, true, init, &mut rng, device),
        }
    }

    /// Input features of the first layer.
    pub fn inputs(&self) -> usize {
        self.fc0.weight.dims()[0]
    }

    /// Logits `[n, 1]`.
    pub fn forward(&self, features: Tensor<B, 2>) -> Tensor<B, 2> {
        let x = linear(features, &self.fc0, Activation::Tanh);
        let x = linear(x, &self.fc2, Activation::Tanh);
        linear(x, &self.fc4, Activation::Identity)
    }

    fn loss_and_correct(&self, batch: TableBatch<B>) -> (Tensor<B, 1>, Tensor<B, 1>) {
        let logits = self.forward(batch.features);
        let predicted = logits.clone().greater_elem(0.0).int();
        let correct = predicted.equal(batch.labels.clone()).float().sum();
        let loss = BinaryCrossEntropyLossConfig::new()
            .with_logits(true)
            .init(&logits.device())
            .forward(logits, batch.labels);
        (loss, correct)
    }
}

/// Features `[n, k]` and 0/1 labels `[n, 1]`.
#[derive(Clone, Debug)]
pub struct TableBatch<B: Backend> {
    pub features: Tensor<B, 2>,
    pub labels: Tensor<B, 2, Int>,
}

impl<B: Backend> TableBatch<B> {
    pub fn from_host(split: &HostSplit, device: &B::Device) -> Self {
        let n = split.rows();
        let labels = match &split.labels {
            Labels::Binary(l) => l.clone(),
            other => unreachable!("tabular data always has 0/1 labels, not {other:?}"),
        };
        Self {
            features: Tensor::from_data(
                TensorData::new(split.features.values.clone(), [n, split.features.cols]),
                device,
            ),
            labels: Tensor::from_data(TensorData::new(labels, [n, 1]), device),
        }
    }
}

impl<B: Backend> Rows<B> for TableBatch<B> {
    fn rows(&self) -> usize {
        self.labels.dims()[0]
    }
    fn narrow(&self, start: usize, len: usize) -> Self {
        Self {
            features: self.features.clone().narrow(0, start, len),
            labels: self.labels.clone().narrow(0, start, len),
        }
    }
    fn select(&self, indices: Tensor<B, 1, Int>) -> Self {
        Self {
            features: gather_rows(&self.features, &indices),
            labels: gather_rows(&self.labels, &indices),
        }
    }
    fn cat(parts: Vec<Self>) -> Self {
        Self {
            features: Tensor::cat(parts.iter().map(|p| p.features.clone()).collect(), 0),
            labels: Tensor::cat(parts.iter().map(|p| p.labels.clone()).collect(), 0),
        }
    }
    fn to_device(&self, device: &B::Device) -> Self {
        Self {
            features: self.features.clone().to_device(device),
            labels: self.labels.clone().to_device(device),
        }
    }
}

impl<B: EmberBackend> EmberModel<B> for TabularMlp<B> {
    type Batch = TableBatch<B>;

    fn init(config: &crate::config::JobConfig, device: &B::Device) -> Self {
        Self::new(
            config
                .inputs
                .unwrap_or(crate::data::synthetic::TABULAR_COLS),
            config.init,
            config.seed,
            device,
        )
    }

    fn batch(split: &HostSplit, device: &B::Device) -> Self::Batch {
        TableBatch::from_host(split, device)
    }
}

impl<B: EmberBackend> Predict<B> for TabularMlp<B> {
    fn header(&self) -> Vec<String> {
        vec!["probability".to_string(), "label".to_string()]
    }

    fn predict(&self, inputs: &HostSplit, device: &B::Device) -> Vec<Vec<String>> {
        let mut out = Vec::with_capacity(inputs.rows());
        for start in (0..inputs.rows()).step_by(PREDICT_CHUNK) {
            let len = PREDICT_CHUNK.min(inputs.rows() - start);
            let x = matrix_rows::<B>(&inputs.features, start, len, device);
            for p in rows_of(sigmoid(self.forward(x))) {
                out.push(vec![p[0].to_string(), u8::from(p[0] > 0.5).to_string()]);
            }
        }
        out
    }
}

impl<B: TrainBackend> TrainStep for TabularMlp<B> {
    type Input = TableBatch<B>;
    type Output = StepOutput<B>;

    fn step(&self, batch: TableBatch<B>) -> TrainOutput<StepOutput<B>> {
        let rows = batch.labels.dims()[0];
        let (loss, correct) = self.loss_and_correct(batch);
        train_output(self, loss, Some(correct), rows)
    }
}

impl<B: EmberBackend> InferenceStep for TabularMlp<B> {
    type Input = TableBatch<B>;
    type Output = StepOutput<B>;

    fn step(&self, batch: TableBatch<B>) -> StepOutput<B> {
        let rows = batch.labels.dims()[0];
        let (loss, correct) = self.loss_and_correct(batch);
        StepOutput {
            loss,
            correct: Some(correct),
            rows,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{Autodiff, Flex};

    #[test]
    fn one_logit_per_row_and_loss_near_ln2_at_start() {
        let device = Default::default();
        let model = TabularMlp::<Autodiff<Flex>>::new(61, Init::Torch, 3, &device);
        let batch = TableBatch {
            features: Tensor::zeros([4, 61], &device),
            labels: Tensor::from_data(TensorData::new(vec![0i64, 1, 0, 1], [4, 1]), &device),
        };
        assert_eq!(model.forward(batch.features.clone()).dims(), [4, 1]);
        let stats = TrainStep::step(&model, batch).item.read();
        assert!(
            (stats.loss - std::f64::consts::LN_2).abs() < 0.3,
            "{}",
            stats.loss
        );
        // All rows are identical, so exactly half the labels are predicted right.
        assert_eq!(stats.accuracy, Some(0.5));
    }
}
