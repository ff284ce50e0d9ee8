//! A classifier's loss on the GPU, one launch each way: the cross-entropy of classes, as Burn's
//! `CrossEntropyLoss` (log-softmax, the label's term, the mean over rows), or, for a binary
//! classifier's one logit `z` and 0/1 label `y`, as its `BinaryCrossEntropyLoss` with logits
//! (`max(z, 0) - z·y + ln(1 + exp(-|z|))`, its stable form).
//! - forward: each row's loss and whether it is predicted right (the first largest logit is
//!   the label's, as `argmax`; for a binary classifier, `z > 0` exactly when `y` is 1), summed
//!   by one cube in a fixed order into the mean loss and the correct count;
//! - backward: `(softmax(z) - onehot(label)) · grad / rows` (binary: `(sigmoid(z) - y) · grad
//!   / rows`), a unit per row; or, for a classifier's head (`ops::classifier_head`), made by
//!   the forward for `grad` 1 and scaled where the output layer's backward reads it.

use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeRuntime, ops::numeric::empty_device};
use cubecl::prelude::*;

pub(super) const UNITS: usize = 256;

/// Where a row's logits lie: element `j` of row `r` at `r * row + j * col` of a slice (a
/// tensor's strides, or a cube's shared block), `cols` of them.
#[derive(CubeType, Clone, Copy)]
pub(super) struct Layout {
    pub row: usize,
    pub col: usize,
    pub cols: usize,
}

/// The first index of row `r`'s largest logit.
#[cube]
fn row_argmax<F: Float>(z: &Slice<F>, at: Layout, r: usize) -> usize {
    let base = r * at.row;
    let mut best = z[base];
    let mut arg = 0;
    for j in 1..at.cols {
        let v = z[base + j * at.col];
        if v > best {
            best = v;
            arg = j;
        }
    }
    arg
}

/// `ln Σ exp(z - max)` of row `r`.
#[cube]
fn row_log_sum<F: Float>(z: &Slice<F>, at: Layout, r: usize, max: F) -> F {
    let base = r * at.row;
    let mut sum = F::new(0.0);
    for j in 0..at.cols {
        sum += F::exp(z[base + j * at.col] - max);
    }
    F::ln(sum)
}

/// One level of the cube's sum: the first `half` units add the next `half`'s figures.
#[cube]
fn fold<F: Float>(
    losses: &mut SharedMemory<F>,
    hits: &mut SharedMemory<F>,
    u: usize,
    #[comptime] half: usize,
) {
    if u < half {
        losses[u] = losses[u] + losses[u + half];
        hits[u] = hits[u] + hits[u + half];
    }
    sync_cube();
}

/// Row `r`'s binary cross-entropy on its logit `v` against its 0/1 label `y`.
#[cube]
fn binary_row_loss<F: Float>(v: F, y: F) -> F {
    F::max(v, F::new(0.0)) - v * y + F::ln(F::new(1.0) + F::exp(-F::abs(v)))
}

/// 1 where logit `v` is on its label `y`'s side of 0 (`v > 0` exactly when `y` is 1), else 0.
#[cube]
fn binary_row_hit<F: Float>(v: F, y: F) -> F {
    let positive = if v > F::new(0.0) {
        F::new(1.0)
    } else {
        F::new(0.0)
    };
    if positive == y {
        F::new(1.0)
    } else {
        F::new(0.0)
    }
}

/// Row `r`'s gradient of the loss at `scale` (the loss's gradient over the rows):
/// `(sigmoid(v) - y) · scale` (binary) or `(softmax(z) - onehot(label)) · scale`, `lse` the
/// row's log-sum-exp.
#[cube]
#[allow(clippy::too_many_arguments)]
fn row_grad<F: Float>(
    z: &Slice<F>,
    at: Layout,
    dz: &mut Tensor<F>,
    r: usize,
    label: usize,
    y: F,
    lse: F,
    scale: F,
    #[comptime] binary: bool,
) {
    if binary {
        let p = F::new(1.0) / (F::new(1.0) + F::exp(-z[r * at.row]));
        dz[r * dz.stride(0)] = (p - y) * scale;
    } else {
        for j in 0..at.cols {
            let p = F::exp(z[r * at.row + j * at.col] - lse);
            let hit = if j == label { F::new(1.0) } else { F::new(0.0) };
            dz[r * dz.stride(0) + j * dz.stride(1)] = (p - hit) * scale;
        }
    }
}

