//! Element-wise passes on `Flex`'s tensors: a kernel of `ember_kernels::elementwise` over a
//! tensor's storage (on a private copy when the tensor is shared).

use super::contiguous::{owned_contiguous, to_contiguous};
use burn::backend::flex::FlexTensor;
use burn::tensor::DType;
pub(crate) use ember_kernels::elementwise::*;

/// Applies `f` to the elements of `x` in place (on a private copy when `x` is shared).
pub fn map_f32(x: FlexTensor, f: impl Fn(&mut [f32])) -> FlexTensor {
    assert_eq!(
        x.dtype(),
        DType::F32,
        "ember's CPU kernels take f32 tensors"
    );
    let mut x = owned_contiguous(x);
    let n = x.layout().num_elements();
    f(&mut x.storage_mut::<f32>()[..n]);
    x
}

/// `f(a, b)` element-wise into `a`'s storage; both tensors have the same shape.
pub fn zip_f32(a: FlexTensor, b: FlexTensor, f: impl Fn(&mut [f32], &[f32])) -> FlexTensor {
    assert_eq!(a.layout().shape(), b.layout().shape(), "shapes differ");
    let b = if b.layout().is_contiguous() && b.layout().start_offset() == 0 {
        b
    } else {
        to_contiguous(&b)
    };
    let mut a = owned_contiguous(a);
    let n = a.layout().num_elements();
    f(&mut a.storage_mut::<f32>()[..n], &b.storage::<f32>()[..n]);
    a
}
