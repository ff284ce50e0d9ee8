//! ember's CPU kernels: plain functions on `f32` slices and strided views, with no tensor type
//! and nothing of ember's. ember's `ops` module calls them on the storage of Burn's CPU tensors.
//!
//! - products (`products::gemm_into`): the `gemm` crate (Burn's CPU backend's multiply) in
//!   blocks over the pool, and ember's own x86 kernels where a shape suits them
//!   (`vector_products`, `long_sums`, `short_sums`, `tall_products`), each giving the crate's
//!   bits; a linear layer's input gradient (`input_grad`), transposes, column and channel sums,
//!   row dot products;
//! - element-wise passes (`elementwise`): activations and their derivatives, dropout masks,
//!   row fills, compiled for each SIMD level and picked at run time (the [`dispatch!`] macro);
//!   vectorised `tanh` (`vector_libm`);
//! - the optimizers' updates (`optimizers`), with subnormals flushed (`subnormals`);
//! - the SIMD probe and the numerics key (`simd`);
//! - raw views and the sizes of a product and of a layer (`view`), the leaf every other
//!   module builds on.
//!
//! Every kernel that promises the bits of another computation is tested against it bit for bit
//! (`cargo test -p ember-kernels`); `testing` holds the helpers those tests share.

pub mod channel_sums;
#[cfg(target_arch = "x86_64")]
pub mod column_sums;
pub mod elementwise;
pub mod gemm;
pub mod input_grad;
#[cfg(target_arch = "x86_64")]
pub mod long_sums;
pub mod optimizers;
pub mod products;
pub mod row_dots;
#[cfg(target_arch = "x86_64")]
pub mod short_sums;
pub mod simd;
pub mod subnormals;
#[cfg(target_arch = "x86_64")]
pub mod tall_products;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(test)]
mod tests;
pub mod transpose;
#[cfg(target_arch = "x86_64")]
pub mod vector_libm;
#[cfg(target_arch = "x86_64")]
pub mod vector_products;
pub mod view;

/// The activation a product's output passes through (a linear layer's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    Identity,
    Relu,
    Tanh,
}

/// One Adam update's hyper-parameters (the learning rate aside); `time` counts steps from 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamStep {
    pub beta1: f32,
    pub beta2: f32,
    pub epsilon: f32,
    pub time: usize,
}

impl AdamStep {
    /// `sqrt(1 - beta2^t) / (1 - beta1^t)` and `epsilon * sqrt(1 - beta2^t)`: Burn's (and, up to
    /// rounding, PyTorch's) bias correction folded into two constants.
    pub fn corrections(&self) -> (f32, f32) {
        let t = self.time as i32;
        let bc2 = (1.0 - self.beta2.powi(t)).sqrt();
        (bc2 / (1.0 - self.beta1.powi(t)), self.epsilon * bc2)
    }
}
