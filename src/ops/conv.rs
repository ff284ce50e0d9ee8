//! 2-d convolution on the CPU: per image, the patches laid out as columns (im2col) and one
//! product with the weights, on the `gemm` crate. Burn's flex convolution does the same
//! forward, but its weight gradient goes through strided copies of the whole batch
//! (`swap_dims` then `to_contiguous`, an element-by-element walk) and its input gradient
//! through a transposed convolution one image at a time: in a small CNN's profile the copies
//! took a fifth of the step and the products a sixth.
//!
//! Here each image's column buffer stays in its thread (a few hundred KiB), the input gradient
//! is one product and a scatter back per image, and the weight and bias gradients are summed
//! over fixed chunks of images, then across chunks in order: the same bits at any thread count,
//! as the resumed runs need.

use super::Activation;
use super::row_dots;
use super::transpose::transpose_into;
use super::view::{ProductDims, assume_init, uninit};
use super::{contiguous::contiguous, gemm::gemm_block};
use burn::backend::flex::FlexTensor;
use burn::tensor::TensorData;
use rayon::prelude::*;

/// Images per chunk of the weight gradient's sum (fixed, so the sum's order is too).
const CHUNK_IMAGES: usize = 8;

/// The sizes of one convolution: `x` `[n, cin, h, w]`, weights `[cout, cin, k, k]`, output
/// `[n, cout, oh, ow]`.
#[derive(Debug, Clone, Copy)]
struct Geometry {
    n: usize,
    cin: usize,
    h: usize,
    w: usize,
    cout: usize,
    k: usize,
    stride: usize,
    pad: usize,
    oh: usize,
    ow: usize,
}

impl Geometry {
    fn of(x: &FlexTensor, weight: &FlexTensor, stride: usize, pad: usize) -> Self {
        let (xs, ws) = (x.layout().shape(), weight.layout().shape());
        let (n, cin, cout, k) = (xs[0], xs[1], ws[0], ws[2]);
        Self::sized([n, cin, xs[2], xs[3]], cout, k, (stride, pad))
    }

    /// The geometry of `cout` k×k kernels over `[n, cin, h, w]` maps at `stride` and `pad`.
    fn sized(
        [n, cin, h, w]: [usize; 4],
        cout: usize,
        k: usize,
        (stride, pad): (usize, usize),
    ) -> Self {
        Self {
            n,
            cin,
            h,
            w,
            cout,
            k,
            stride,
            pad,
            oh: (h + 2 * pad - k) / stride + 1,
            ow: (w + 2 * pad - k) / stride + 1,
        }
    }

    /// Whether the output maps have the input's size at stride 1 ("same" padding, an odd
    /// kernel): then each of im2col's rows is the input plane shifted.
    fn keeps_size(&self) -> bool {
        self.stride == 1 && 2 * self.pad + 1 == self.k
    }

    /// Rows of the column buffer: one per (input channel, kernel row, kernel column).
    fn patch(&self) -> usize {
        self.cin * self.k * self.k
    }

    fn out_pixels(&self) -> usize {
        self.oh * self.ow
    }

    fn image(&self) -> usize {
        self.cin * self.h * self.w
    }

    /// The output columns `lo..hi` whose input column `ox·stride + kx - pad` lies inside the
    /// image.
    fn inside(&self, kx: usize) -> (usize, usize) {
        let s = self.stride;
        let lo = self.pad.saturating_sub(kx).div_ceil(s).min(self.ow);
        let end = self.w + self.pad;
        let hi = if end > kx {
            ((end - kx - 1) / s + 1).min(self.ow)
        } else {
            0
        };
        (lo, hi.max(lo))
    }

