//! linear-scalar: the seed's `Model`, y = Linear(40, 1, no bias)(x) + p * f, with p one learned
//! scalar drawn from N(0, 1); mean squared error.

use super::{
    EmberModel, PREDICT_CHUNK, Predict, RegressionStep, StepOutput, TorchNames, init_linear,
    matrix_rows, param, rows_of, train_output,
};
use crate::config::Init;
use crate::data::loader::{Rows, data_rows, gather_rows};
use crate::data::{HostSplit, Labels};
use crate::device::TrainBackend;
use crate::ops::EmberBackend;
use burn::module::Param;
use burn::nn::Linear;
use burn::nn::loss::{MseLoss, Reduction};
use burn::prelude::*;
use burn::tensor::{TensorData, TensorPrimitive};
use burn::train::{InferenceStep, TrainOutput, TrainStep};

#[derive(Module, Debug)]
pub struct LinearScalar<B: Backend> {
    lin: Linear<B>,
    par: Param<Tensor<B, 1>>,
}

impl<B: Backend> TorchNames for LinearScalar<B> {
    fn torch_names(&self) -> Vec<(String, String)> {
        Vec::new()
    }
}

impl<B: Backend> LinearScalar<B> {
    pub fn new(inputs: usize, init: Init, seed: u64, device: &B::Device) -> Self {
        let mut rng = crate::rng::stream(seed, "init", 0);
        let lin = init_linear(inputs, 1, false, init, &mut rng, device);
        let p = crate::rng::normal(&mut rng) as f32;
        Self {
            lin,
            par: param(TensorData::new(vec![p], [1]), &mut rng, device),
        }
    }

    /// Input columns of `x`.
    pub fn inputs(&self) -> usize {
        self.lin.weight.dims()[0]
    }

    /// The weight `w` `[inputs, 1]` and the scalar `p` `[1]`.
    pub(crate) fn parts(&self) -> (&Param<Tensor<B, 2>>, &Param<Tensor<B, 1>>) {
        (&self.lin.weight, &self.par)
    }

    /// The same model with other values of `w` and `p` (the parameter ids kept).
    pub(crate) fn with_parts(mut self, w: Tensor<B, 2>, p: Tensor<B, 1>) -> Self {
        self.lin.weight = Param::initialized(self.lin.weight.id, w);
        self.par = Param::initialized(self.par.id, p);
        self
    }

    /// Predictions `[n, 1]`.
    pub fn forward(&self, x: Tensor<B, 2>, f: Tensor<B, 2>) -> Tensor<B, 2> {
        self.lin.forward(x) + f * self.par.val().unsqueeze_dim(0)
    }
}

impl<B: EmberBackend> LinearScalar<B> {
    /// The step's loss; with `metrics`, MAE and R²'s sums too (validation passes only: the
    /// training loop stays as lean as the seed's). A training step on a backend with its own
    /// kernel for the model and loss takes it, as one replica.
    fn step_output(&self, batch: ScalarBatch<B>, metrics: bool) -> StepOutput<B> {
        let rows = batch.y.dims()[0];
        if let (false, Some(xf)) = (metrics, batch.xf) {
            let w = self.lin.weight.val().unsqueeze_dim::<3>(0);
            let loss = B::scalar_mse_replicas(
                xf.into_primitive().tensor(),
                batch.y.into_primitive().tensor(),
                w.into_primitive().tensor(),
                self.par.val().into_primitive().tensor(),
            );
            return regression_output(Tensor::from_primitive(TensorPrimitive::Float(loss)), rows);
        }
        let prediction = self.forward(batch.x, batch.f);
        let regression = metrics.then(|| RegressionStep {
            abs_error_sum: (prediction.clone().detach() - batch.y.clone()).abs().sum(),
            targets: batch.y.clone(),
            mask: None,
        });
        StepOutput {
            regression,
            ..regression_output(
                MseLoss::new().forward(prediction, batch.y, Reduction::Mean),
                rows,
            )
        }
    }
}

/// A step's output of `rows` rows with only its loss.
fn regression_output<B: Backend>(loss: Tensor<B, 1>, rows: usize) -> StepOutput<B> {
    StepOutput {
        loss,
        correct: None,
        rows,
        replica_rows: None,
        regression: None,
    }
}

/// Inputs `x` `[n, k]`, the scalar column `f` `[n, 1]` and targets `y` `[n, 1]`; on a
/// backend with its own kernel for the model and loss (`EmberBackend::fused_scalar_mse`), also
/// `x` with `f` as its last column, `xf` `[n, k + 1]`, which that kernel reads.
#[derive(Clone, Debug)]
pub struct ScalarBatch<B: Backend> {
    pub x: Tensor<B, 2>,
    pub f: Tensor<B, 2>,
    pub y: Tensor<B, 2>,
    pub xf: Option<Tensor<B, 2>>,
}

impl<B: EmberBackend> ScalarBatch<B> {
    pub fn from_host(split: &HostSplit, device: &B::Device) -> Self {
        let n = split.rows();
        let y = match &split.labels {
            Labels::Values(v) => v.values.clone(),
            other => unreachable!("linear-scalar data always has real targets, not {other:?}"),
        };
        let f = split
            .scalar
            .clone()
            .expect("linear-scalar data always has the scalar column");
        let k = split.features.cols;
        let xf = B::fused_scalar_mse().then(|| {
            let x = &split.features.values;
            let values: Vec<f32> = (0..n)
                .flat_map(|r| x[r * k..(r + 1) * k].iter().chain(std::iter::once(&f[r])))
                .copied()
                .collect();
            Tensor::from_data(TensorData::new(values, [n, k + 1]), device)
        });
        Self {
            x: Tensor::from_data(
                TensorData::new(split.features.values.clone(), [n, k]),
                device,
            ),
            f: Tensor::from_data(TensorData::new(f, [n, 1]), device),
            y: Tensor::from_data(TensorData::new(y, [n, 1]), device),
            xf,
        }
    }
}

