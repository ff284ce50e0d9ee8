//! Burn's `Optimizer` for ember's SGD and Adam that updates all of a module's parameters in one
//! operation of the backend ([`EmberBackend::sgd_steps`], [`adam_steps`]: on the GPU one
//! launch for a whole MLP, where Burn's `OptimizerAdaptor` makes one or more per parameter).
//! A step gathers each parameter's weights, gradient and state (a visit of the module), updates
//! them together, then puts the new weights and state back (a map of the module). Its record
//! is the adaptor's, so checkpoints hold the same files either way, and settings without a
//! grouped update (SGD with momentum) step through the adaptor itself, as does every backend
//! that gains nothing from grouping (the CPU: [`EmberBackend::GROUPED_UPDATES`]).
//!
//! [`adam_steps`]: EmberBackend::adam_steps

use super::{Adam, AdamState, PerReplica, Sgd, StepAt, moments, prim, tensor};
use crate::ops::{EmberBackend, Lr};
use burn::module::{AutodiffModule, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::optim::SimpleOptimizer;
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::record::AdaptorRecord;
use burn::optim::{GradientsParams, LearningRate, MultiGradientsParams, Optimizer};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::FloatTensor;
use std::collections::{BTreeMap, HashMap};

/// The optimizer state of every parameter, as Burn's adaptor records it.
pub type Records<O, M, B> = <OptimizerAdaptor<O, M, B> as Optimizer<M, B>>::Record;

/// One parameter in a grouped update: its weights, gradient and state's tensors on the way in;
/// its new weights and state's tensors on the way out. `time` is Adam's step count.
pub struct Slot<B: Backend> {
    pub tensors: Vec<FloatTensor<B>>,
    pub time: usize,
}

/// An optimizer whose step of a whole module can be one operation of the backend.
pub trait Group<B: EmberBackend>: SimpleOptimizer<B> + Clone {
    /// Whether these settings update a module as one group.
    fn groups(&self) -> bool;

    /// The learning rate of a step at the Learner's rate `lr`: one for the whole module, or
    /// one per replica ([`PerReplica`]).
    fn rate(&self, lr: f64) -> Lr<B> {
        Lr::One(lr)
    }

    /// A parameter's slot for the group: its weights, gradient (the per-tensor parts, weight
    /// decay, done) and state.
    fn slot<const D: usize>(
        &self,
        lr: &Lr<B>,
        w: Tensor<B, D>,
        g: Tensor<B, D>,
        state: Option<Self::State<D>>,
    ) -> Slot<B>;

    /// The update of every slot: each parameter's new slot, in order.
    fn update(&self, lr: &Lr<B>, slots: Vec<Slot<B>>) -> Vec<Slot<B>>;

    /// A parameter's new weights and state, from its new slot.
    fn unslot<const D: usize>(slot: Slot<B>) -> (Tensor<B, D>, Option<Self::State<D>>);
}

impl<B: EmberBackend> Group<B> for Sgd {
    fn groups(&self) -> bool {
        self.momentum == 0.0
    }

    fn slot<const D: usize>(
        &self,
        _lr: &Lr<B>,
        w: Tensor<B, D>,
        g: Tensor<B, D>,
        _state: Option<Self::State<D>>,
    ) -> Slot<B> {
        let g = self.decayed(&w, g);
        Slot {
            tensors: vec![prim(w), prim(g)],
            time: 0,
        }
    }

    fn update(&self, lr: &Lr<B>, slots: Vec<Slot<B>>) -> Vec<Slot<B>> {
        let pairs = slots
            .into_iter()
            .map(|s| array(s.tensors, "SGD's slot: weights and gradient"))
            .collect();
        let news = B::sgd_steps(pairs, lr);
        let slot = |w| Slot {
            tensors: vec![w],
            time: 0,
        };
        news.into_iter().map(slot).collect()
    }

    fn unslot<const D: usize>(slot: Slot<B>) -> (Tensor<B, D>, Option<Self::State<D>>) {
        let [w] = array(slot.tensors, "SGD's new slot: the weights");
        (tensor(w), None)
    }
}

const QUAD: &str = "Adam's slot: weights, gradient and moments";

impl<B: EmberBackend> Group<B> for Adam {
    fn groups(&self) -> bool {
        true
    }

    fn slot<const D: usize>(
        &self,
        lr: &Lr<B>,
        w: Tensor<B, D>,
        g: Tensor<B, D>,
        state: Option<Self::State<D>>,
    ) -> Slot<B> {
        let (w, g) = self.decayed(lr, w, g);
        let (time, m, v) = moments(state, &g);
        Slot {
            tensors: vec![prim(w), prim(g), prim(m), prim(v)],
            time,
        }
    }

    /// One operation per step count: every parameter's, unless some joined the module later.
    fn update(&self, lr: &Lr<B>, slots: Vec<Slot<B>>) -> Vec<Slot<B>> {
        let mut by_time: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (i, s) in slots.iter().enumerate() {
            by_time.entry(s.time).or_default().push(i);
        }
        let mut slots: Vec<Option<Slot<B>>> = slots.into_iter().map(Some).collect();
        let mut news: Vec<Option<Slot<B>>> = (0..slots.len()).map(|_| None).collect();
        for (time, which) in by_time {
            let params = (which.iter())
                .map(|&i| array(slots[i].take().expect("each slot once").tensors, QUAD))
                .collect();
            for (&i, [w, m, v]) in which.iter().zip(B::adam_steps(params, self.at(time), lr)) {
                news[i] = Some(Slot {
                    tensors: vec![w, m, v],
                    time,
                });
            }
        }
        news.into_iter()
            .map(|s| s.expect("every slot updated"))
            .collect()
    }

    fn unslot<const D: usize>(slot: Slot<B>) -> (Tensor<B, D>, Option<Self::State<D>>) {
        let [w, m, v] = array(slot.tensors, "Adam's new slot: weights and moments");
        let state = AdamState {
            time: slot.time,
            moment_1: tensor(m),
            moment_2: tensor(v),
        };
        (tensor(w), Some(state))
    }
}

/// A slot's tensors as the array they always are (`what` says which).
fn array<T, const N: usize>(tensors: Vec<T>, what: &str) -> [T; N] {
    match tensors.try_into() {
        Ok(array) => array,
        Err(_) => panic!("{what}"),
    }
}

/// K replicas stacked on each parameter's first axis, each at its own learning rate: the
/// inner optimizer's group at the rates [`PerReplica`] makes once a step.
impl<B: EmberBackend, O: Group<B> + StepAt<B>> Group<B> for PerReplica<O, B> {
    fn groups(&self) -> bool {
        self.inner.groups()
    }

    fn rate(&self, lr: f64) -> Lr<B> {
        self.lr(lr)
    }

    fn slot<const D: usize>(
        &self,
        lr: &Lr<B>,
        w: Tensor<B, D>,
        g: Tensor<B, D>,
        state: Option<Self::State<D>>,
    ) -> Slot<B> {
        self.inner.slot(lr, w, g, state)
    }

    fn update(&self, lr: &Lr<B>, slots: Vec<Slot<B>>) -> Vec<Slot<B>> {
        self.inner.update(lr, slots)
    }

    fn unslot<const D: usize>(slot: Slot<B>) -> (Tensor<B, D>, Option<Self::State<D>>) {
        O::unslot(slot)
    }
}

/// ember's optimizer of a module for the Learner: a grouped step where the settings allow,
/// else Burn's adaptor (one parameter at a time).
pub enum Grouped<O, M, B>
where
    O: Group<B::InnerBackend>,
    M: AutodiffModule<B>,
    B: AutodiffBackend,
    B::InnerBackend: EmberBackend,
{
    All { optim: O, records: Records<O, M, B> },
    Each(OptimizerAdaptor<O, M, B>),
}

impl<O, M, B> Grouped<O, M, B>
where
    O: Group<B::InnerBackend>,
    M: AutodiffModule<B>,
    B: AutodiffBackend,
    B::InnerBackend: EmberBackend,
{
    /// Grouped where both the settings and the backend gain from it.
    pub fn new(optim: O) -> Self {
        match optim.groups() && B::InnerBackend::GROUPED_UPDATES {
            true => Self::all(optim),
            false => Grouped::Each(OptimizerAdaptor::from(optim)),
        }
    }

    /// Grouped whatever the backend (the tests compare this path with the adaptor on the CPU).
    fn all(optim: O) -> Self {
        debug_assert!(optim.groups(), "settings that group");
        Grouped::All {
            optim,
            records: Default::default(),
        }
    }
}

impl<O, M, B> Clone for Grouped<O, M, B>
where
    O: Group<B::InnerBackend>,
    M: AutodiffModule<B>,
    B: AutodiffBackend,
    B::InnerBackend: EmberBackend,
{
    fn clone(&self) -> Self {
        match self {
            Grouped::All { optim, records } => Grouped::All {
                optim: optim.clone(),
                records: records.clone(),
            },
            Grouped::Each(adaptor) => Grouped::Each(adaptor.clone()),
        }
    }
}

impl<O, M, B> Optimizer<M, B> for Grouped<O, M, B>
where
    O: Group<B::InnerBackend>,
    M: AutodiffModule<B>,
    B: AutodiffBackend,
    B::InnerBackend: EmberBackend,
{
    type Record = Records<O, M, B>;

    fn step(&mut self, lr: LearningRate, module: M, mut grads: GradientsParams) -> M {
        let (optim, records) = match self {
            Grouped::Each(adaptor) => return adaptor.step(lr, module, grads),
            Grouped::All { optim, records } => (optim, records),
        };
        let rate = optim.rate(lr);
        let mut gather = Gather::<O, M, B> {
            optim,
            records,
            grads: &mut grads,
            lr: &rate,
            ids: Vec::new(),
            slots: Vec::new(),
        };
        module.visit(&mut gather);
        let (ids, slots) = (gather.ids, gather.slots);
        let news = ids.into_iter().zip(optim.update(&rate, slots)).collect();
        module.map(&mut Scatter::<O, M, B> { records, news })
    }

    /// Several devices' gradients: one parameter at a time, as Burn's adaptor does.
    fn step_multi(&mut self, lr: LearningRate, module: M, grads: MultiGradientsParams) -> M {
        let (optim, records) = match self {
            Grouped::Each(adaptor) => return adaptor.step_multi(lr, module, grads),
            Grouped::All { optim, records } => (optim, records),
        };
        let adaptor = OptimizerAdaptor::<O, M, B>::from(optim.clone());
        let mut adaptor = adaptor.load_record(std::mem::take(records));
        let module = adaptor.step_multi(lr, module, grads);
        *records = adaptor.to_record();
        module
    }

    fn to_record(&self) -> Self::Record {
        match self {
            Grouped::All { records, .. } => records.clone(),
            Grouped::Each(adaptor) => adaptor.to_record(),
        }
    }

    fn load_record(self, record: Self::Record) -> Self {
        match self {
            Grouped::All { optim, .. } => Grouped::All {
                optim,
                records: record,
            },
            Grouped::Each(adaptor) => Grouped::Each(adaptor.load_record(record)),
        }
    }
}

/// The visit that takes each parameter with a gradient into a slot, with its state.
struct Gather<'a, O, M, B>
where
    O: Group<B::InnerBackend> + 'a,
    M: AutodiffModule<B>,
    B: AutodiffBackend,
    B::InnerBackend: EmberBackend,
{
    optim: &'a O,
    records: &'a mut Records<O, M, B>,
    grads: &'a mut GradientsParams,
    lr: &'a Lr<B::InnerBackend>,
    ids: Vec<ParamId>,
    slots: Vec<Slot<B::InnerBackend>>,
}

impl<O, M, B> ModuleVisitor<B> for Gather<'_, O, M, B>
where
    O: Group<B::InnerBackend>,
    M: AutodiffModule<B>,
    B: AutodiffBackend,
    B::InnerBackend: EmberBackend,
{
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let Some(grad) = self.grads.remove::<B::InnerBackend, D>(param.id) else {
            return;
        };
        let device = grad.device();
        let state = (self.records.remove(&param.id))
            .map(|record| O::to_device(record.into_state::<D>(), &device));
        let w = param.val().inner();
        self.slots.push(self.optim.slot(self.lr, w, grad, state));
        self.ids.push(param.id);
    }
}