    /// Calls `f(column row, output row, input offset or None, lo, hi)` for every row of the
    /// column buffer and every output row: the input row's first element when it is inside the
    /// image (output columns `lo..hi` read it), or `None` for a row of zeros.
    fn walk(&self, mut f: impl FnMut(usize, usize, Option<usize>, (usize, usize))) {
        let k = self.k;
        for c in 0..self.cin {
            for ky in 0..k {
                for kx in 0..k {
                    let row = (c * k + ky) * k + kx;
                    let span = self.inside(kx);
                    for oy in 0..self.oh {
                        let iy = (oy * self.stride + ky).checked_sub(self.pad);
                        let at = iy.filter(|&iy| iy < self.h).map(|iy| {
                            // Input element of output column 0 (it may lie before the row).
                            (c * self.h + iy) * self.w + kx
                        });
                        f(row, oy, at, span);
                    }
                }
            }
        }
    }
}

/// `col [patch, oh·ow]` of one image `[cin, h, w]`.
fn im2col(image: &[f32], g: &Geometry, col: &mut [f32]) {
    if g.keeps_size() {
        return im2col_shifted(image, g, col);
    }
    im2col_by_rows(image, g, col);
}

/// Where a row of a size-keeping convolution's column buffer lies in the input: its elements
/// `span` are the input image's elements from `input` on, in order, except in the output
/// columns `wrapped`, where the input column lies left or right of the plane and the run wraps
/// into a neighbouring row. The rest of the row falls past the plane.
struct Shifted {
    span: std::ops::Range<usize>,
    input: usize,
    wrapped: std::ops::Range<usize>,
}

impl Geometry {
    /// Each row of the column buffer `col` (rows `stride` apart) with its [`Shifted`]: the
    /// plane of the row's channel shifted by `ky - pad` rows and `kx - pad` columns.
    fn shifted_rows<'a>(
        &self,
        col: &'a mut [f32],
        stride: usize,
    ) -> impl Iterator<Item = (Shifted, &'a mut [f32])> + use<'a> {
        let (w, k, pad, pixels) = (self.w, self.k, self.pad as isize, self.out_pixels());
        let rows = col.chunks_mut(stride).take(self.patch());
        rows.enumerate().map(move |(row, out)| {
            let out = &mut out[..pixels];
            let (c, ky, kx) = (row / (k * k), row / k % k, row % k);
            let (dy, dx) = (ky as isize - pad, kx as isize - pad);
            // Output pixel i reads input pixel i + shift of the plane, where that lies in it.
            let shift = dy * w as isize + dx;
            let first = (-shift).clamp(0, pixels as isize) as usize;
            let end = (pixels as isize - shift).clamp(first as isize, pixels as isize) as usize;
            let wrapped = if dx < 0 {
                0..dx.unsigned_abs().min(w)
            } else {
                w.saturating_sub(dx as usize)..w
            };
            // An empty span (a shift of a whole plane or more) reads nothing, from anywhere.
            let from = if first < end {
                first as isize + shift
            } else {
                0
            };
            let input = c * pixels + from as usize;
            (
                Shifted {
                    span: first..end,
                    input,
                    wrapped,
                },
                out,
            )
        })
    }
}

/// Sets the `wrapped` columns of one row of a column buffer to zero, column by column down the
/// map: one or two columns of a few dozen rows, where a fill per row would be a call per
/// element or two.
fn zero_columns(row: &mut [f32], wrapped: std::ops::Range<usize>, w: usize) {
    for column in wrapped {
        row.iter_mut()
            .skip(column)
            .step_by(w)
            .for_each(|v| *v = 0.0);
    }
}

/// [`im2col`] of a stride-1 convolution that keeps the maps' size: each row of `col` is the
/// input plane shifted by `ky - pad` rows and `kx - pad` columns, so it is one contiguous copy
/// (a few hundred floats), then zeros where the shift runs past the plane or wraps from one
/// row into the next. Row by row, the copies were a few dozen floats each, and a call apiece.
fn im2col_shifted(image: &[f32], g: &Geometry, col: &mut [f32]) {
    for (
        Shifted {
            span,
            input,
            wrapped,
        },
        out,
    ) in g.shifted_rows(col, g.out_pixels())
    {
        out[..span.start].fill(0.0);
        out[span.end..].fill(0.0);
        out[span.clone()].copy_from_slice(&image[input..][..span.len()]);
        zero_columns(out, wrapped, g.w);
    }
}

