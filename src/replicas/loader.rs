//! The replicas' training batches, cut on the device from the split uploaded once. In file
//! order every replica trains on the same rows, and a batch is one `narrow` shared by all. When
//! shuffling, each replica has its own order, drawn from its own seed exactly as a single run's
//! loader draws it: the K permutations are uploaded once per epoch as one `[K, n]` index
//! tensor, and each batch is one gather of its K slices.

use super::model::ReplicaBatch;
use crate::data::loader::{EpochCell, Rows};
use crate::model::mlp::MlpBatch;
use burn::data::dataloader::{DataLoader, DataLoaderIterator, Progress};
use burn::prelude::*;
use burn::tensor::TensorData;
use std::sync::Arc;

#[derive(Clone)]
pub struct ReplicaLoader<B: Backend> {
    /// The training split, in file order.
    split: MlpBatch<B>,
    /// Each replica's shuffle seed; `None` for file order.
    seeds: Option<Vec<u64>>,
    batch_size: usize,
    drop_last: bool,
    epoch: EpochCell,
    device: B::Device,
}

impl<B: Backend> ReplicaLoader<B> {
    pub fn new(
        split: MlpBatch<B>,
        seeds: Option<Vec<u64>>,
        (batch_size, drop_last): (usize, bool),
        epoch: EpochCell,
        device: B::Device,
    ) -> Self {
        Self {
            split,
            seeds,
            batch_size,
            drop_last,
            epoch,
            device,
        }
    }

    /// Rows served per epoch (the partial last batch is dropped with `drop_last`).
    fn rows_per_epoch(&self) -> usize {
        let rows = self.split.rows();
        if self.drop_last {
            rows - rows % self.batch_size
        } else {
            rows
        }
    }

    pub fn batches_per_epoch(&self) -> usize {
        self.rows_per_epoch().div_ceil(self.batch_size)
    }

    /// The replicas' orders for `epoch`, `[K, n]`, on the device.
    fn orders(&self, seeds: &[u64], epoch: usize) -> Tensor<B, 2, Int> {
        let n = self.split.rows();
        let values: Vec<i64> = seeds
            .iter()
            .flat_map(|&seed| {
                let mut rng = crate::rng::stream(seed, "shuffle", epoch as u64);
                crate::rng::permutation(&mut rng, n)
            })
            .map(|i| i as i64)
            .collect();
        Tensor::from_data(TensorData::new(values, [seeds.len(), n]), &self.device)
    }
}

struct ReplicaIter<'a, B: Backend> {
    loader: &'a ReplicaLoader<B>,
    orders: Option<Tensor<B, 2, Int>>,
    next_row: usize,
    total: usize,
}

impl<B: Backend> Iterator for ReplicaIter<'_, B> {
    type Item = ReplicaBatch<B>;

    fn next(&mut self) -> Option<ReplicaBatch<B>> {
        if self.next_row >= self.total {
            return None;
        }
        let len = self.loader.batch_size.min(self.total - self.next_row);
        let start = self.next_row;
        self.next_row += len;
        Some(match &self.orders {
            None => ReplicaBatch {
                rows: self.loader.split.narrow(start, len),
                shared: true,
            },
            Some(orders) => {
                let k = orders.dims()[0];
                let indices = orders.clone().narrow(1, start, len).reshape([k * len]);
                ReplicaBatch {
                    rows: self.loader.split.select(indices),
                    shared: false,
                }
            }
        })
    }
}

impl<B: Backend> DataLoaderIterator<ReplicaBatch<B>> for ReplicaIter<'_, B> {
    fn progress(&self) -> Progress {
        Progress::new(self.next_row, self.total)
    }
}

impl<B: Backend> DataLoader<B, ReplicaBatch<B>> for ReplicaLoader<B> {
    fn iter<'a>(&'a self) -> Box<dyn DataLoaderIterator<ReplicaBatch<B>> + 'a> {
        let orders = (self.seeds.as_deref()).map(|s| self.orders(s, self.epoch.get()));
        Box::new(ReplicaIter {
            loader: self,
            orders,
            next_row: 0,
            total: self.rows_per_epoch(),
        })
    }

    fn num_items(&self) -> usize {
        self.rows_per_epoch()
    }

    fn to_device(&self, device: &B::Device) -> Arc<dyn DataLoader<B, ReplicaBatch<B>>> {
        Arc::new(Self {
            split: self.split.to_device(device),
            device: device.clone(),
            ..self.clone()
        })
    }

    fn slice(&self, start: usize, end: usize) -> Arc<dyn DataLoader<B, ReplicaBatch<B>>> {
        let end = end.min(self.split.rows());
        let start = start.min(end);
        Arc::new(Self {
            split: self.split.narrow(start, end - start),
            ..self.clone()
        })
    }
}
