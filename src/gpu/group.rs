//! A model's parameter updates as one operation of the fusion stream: every `[w, g]` (SGD) or
//! `[w, g, m, v]` (Adam) of an optimizer step in one custom operation, whose kernels
//! (`update::sgd_group`, `adam_group`) update them all in one launch.

use super::{Cube, float, kernels_on, path, put, stream, update};
use crate::ops::Lr;
use burn::backend::ir::TensorIr;
use burn::tensor::ops::FloatTensor;
use burn_cubecl::{BoolElement, CubeRuntime};
use burn_fusion::{Fusion, FusionRuntime, FusionTensor};

type T<R, BT> = FloatTensor<Fusion<Cube<R, BT>>>;

/// Whether one operation updates `params` (each a parameter's tensors, its weights first), or
/// why not. Even a model whose parameters are all small (linear-scalar's two) gains: their
/// gradients come from operations of ember's, into whose kernels Burn's fusion cannot fold an
/// update, so each parameter's update would be a launch of its own.
pub fn way<F: FusionRuntime, const N: usize>(
    params: &[[FusionTensor<F>; N]],
) -> Result<(), path::Reason> {
    match (kernels_on(), params.is_empty()) {
        (false, _) => Err(super::OFF),
        (true, true) => Err("no parameters"),
        (true, false) => Ok(()),
    }
}

/// The stream's tensors of `ins`, `N` for each parameter.
fn read<R: CubeRuntime, BT: BoolElement, const N: usize>(
    h: &mut stream::Handles<Cube<R, BT>>,
    ins: &[TensorIr],
) -> Vec<[burn_cubecl::tensor::CubeTensor<R>; N]> {
    ins.chunks(N)
        .map(|p| std::array::from_fn(|i| float::<R, BT>(h, &p[i])))
        .collect()
}

/// The operation's extra input (the rates, one per replica) and the learning rate the kernels
/// take from it once the stream reaches them.
fn rate_input<R: CubeRuntime, BT: BoolElement>(
    lr: &Lr<Fusion<Cube<R, BT>>>,
) -> (Vec<T<R, BT>>, Option<f32>) {
    match lr {
        Lr::One(lr) => (Vec::new(), Some(*lr as f32)),
        Lr::PerReplica(rates) => (vec![rates.clone()], None),
    }
}

/// The kernels' rate: `one`, or the last of the operation's inputs.
fn rate<R: CubeRuntime, BT: BoolElement>(
    h: &mut stream::Handles<Cube<R, BT>>,
    ins: &[TensorIr],
    one: Option<f32>,
) -> update::Rate<R> {
    match one {
        Some(lr) => update::Rate::One(lr),
        None => update::Rate::PerReplica(Box::new(float::<R, BT>(h, &ins[ins.len() - 1]))),
    }
}

/// SGD's `w - lr · g` for every `[w, g]` of `params`, as one operation.
pub fn sgd<R: CubeRuntime, BT: BoolElement>(
    params: Vec<[T<R, BT>; 2]>,
    lr: &Lr<Fusion<Cube<R, BT>>>,
) -> Vec<T<R, BT>> {
    let shapes = params.iter().map(|[w, _]| w.shape.clone()).collect();
    let (extra, one) = rate_input(lr);
    let count = params.len();
    let run: stream::Run<Cube<R, BT>> = Box::new(move |ins, outs, h| {
        let rate = rate::<R, BT>(h, ins, one);
        let news = update::sgd_group::<R>(read::<R, BT, 2>(h, &ins[..2 * count]), &rate);
        for (ir, w) in outs.iter().zip(news) {
            put::<R, BT>(h, ir, w);
        }
    });
    let inputs = params.into_iter().flatten().chain(extra).collect();
    stream::register::<Cube<R, BT>>("sgd_steps", inputs, shapes, run)
}

/// Adam's step at `consts` (`update::adam_group`) and `lr` of every `[w, g, m, v]` of
/// `params`, as one operation: each parameter's new `[w, m, v]`.
pub fn adam<R: CubeRuntime, BT: BoolElement>(
    params: Vec<[T<R, BT>; 4]>,
    consts: [f32; 4],
    lr: &Lr<Fusion<Cube<R, BT>>>,
) -> Vec<[T<R, BT>; 3]> {
    let shapes = (params.iter())
        .flat_map(|[w, ..]| [w.shape.clone(), w.shape.clone(), w.shape.clone()])
        .collect();
    let (extra, one) = rate_input(lr);
    let count = params.len();
    let run: stream::Run<Cube<R, BT>> = Box::new(move |ins, outs, h| {
        let rate = rate::<R, BT>(h, ins, one);
        let params = read::<R, BT, 4>(h, &ins[..4 * count]);
        let news = update::adam_group::<R>(params, consts, &rate);
        for (irs, tensors) in outs.chunks(3).zip(news) {
            for (ir, t) in irs.iter().zip(tensors) {
                put::<R, BT>(h, ir, t);
            }
        }
    });
    let inputs = params.into_iter().flatten().chain(extra).collect();
    let outs = stream::register::<Cube<R, BT>>("adam_steps", inputs, shapes, run);
    let mut outs = outs.into_iter();
    let mut next = move || outs.next().expect("three outputs a parameter");
    (0..count).map(|_| [next(), next(), next()]).collect()
}