/// [`im2col`] row by row of the output, for any stride and padding.
fn im2col_by_rows(image: &[f32], g: &Geometry, col: &mut [f32]) {
    let (ow, s, p) = (g.ow, g.stride, g.pad);
    let pixels = g.out_pixels();
    g.walk(|row, oy, at, (lo, hi)| {
        let out = &mut col[row * pixels + oy * ow..][..ow];
        let Some(at) = at else {
            out.fill(0.0);
            return;
        };
        out[..lo].fill(0.0);
        out[hi..].fill(0.0);
        // Output column ox reads input element at + ox·s - p. An empty span is skipped: on a
        // map narrower than the padding, at + lo - p would fall before the row.
        if s == 1 && lo < hi {
            out[lo..hi].copy_from_slice(&image[at + lo - p..at + hi - p]);
        } else if s > 1 {
            for (ox, v) in out.iter_mut().enumerate().take(hi).skip(lo) {
                *v = image[at + ox * s - p];
            }
        }
    });
}

/// One image's gradient `[cin, h, w]` from `col [patch, oh·ow]`, whose rows lie `stride`
/// apart (im2col's adjoint), written over the whole of `image`. `col` is scratch: the shifted
/// path zeroes its values that wrap into a neighbouring row.
fn col2im(col: &mut [f32], stride: usize, g: &Geometry, image: &mut [f32]) {
    // The sums start at +0.0, here rather than in each caller, as the shifted path needs.
    image.fill(0.0);
    if g.keeps_size() {
        return col2im_shifted(col, stride, g, image);
    }
    col2im_by_rows(col, stride, g, image);
}

/// [`col2im`] of a size-keeping stride-1 convolution, one contiguous sum per row of `col`
/// (see [`im2col_shifted`]). The wrapped columns' values are set to zero first, so the span
/// adds +0.0 there; that leaves every sum as it was, because [`col2im`] starts the image at
/// +0.0, so it never holds -0.0 (only -0.0 + -0.0 rounds to -0.0). Each pixel's terms come in
/// the same order as row by row: by the column buffer's rows.
fn col2im_shifted(col: &mut [f32], stride: usize, g: &Geometry, image: &mut [f32]) {
    for (
        Shifted {
            span,
            input,
            wrapped,
        },
        from,
    ) in g.shifted_rows(col, stride)
    {
        zero_columns(from, wrapped, g.w);
        let to = &mut image[input..][..span.len()];
        to.iter_mut().zip(&from[span]).for_each(|(d, v)| *d += v);
    }
}

/// [`col2im`] row by row of the output, for any stride and padding.
fn col2im_by_rows(col: &[f32], stride: usize, g: &Geometry, image: &mut [f32]) {
    let (ow, s, p) = (g.ow, g.stride, g.pad);
    g.walk(|row, oy, at, (lo, hi)| {
        let Some(at) = at else { return };
        let from = &col[row * stride + oy * ow..][..ow];
        // As in im2col_by_rows, an empty span is skipped.
        if s == 1 && lo < hi {
            let to = &mut image[at + lo - p..at + hi - p];
            to.iter_mut().zip(&from[lo..hi]).for_each(|(d, v)| *d += v);
        } else if s > 1 {
            for (ox, v) in from.iter().enumerate().take(hi).skip(lo) {
                image[at + ox * s - p] += v;
            }
        }
    });
}

/// `[rows, cols]` row-major at `p`, as the gemm calls take it.
fn rows(p: *const f32, cols: usize) -> (*const f32, isize, isize) {
    (p, cols as isize, 1)
}

