//! `Flex`'s tensors as the kernels' raw views (`ember_kernels::view`, re-exported here): a 2-d
//! tensor's sizes and view, a replica's matrix in a stacked tensor, and a tensor from a buffer.

use burn::backend::flex::FlexTensor;
pub(crate) use ember_kernels::view::*;

/// Rows and columns of a 2-d tensor.
pub(super) fn dims(t: &FlexTensor) -> (usize, usize) {
    let s = t.layout().shape();
    assert_eq!(s.num_dims(), 2, "ember's linear takes 2-d tensors");
    (s[0], s[1])
}

/// (row stride, column stride) in elements, and the first element.
pub(super) fn view(t: &FlexTensor) -> (*const f32, isize, isize) {
    let strides = t.layout().strides();
    let base = t.storage::<f32>().as_ptr();
    // SAFETY: the layout's offset lies inside the tensor's storage.
    let ptr = unsafe { base.add(t.layout().start_offset()) };
    (ptr, strides[0], strides[1])
}

pub(super) fn tensor(values: Vec<f32>, rows: usize, cols: usize) -> FlexTensor {
    FlexTensor::from_data(burn::tensor::TensorData::new(values, [rows, cols]))
}

/// Replica `r`'s `[rows, cols]` matrix in a stacked `[K, rows, cols]` tensor, or the tensor
/// itself when it is a 2-d one that every replica shares.
pub(super) fn replica_view(t: &FlexTensor, r: usize) -> (*const f32, isize, isize) {
    let strides = t.layout().strides();
    if strides.len() == 2 {
        return view(t);
    }
    let base = t.storage::<f32>().as_ptr();
    let offset = t.layout().start_offset() as isize + r as isize * strides[0];
    // SAFETY: replica r's first element lies inside the tensor's storage.
    (unsafe { base.offset(offset) }, strides[1], strides[2])
}
