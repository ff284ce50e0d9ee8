//! The optimizers' updates on the GPU: SGD's `w - lr · g`, and Adam's new moments and weights
//! together, with the formulas (and the order of operations) of ember's composed ones
//! (`ops::EmberBackend::sgd_step`, `adam_step`). A model's parameters are updated together,
//! all of them in one launch ([`sgd_group`], [`adam_group`]): cube row `y` of the launch takes
//! parameter `y`, whose tensors the kernel reads from sequences of tensors (one binding each),
//! each through its own strides, of any rank. A single parameter's update is a group of one.

use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeRuntime, ops::numeric::empty_device};
use cubecl::prelude::*;

/// The number of elements of `t`, of any rank.
#[cube]
fn count<F: Float>(t: &Tensor<F>) -> usize {
    let mut n = 1;
    for d in 0..t.rank() {
        n *= t.shape(d);
    }
    n
}

/// The offset of element `e` of `t` (of any rank: a convolution's kernels have four) in the
/// row-major order of its shape.
#[cube]
pub(super) fn offset<F: Float>(t: &Tensor<F>, e: usize) -> usize {
    let (rank, mut rest, mut at) = (t.rank(), e, 0);
    for i in 0..rank {
        let d = rank - 1 - i;
        at += (rest % t.shape(d)) * t.stride(d);
        rest /= t.shape(d);
    }
    at
}

/// The learning rate of element `e` of a parameter of `len` elements: `lr`, or `per_replica`
/// the rate in `rates` (`[K]`) of the replica whose slice of the parameter holds `e` (K
/// replicas stacked on the parameter's first axis).
#[cube]
fn rate_at(
    rates: &Tensor<f32>,
    lr: f32,
    e: usize,
    len: usize,
    #[comptime] per_replica: bool,
) -> f32 {
    if comptime![per_replica] {
        let each = len / rates.shape(0);
        rates[(e / each) * rates.stride(0)]
    } else {
        lr
    }
}

#[cube(launch_unchecked)]
fn sgd_group_kernel(
    ws: &Sequence<Tensor<f32>>,
    gs: &Sequence<Tensor<f32>>,
    outs: &mut Sequence<Tensor<f32>>,
    rates: &Tensor<f32>,
    lr: f32,
    #[comptime] per_replica: bool,
) {
    let e = ABSOLUTE_POS_X as usize;
    #[unroll]
    for p in 0..ws.len() {
        if CUBE_POS_Y == comptime![p as u32] {
            let (w, g, out) = (ws.index(p), gs.index(p), outs.index_mut(p));
            let len = count::<f32>(w);
            if e < len {
                let rate = rate_at(rates, lr, e, len, per_replica);
                let o = offset::<f32>(out, e);
                out[o] = w[offset::<f32>(w, e)] - g[offset::<f32>(g, e)] * rate;
            }
        }
    }
}

/// Adam's step of the parameter of this cube row: `ins` holds each parameter's weights,
/// gradient and moments (4 tensors each, in that order), `outs` its new weights and moments
/// (3 each).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
fn adam_group_kernel(
    ins: &Sequence<Tensor<f32>>,
    outs: &mut Sequence<Tensor<f32>>,
    rates: &Tensor<f32>,
    beta1: f32,
    beta2: f32,
    factor: f32,
    eps: f32,
    lr: f32,
    #[comptime] per_replica: bool,
) {
    let e = ABSOLUTE_POS_X as usize;
    #[unroll]
    for p in 0..comptime![outs.len() / 3] {
        if CUBE_POS_Y == comptime![p as u32] {
            let (w, g) = (ins.index(4 * p), ins.index(4 * p + 1));
            let (m, v) = (ins.index(4 * p + 2), ins.index(4 * p + 3));
            let len = count::<f32>(w);
            if e < len {
                let rate = rate_at(rates, lr, e, len, per_replica);
                let gv = g[offset::<f32>(g, e)];
                let mv = m[offset::<f32>(m, e)] * beta1 + gv * (f32::new(1.0) - beta1);
                let vv = v[offset::<f32>(v, e)] * beta2 + (gv * gv) * (f32::new(1.0) - beta2);
                let update = (mv * factor) / (f32::sqrt(vv) + eps);
                let w_out = outs.index_mut(3 * p);
                let ow = offset::<f32>(w_out, e);
                w_out[ow] = w[offset::<f32>(w, e)] - update * rate;
                let m_out = outs.index_mut(3 * p + 1);
                let om = offset::<f32>(m_out, e);
                m_out[om] = mv;
                let v_out = outs.index_mut(3 * p + 2);
                let ov = offset::<f32>(v_out, e);
                v_out[ov] = vv;
            }
        }
    }
}

const UNITS: u32 = 256;

fn elements(t: &CubeTensor<impl CubeRuntime>) -> usize {
    t.meta.shape().iter().product()
}

fn like<R: CubeRuntime>(t: &CubeTensor<R>) -> CubeTensor<R> {
    empty_device::<R, f32>(t.client.clone(), t.device.clone(), t.meta.shape().clone())
}

/// A learning rate: one, or one per replica (`[K]`, on the device).
#[derive(Clone)]
pub enum Rate<R: CubeRuntime> {
    One(f32),
    PerReplica(Box<CubeTensor<R>>),
}