/// Row `r`'s label (a class), its log-sum-exp and the first index of its largest logit; or,
/// for a binary classifier, its 0/1 label as a float (second).
#[cube]
fn row_terms<F: Float, I: Int>(
    z: &Slice<F>,
    at: Layout,
    labels: &Tensor<I>,
    r: usize,
    #[comptime] binary: bool,
) -> (usize, F, F, usize) {
    let raw = labels[r * labels.stride(0)];
    if binary {
        (0, F::cast_from(raw), F::new(0.0), 0)
    } else {
        let best = row_argmax::<F>(z, at, r);
        let max = z[r * at.row + best * at.col];
        let lse = max + row_log_sum::<F>(z, at, r, max);
        (usize::cast_from(raw), F::new(0.0), lse, best)
    }
}

/// The mean loss and the correct rows of the `rows` rows of logits in `z` (laid out as `at`),
/// summed by the cube's units in a fixed order into `loss[0]` and `correct[0]`; with
/// `with_grad`, each row's gradient for a loss gradient of 1 into `dz` too.
#[cube]
#[allow(clippy::too_many_arguments)]
pub(super) fn rows_loss<F: Float, I: Int>(
    z: &Slice<F>,
    at: Layout,
    rows: usize,
    labels: &Tensor<I>,
    loss: &mut Tensor<F>,
    correct: &mut Tensor<F>,
    dz: &mut Tensor<F>,
    #[comptime] binary: bool,
    #[comptime] with_grad: bool,
) {
    let units = comptime![UNITS];
    let u = UNIT_POS as usize;
    let mut losses = SharedMemory::<F>::new(units);
    let mut hits = SharedMemory::<F>::new(units);
    let mut l = F::new(0.0);
    let mut h = F::new(0.0);
    // The gradient's scale for a loss gradient of 1, as the backward kernel makes it.
    let unit = F::new(1.0) / F::cast_from(rows);
    let mut r = u;
    while r < rows {
        let (label, y, lse, best) = row_terms::<F, I>(z, at, labels, r, binary);
        if binary {
            let v = z[r * at.row];
            l += binary_row_loss::<F>(v, y);
            h += binary_row_hit::<F>(v, y);
        } else {
            l += lse - z[r * at.row + label * at.col];
            h += if best == label {
                F::new(1.0)
            } else {
                F::new(0.0)
            };
        }
        if with_grad {
            row_grad::<F>(z, at, dz, r, label, y, lse, unit, binary);
        }
        r += units;
    }
    losses[u] = l;
    hits[u] = h;
    sync_cube();
    #[unroll]
    for level in 1..comptime![UNITS.trailing_zeros() as usize + 1] {
        fold::<F>(&mut losses, &mut hits, u, comptime![UNITS >> level]);
    }
    if u == 0 {
        loss[0] = losses[0] / F::cast_from(rows);
        correct[0] = hits[0];
    }
}

/// The layout of a tensor of logits `[rows, classes]` (or `[rows, 1]`).
#[cube]
fn tensor_layout<F: Float>(z: &Tensor<F>) -> Layout {
    Layout {
        row: z.stride(0),
        col: z.stride(1),
        cols: z.shape(1),
    }
}

#[cube(launch_unchecked)]
fn forward_kernel<F: Float, I: Int>(
    z: &Tensor<F>,
    labels: &Tensor<I>,
    loss: &mut Tensor<F>,
    correct: &mut Tensor<F>,
    dz: &mut Tensor<F>,
    #[comptime] binary: bool,
    #[comptime] with_grad: bool,
) {
    let at = tensor_layout::<F>(z);
    let z_rows = z.shape(0);
    rows_loss::<F, I>(
        &z.to_slice(),
        at,
        z_rows,
        labels,
        loss,
        correct,
        dz,
        binary,
        with_grad,
    );
}