impl<B: EmberBackend> Rows<B> for ScalarBatch<B> {
    fn rows(&self) -> usize {
        self.y.dims()[0]
    }
    fn narrow(&self, start: usize, len: usize) -> Self {
        Self {
            x: data_rows(&self.x, start, len),
            f: data_rows(&self.f, start, len),
            y: data_rows(&self.y, start, len),
            xf: self.xf.as_ref().map(|t| data_rows(t, start, len)),
        }
    }
    fn select(&self, indices: Tensor<B, 1, Int>) -> Self {
        Self {
            x: gather_rows(&self.x, &indices),
            f: gather_rows(&self.f, &indices),
            y: gather_rows(&self.y, &indices),
            xf: self.xf.as_ref().map(|t| gather_rows(t, &indices)),
        }
    }
    fn cat(parts: Vec<Self>) -> Self {
        Self {
            x: Tensor::cat(parts.iter().map(|p| p.x.clone()).collect(), 0),
            f: Tensor::cat(parts.iter().map(|p| p.f.clone()).collect(), 0),
            y: Tensor::cat(parts.iter().map(|p| p.y.clone()).collect(), 0),
            xf: (parts
                .iter()
                .map(|p| p.xf.clone())
                .collect::<Option<Vec<_>>>())
            .map(|xf| Tensor::cat(xf, 0)),
        }
    }
    fn to_device(&self, device: &B::Device) -> Self {
        Self {
            x: self.x.clone().to_device(device),
            f: self.f.clone().to_device(device),
            y: self.y.clone().to_device(device),
            xf: self.xf.clone().map(|t| t.to_device(device)),
        }
    }
}

impl<B: EmberBackend> EmberModel<B> for LinearScalar<B> {
    type Batch = ScalarBatch<B>;

    fn init(config: &crate::config::JobConfig, device: &B::Device) -> Self {
        Self::new(
            config
                .model
                .inputs
                .unwrap_or(crate::data::synthetic::SCALAR_COLS),
            config.model.init,
            config.seed,
            device,
        )
    }

    fn batch(split: &HostSplit, device: &B::Device) -> Self::Batch {
        ScalarBatch::from_host(split, device)
    }

    fn network(&self) -> crate::model::network::Network {
        crate::model::network::Network::LinearScalar {
            weight: rows_of(self.lin.weight.val()).concat(),
            p: rows_of(self.par.val().unsqueeze_dim(0))[0][0],
        }
    }
}

impl<B: EmberBackend> Predict<B> for LinearScalar<B> {
    fn header(&self) -> Vec<String> {
        vec!["value".to_string()]
    }

    fn predict(&self, inputs: &HostSplit, device: &B::Device) -> Vec<Vec<String>> {
        let f = crate::data::Matrix {
            rows: inputs.rows(),
            cols: 1,
            values: inputs
                .scalar
                .clone()
                .expect("linear-scalar inputs always have the scalar column"),
        };
        let mut out = Vec::with_capacity(inputs.rows());
        for start in (0..inputs.rows()).step_by(PREDICT_CHUNK) {
            let len = PREDICT_CHUNK.min(inputs.rows() - start);
            let x = matrix_rows::<B>(&inputs.features, start, len, device);
            let fv = matrix_rows::<B>(&f, start, len, device);
            for v in rows_of(self.forward(x, fv)) {
                out.push(vec![v[0].to_string()]);
            }
        }
        out
    }
}

impl<B: TrainBackend> TrainStep for LinearScalar<B> {
    type Input = ScalarBatch<B>;
    type Output = StepOutput<B>;

    fn step(&self, batch: ScalarBatch<B>) -> TrainOutput<StepOutput<B>> {
        train_output(self, self.step_output(batch, false))
    }
}

impl<B: EmberBackend> InferenceStep for LinearScalar<B> {
    type Input = ScalarBatch<B>;
    type Output = StepOutput<B>;

    fn step(&self, batch: ScalarBatch<B>) -> StepOutput<B> {
        self.step_output(batch, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{Autodiff, Flex};

    #[test]
    fn prediction_is_linear_part_plus_p_times_f() {
        let device = Default::default();
        let model = LinearScalar::<Autodiff<Flex>>::new(40, Init::Torch, 9, &device);
        let x = Tensor::zeros([3, 40], &device);
        let f = Tensor::from_data(TensorData::new(vec![1.0f32, 2.0, 3.0], [3, 1]), &device);
        let out: Vec<f32> = model.forward(x, f).into_data().to_vec().unwrap();
        let p: f32 = model.par.val().into_scalar();
        assert_eq!(out, vec![p, 2.0 * p, 3.0 * p]);
    }

    #[test]
    fn p_is_drawn_from_the_seed() {
        let device = Default::default();
        let a: f32 = LinearScalar::<Flex>::new(40, Init::Torch, 1, &device)
            .par
            .val()
            .into_scalar();
        let b: f32 = LinearScalar::<Flex>::new(40, Init::Torch, 1, &device)
            .par
            .val()
            .into_scalar();
        let c: f32 = LinearScalar::<Flex>::new(40, Init::Torch, 2, &device)
            .par
            .val()
            .into_scalar();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
