//! The optimizers' updates of one parameter tensor on the GPU, one launch each: SGD's
//! `w - lr · g`, and Adam's new moments and weights together, with the formulas (and the order
//! of operations) of ember's composed ones (`ops::EmberBackend::sgd_step`, `adam_step`).
//! Tensors of one or two dimensions (a layer's weights and biases), each read and written
//! through its own strides.

use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeRuntime, ops::numeric::empty_device};
use cubecl::prelude::*;

/// The offset of element `e` of a `[rows, cols]` view (a vector is one row).
#[cube]
fn at<F: Float>(t: &Tensor<F>, e: usize) -> usize {
    if t.rank() == 1 {
        e * t.stride(0)
    } else {
        let cols = t.shape(1);
        (e / cols) * t.stride(0) + (e % cols) * t.stride(1)
    }
}

#[cube]
fn at_mut<F: Float>(t: &mut Tensor<F>, e: usize) -> usize {
    if t.rank() == 1 {
        e * t.stride(0)
    } else {
        let cols = t.shape(1);
        (e / cols) * t.stride(0) + (e % cols) * t.stride(1)
    }
}

#[cube(launch_unchecked)]
fn sgd_kernel(w: &Tensor<f32>, g: &Tensor<f32>, out: &mut Tensor<f32>, lr: f32, len: usize) {
    let e = ABSOLUTE_POS;
    if e < len {
        let o = at_mut::<f32>(out, e);
        out[o] = w[at::<f32>(w, e)] - g[at::<f32>(g, e)] * lr;
    }
}

#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
fn adam_kernel(
    w: &Tensor<f32>,
    g: &Tensor<f32>,
    m: &Tensor<f32>,
    v: &Tensor<f32>,
    w_out: &mut Tensor<f32>,
    m_out: &mut Tensor<f32>,
    v_out: &mut Tensor<f32>,
    beta1: f32,
    beta2: f32,
    factor: f32,
    eps: f32,
    lr: f32,
    len: usize,
) {
    let e = ABSOLUTE_POS;
    if e < len {
        let gv = g[at::<f32>(g, e)];
        let mv = m[at::<f32>(m, e)] * beta1 + gv * (f32::new(1.0) - beta1);
        let vv = v[at::<f32>(v, e)] * beta2 + (gv * gv) * (f32::new(1.0) - beta2);
        let update = (mv * factor) / (f32::sqrt(vv) + eps);
        let (ow, om, ov) = (
            at_mut::<f32>(w_out, e),
            at_mut::<f32>(m_out, e),
            at_mut::<f32>(v_out, e),
        );
        w_out[ow] = w[at::<f32>(w, e)] - update * lr;
        m_out[om] = mv;
        v_out[ov] = vv;
    }
}

const UNITS: u32 = 256;

fn elements(t: &CubeTensor<impl CubeRuntime>) -> usize {
    t.meta.shape().iter().product()
}

fn like<R: CubeRuntime>(t: &CubeTensor<R>) -> CubeTensor<R> {
    empty_device::<R, f32>(t.client.clone(), t.device.clone(), t.meta.shape().clone())
}

fn cubes(len: usize) -> CubeCount {
    CubeCount::Static(len.div_ceil(UNITS as usize) as u32, 1, 1)
}

/// `w - lr · g`.
pub fn sgd<R: CubeRuntime>(w: CubeTensor<R>, g: CubeTensor<R>, lr: f32) -> CubeTensor<R> {
    let (out, len, client) = (like(&w), elements(&w), w.client.clone());
    // SAFETY: the kernel touches the first `len` elements of each tensor, all of that size.
    unsafe {
        sgd_kernel::launch_unchecked::<R>(
            &client,
            cubes(len),
            CubeDim::new_1d(UNITS),
            w.into_tensor_arg(),
            g.into_tensor_arg(),
            out.clone().into_tensor_arg(),
            lr,
            len,
        );
    }
    out
}

/// Adam's step: the new weights and moments from `w`, `g` and the moments `m`, `v`; `consts`
/// are `beta1`, `beta2`, the bias correction's factor and epsilon (`AdamStep::corrections`),
/// and the learning rate.
pub fn adam<R: CubeRuntime>(
    [w, g, m, v]: [CubeTensor<R>; 4],
    consts: [f32; 5],
) -> [CubeTensor<R>; 3] {
    let (w_out, m_out, v_out) = (like(&w), like(&w), like(&w));
    let (len, client) = (elements(&w), w.client.clone());
    let [beta1, beta2, factor, eps, lr] = consts;
    // SAFETY: the kernel touches the first `len` elements of each tensor, all of that size.
    unsafe {
        adam_kernel::launch_unchecked::<R>(
            &client,
            cubes(len),
            CubeDim::new_1d(UNITS),
            w.into_tensor_arg(),
            g.into_tensor_arg(),
            m.into_tensor_arg(),
            v.into_tensor_arg(),
            w_out.clone().into_tensor_arg(),
            m_out.clone().into_tensor_arg(),
            v_out.clone().into_tensor_arg(),
            beta1,
            beta2,
            factor,
            eps,
            lr,
            len,
        );
    }
    [w_out, m_out, v_out]
}
