//! A linear layer's input gradient `dx [m, k] = dz [m, n] · wᵀ [n, k]`, for a weight `w [k, n]`.
//!
//! Why not that product as written: `wᵀ` does not run along the gemm crate's kernel rows, and
//! the crate packs such an operand one element at a time down a column, nearly every element
//! a cache miss (`ops::transpose` says why). Two ways around it, each with a transposed copy:
//! - [`Plan::CopiedWeight`]: `wᵀ` copied out (`k·n` elements), then `dz · wᵀ`;
//! - [`Plan::TurnedOver`]: the product turned over, `dxᵀ [k, m] = w [k, n] · dzᵀ [n, m]`, with
//!   `dzᵀ` copied out (`m·n`) and `dxᵀ` copied back into dx's rows (`m·k`). The crate then
//!   reads `w` along its rows as it stands.
//!
//! The plan that copies fewer elements is taken: a batch that is small against the layer turns
//! the product over (fashion-mlp's second layer: 64K elements against 262K), a large one copies
//! the weight. On an Emerald Rapids Xeon the turned-over product of that layer also ran faster
//! by itself (167-183 µs against 231-261 µs, one thread), besides skipping the 1 MB copy.
//!
//! Every plan gives the bits of the strided product. The crate sums each element over `n` in
//! chunks whose length depends only on `n` and the cache (or, when both output sides are at
//! most 64, only on `n`: symmetric in the two sides), so turning the product over keeps the
//! sums; packing and copying move values without reordering them. The copies are made only
//! for products that take the crate's blocked kernel: its other kernels, chosen by the
//! operands' strides, sum in other orders.

use crate::transpose::{transpose_to, transposed};
use crate::view::{LayerDims, ProductDims, SendView, View};
use crate::{gemm::gemm_block, products::gemm_into, products::product};

/// A weight with rows of at least this many columns is copied (one way or the other); narrower
/// rows pack without cache misses.
const COPY_COLUMNS: usize = 64;

/// Whether turning over a product of a batch of `m` rows with a weight `[k, n]` copies fewer
/// elements (the batch-sized `m·n` and `m·k`) than copying or packing the weight (`k·n`).
pub fn turning_copies_less(layer: LayerDims) -> bool {
    let (m, k, n) = (layer.batch, layer.inputs, layer.outputs);
    m * (n + k) <= k * n
}

/// How dx is computed.
enum Plan {
    /// `dz · wᵀ` through w's own view with its strides swapped.
    Strided,
    /// `dz · wᵀ` with `wᵀ` copied out row-major.
    CopiedWeight(Vec<f32>),
    /// `w · dzᵀ` with `dzᵀ` copied out row-major, the result copied back transposed.
    TurnedOver(Vec<f32>),
}

/// One input gradient, its copy made: [`prepare`] it, then [`InputGrad::write`] it.
pub struct InputGrad {
    plan: Plan,
    dz: SendView,
    w: SendView,
    /// dx is `batch x inputs`, the sum runs over `outputs`.
    layer: LayerDims,
}

/// Chooses how to compute `dz [m, n] · wᵀ` for `w [k, n]`, and makes the plan's copy, spread
/// over the pool when `split`.
///
/// # Safety
/// `dz` and `w` address `m x n` and `k x n` readable elements through their strides, for as
/// long as the result lives.
pub unsafe fn prepare(dz: View, w: View, layer: LayerDims, split: bool) -> InputGrad {
    let (m, k, n) = (layer.batch, layer.inputs, layer.outputs);
    // A column-major w (row stride 1) is wᵀ row-major already.
    let plan = if n < COPY_COLUMNS || !crate::gemm::blocked(layer.input_grad()) || w.1 == 1 {
        Plan::Strided
    } else if turning_copies_less(layer) {
        // SAFETY: forwarded from the caller.
        Plan::TurnedOver(unsafe { transposed(dz, m, n, split) })
    } else {
        // SAFETY: forwarded from the caller.
        Plan::CopiedWeight(unsafe { transposed(w, k, n, split) })
    };
    let (dz, w) = (SendView(dz), SendView(w));
    InputGrad { plan, dz, w, layer }
}

impl InputGrad {
    /// Writes dx `[m, k]` at `dst`, whose rows are `dst_rs` elements apart; spread over the
    /// pool when `split` (which needs dx's rows contiguous, `dst_rs == k`).
    ///
    /// # Safety
    /// `dst` is writable at `i * dst_rs + j` for every `i < m`, `j < k`.
    pub unsafe fn write(&self, dst: *mut f32, dst_rs: usize, split: bool) {
        let (m, k, n) = (self.layer.batch, self.layer.inputs, self.layer.outputs);
        let dims = self.layer.input_grad();
        assert!(
            !split || dst_rs == k,
            "a split input gradient has contiguous rows"
        );
        let identity = crate::Activation::Identity;
        let serial = gemm::Parallelism::None;
        let (dz, w) = (self.dz.get(), self.w.get());
        // SAFETY (every arm): `dst` as the caller vouches; the views address dz, w or this
        // plan's copy.
        let rhs = match &self.plan {
            Plan::Strided => (w.0, w.2, w.1),
            Plan::CopiedWeight(w_t) => (w_t.as_ptr(), k as isize, 1),
            Plan::TurnedOver(dz_t) => unsafe {
                let dz_t = (dz_t.as_ptr(), m as isize, 1);
                let turned = ProductDims {
                    rows: k,
                    cols: m,
                    inner: n,
                };
                let dx_t = product(turned, w, dz_t, split);
                return transpose_to((dx_t.as_ptr(), m as isize, 1), k, m, (dst, dst_rs), split);
            },
        };
        #[cfg(target_arch = "x86_64")]
        if !split && crate::short_sums::applies(dims, (dz, rhs)) {
            let (dst, operands) = ((dst, dst_rs), (dz, rhs));
            return unsafe { crate::short_sums::product_into(dst, dims, false, operands, false) };
        }
        match split {
            true => unsafe { gemm_into(dst, dims, false, (dz, rhs), identity, true) },
            false => unsafe { gemm_block(dst, dst_rs, dims, false, (dz, rhs), identity, serial) },
        }
    }

    /// Whether the plan copies w, turns the product over, or neither (for the tests).
    #[cfg(any(test, feature = "testing"))]
    pub fn kind(&self) -> &'static str {
        match self.plan {
            Plan::Strided => "strided",
            Plan::CopiedWeight(_) => "copied weight",
            Plan::TurnedOver(_) => "turned over",
        }
    }
}
