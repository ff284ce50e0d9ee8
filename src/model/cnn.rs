//! The convolutional network: `[[model.conv]]` blocks (a convolution, an optional batch norm,
//! the model's activation, an optional max-pool) on the image rows, then `model.pooling`
//! (flatten, or each channel's mean), then the general MLP as its head. Rows arrive as ember's
//! image sources give them (pixels row by row, channels interleaved) and become `[n, channels,
//! height, width]` maps on the device, so batches, the loader, checkpoints and predictions are
//! the MLP's.
//!
//! Batch norm follows PyTorch's `BatchNorm2d` defaults (momentum 0.1, epsilon 1e-5); like
//! Burn's module it keeps the biased batch variance in its running average where PyTorch keeps
//! the unbiased one (a factor N/(N−1): under 0.01 % for a batch of 64 images of 28×28). Its running statistics are module state: saved in checkpoints and model files,
//! and used (in place of the batch's) by validation, `eval` and `predict`.

use super::augment::augment;
use super::mlp::{Mlp, MlpBatch};
use super::{
    EmberModel, PREDICT_CHUNK, Predict, StepOutput, TorchNames, draw_uniform, init_bound,
    matrix_rows, param, rows_of, train_output,
};
use crate::config::conv::{feature_shape, head_inputs};
use crate::config::{Activation, Augment, ConvSpec, Init, JobConfig, Pooling};
use crate::data::HostSplit;
use crate::device::TrainBackend;
use crate::ops::{self, EmberBackend};
use burn::module::{ParamId, RunningState};
use burn::nn::conv::Conv2d;
use burn::nn::{BatchNorm, PaddingConfig2d};
use burn::prelude::*;
use burn::tensor::TensorData;
use burn::tensor::activation::{gelu, relu, sigmoid};
use burn::train::{InferenceStep, TrainOutput, TrainStep};
use rand_mt::Mt64;

/// PyTorch's `BatchNorm2d` defaults.
const NORM_MOMENTUM: f64 = 0.1;
const NORM_EPSILON: f64 = 1e-5;
/// Mixed into a convolution's parameter id to give its batch count's ("num_batc").
const TRACKED_ID: u64 = 0x6e75_6d5f_6261_7463;

/// One block: conv, [batch norm], activation, [max-pool of `pool`, 1 for none].
#[derive(Module, Debug)]
pub struct ConvBlock<B: Backend> {
    conv: Conv2d<B>,
    norm: Option<BatchNorm<B>>,
    /// The training batches `norm` has normalised: PyTorch's `num_batches_tracked`, which a
    /// strict load of `BatchNorm2d` asks for. An f32 count, exact to 2^24 batches.
    tracked: Option<RunningState<Tensor<B, 1>>>,
    pool: usize,
}

/// How the network reads its rows, which the layers do not hold.
#[derive(Debug, Clone)]
pub struct Shape {
    /// `[channels, height, width]` of an input image.
    pub image: [usize; 3],
    pub pooling: Pooling,
    pub activation: Activation,
    /// The training steps' augmentation, if any.
    pub augment: Option<Augment>,
}

#[derive(Module, Debug)]
pub struct Cnn<B: Backend> {
    blocks: Vec<ConvBlock<B>>,
    mlp: Mlp<B>,
    #[module(skip)]
    shape: Shape,
}

impl<B: Backend> ConvBlock<B> {
    /// A block on `inputs` channels with weights drawn from `rng`: PyTorch's `nn.Conv2d`
    /// bounds, or Keras' Glorot over `channels × kernel²` fans with zero biases.
    fn new(inputs: usize, spec: ConvSpec, init: Init, rng: &mut Mt64, device: &B::Device) -> Self {
        let (k, out) = (spec.kernel, spec.channels);
        let bound = init_bound(init, inputs * k * k, out * k * k);
        let weight = draw_uniform(out * inputs * k * k, bound, rng);
        // A batch norm subtracts each channel's mean, so a bias before it would learn nothing
        // (PyTorch's networks write `Conv2d(..., bias=False)` there); without one, a step also
        // skips the bias gradient, a strided copy of the output's gradient on flex.
        let bias = (!spec.batch_norm).then(|| match init {
            Init::Torch => draw_uniform(out, bound, rng),
            Init::Keras => vec![0.0; out],
        });
        let p = spec.padding;
        let conv = Conv2d {
            weight: param(TensorData::new(weight, [out, inputs, k, k]), rng, device),
            bias: bias.map(|b| param(TensorData::new(b, [out]), rng, device)),
            stride: [spec.stride; 2],
            kernel_size: [k; 2],
            dilation: [1, 1],
            groups: 1,
            padding: PaddingConfig2d::Explicit(p, p, p, p),
        };
        let norm = spec.batch_norm.then(|| batch_norm(out, rng, device));
        // The count's id comes from the convolution's rather than from `rng`, so that adding it
        // left every later draw (and so every trained network) as it was.
        let tracked = norm.as_ref().map(|_| {
            let id = ParamId::from(conv.weight.id.val() ^ TRACKED_ID);
            RunningState::with_id(id, Tensor::zeros([1], device))
        });
        Self {
            conv,
            norm,
            tracked,
            pool: spec.pool,
        }
    }

