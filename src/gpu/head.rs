//! A classifier's head forward in one launch, where its logits fit one cube's block (at most
//! `SPAN` rows and `SPAN` classes: fashion-mlp's batches of 64 rows into 10 classes): the
//! cube's units make the logits as the layer's kernel does (`linear::block_sums`, the same sums
//! in the same order), keep them in shared memory as well as writing them out, then make the
//! loss, the correct rows and the logits' gradient for a loss gradient of 1 from the shared
//! block as the loss's kernel does from a tensor (`loss::rows_loss`). Each output has the bits
//! of the layer's launch followed by the loss's; larger heads take those two launches.

use super::linear::{self, MICRO, SPAN, TILE, at, block_sums, cols, rows};
use super::loss::{self, Layout, UNITS, rows_loss};
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeRuntime, ops::numeric::empty_device};
use cubecl::prelude::*;

// The loss's sums are one unit's each of the cube's units.
const _: () = assert!(TILE * TILE == UNITS);

#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
fn head_kernel<F: Float, I: Int>(
    x: &Tensor<F>,
    w: &Tensor<F>,
    b: &Tensor<F>,
    labels: &Tensor<I>,
    z: &mut Tensor<F>,
    loss: &mut Tensor<F>,
    correct: &mut Tensor<F>,
    dz: &mut Tensor<F>,
    #[comptime] binary: bool,
) {
    let (q, span) = (comptime![MICRO], comptime![SPAN]);
    let (m, n) = (rows::<F>(x), cols::<F>(w));
    let r0 = UNIT_POS_Y as usize * q;
    let c0 = UNIT_POS_X as usize * q;
    let mut acc = Array::<F>::new(comptime![MICRO * MICRO]);
    block_sums::<F>(x, w, 0, 0, r0, c0, &mut acc);
    let mut block = SharedMemory::<F>::new(comptime![SPAN * SPAN]);
    let bs = b.stride(0);
    #[unroll]
    for a in 0..q {
        #[unroll]
        for c in 0..q {
            let (r, col) = (r0 + a, c0 + c);
            if r < m && col < n {
                let v = acc[a * q + c] + b[col * bs];
                block[r * span + col] = v;
                let o = at::<F>(z, 0, r, col);
                z[o] = v;
            }
        }
    }
    sync_cube();
    let layout = Layout {
        row: span,
        col: 1,
        cols: n,
    };
    let logits = block.to_slice();
    rows_loss::<F, I>(&logits, layout, m, labels, loss, correct, dz, binary, true);
}

/// Whether a head of `rows` rows into `classes` logits takes the one launch.
pub fn fits(rows: usize, classes: usize) -> bool {
    rows <= SPAN && classes <= SPAN
}

/// The layer `x · w + b` and its loss against `labels` (`loss::forward_with_grad`): the mean
/// loss `[1]`, the correct rows `[1]`, the logits and their gradient for a loss gradient of 1;
/// in one launch where the logits [`fits`], else in the layer's and the loss's.
pub fn forward<R: CubeRuntime>(
    x: CubeTensor<R>,
    w: CubeTensor<R>,
    b: CubeTensor<R>,
    labels: CubeTensor<R>,
    binary: bool,
) -> [CubeTensor<R>; 4] {
    let (m, n) = (x.meta.shape()[0], w.meta.shape()[1]);
    if !fits(m, n) {
        let z = linear::forward::<R>(x, w, b, linear::IDENTITY);
        let [l, c, dz] = loss::forward_with_grad::<R>(z.clone(), labels, binary);
        return [l, c, z, dz];
    }
    let (client, device) = (x.client.clone(), x.device.clone());
    let new =
        |shape: Vec<usize>| empty_device::<R, f32>(client.clone(), device.clone(), shape.into());
    let (l, c, z, dz) = (new(vec![1]), new(vec![1]), new(vec![m, n]), new(vec![m, n]));
    // SAFETY: one cube covers every logit; each unit writes its own block's logits, and each
    // row's gradient is written by the one unit that sums that row; unit 0 writes the loss.
    unsafe {
        head_kernel::launch_unchecked::<f32, i32, R>(
            &client,
            CubeCount::Static(1, 1, 1),
            linear::cube_dim(),
            x.into_tensor_arg(),
            w.into_tensor_arg(),
            b.into_tensor_arg(),
            labels.into_tensor_arg(),
            z.clone().into_tensor_arg(),
            l.clone().into_tensor_arg(),
            c.clone().into_tensor_arg(),
            dz.clone().into_tensor_arg(),
            binary,
        );
    }
    [l, c, z, dz]
}
