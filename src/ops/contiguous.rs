//! Burn flex tensors as contiguous f32 buffers: a transposed view copied out by tiles,
//! an owned tensor reused in place.

use super::view::{tensor, view};
use burn::backend::flex::FlexTensor;
use burn::tensor::DType;

/// `t` as a contiguous tensor: itself when it is one, else a copy. The view of a transposed
/// f32 matrix (a layer turned over at one thread gives its output as one, see [`linear`]) is
/// copied by `transpose`'s tiles, where Burn's copy took 2.7 times as long (fashion-mlp,
/// Emerald Rapids).
pub(super) fn to_contiguous(t: &FlexTensor) -> FlexTensor {
    if !is_transposed_view(t) {
        return t.to_contiguous();
    }
    let l = t.layout();
    let (rows, cols) = (l.shape()[0], l.shape()[1]);
    let (p, _, _) = view(t);
    // SAFETY: t's elements (i, j) lie at p + i + j * rows: a row-major [cols, rows] matrix.
    let values = unsafe { super::transpose::transposed((p, rows as isize, 1), cols, rows, true) };
    tensor(values, rows, cols)
}

/// Whether `t` is a 2-d f32 matrix whose elements (i, j) lie at i + j * rows from its first.
pub(super) fn is_transposed_view(t: &FlexTensor) -> bool {
    let l = t.layout();
    l.num_dims() == 2
        && t.dtype() == DType::F32
        && l.shape()[0] > 1
        && l.strides() == [1, l.shape()[0] as isize]
}

/// A contiguous, uniquely owned copy (or the tensor itself, when it already is one).
pub(super) fn owned_contiguous(x: FlexTensor) -> FlexTensor {
    let layout = x.layout();
    if x.is_unique() && layout.is_contiguous() && layout.start_offset() == 0 {
        x
    } else {
        let c = to_contiguous(&x);
        if c.is_unique() {
            c
        } else {
            // `to_contiguous` may hand back shared storage; copy it out.
            let values = c.storage::<f32>()[..c.layout().num_elements()].to_vec();
            let shape = c.layout().shape().clone();
            FlexTensor::from_data(burn::tensor::TensorData::new(values, shape))
        }
    }
}

/// The first `len` values of `t`, contiguous, as a vector of their own.
pub(super) fn values(t: FlexTensor, len: usize) -> Vec<f32> {
    let (t, range) = contiguous(t, len);
    t.storage::<f32>()[range].to_vec()
}

/// `t` contiguous (a copy only when it is not), and the range of its first `len` values in its
/// storage.
pub(super) fn contiguous(t: FlexTensor, len: usize) -> (FlexTensor, std::ops::Range<usize>) {
    let t = to_contiguous(&t);
    let start = t.layout().start_offset();
    (t, start..start + len)
}
