//! Raw views of f32 matrices for the kernels: a pointer with its row and column strides
//! ([`View`]), pointers that may cross to the pool's threads ([`SendPtr`], [`SendView`]), the
//! sizes of a product and of a linear layer ([`ProductDims`], [`LayerDims`]), and
//! uninitialised buffers. Imports nothing else of the crate.

use std::mem::MaybeUninit;

/// A matrix product's sizes: `dst [rows, cols] = lhs [rows, inner] · rhs [inner, cols]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProductDims {
    pub rows: usize,
    pub cols: usize,
    /// The length of each output's sum.
    pub inner: usize,
}

impl ProductDims {
    /// Multiply-adds: the product's work.
    pub fn work(self) -> usize {
        self.rows * self.cols * self.inner
    }
}

#[cfg(any(test, feature = "testing"))]
impl ProductDims {
    /// The sizes as the tests' tables list them, `(m, n, k)`: `m x k · k x n`.
    pub fn mnk((rows, cols, inner): (usize, usize, usize)) -> Self {
        ProductDims { rows, cols, inner }
    }
}

/// A linear layer's sizes: `x [batch, inputs] · w [inputs, outputs]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerDims {
    pub batch: usize,
    pub inputs: usize,
    pub outputs: usize,
}

impl LayerDims {
    /// The forward product, `y = x · w`.
    pub fn forward(self) -> ProductDims {
        let (rows, cols, inner) = (self.batch, self.outputs, self.inputs);
        ProductDims { rows, cols, inner }
    }

    /// The input gradient's product, `dx = dz · wᵀ`.
    pub fn input_grad(self) -> ProductDims {
        let (rows, cols, inner) = (self.batch, self.inputs, self.outputs);
        ProductDims { rows, cols, inner }
    }

    /// The weight gradient's product, `dw = xᵀ · dz`.
    pub fn weight_grad(self) -> ProductDims {
        let (rows, cols, inner) = (self.inputs, self.outputs, self.batch);
        ProductDims { rows, cols, inner }
    }
}

/// A strided matrix: its first element, row stride and column stride, in elements.
pub type View = (*const f32, isize, isize);

/// A destination that crosses into the pool's threads: each writes its own columns.
#[derive(Clone, Copy)]
pub struct SendPtr(pub *mut f32);
// SAFETY: the blocks write disjoint elements of a buffer that outlives the parallel loop.
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

impl SendPtr {
    /// The pointer; a method, so that a closure captures the whole `SendPtr`, not its field.
    pub fn get(self) -> *mut f32 {
        self.0
    }
}

/// A raw view that crosses into the pool's threads: each writes its own replica's slice.
#[derive(Clone, Copy)]
pub struct SendView(pub (*const f32, isize, isize));
// SAFETY: the views point into tensors that outlive the parallel loop and are only read.
unsafe impl Send for SendView {}
unsafe impl Sync for SendView {}

impl SendView {
    /// The view; a method, so that a closure captures the whole `SendView`, not its field.
    pub fn get(self) -> (*const f32, isize, isize) {
        self.0
    }
}

/// Tiles of at most `widest` columns over `n` columns, as even as their number allows (20 as 10
/// and 10, not 12 and 8): each tile's first column and width, in order.
#[cfg(target_arch = "x86_64")]
pub fn even_tiles(n: usize, widest: usize) -> impl Iterator<Item = (usize, usize)> {
    let tiles = n.div_ceil(widest);
    (0..tiles).scan(0, move |col, t| {
        let (first, cols) = (*col, (n - *col).div_ceil(tiles - t));
        *col += cols;
        Some((first, cols))
    })
}

/// A buffer of `len` floats for a kernel that writes every element before any is read.
pub fn uninit(len: usize) -> Vec<MaybeUninit<f32>> {
    let mut v = Vec::with_capacity(len);
    // SAFETY: the capacity is `len`, and `MaybeUninit` elements need no initialisation.
    unsafe { v.set_len(len) };
    v
}

/// The floats of a buffer from [`uninit`].
///
/// # Safety
/// Every element has been written.
pub unsafe fn assume_init(v: Vec<MaybeUninit<f32>>) -> Vec<f32> {
    let mut v = std::mem::ManuallyDrop::new(v);
    let (ptr, len, cap) = (v.as_mut_ptr().cast::<f32>(), v.len(), v.capacity());
    // SAFETY: same allocation, layout and length; the caller vouches for the elements.
    unsafe { Vec::from_raw_parts(ptr, len, cap) }
}