    /// The zeros on each side (ember's convolutions pad every side alike).
    fn padding(&self) -> usize {
        match self.conv.padding {
            PaddingConfig2d::Explicit(p, ..) => p,
            _ => unreachable!("ember's convolutions pad explicitly"),
        }
    }

    fn forward(&self, x: Tensor<B, 4>, activation: Activation) -> Tensor<B, 4>
    where
        B: EmberBackend,
    {
        // ember's convolution: Burn's `Conv2d::forward` on the GPU backends, a kernel of ember's
        // own on the CPU (see `ops::conv`).
        let bias = self.conv.bias.as_ref().map(|b| b.val());
        let weight = self.conv.weight.val();
        let mut x = ops::conv(x, weight, bias, self.conv.stride[0], self.padding());
        if let Some(norm) = &self.norm {
            x = normalize(norm, x);
        }
        if let (Some(tracked), true) = (&self.tracked, B::ad_enabled(&x.device())) {
            let count = tracked.value_sync().to_device(&x.device());
            tracked.update(count.add_scalar(1.0).detach());
        }
        // ReLU commutes with a max-pool (the largest rectified value is the rectified largest
        // value, and the gradient reaches the same element or is zero), so a ReLU block pools
        // first and rectifies a quarter of the values: the same outputs and gradients, bit for
        // bit. Other activations are not monotone to the last bit, or not at all (GELU).
        let pool_first = activation == Activation::Relu;
        if !pool_first {
            x = activate(x, activation);
        }
        if self.pool > 1 {
            x = ops::max_pool(x, self.pool);
        }
        if pool_first {
            x = activate(x, activation);
        }
        x
    }
}

/// A batch norm over `channels` at its identity (scale 1, shift 0, running mean 0 and
/// variance 1), its ids drawn from `rng` like every parameter's.
fn batch_norm<B: Backend>(channels: usize, rng: &mut Mt64, device: &B::Device) -> BatchNorm<B> {
    let fill = |v: f32| TensorData::new(vec![v; channels], [channels]);
    let mut state = |v: f32| {
        let id = ParamId::from(rng.next_u64());
        RunningState::with_id(id, Tensor::from_data(fill(v), device))
    };
    let (running_mean, running_var) = (state(0.0), state(1.0));
    BatchNorm {
        gamma: param(fill(1.0), rng, device),
        beta: param(fill(0.0), rng, device),
        running_mean,
        running_var,
        momentum: NORM_MOMENTUM,
        epsilon: NORM_EPSILON,
    }
}

/// Burn's `BatchNorm` forward through ember's own operation (`ops::batch_norm`): Burn's
/// composition is a dozen broadcast operations, and on the CPU backend those strided walks took
/// most of a training step. Training normalises by the batch's mean and biased variance and
/// moves the running statistics by the momentum, as Burn's does; inference uses the running
/// statistics, folded into one multiply-add per value.
fn normalize<B: EmberBackend>(norm: &BatchNorm<B>, x: Tensor<B, 4>) -> Tensor<B, 4> {
    let [n, c, h, w] = x.dims();
    let x = x.reshape([n, c, h * w]);
    let y = if B::ad_enabled(&x.device()) {
        let (y, mean, var) = ops::batch_norm(x, norm.gamma.val(), norm.beta.val(), norm.epsilon);
        let m = norm.momentum;
        for (state, batch) in [(&norm.running_mean, mean), (&norm.running_var, var)] {
            let kept = state
                .value_sync()
                .to_device(&y.device())
                .mul_scalar(1.0 - m);
            state.update(kept.add(batch.mul_scalar(m)).detach());
        }
        y
    } else {
        let device = x.device();
        let mean = norm.running_mean.value().to_device(&device);
        let var = norm.running_var.value().to_device(&device);
        let scale = norm.gamma.val() / var.add_scalar(norm.epsilon).sqrt();
        let shift = norm.beta.val() - mean * scale.clone();
        ops::channel_affine(x, scale, shift)
    };
    y.reshape([n, c, h, w])
}

