//! Raw views of f32 matrices for the CPU kernels: a pointer with its row and column strides
//! ([`View`]), pointers that may cross to the pool's threads ([`SendPtr`], [`SendView`]), the
//! sizes of a product and of a linear layer ([`ProductDims`], [`LayerDims`]), uninitialised
//! buffers, and a tensor from a buffer. Imports nothing else of ember.

use burn::backend::flex::FlexTensor;
use std::mem::MaybeUninit;

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

/// A matrix product's sizes: `dst [rows, cols] = lhs [rows, inner] · rhs [inner, cols]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ProductDims {
    pub rows: usize,
    pub cols: usize,
    /// The length of each output's sum.
    pub inner: usize,
}

impl ProductDims {
    /// Multiply-adds: the product's work.
    pub(super) fn work(self) -> usize {
        self.rows * self.cols * self.inner
    }
}

#[cfg(test)]
impl ProductDims {
    /// The sizes as the tests' tables list them, `(m, n, k)`: `m x k · k x n`.
    pub(super) fn mnk((rows, cols, inner): (usize, usize, usize)) -> Self {
        ProductDims { rows, cols, inner }
    }
}

/// A linear layer's sizes: `x [batch, inputs] · w [inputs, outputs]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct LayerDims {
    pub batch: usize,
    pub inputs: usize,
    pub outputs: usize,
}

impl LayerDims {
    /// The forward product, `y = x · w`.
    pub(super) fn forward(self) -> ProductDims {
        let (rows, cols, inner) = (self.batch, self.outputs, self.inputs);
        ProductDims { rows, cols, inner }
    }

    /// The input gradient's product, `dx = dz · wᵀ`.
    pub(super) fn input_grad(self) -> ProductDims {
        let (rows, cols, inner) = (self.batch, self.inputs, self.outputs);
        ProductDims { rows, cols, inner }
    }

    /// The weight gradient's product, `dw = xᵀ · dz`.
    pub(super) fn weight_grad(self) -> ProductDims {
        let (rows, cols, inner) = (self.inputs, self.outputs, self.batch);
        ProductDims { rows, cols, inner }
    }
}

/// A strided matrix: its first element, row stride and column stride, in elements.
pub(super) type View = (*const f32, isize, isize);

/// A destination that crosses into the pool's threads: each writes its own columns.
#[derive(Clone, Copy)]
pub(super) struct SendPtr(pub(super) *mut f32);
// SAFETY: the blocks write disjoint elements of a buffer that outlives the parallel loop.
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

impl SendPtr {
    /// The pointer; a method, so that a closure captures the whole `SendPtr`, not its field.
    pub(super) fn get(self) -> *mut f32 {
        self.0
    }
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

/// A raw view that crosses into the pool's threads: each writes its own replica's slice.
#[derive(Clone, Copy)]
pub(super) struct SendView(pub(super) (*const f32, isize, isize));
// SAFETY: the views point into tensors that outlive the parallel loop and are only read.
unsafe impl Send for SendView {}
unsafe impl Sync for SendView {}

impl SendView {
    /// The view; a method, so that a closure captures the whole `SendView`, not its field.
    pub(super) fn get(self) -> (*const f32, isize, isize) {
        self.0
    }
}

/// Tiles of at most `widest` columns over `n` columns, as even as their number allows (20 as 10
/// and 10, not 12 and 8): each tile's first column and width, in order.
#[cfg(target_arch = "x86_64")]
pub(super) fn even_tiles(n: usize, widest: usize) -> impl Iterator<Item = (usize, usize)> {
    let tiles = n.div_ceil(widest);
    (0..tiles).scan(0, move |col, t| {
        let (first, cols) = (*col, (n - *col).div_ceil(tiles - t));
        *col += cols;
        Some((first, cols))
    })
}

/// A buffer of `len` floats for a kernel that writes every element before any is read.
pub(super) fn uninit(len: usize) -> Vec<MaybeUninit<f32>> {
    let mut v = Vec::with_capacity(len);
    // SAFETY: the capacity is `len`, and `MaybeUninit` elements need no initialisation.
    unsafe { v.set_len(len) };
    v
}

/// The floats of a buffer from [`uninit`].
///
/// # Safety
/// Every element has been written.
pub(super) unsafe fn assume_init(v: Vec<MaybeUninit<f32>>) -> Vec<f32> {
    let mut v = std::mem::ManuallyDrop::new(v);
    let (ptr, len, cap) = (v.as_mut_ptr().cast::<f32>(), v.len(), v.capacity());
    // SAFETY: same allocation, layout and length; the caller vouches for the elements.
    unsafe { Vec::from_raw_parts(ptr, len, cap) }
}