/// `dst [m, n] = (keep ? dst : 0) + lhs [m, k] · rhs [k, n]` on this thread (the callers are
/// already spread over the pool, an image or a chunk of images each).
///
/// # Safety
/// As for `gemm::gemm_block`, with `dst` rows `n` apart.
unsafe fn product(
    dst: *mut f32,
    dims: ProductDims,
    keep: bool,
    operands: ((*const f32, isize, isize), (*const f32, isize, isize)),
) {
    let (identity, serial) = (Activation::Identity, gemm::Parallelism::None);
    // SAFETY: forwarded from the caller.
    unsafe { gemm_block(dst, dims.cols, dims, keep, operands, identity, serial) }
}

/// The convolution of `x` `[n, cin, h, w]` with `weight` `[cout, cin, k, k]`, stride and zero
/// padding on every side, plus `bias` `[cout]`.
pub fn forward(
    x: FlexTensor,
    weight: FlexTensor,
    bias: Option<FlexTensor>,
    stride: usize,
    pad: usize,
) -> FlexTensor {
    let g = Geometry::of(&x, &weight, stride, pad);
    let (patch, pixels) = (g.patch(), g.out_pixels());
    // The inputs read where they are (a copy only when one is not contiguous).
    let ((xt, xr), (wt, wr)) = (
        contiguous(x, g.n * g.image()),
        contiguous(weight, g.cout * patch),
    );
    let bias = bias.map(|b| contiguous(b, g.cout));
    let (x, weight) = (&xt.storage::<f32>()[xr], &wt.storage::<f32>()[wr]);
    let bias = bias.as_ref().map(|(b, r)| &b.storage::<f32>()[r.clone()]);
    let mut y = uninit(g.n * g.cout * pixels);
    y.par_chunks_mut(g.cout * pixels)
        .zip(x.par_chunks(g.image()))
        .for_each_init(
            || vec![0.0; patch * pixels],
            |col, (out, image)| {
                im2col(image, &g, col);
                let out = out.as_mut_ptr().cast::<f32>();
                let operands = (rows(weight.as_ptr(), patch), rows(col.as_ptr(), pixels));
                // SAFETY: `out` holds cout × pixels elements, written (not read) here; the
                // operands are the whole weight and column buffers.
                unsafe {
                    let dims = ProductDims {
                        rows: g.cout,
                        cols: pixels,
                        inner: patch,
                    };
                    product(out, dims, false, operands)
                };
                if let Some(b) = bias {
                    // SAFETY: the product wrote every element.
                    let out = unsafe { std::slice::from_raw_parts_mut(out, g.cout * pixels) };
                    for (channel, b) in out.chunks_mut(pixels).zip(b) {
                        channel.iter_mut().for_each(|v| *v += b);
                    }
                }
            },
        );
    // SAFETY: every image's product wrote its whole output.
    let y = unsafe { assume_init(y) };
    FlexTensor::from_data(TensorData::new(y, [g.n, g.cout, g.oh, g.ow]))
}

/// The gradients of [`forward`] for `x` (when `need_dx`), the weights, and the bias (when
/// `need_bias`), given the output's gradient `grad` `[n, cout, oh, ow]`.
pub fn backward(
    x: FlexTensor,
    weight: FlexTensor,
    grad: FlexTensor,
    (stride, pad): (usize, usize),
    need_dx: bool,
    need_bias: bool,
) -> (Option<FlexTensor>, FlexTensor, Option<FlexTensor>) {
    let g = Geometry::of(&x, &weight, stride, pad);
    let (patch, pixels) = (g.patch(), g.out_pixels());
    let ((xt, xr), (wt, wr)) = (
        contiguous(x, g.n * g.image()),
        contiguous(weight, g.cout * patch),
    );
    let (gt, gr) = contiguous(grad, g.n * g.cout * pixels);
    let (x, weight) = (&xt.storage::<f32>()[xr], &wt.storage::<f32>()[wr]);
    let grad = &gt.storage::<f32>()[gr];
    let (dw, db) = weight_grads(x, grad, &g, need_bias);
    let dx = need_dx.then(|| {
        let dx = input_grad(weight, grad, &g);
        FlexTensor::from_data(TensorData::new(dx, [g.n, g.cin, g.h, g.w]))
    });
    let dw = FlexTensor::from_data(TensorData::new(dw, [g.cout, g.cin, g.k, g.k]));
    let db = db.map(|db| FlexTensor::from_data(TensorData::new(db, [g.cout])));
    (dx, dw, db)
}

