//! ember's kernels as custom operations of Burn's fusion stream. On `Fusion<CubeBackend>`
//! (Burn's CUDA and wgpu backends) a tensor is a promise of the stream; an operation of ember's
//! joins the stream as Burn's own do, so that it runs in order with them, and reads and writes
//! the `CubeBackend` tensors once the stream gets to it (as `burn-vision` registers its own).
//! Burn's fusion never fuses across such an operation: what comes before and after it closes
//! its fused blocks.

use burn::backend::ir::{CustomOpIr, HandleContainer, OperationIr, TensorIr};
use burn::tensor::{DType, Shape};
use burn_fusion::stream::{Operation, OperationStreams};
use burn_fusion::{FusionBackend, FusionRuntime, FusionTensor};

/// The stream's handles of `B`'s tensors.
pub type Handles<B> =
    HandleContainer<<<B as FusionBackend>::FusionRuntime as FusionRuntime>::FusionHandle>;

/// What an operation does once the stream reaches it: read its inputs (the first list of
/// `TensorIr`s) from the handles, launch its kernels, register its outputs (the second).
pub type Run<B> = Box<dyn Fn(&[TensorIr], &[TensorIr], &mut Handles<B>) + Send + Sync>;

struct Custom<B: FusionBackend> {
    desc: CustomOpIr,
    run: Run<B>,
}

impl<B: FusionBackend> std::fmt::Debug for Custom<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ember::{}", self.desc.id)
    }
}

impl<B: FusionBackend> Operation<B::FusionRuntime> for Custom<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        (self.run)(&self.desc.inputs, &self.desc.outputs, handles);
    }
}

/// Registers the operation `name` on `inputs` (consumed, as Burn's operations consume
/// theirs), with f32 outputs of `shapes`; returns the outputs.
pub fn register<B: FusionBackend>(
    name: &'static str,
    inputs: Vec<FusionTensor<B::FusionRuntime>>,
    shapes: Vec<Shape>,
    run: Run<B>,
) -> Vec<FusionTensor<B::FusionRuntime>> {
    let client = inputs[0].client.clone();
    let streams = OperationStreams::with_inputs(inputs.iter());
    let outputs: Vec<TensorIr> = (shapes.into_iter())
        .map(|shape| TensorIr::uninit(client.create_empty_handle(), shape, DType::F32))
        .collect();
    let inputs: Vec<TensorIr> = inputs.into_iter().map(FusionTensor::into_ir).collect();
    let desc = CustomOpIr::new(name, &inputs, &outputs);
    let repr = OperationIr::Custom(desc.clone());
    client.register(streams, repr, Custom::<B> { desc, run })
}