fn activate<B: EmberBackend>(x: Tensor<B, 4>, activation: Activation) -> Tensor<B, 4> {
    match activation {
        Activation::Relu => relu(x),
        Activation::Tanh => ops::tanh(x),
        Activation::Gelu => gelu(x),
        Activation::Sigmoid => sigmoid(x),
        Activation::Identity => x,
    }
}

impl<B: EmberBackend> Cnn<B> {
    /// The network of `config` (its image shape resolved from the data) with `outputs`
    /// outputs. The blocks draw their weights from their own stream; the head draws as an MLP
    /// of the same widths would.
    pub fn new(config: &JobConfig, outputs: usize, device: &B::Device) -> Self {
        let spec = &config.model;
        let image = spec
            .image
            .expect("the image shape is resolved from the data before a model is built");
        let features = feature_shape(image, &spec.conv)
            .expect("the blocks were checked against the image shape when it was resolved");
        let mut rng = crate::rng::stream(config.seed, "init", 1);
        let mut channels = image[0];
        let blocks = (spec.conv.iter())
            .map(|b| {
                let block = ConvBlock::new(channels, *b, spec.init, &mut rng, device);
                channels = b.channels;
                block
            })
            .collect();
        let inputs = head_inputs(features, spec.pooling);
        Self {
            blocks,
            mlp: Mlp::new(config, inputs, outputs, device),
            shape: Shape {
                image,
                pooling: spec.pooling,
                activation: spec.activation,
                augment: spec.augment,
            },
        }
    }

    /// Outputs `[n, outputs]` of image rows `[n, height × width × channels]`.
    pub fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        self.forward_maps(self.maps(x))
    }

    /// Image rows as `[n, channels, height, width]` maps.
    fn maps(&self, x: Tensor<B, 2>) -> Tensor<B, 4> {
        let n = x.dims()[0];
        let [c, h, w] = self.shape.image;
        if c == 1 {
            x.reshape([n, 1, h, w])
        } else {
            x.reshape([n, h, w, c]).permute([0, 3, 1, 2])
        }
    }

    fn forward_maps(&self, maps: Tensor<B, 4>) -> Tensor<B, 2> {
        self.mlp.forward(self.features(maps))
    }

    /// The head's inputs `[n, features]`: the blocks' output maps, flattened or averaged.
    fn features(&self, mut maps: Tensor<B, 4>) -> Tensor<B, 2> {
        for block in &self.blocks {
            maps = block.forward(maps, self.shape.activation);
        }
        match self.shape.pooling {
            Pooling::Flatten => maps.flatten(1, 3),
            Pooling::Average => maps.mean_dim(3).mean_dim(2).flatten(1, 3),
        }
    }

    /// A step's outputs; a training step augments its images first, when the job says so.
    /// The head's step is the MLP's on the features (so a classifier's output layer and loss
    /// are one operation where the backend has its own loss, as in the MLP).
    fn step_output(&self, batch: MlpBatch<B>, training: bool) -> StepOutput<B> {
        let mut maps = self.maps(batch.inputs);
        if let (true, Some(a)) = (training, self.shape.augment) {
            maps = augment(maps, a, ops::dropout::next_seed());
        }
        let inputs = self.features(maps);
        let head = MlpBatch {
            inputs,
            targets: batch.targets,
        };
        self.mlp.step_output(head, !training)
    }
}

