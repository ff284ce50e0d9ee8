//! A trained network's weights and what its head does, read off the model as plain arrays on
//! the host: what `ember export --format onnx` writes into its graph (`crate::onnx`).

use crate::config::{Activation, Pooling, Task};

/// One linear layer on the host: `weight` `[inputs, outputs]` row-major (Burn's layout).
#[derive(Debug, Clone)]
pub struct Layer {
    pub inputs: usize,
    pub outputs: usize,
    pub weight: Vec<f32>,
    pub bias: Vec<f32>,
}

/// An MLP's layers and what its head does.
#[derive(Debug, Clone)]
pub struct MlpNet {
    pub layers: Vec<Layer>,
    pub activation: Activation,
    pub task: Task,
    /// Class names, or target columns.
    pub names: Vec<String>,
    /// The tables of embedded columns and where their rows go, when there are any.
    pub lookup: Option<Lookup>,
}

/// Embedded columns (`model::embed`): the plan of the first layer's inputs and each table,
/// `[rows, width]` row-major.
#[derive(Debug, Clone)]
pub struct Lookup {
    pub plan: super::embed::Plan,
    pub tables: Vec<(usize, usize, Vec<f32>)>,
}

/// One convolution block on the host: `weight` `[outputs, inputs, kernel, kernel]` (PyTorch's
/// and Burn's layout), then batch norm, the activation and a max-pool of `pool` (1: none).
#[derive(Debug, Clone)]
pub struct ConvLayer {
    pub inputs: usize,
    pub outputs: usize,
    pub kernel: usize,
    pub stride: usize,
    pub padding: usize,
    pub pool: usize,
    pub weight: Vec<f32>,
    pub bias: Vec<f32>,
    pub norm: Option<Norm>,
}

/// A batch norm's learned scale and shift and its running statistics.
#[derive(Debug, Clone)]
pub struct Norm {
    pub scale: Vec<f32>,
    pub shift: Vec<f32>,
    pub mean: Vec<f32>,
    pub var: Vec<f32>,
    pub epsilon: f64,
}

/// A trained network's weights and what its head does, read off the model for export.
#[derive(Debug, Clone)]
pub enum Network {
    Mlp(MlpNet),
    /// Convolution blocks on `[channels, height, width]` images, pooled, then an MLP.
    Cnn {
        image: [usize; 3],
        blocks: Vec<ConvLayer>,
        pooling: Pooling,
        mlp: MlpNet,
    },
    /// linear-scalar: `x @ weight + p * f`.
    LinearScalar {
        weight: Vec<f32>,
        p: f32,
    },
}