impl<R: CubeRuntime> Rate<R> {
    /// The kernels' arguments: the rates tensor (any tensor, unread, for one rate), the one
    /// rate, and whether there is one per replica.
    fn args(&self, stand_in: &CubeTensor<R>) -> (CubeTensor<R>, f32, bool) {
        match self {
            Rate::One(lr) => (stand_in.clone(), *lr, false),
            Rate::PerReplica(rates) => ((**rates).clone(), 0.0, true),
        }
    }
}

/// `w - lr · g`.
pub fn sgd<R: CubeRuntime>(w: CubeTensor<R>, g: CubeTensor<R>, lr: f32) -> CubeTensor<R> {
    sgd_group(vec![[w, g]], &Rate::One(lr)).remove(0)
}

/// Adam's step: the new weights and moments from `w`, `g` and the moments `m`, `v`; `consts`
/// are `beta1`, `beta2`, the bias correction's factor and epsilon (`AdamStep::corrections`),
/// and the learning rate.
pub fn adam<R: CubeRuntime>(params: [CubeTensor<R>; 4], consts: [f32; 5]) -> [CubeTensor<R>; 3] {
    let [beta1, beta2, factor, eps, lr] = consts;
    adam_group(vec![params], [beta1, beta2, factor, eps], &Rate::One(lr)).remove(0)
}

/// The most parameters one launch updates, when each takes `per_param` bindings: within the
/// device's bindings (Metal's 31 are the fewest), with three spare for the rates and the
/// launch's metadata, and
/// at most 16, since the kernel is unrolled over them.
fn per_launch<R: CubeRuntime>(client: &ComputeClient<R>, per_param: usize) -> usize {
    let bindings = client.properties().hardware.max_bindings as usize;
    (bindings.saturating_sub(3) / per_param).clamp(1, 16)
}

/// The launch for `params`: a row of cubes per parameter, as many cubes as its largest needs.
fn group_cubes<R: CubeRuntime>(params: &[CubeTensor<R>]) -> CubeCount {
    let longest = params.iter().map(elements).max().unwrap_or(0);
    CubeCount::Static(
        longest.div_ceil(UNITS as usize).max(1) as u32,
        params.len() as u32,
        1,
    )
}

fn sequence<R: CubeRuntime>(ts: &[CubeTensor<R>]) -> SequenceArg<R, Tensor<f32>> {
    ts.iter().map(|t| t.clone().into_tensor_arg()).collect()
}

/// `w - lr · g` for every `[w, g]` of `params`, in as few launches as the device's bindings
/// allow (one for an MLP).
pub fn sgd_group<R: CubeRuntime>(
    params: Vec<[CubeTensor<R>; 2]>,
    lr: &Rate<R>,
) -> Vec<CubeTensor<R>> {
    let Some(client) = params.first().map(|[w, _]| w.client.clone()) else {
        return Vec::new();
    };
    let (rates, lr, per_replica) = lr.args(&params[0][0]);
    let mut outs = Vec::with_capacity(params.len());
    for chunk in params.chunks(per_launch(&client, 3)) {
        let ws: Vec<_> = chunk.iter().map(|[w, _]| w.clone()).collect();
        let gs: Vec<_> = chunk.iter().map(|[_, g]| g.clone()).collect();
        let news: Vec<_> = ws.iter().map(like).collect();
        // SAFETY: each cube row touches the first elements of its parameter's tensors, as
        // many as the parameter has, all of one shape.
        unsafe {
            sgd_group_kernel::launch_unchecked::<R>(
                &client,
                group_cubes(&ws),
                CubeDim::new_1d(UNITS),
                sequence(&ws),
                sequence(&gs),
                sequence(&news),
                rates.clone().into_tensor_arg(),
                lr,
                per_replica,
            );
        }
        outs.extend(news);
    }
    outs
}

/// Adam's step (`adam`) of every `[w, g, m, v]` of `params` at the same `consts` (`beta1`,
/// `beta2`, the bias correction's factor and epsilon) and learning rate, in as few launches as
/// the device's bindings allow: each parameter's new `[w, m, v]`.
pub fn adam_group<R: CubeRuntime>(
    params: Vec<[CubeTensor<R>; 4]>,
    consts: [f32; 4],
    lr: &Rate<R>,
) -> Vec<[CubeTensor<R>; 3]> {
    let Some(client) = params.first().map(|p| p[0].client.clone()) else {
        return Vec::new();
    };
    let [beta1, beta2, factor, eps] = consts;
    let (rates, lr, per_replica) = lr.args(&params[0][0]);
    let mut outs = Vec::with_capacity(params.len());
    for chunk in params.chunks(per_launch(&client, 7)) {
        let ins: Vec<_> = chunk.iter().flatten().cloned().collect();
        let news: Vec<[CubeTensor<R>; 3]> = chunk
            .iter()
            .map(|[w, ..]| [like(w), like(w), like(w)])
            .collect();
        let flat: Vec<_> = news.iter().flatten().cloned().collect();
        let ws: Vec<_> = chunk.iter().map(|[w, ..]| w.clone()).collect();
        // SAFETY: each cube row touches the first elements of its parameter's tensors, as
        // many as the parameter has, all of one shape.
        unsafe {
            adam_group_kernel::launch_unchecked::<R>(
                &client,
                group_cubes(&ws),
                CubeDim::new_1d(UNITS),
                sequence(&ins),
                sequence(&flat),
                rates.clone().into_tensor_arg(),
                beta1,
                beta2,
                factor,
                eps,
                lr,
                per_replica,
            );
        }
        outs.extend(news);
    }
    outs
}