impl<B: EmberBackend> TorchNames for Cnn<B> {
    /// The modules of one `nn.Sequential` named `net`, in order: per block `Conv2d`,
    /// [`BatchNorm2d`], the activation, [`MaxPool2d`]; `Flatten` (or `AdaptiveAvgPool2d(1)`
    /// then `Flatten`); then the head's `Linear`, activation, [`Dropout`] per hidden layer.
    fn torch_names(&self) -> Vec<(String, String)> {
        let mut names = Vec::new();
        let mut module = 0;
        for (i, b) in self.blocks.iter().enumerate() {
            names.push((format!("blocks.{i}.conv."), format!("net.{module}.")));
            module += 1;
            if b.norm.is_some() {
                // Whole names before the norm's prefix, which would claim them first (loading
                // applies the pairs in turn). The scale and shift are named here rather than
                // left to burn-store's adapter: it finds them by PyTorch's names on loading but
                // then reports the file's `weight` and `bias` as unused.
                let (torch, burn) = (format!("net.{module}."), format!("blocks.{i}.norm."));
                for (ours, theirs) in [("gamma", "weight"), ("beta", "bias")] {
                    names.push((format!("{burn}{ours}"), format!("{torch}{theirs}")));
                }
                let count = format!("{torch}num_batches_tracked");
                names.push((format!("blocks.{i}.tracked"), count));
                names.push((burn, torch));
                module += 1;
            }
            module += 1 + usize::from(b.pool > 1);
        }
        module += match self.shape.pooling {
            Pooling::Flatten => 1,
            Pooling::Average => 2,
        };
        let stride = self.mlp.torch_stride();
        for layer in 0..self.mlp.depth() {
            let torch = format!("net.{}.", module + layer * stride);
            names.push((format!("mlp.layers.{layer}."), torch));
        }
        names
    }
}

impl<B: EmberBackend> EmberModel<B> for Cnn<B> {
    type Batch = MlpBatch<B>;

    fn init(config: &JobConfig, device: &B::Device) -> Self {
        let outputs = config
            .model
            .outputs
            .expect("the output width is resolved from the data before a model is built");
        Self::new(config, outputs, device)
    }

    fn batch(split: &HostSplit, device: &B::Device) -> Self::Batch {
        MlpBatch::from_host(split, device)
    }

    /// The convolutions' weights and batch norms, then the head's layers.
    fn fits_record(&self, record: &CnnRecord<B>) -> std::result::Result<(), String> {
        // A block's shape with a fifth figure for its batch norm, so a missing one differs.
        let shape = |w: &burn::module::Param<Tensor<B, 4>>, norm: bool| {
            let mut dims = w.lazy_shape().to_vec();
            dims.push(usize::from(norm));
            dims
        };
        let wanted: Vec<_> = (self.blocks.iter())
            .map(|b| shape(&b.conv.weight, b.norm.is_some()))
            .collect();
        let found: Vec<_> = (record.blocks.iter())
            .map(|b| shape(&b.conv.weight, b.norm.is_some()))
            .collect();
        let keys = "model.conv: channels, kernel, batch_norm";
        super::shapes_fit("convolution", keys, &wanted, &found)?;
        self.mlp.fits_record(&record.mlp)
    }

    fn network(&self) -> crate::model::network::Network {
        let host = |t: Tensor<B, 1>| -> Vec<f32> { rows_of(t.unsqueeze_dim::<2>(0)).concat() };
        let blocks = (self.blocks.iter())
            .map(|b| {
                let [outputs, inputs, kernel, _] = b.conv.weight.dims();
                crate::model::network::ConvLayer {
                    inputs,
                    outputs,
                    kernel,
                    stride: b.conv.stride[0],
                    padding: b.padding(),
                    pool: b.pool,
                    weight: host(b.conv.weight.val().flatten(0, 3)),
                    bias: (b.conv.bias.as_ref())
                        .map_or_else(|| vec![0.0; outputs], |b| host(b.val())),
                    norm: b.norm.as_ref().map(|n| crate::model::network::Norm {
                        scale: host(n.gamma.val()),
                        shift: host(n.beta.val()),
                        mean: host(n.running_mean.value()),
                        var: host(n.running_var.value()),
                        epsilon: n.epsilon,
                    }),
                }
            })
            .collect();
        crate::model::network::Network::Cnn {
            image: self.shape.image,
            blocks,
            pooling: self.shape.pooling,
            mlp: self.mlp.mlp_net(),
        }
    }
}

impl<B: EmberBackend> Predict<B> for Cnn<B> {
    fn header(&self) -> Vec<String> {
        self.mlp.header()
    }