/// Patches of at most this many rows take [`row_dots`]' weight gradient, wider ones the gemm
/// crate's (a first layer over grey or RGB images against the later layers).
const ROW_DOTS_PATCH: usize = 32;

/// `dW [cout, patch] = Σ dz_i · col_iᵀ` and, when `need_bias`, `db [cout] = Σ dz_i`, each chunk
/// of images summed on its own thread, the chunks then added in order. (A convolution before a
/// batch norm has no bias, and db's sums, one f32 chain per channel, cost as much as a pass.)
fn weight_grads(
    x: &[f32],
    grad: &[f32],
    g: &Geometry,
    need_bias: bool,
) -> (Vec<f32>, Option<Vec<f32>>) {
    let (patch, pixels) = (g.patch(), g.out_pixels());
    let chunk = |c: usize| {
        let images = c * CHUNK_IMAGES..((c + 1) * CHUNK_IMAGES).min(g.n);
        let mut col = vec![0.0f32; patch * pixels];
        // im2col of image i into `col`, and the image's output gradient.
        let columns = |i: usize, col: &mut [f32]| {
            im2col(&x[i * g.image()..][..g.image()], g, col);
            &grad[i * g.cout * pixels..][..g.cout * pixels]
        };
        let mut dw = vec![0.0f32; g.cout * patch];
        let mut db = vec![0.0f32; g.cout];
        let mut add_bias = |dz: &[f32]| {
            if need_bias {
                for (sum, channel) in db.iter_mut().zip(dz.chunks(pixels)) {
                    *sum += channel.iter().sum::<f32>();
                }
            }
        };
        if patch <= ROW_DOTS_PATCH {
            let mut lanes = vec![[0.0; row_dots::LANES]; g.cout * patch];
            for i in images {
                let dz = columns(i, &mut col);
                row_dots::accumulate(&mut lanes, dz, &col, (g.cout, patch, pixels));
                add_bias(dz);
            }
            row_dots::reduce(&lanes, &mut dw);
        } else {
            let mut col_t = vec![0.0f32; patch * pixels];
            for i in images {
                let dz = columns(i, &mut col);
                // colᵀ [pixels, patch] as a row-major copy, transposed by tiles: the gemm crate
                // packs an rhs whose rows are not contiguous one element at a time, which was
                // 3 % of fashion-cnn's step. The same bits: packing only moves values.
                // SAFETY: col is patch × pixels.
                unsafe { transpose_into(rows(col.as_ptr(), pixels), patch, pixels, &mut col_t) };
                let operands = (rows(dz.as_ptr(), pixels), rows(col_t.as_ptr(), patch));
                // SAFETY: dw holds cout × patch initialised elements; dz is cout × pixels and
                // col_t pixels × patch.
                unsafe {
                    let dims = ProductDims {
                        rows: g.cout,
                        cols: patch,
                        inner: pixels,
                    };
                    product(dw.as_mut_ptr(), dims, true, operands)
                };
                add_bias(dz);
            }
        }
        (dw, db)
    };
    let parts: Vec<(Vec<f32>, Vec<f32>)> = (0..g.n.div_ceil(CHUNK_IMAGES))
        .into_par_iter()
        .map(chunk)
        .collect();
    let mut parts = parts.into_iter();
    let (mut dw, mut db) = parts.next().expect("a batch has at least one image");
    for (w, b) in parts {
        dw.iter_mut().zip(&w).for_each(|(s, v)| *s += v);
        db.iter_mut().zip(&b).for_each(|(s, v)| *s += v);
    }
    (dw, need_bias.then_some(db))
}