/// The map that puts each updated parameter's new weights and state in place.
struct Scatter<'a, O, M, B>
where
    O: Group<B::InnerBackend> + 'a,
    M: AutodiffModule<B>,
    B: AutodiffBackend,
    B::InnerBackend: EmberBackend,
{
    records: &'a mut Records<O, M, B>,
    news: HashMap<ParamId, Slot<B::InnerBackend>>,
}

impl<O, M, B> ModuleMapper<B> for Scatter<'_, O, M, B>
where
    O: Group<B::InnerBackend>,
    M: AutodiffModule<B>,
    B: AutodiffBackend,
    B::InnerBackend: EmberBackend,
{
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let Some(slot) = self.news.remove(&param.id) else {
            return param;
        };
        let (id, old, mapper) = param.consume();
        let (w, state) = O::unslot::<D>(slot);
        if let Some(state) = state {
            self.records.insert(id, AdaptorRecord::from_state(state));
        }
        let w = Tensor::from_inner(w);
        let w = if old.is_require_grad() {
            w.require_grad()
        } else {
            w
        };
        Param::from_mapped_value(id, w, mapper)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::{Autodiff, Flex};
    use burn::nn::{Linear, LinearConfig};
    use burn::tensor::Distribution;

    type A = Autodiff<Flex>;

    /// The gradients of a step on `layer`; before step 2 without the bias's, so that the
    /// bias's step count trails the weights' (as a parameter that joined later would).
    fn grads(layer: &Linear<A>, x: Tensor<A, 2>, step: usize) -> GradientsParams {
        let loss = layer.forward(x).powf_scalar(2.0).sum();
        let mut grads = GradientsParams::from_grads(loss.backward(), layer);
        if step < 2 {
            let bias = layer.bias.as_ref().expect("a bias");
            grads.remove::<Flex, 1>(bias.id);
        }
        grads
    }

    /// A copy of `layer` with the same parameter ids and values but tensors of its own (a clone
    /// would share autodiff nodes).
    fn copy(layer: &Linear<A>) -> Linear<A> {
        fn own<const D: usize>(p: &Param<Tensor<A, D>>) -> Param<Tensor<A, D>> {
            let values = Tensor::from_data(p.val().into_data(), &Default::default());
            Param::initialized(p.id, values.require_grad())
        }
        Linear {
            weight: own(&layer.weight),
            bias: layer.bias.as_ref().map(own),
        }
    }

    /// Five steps grouped and five through Burn's adaptor give the same bits; after the third
    /// each takes over the other's record, so the records are the same too.
    fn same_as_the_adaptor<O: Group<Flex>>(optim: O) {
        let device = Default::default();
        let mut a = LinearConfig::new(13, 7).init::<A>(&device);
        let mut b = copy(&a);
        let mut grouped = Grouped::<O, Linear<A>, A>::all(optim.clone());
        let mut adaptor = OptimizerAdaptor::<O, Linear<A>, A>::from(optim.clone());
        for step in 0..5 {
            if step == 3 {
                let (ra, rb) = (grouped.to_record(), adaptor.to_record());
                grouped = Grouped::all(optim.clone()).load_record(rb);
                adaptor = OptimizerAdaptor::from(optim.clone()).load_record(ra);
            }
            let x = Tensor::<A, 2>::random([9, 13], Distribution::Normal(0.0, 1.0), &device);
            let (ga, gb) = (grads(&a, x.clone(), step), grads(&b, x, step));
            a = grouped.step(0.05, a, ga);
            b = adaptor.step(0.05, b, gb);
        }
        assert_eq!(a.weight.val().into_data(), b.weight.val().into_data());
        let bias = |l: Linear<A>| l.bias.expect("a bias").val().into_data();
        assert_eq!(bias(a), bias(b));
    }

    #[test]
    fn a_grouped_sgd_step_is_the_adaptor_s() {
        same_as_the_adaptor(Sgd {
            weight_decay: 0.01,
            ..Sgd::default()
        });
    }

    #[test]
    fn a_grouped_adam_step_is_the_adaptor_s_at_each_parameter_s_own_step_count() {
        for decoupled in [false, true] {
            same_as_the_adaptor(Adam {
                beta1: 0.9,
                beta2: 0.999,
                epsilon: 1e-8,
                weight_decay: 0.01,
                decoupled,
            });
        }
    }
}