    fn predict(&self, inputs: &HostSplit, device: &B::Device) -> Vec<Vec<String>> {
        let mut out = Vec::with_capacity(inputs.rows());
        for start in (0..inputs.rows()).step_by(PREDICT_CHUNK) {
            let len = PREDICT_CHUNK.min(inputs.rows() - start);
            let x = self.forward(matrix_rows::<B>(&inputs.features, start, len, device));
            out.extend(self.mlp.predicted_rows(x));
        }
        out
    }
}

impl<B: TrainBackend> TrainStep for Cnn<B> {
    type Input = MlpBatch<B>;
    type Output = StepOutput<B>;

    fn step(&self, batch: MlpBatch<B>) -> TrainOutput<StepOutput<B>> {
        train_output(self, self.step_output(batch, true))
    }
}

impl<B: EmberBackend> InferenceStep for Cnn<B> {
    type Input = MlpBatch<B>;
    type Output = StepOutput<B>;

    fn step(&self, batch: MlpBatch<B>) -> StepOutput<B> {
        self.step_output(batch, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::mlp::Targets;
    use burn::backend::{Autodiff, Flex};
    use burn::module::AutodiffModule;
    use burn::nn::BatchNormConfig;
    use burn::tensor::{Distribution, Tolerance};

    type A = Autodiff<Flex>;

    /// ember's batch norm against Burn's `BatchNorm` module: training outputs, the gradients
    /// of the input, scale and shift, the running statistics after two steps, and inference.
    #[test]
    fn batch_norm_matches_burns_module() {
        let device = Default::default();
        let burns = BatchNormConfig::new(4).init::<A>(&device);
        let mut rng = crate::rng::stream(1, "test", 0);
        let ours = batch_norm::<A>(4, &mut rng, &device);
        let tol = Tolerance::<f32>::absolute(1e-4);
        for _ in 0..2 {
            let x = Tensor::<A, 4>::random([3, 4, 5, 6], Distribution::Normal(2.0, 3.0), &device);
            let w = Tensor::<A, 4>::random([3, 4, 5, 6], Distribution::Default, &device);
            // Two leaves of their own: one node shared by both graphs loses its gradient.
            let leaf = || Tensor::<A, 4>::from_data(x.to_data(), &device).require_grad();
            let (xa, xb) = (leaf(), leaf());
            let ya = normalize(&ours, xa.clone());
            let yb = burns.forward(xb.clone());
            ya.clone()
                .into_data()
                .assert_approx_eq(&yb.clone().into_data(), tol);
            let ga = (ya * w.clone()).sum().backward();
            let gb = (yb * w).sum().backward();
            let grad = |t: &Tensor<A, 4>, g, who: &str| {
                t.grad(g)
                    .unwrap_or_else(|| panic!("no gradient of {who}"))
                    .into_data()
            };
            grad(&xa, &ga, "ours").assert_approx_eq(&grad(&xb, &gb, "burn's"), tol);
            let (pa, pb) = (ours.gamma.val(), burns.gamma.val());
            pa.grad(&ga)
                .unwrap()
                .into_data()
                .assert_approx_eq(&pb.grad(&gb).unwrap().into_data(), tol);
            let (pa, pb) = (ours.beta.val(), burns.beta.val());
            pa.grad(&ga)
                .unwrap()
                .into_data()
                .assert_approx_eq(&pb.grad(&gb).unwrap().into_data(), tol);
            for (a, b) in [
                (&ours.running_mean, &burns.running_mean),
                (&ours.running_var, &burns.running_var),
            ] {
                a.value()
                    .into_data()
                    .assert_approx_eq(&b.value().into_data(), tol);
            }
        }
        let x = Tensor::<Flex, 4>::random([2, 4, 3, 3], Distribution::Default, &device);
        let a = normalize(&ours.valid(), x.clone()).into_data();
        a.assert_approx_eq(&burns.valid().forward(x).into_data(), tol);
    }

    /// A record of other convolutions, or of a block without its batch norm, does not fit the
    /// config's network; the config's own does.
    #[test]
    fn a_record_of_other_convolutions_does_not_fit() {
        let device = Default::default();
        let model = Cnn::<Flex>::init(&job(""), &device);
        let record = |extra: &str| Cnn::<Flex>::init(&job(extra), &device).into_record();
        assert_eq!(model.fits_record(&record("")), Ok(()));
        for (extra, needle) in [
            (
                "batch_norm = true\n",
                "the model file's convolution 1 is [2, 1, ",
            ),
            (
                "[[model.conv]]\nchannels = 2\n",
                "the model file has 2 convolutions where the config (model.conv: channels, \
                 kernel, batch_norm) gives 1",
            ),
        ] {
            let err = model.fits_record(&record(extra)).unwrap_err();
            assert!(err.contains(needle), "{extra:?}: {err}");
        }
    }

    /// A job on 8x8 images with one block, with or without `[model.augment]`.
    fn job(augment: &str) -> JobConfig {
        let text = format!(
            "task = \"classification\"\n[data]\nsource = \"idx\"\n\
             [model]\nhidden = []\ninputs = 64\noutputs = 3\nimage = [1, 8, 8]\n\
             [[model.conv]]\nchannels = 2\n{augment}[sgd]\nlr = 0.1\n"
        );
        let raw = crate::config::parse(std::path::Path::new("t.toml"), &text).unwrap();
        raw.check().unwrap()
    }

    /// Training steps see each step's own shifted and mirrored images; validation steps, and
    /// a job without augmentation, see the images as they are.
    #[test]
    fn training_steps_augment_by_the_step_seed_and_validation_does_not() {
        let device = Default::default();
        let pixels: Vec<f32> = (0..6 * 64)
            .map(|i| ((i * 37) % 101) as f32 / 100.0)
            .collect();
        let loss_of = |model: &Cnn<A>, seed: u64, training: bool| -> f32 {
            ops::dropout::seed_step::<A>(&device, seed);
            let batch = MlpBatch {
                inputs: Tensor::from_data(TensorData::new(pixels.clone(), [6, 64]), &device),
                targets: Targets::Classes(Tensor::from_data([0, 1, 2, 0, 1, 2], &device)),
            };
            model.step_output(batch, training).loss.into_scalar()
        };
        let augmented = Cnn::<A>::init(&job("[model.augment]\n"), &device);
        assert_eq!(loss_of(&augmented, 1, true), loss_of(&augmented, 1, true));
        assert_ne!(loss_of(&augmented, 1, true), loss_of(&augmented, 2, true));
        assert_eq!(loss_of(&augmented, 1, false), loss_of(&augmented, 2, false));
        let plain = Cnn::<A>::init(&job(""), &device);
        assert_eq!(loss_of(&plain, 1, true), loss_of(&plain, 2, true));
    }

    /// Training steps count the batches a batch norm has seen; the PyTorch layout writes the
    /// count as `num_batches_tracked`, an int64 scalar, and reads it back.
    #[test]
    fn batch_counts_go_out_as_pytorchs_int64_scalar_and_back() {
        let device = Default::default();
        let config = job("batch_norm = true\n");
        let model = Cnn::<A>::init(&config, &device);
        for _ in 0..3 {
            let batch = MlpBatch {
                inputs: Tensor::from_data(TensorData::new(vec![0.5f32; 2 * 64], [2, 64]), &device),
                targets: Targets::Classes(Tensor::from_data([0, 1], &device)),
            };
            model.step_output(batch, true);
        }
        // Validation runs on the inner backend, as Burn's Learner runs it: it counts nothing.
        let model = model.valid();
        model.step_output(
            MlpBatch {
                inputs: Tensor::zeros([1, 64], &device),
                targets: Targets::Classes(Tensor::from_data([0], &device)),
            },
            false,
        );
        let count = |m: &Cnn<Flex>| m.blocks[0].tracked.as_ref().unwrap().value().into_scalar();
        assert_eq!(count(&model), 3.0);
        let dir = crate::data::test_dir("batch-count");
        let path = dir.join("model.safetensors");
        let layout = crate::export::Layout::Pytorch;
        crate::export::save_safetensors(&model, &path, layout, "t").unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let tracked = file.tensor("net.1.num_batches_tracked").unwrap();
        assert_eq!(tracked.dtype(), safetensors::Dtype::I64);
        assert_eq!(
            (tracked.shape(), tracked.data()),
            (&[][..], &3i64.to_le_bytes()[..])
        );
        let fresh = Cnn::<Flex>::init(&config, &device);
        let loaded = crate::export::load_safetensors(fresh, &path, layout).unwrap();
        assert_eq!(count(&loaded), 3.0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