/// Images whose input gradients are one product, side by side: the weights are packed once
/// for them, and the product's rows (4 × 196 pixels in fashion-cnn's second layer) fill the
/// gemm crate's kernels better than one image's 196. At an image a product the weights' pack
/// and the kernels' edges made it 1.4 times slower on an AVX-512 Xeon.
const DCOL_IMAGES: usize = 4;

/// `dx_i = col2im(Wᵀ · dz_i)` for every image, `DCOL_IMAGES` images a product, on the pool.
fn input_grad(weight: &[f32], grad: &[f32], g: &Geometry) -> Vec<f32> {
    let (patch, pixels) = (g.patch(), g.out_pixels());
    let scratch = || {
        let dcol = vec![0.0f32; patch * pixels * DCOL_IMAGES];
        (dcol, vec![0.0f32; g.cout * pixels * DCOL_IMAGES])
    };
    // Initialised only to be a safe slice: col2im writes each image whole.
    let mut dx = vec![0.0f32; g.n * g.image()];
    dx.par_chunks_mut(DCOL_IMAGES * g.image())
        .zip(grad.par_chunks(DCOL_IMAGES * g.cout * pixels))
        .for_each_init(scratch, |(dcol, dz_side), (dx, dz)| {
            let cols = dz.len() / g.cout;
            // dz [images, cout, pixels] as [cout, images · pixels]: each channel's maps in a row.
            for (i, image) in dz.chunks(g.cout * pixels).enumerate() {
                for (c, map) in image.chunks(pixels).enumerate() {
                    dz_side[c * cols + i * pixels..][..pixels].copy_from_slice(map);
                }
            }
            // Wᵀ: element (row, channel) of W [cout, patch] sits at channel·patch + row.
            let w_t = (weight.as_ptr(), 1, patch as isize);
            let operands = (w_t, rows(dz_side.as_ptr(), cols));
            // SAFETY: dcol holds patch × cols elements, written here; dz_side cout × cols.
            unsafe {
                let dims = ProductDims {
                    rows: patch,
                    cols,
                    inner: g.cout,
                };
                product(dcol.as_mut_ptr(), dims, false, operands)
            };
            for (i, dx) in dx.chunks_mut(g.image()).enumerate() {
                col2im(&mut dcol[i * pixels..], cols, g, dx);
            }
        });
    dx
}

#[cfg(test)]
mod tests {
    use crate::ops;
    use burn::backend::{Autodiff, Flex};
    use burn::prelude::*;
    use burn::tensor::Tolerance;
    use burn::tensor::ops::ConvOptions;

    type A = Autodiff<Flex>;

    /// Values in [-1, 1] of the given shape, from the index and `salt` alone: the backend's
    /// generator is shared by the tests' threads.
    fn inputs(shape: Vec<usize>, salt: u64) -> TensorData {
        let len = shape.iter().product::<usize>() as u64;
        let values: Vec<f32> = (0..len)
            .map(|i| (crate::ops::dropout::mix(i ^ salt << 32) % 2001) as f32 / 1000.0 - 1.0)
            .collect();
        TensorData::new(values, shape)
    }

    /// (n, cin, h, w, cout, k, stride, padding, bias)
    type Case = (usize, usize, usize, usize, usize, usize, usize, usize, bool);

