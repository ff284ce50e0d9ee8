//! The three models, one file each, and what they share: the step output whose statistics stay
//! on the device, and weight initialisation drawn on the host.

pub mod fashion;
pub mod linear_scalar;
pub mod tabular;

use crate::config::Init;
use burn::module::{Param, ParamId};
use burn::nn::Linear;
use burn::prelude::*;
use burn::tensor::TensorData;
use burn::train::ItemLazy;
use rand_mt::Mt64;

/// What a train or valid step hands back: the batch's mean loss and, for classifiers, the
/// number of rows it got right, both still on the device. Nothing here is read per step: the
/// training strategy adds them into per-epoch totals on the device and reads those rarely.
pub struct StepOutput<B: Backend> {
    /// Mean loss over the batch (detached from the graph).
    pub loss: Tensor<B, 1>,
    /// Correctly classified rows in the batch, as a float count.
    pub correct: Option<Tensor<B, 1>>,
    /// Rows in the batch.
    pub rows: usize,
}

/// A [`StepOutput`] read back to the host.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepStats {
    /// Mean loss.
    pub loss: f64,
    /// Accuracy in [0, 1], for classifiers.
    pub accuracy: Option<f64>,
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
            rows,
        }
    }
}

/// The single value of a one-element tensor.
pub fn scalar<B: Backend>(t: Tensor<B, 1>) -> f64 {
    t.into_data()
        .convert::<f64>()
        .to_vec::<f64>()
        .ok()
        .and_then(|v| v.first().copied())
        .unwrap_or(f64::NAN)
}

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

/// A linear layer (`[in, out]` weights, Burn's layout) with weights drawn on the host:
/// `Torch` is `nn.Linear`'s uniform(±1/sqrt(fan_in)) for weights and biases, `Keras` is
/// Glorot-uniform weights and zero biases.
pub fn linear<B: Backend>(
    fan_in: usize,
    fan_out: usize,
    bias: bool,
    init: Init,
    rng: &mut Mt64,
    device: &B::Device,
) -> Linear<B> {
    let bound = match init {
        Init::Torch => 1.0 / (fan_in as f64).sqrt(),
        Init::Keras => (6.0 / (fan_in + fan_out) as f64).sqrt(),
    };
    let mut draw = |n: usize| -> Vec<f32> {
        (0..n)
            .map(|_| ((2.0 * crate::rng::uniform(rng) - 1.0) * bound) as f32)
            .collect()
    };
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

/// How a model's parameters are named in PyTorch's state_dict of the seed's own module:
/// (Burn path prefix, PyTorch name prefix) pairs; paths not listed keep their name.
pub trait TorchNames {
    const TORCH_NAMES: &'static [(&'static str, &'static str)];
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;

    #[test]
    fn torch_init_is_bounded_by_one_over_sqrt_fan_in() {
        let mut rng = crate::rng::stream(1, "init", 0);
        let l = linear::<Flex>(100, 7, true, Init::Torch, &mut rng, &Default::default());
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
        let l = linear::<Flex>(10, 20, true, Init::Keras, &mut rng, &Default::default());
        let b: Vec<f32> = l.bias.unwrap().val().into_data().to_vec().unwrap();
        assert!(b.iter().all(|v| *v == 0.0));
        let bound = (6.0f32 / 30.0).sqrt();
        let w: Vec<f32> = l.weight.val().into_data().to_vec().unwrap();
        assert!(w.iter().all(|v| v.abs() <= bound));
    }
}