#[cube(launch_unchecked)]
fn backward_kernel<F: Float, I: Int>(
    z: &Tensor<F>,
    labels: &Tensor<I>,
    grad: &Tensor<F>,
    dz: &mut Tensor<F>,
    #[comptime] binary: bool,
) {
    let rows = z.shape(0);
    let r = ABSOLUTE_POS;
    let scale = grad[0] / F::cast_from(rows);
    if r < rows {
        let at = tensor_layout::<F>(z);
        let zs = z.to_slice();
        let (label, y, lse, _) = row_terms::<F, I>(&zs, at, labels, r, binary);
        row_grad::<F>(&zs, at, dz, r, label, y, lse, scale, binary);
    }
}

/// The mean cross-entropy `[1]` of `logits` `[rows, classes]` against `labels` `[rows]`, and
/// the count `[1]` of rows whose first largest logit is their label's; with `binary`, of one
/// logit per row against 0/1 `labels` `[rows, 1]`.
pub fn forward<R: CubeRuntime>(
    logits: CubeTensor<R>,
    labels: CubeTensor<R>,
    binary: bool,
) -> (CubeTensor<R>, CubeTensor<R>) {
    let (loss, correct, _) = forward_with(logits, labels, binary, false);
    (loss, correct)
}

/// [`forward`], and the logits' gradient for a loss gradient of 1 (what [`backward`] gives
/// for `grad` 1, bit for bit), in the same launch.
pub fn forward_with_grad<R: CubeRuntime>(
    logits: CubeTensor<R>,
    labels: CubeTensor<R>,
    binary: bool,
) -> [CubeTensor<R>; 3] {
    let (loss, correct, dz) = forward_with(logits, labels, binary, true);
    [loss, correct, dz]
}

fn forward_with<R: CubeRuntime>(
    logits: CubeTensor<R>,
    labels: CubeTensor<R>,
    binary: bool,
    with_grad: bool,
) -> (CubeTensor<R>, CubeTensor<R>, CubeTensor<R>) {
    let (client, device) = (logits.client.clone(), logits.device.clone());
    let loss = empty_device::<R, f32>(client.clone(), device.clone(), [1].into());
    let correct = empty_device::<R, f32>(client.clone(), device.clone(), [1].into());
    // Without the gradient, a one-element stand-in the kernel never touches.
    let dz_shape = match with_grad {
        true => logits.meta.shape().clone(),
        false => [1].into(),
    };
    let dz = empty_device::<R, f32>(client.clone(), device, dz_shape);
    // SAFETY: each row's reads and writes are inside its row; the one cube writes element 0 of
    // the loss and the count.
    unsafe {
        forward_kernel::launch_unchecked::<f32, i32, R>(
            &client,
            CubeCount::Static(1, 1, 1),
            CubeDim::new_1d(UNITS as u32),
            logits.into_tensor_arg(),
            labels.into_tensor_arg(),
            loss.clone().into_tensor_arg(),
            correct.clone().into_tensor_arg(),
            dz.clone().into_tensor_arg(),
            binary,
            with_grad,
        );
    }
    (loss, correct, dz)
}

/// The gradient of [`forward`]'s loss with respect to the logits, for the loss's gradient
/// `grad` `[1]`.
pub fn backward<R: CubeRuntime>(
    logits: CubeTensor<R>,
    labels: CubeTensor<R>,
    grad: CubeTensor<R>,
    binary: bool,
) -> CubeTensor<R> {
    let rows = logits.meta.shape()[0];
    let (client, device) = (logits.client.clone(), logits.device.clone());
    let dz = empty_device::<R, f32>(client.clone(), device, logits.meta.shape().clone());
    let count = CubeCount::Static(rows.div_ceil(UNITS) as u32, 1, 1);
    // SAFETY: a unit per row, each inside its row.
    unsafe {
        backward_kernel::launch_unchecked::<f32, i32, R>(
            &client,
            count,
            CubeDim::new_1d(UNITS as u32),
            logits.into_tensor_arg(),
            labels.into_tensor_arg(),
            grad.into_tensor_arg(),
            dz.clone().into_tensor_arg(),
            binary,
        );
    }
    dz
}