    /// The output and the gradients of x, the weights and the bias of `Σ y·r` for a fixed `r`,
    /// by ember's operation or by Burn's `conv2d`.
    fn run(case: Case, ours: bool) -> Vec<Vec<f32>> {
        let (n, cin, h, w, cout, k, stride, pad, with_bias) = case;
        let device = Default::default();
        let x = Tensor::<A, 4>::from_data(inputs(vec![n, cin, h, w], 1), &device).require_grad();
        let weight =
            Tensor::<A, 4>::from_data(inputs(vec![cout, cin, k, k], 2), &device).require_grad();
        let bias = Tensor::<A, 1>::from_data(inputs(vec![cout], 3), &device).require_grad();
        let b = with_bias.then(|| bias.clone());
        let y = if ours {
            ops::conv(x.clone(), weight.clone(), b, stride, pad)
        } else {
            let options = ConvOptions::new([stride; 2], [pad; 2], [1, 1], 1);
            burn::tensor::module::conv2d(x.clone(), weight.clone(), b, options)
        };
        let r = Tensor::<A, 4>::from_data(inputs(y.dims().to_vec(), 4), &device);
        let grads = (y.clone() * r).sum().backward();
        let host = |t: Tensor<Flex, 4>| t.into_data().to_vec::<f32>().unwrap();
        let mut out = vec![
            host(y.inner()),
            host(x.grad(&grads).unwrap()),
            host(weight.grad(&grads).unwrap()),
        ];
        if with_bias {
            out.push(bias.grad(&grads).unwrap().into_data().to_vec().unwrap());
        }
        out
    }

    const CASES: [Case; 7] = [
        (3, 2, 7, 9, 4, 3, 1, 1, true),
        // A patch of 36 rows: the weight gradient through the gemm crate, in two chunks.
        (10, 4, 6, 6, 3, 3, 1, 1, false),
        (2, 3, 11, 10, 5, 5, 2, 0, false),
        (4, 1, 6, 6, 3, 3, 2, 2, true),
        (2, 4, 5, 5, 6, 1, 1, 0, false),
        (19, 2, 8, 8, 3, 3, 1, 1, true),
        // A map narrower than the padding: the input gradient's spans there are empty.
        (2, 2, 3, 1, 2, 5, 1, 2, false),
    ];

    /// Forward and every gradient agree with Burn's convolution, for strides, paddings,
    /// kernels of 1 to 5, with and without a bias, and batches of several chunks.
    #[test]
    fn the_kernel_matches_burns_convolution_and_its_gradients() {
        for case in CASES {
            let (ours, burns) = (run(case, true), run(case, false));
            assert_eq!(ours.len(), burns.len());
            for (i, (a, b)) in ours.iter().zip(&burns).enumerate() {
                let shape = [a.len()];
                TensorData::new(a.clone(), shape).assert_approx_eq::<f32>(
                    &TensorData::new(b.clone(), shape),
                    Tolerance::absolute(1e-4),
                );
                assert!(
                    a.iter().any(|v| *v != 0.0),
                    "case {case:?}, output {i} is all zeros"
                );
            }
        }
    }

