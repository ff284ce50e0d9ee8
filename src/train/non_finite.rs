//! The NaN guard's look at a model's weights after an epoch: whether each replica (a single
//! run is one) holds a NaN or an infinity, with one device read.

use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::*;

/// Counts each replica's non-finite weights, `[K]`: every float parameter's leading axis is
/// the replica's (a single model's parameters are one replica's).
struct NonFinite<B: Backend> {
    replicas: usize,
    count: Option<Tensor<B, 1, Int>>,
}

impl<B: Backend> ModuleVisitor<B> for NonFinite<B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let k = self.replicas;
        let bad = param.val().is_finite().bool_not().int();
        let bad = bad.reshape([k as i32, -1]).sum_dim(1).reshape([k]);
        self.count = Some(match self.count.take() {
            Some(c) => c + bad,
            None => bad,
        });
    }
}

/// Whether each of `model`'s `replicas` has a NaN or infinite weight.
pub fn non_finite_weights<B: Backend, M: Module<B>>(model: &M, replicas: usize) -> Vec<bool> {
    let mut v = NonFinite::<B> {
        replicas,
        count: None,
    };
    model.visit(&mut v);
    let Some(count) = v.count else {
        return vec![false; replicas];
    };
    let counts: Vec<i64> = crate::device::host_read::read(count)
        .convert::<i64>()
        .to_vec()
        .expect("an int tensor reads back");
    counts.iter().map(|c| *c != 0).collect()
}