    /// The GPU backends' composition of the backward gives the kernel's gradients.
    #[test]
    fn the_composed_backward_matches_the_kernel() {
        let device = Default::default();
        let input = |shape: [usize; 4], salt: u64| {
            Tensor::<Flex, 4>::from_data(inputs(shape.to_vec(), salt), &device)
                .into_primitive()
                .tensor()
        };
        let (x, w, g) = (
            input([5, 3, 9, 9], 1),
            input([4, 3, 3, 3], 2),
            input([5, 4, 5, 5], 3),
        );
        let geometry = (2, 1);
        let ours = super::backward(x.clone(), w.clone(), g.clone(), geometry, true, true);
        let theirs = ops::composed::conv_backward::<Flex>(x, w, g, geometry, (true, true));
        let host = |t: burn::backend::flex::FlexTensor| {
            let shape = t.layout().shape().to_vec();
            let n = shape.iter().product::<usize>();
            (t.to_contiguous().storage::<f32>()[..n].to_vec(), shape)
        };
        let pairs = [
            (ours.0.unwrap(), theirs.0.unwrap()),
            (ours.1, theirs.1),
            (ours.2.unwrap(), theirs.2.unwrap()),
        ];
        for (a, b) in pairs {
            let (a, b) = (host(a), host(b));
            assert_eq!(a.1, b.1);
            let n = [a.0.len()];
            TensorData::new(a.0, n)
                .assert_approx_eq::<f32>(&TensorData::new(b.0, n), Tolerance::absolute(1e-4));
        }
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|f| f.to_bits()).collect()
    }

    /// col2im, whichever path the geometry takes, writes the whole image (which starts as NaN)
    /// with the bits of the row-by-row sums into zeros.
    fn assert_col2im_is_the_row_by_row_sums(col: &[f32], g: &super::Geometry, what: &str) {
        let (mut written, mut sums) = (vec![f32::NAN; g.image()], vec![0.0; g.image()]);
        let stride = g.out_pixels();
        super::col2im(&mut col.to_vec(), stride, g, &mut written);
        super::col2im_by_rows(col, stride, g, &mut sums);
        assert_eq!(bits(&written), bits(&sums), "{what}");
    }

    /// The shifted copies of a size-keeping convolution's im2col are the row-by-row ones:
    /// kernels of 1, 3 and 5, square and oblong maps, one and several channels, and maps of
    /// one row or column, narrower than the padding.
    #[test]
    fn shifted_im2col_and_col2im_are_the_row_by_row_ones() {
        for (cin, h, w, k) in [
            (1, 28, 28, 3),
            (3, 5, 7, 3),
            (2, 6, 4, 5),
            (2, 3, 3, 1),
            (1, 2, 9, 5),
            (2, 1, 1, 5),
            (1, 1, 6, 5),
            (1, 7, 1, 3),
        ] {
            let g = super::Geometry::sized([1, cin, h, w], 1, k, (1, k / 2));
            assert!(g.keeps_size());
            let image: Vec<f32> = (0..g.image()).map(|i| i as f32 + 1.0).collect();
            let mut shifted = vec![f32::NAN; g.patch() * g.out_pixels()];
            let mut by_rows = vec![f32::NAN; g.patch() * g.out_pixels()];
            super::im2col_shifted(&image, &g, &mut shifted);
            super::im2col_by_rows(&image, &g, &mut by_rows);
            assert_eq!(bits(&shifted), bits(&by_rows), "{cin}x{h}x{w}, kernel {k}");

            // The adjoint: values of mixed signs and magnitudes, negative zeros among them.
            // col2im (the shifted path here) writes the whole image, which starts as NaN; the
            // row-by-row sums add into zeros.
            let col: Vec<f32> = (0..g.patch() * g.out_pixels())
                .map(|i| match i % 7 {
                    0 => -0.0,
                    r => (r as f32 - 3.5) * 10f32.powi((i % 11) as i32 - 5),
                })
                .collect();
            assert_col2im_is_the_row_by_row_sums(
                &col,
                &g,
                &format!("col2im {cin}x{h}x{w}, kernel {k}"),
            );
        }
    }

    /// col2im writes the whole image on the row-by-row path too (a stride of 2, no padding),
    /// where some pixels get no term: the image starts as NaN and must come out as the sums
    /// into zeros.
    #[test]
    fn col2im_writes_the_whole_image_on_every_path() {
        for (stride, pad, k) in [(2, 1, 3), (1, 0, 3), (3, 0, 2)] {
            let g = super::Geometry::sized([1, 2, 7, 6], 1, k, (stride, pad));
            assert!(!g.keeps_size());
            let col: Vec<f32> = (0..g.patch() * g.out_pixels())
                .map(|i| i as f32 - 20.0)
                .collect();
            assert_col2im_is_the_row_by_row_sums(
                &col,
                &g,
                &format!("stride {stride} pad {pad} k {k}"),
            );
        }
    }

    /// The same bits on 1 and 3 threads: the weight gradient sums fixed chunks in order, by
    /// row dots (a patch of 18 rows) and by the gemm crate (36).
    #[test]
    fn results_do_not_depend_on_the_thread_count() {
        let on = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| [run(CASES[5], true), run(CASES[1], true)].concat())
        };
        let bits = |v: Vec<Vec<f32>>| -> Vec<Vec<u32>> {
            v.into_iter()
                .map(|t| t.iter().map(|f| f.to_bits()).collect())
                .collect()
        };
        assert_eq!(bits(on(1)), bits(on(3)));
    }
}
