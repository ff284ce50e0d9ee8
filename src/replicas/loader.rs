//! The replicas' training batches, cut on the device from the split uploaded once. In file
//! order every replica trains on the same rows, and a batch is one `narrow` shared by all. When
//! shuffling, each replica has its own order, drawn from its own seed exactly as a single run's
//! loader draws it: the K permutations are uploaded once per epoch as one `[K, n]` index
//! tensor, and each batch is one gather of its K slices.
//!
//! Folds as replicas: each replica trains (or validates) on its own split, and the K splits
//! are uploaded once, one after another ([`Blocks`]). A replica's batches are cut from its own
//! block, in file order or in its own shuffled order, exactly as its single run cuts them; where
//! the replicas' batches differ in size (the last one of an epoch), the shorter ones are padded
//! and masked ([`Ragged`]).

use super::model::{Ragged, ReplicaBatch};
use crate::data::loader::{EpochCell, Rows, served, shuffled};
use crate::model::mlp::MlpBatch;
use crate::ops::EmberBackend;
use burn::data::dataloader::{DataLoader, DataLoaderIterator, Progress};
use burn::prelude::*;
use burn::tensor::TensorData;
use std::sync::Arc;

/// Where each replica's own rows lie in the loader's split: replica `r`'s are the
/// `counts[r]` rows from `starts[r]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Blocks {
    pub starts: Vec<usize>,
    pub counts: Vec<usize>,
}

impl Blocks {
    /// The blocks of splits of `counts` rows laid one after another.
    pub fn of(counts: Vec<usize>) -> Self {
        let starts = (counts.iter())
            .scan(0, |at, c| {
                let start = *at;
                *at += c;
                Some(start)
            })
            .collect();
        Self { starts, counts }
    }
}

/// Batches per epoch of `rows`.
pub fn batches_of(rows: usize, batch_size: usize, drop_last: bool) -> usize {
    served(rows, batch_size, drop_last).div_ceil(batch_size)
}

#[derive(Clone)]
pub struct ReplicaLoader<B: Backend> {
    /// The training split, in file order (with `blocks`, every replica's, one after another).
    split: MlpBatch<B>,
    /// Each replica's own rows of `split`; `None` when every replica trains on all of it.
    blocks: Option<Arc<Blocks>>,
    /// Each replica's shuffle seed; `None` for file order.
    seeds: Option<Vec<u64>>,
    batch_size: usize,
    drop_last: bool,
    epoch: EpochCell,
    device: B::Device,
}

impl<B: EmberBackend> ReplicaLoader<B> {
    pub fn new(
        split: MlpBatch<B>,
        seeds: Option<Vec<u64>>,
        (batch_size, drop_last): (usize, bool),
        epoch: EpochCell,
        device: B::Device,
    ) -> Self {
        Self {
            split,
            blocks: None,
            seeds,
            batch_size,
            drop_last,
            epoch,
            device,
        }
    }

    /// Each replica on its own rows of the split, as `blocks` lays them out.
    pub fn with_blocks(mut self, blocks: Blocks) -> Self {
        self.blocks = Some(Arc::new(blocks));
        self
    }

    /// Rows served per epoch of `rows` (the partial last batch is dropped with `drop_last`).
    fn served(&self, rows: usize) -> usize {
        served(rows, self.batch_size, self.drop_last)
    }

    /// Rows served per epoch: the most any replica is served.
    fn rows_per_epoch(&self) -> usize {
        match &self.blocks {
            None => self.served(self.split.rows()),
            Some(b) => b.counts.iter().map(|c| self.served(*c)).max().unwrap_or(0),
        }
    }

    pub fn batches_per_epoch(&self) -> usize {
        self.rows_per_epoch().div_ceil(self.batch_size)
    }

    /// The epoch's batches of every replica's own block: its order of its rows (file order, or
    /// the permutation its single run draws from its seed) as indices into the split, padded to
    /// the longest with its first row, and the mask of its real rows; uploaded once an epoch.
    fn block_epoch(&self, blocks: &Blocks) -> BlockEpoch<B> {
        let epoch = self.epoch.get();
        let total = self.rows_per_epoch();
        let served: Vec<usize> = blocks.counts.iter().map(|c| self.served(*c)).collect();
        let (mut indices, mut mask) = (Vec::new(), Vec::new());
        for (r, &rows) in served.iter().enumerate() {
            let (start, count) = (blocks.starts[r], blocks.counts[r]);
            let order = match &self.seeds {
                None => (0..count).collect(),
                Some(seeds) => shuffled(seeds[r], epoch, count),
            };
            // The padding repeats the block's first row (a row of the split even for an empty
            // block, which folds never make).
            let at = |i: usize| order.get(i).map_or(0, |o| (start + o) as i64);
            indices.extend((0..total).map(|i| at(if i < rows { i } else { 0 })));
            mask.extend((0..total).map(|i| if i < rows { 1.0f32 } else { 0.0 }));
        }
        let k = served.len();
        BlockEpoch {
            indices: Tensor::from_data(TensorData::new(indices, [k, total]), &self.device),
            mask: Tensor::from_data(TensorData::new(mask, [k, total]), &self.device),
            served,
        }
    }

    /// The replicas' orders for `epoch`, `[K, n]`, on the device.
    fn orders(&self, seeds: &[u64], epoch: usize) -> Tensor<B, 2, Int> {
        let n = self.split.rows();
        let values: Vec<i64> = seeds
            .iter()
            .flat_map(|&seed| shuffled(seed, epoch, n))
            .map(|i| i as i64)
            .collect();
        Tensor::from_data(TensorData::new(values, [seeds.len(), n]), &self.device)
    }
}

struct ReplicaIter<'a, B: Backend> {
    loader: &'a ReplicaLoader<B>,
    orders: Option<Tensor<B, 2, Int>>,
    /// With blocks: the epoch's padded orders and masks.
    blocks: Option<BlockEpoch<B>>,
    next_row: usize,
    total: usize,
}

/// An epoch of every replica's own block: `[K, n]` indices into the split and the mask of the
/// real rows (n the most rows any replica is served), and each replica's rows served.
struct BlockEpoch<B: Backend> {
    indices: Tensor<B, 2, Int>,
    mask: Tensor<B, 2>,
    served: Vec<usize>,
}

impl<B: EmberBackend> ReplicaIter<'_, B> {
    /// The batch of rows `start..start + len` of each replica's own order, fewer for a replica
    /// with fewer left (padded and masked).
    fn block_batch(&self, epoch: &BlockEpoch<B>, start: usize, len: usize) -> ReplicaBatch<B> {
        let counts: Vec<usize> = (epoch.served.iter())
            .map(|rows| rows.saturating_sub(start).min(len))
            .collect();
        let k = counts.len();
        let indices = epoch
            .indices
            .clone()
            .narrow(1, start, len)
            .reshape([k * len]);
        ReplicaBatch {
            rows: self.loader.split.select(indices),
            shared: false,
            ragged: Some(Ragged {
                mask: epoch.mask.clone().narrow(1, start, len),
                counts,
            }),
        }
    }
}

impl<B: EmberBackend> Iterator for ReplicaIter<'_, B> {
    type Item = ReplicaBatch<B>;

    fn next(&mut self) -> Option<ReplicaBatch<B>> {
        if self.next_row >= self.total {
            return None;
        }
        let len = self.loader.batch_size.min(self.total - self.next_row);
        let start = self.next_row;
        self.next_row += len;
        if let Some(epoch) = &self.blocks {
            return Some(self.block_batch(epoch, start, len));
        }
        Some(match &self.orders {
            None => ReplicaBatch::shared(self.loader.split.narrow(start, len)),
            Some(orders) => {
                let k = orders.dims()[0];
                let indices = orders.clone().narrow(1, start, len).reshape([k * len]);
                ReplicaBatch {
                    rows: self.loader.split.select(indices),
                    shared: false,
                    ragged: None,
                }
            }
        })
    }
}

impl<B: EmberBackend> DataLoaderIterator<ReplicaBatch<B>> for ReplicaIter<'_, B> {
    fn progress(&self) -> Progress {
        Progress::new(self.next_row, self.total)
    }
}

impl<B: EmberBackend> DataLoader<B, ReplicaBatch<B>> for ReplicaLoader<B> {
    fn iter<'a>(&'a self) -> Box<dyn DataLoaderIterator<ReplicaBatch<B>> + 'a> {
        let (orders, blocks) = match &self.blocks {
            None => {
                let orders = (self.seeds.as_deref()).map(|s| self.orders(s, self.epoch.get()));
                (orders, None)
            }
            Some(blocks) => (None, Some(self.block_epoch(blocks))),
        };
        Box::new(ReplicaIter {
            loader: self,
            orders,
            blocks,
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
        // Each replica's blocks are whole splits: a slice of the rows would cut some of them.
        if self.blocks.is_some() {
            return Arc::new(self.clone());
        }
        let end = end.min(self.split.rows());
        let start = start.min(end);
        Arc::new(Self {
            split: self.split.narrow(start, end - start),
            ..self.clone()
        })
    }
}

/// A loader of batches that every replica sees (the validation rows shared by the replicas of
/// one split), as replica batches.
pub struct SharedRows<B: Backend>(pub Arc<dyn DataLoader<B, MlpBatch<B>>>);

struct SharedIter<'a, B: Backend>(Box<dyn DataLoaderIterator<MlpBatch<B>> + 'a>);

impl<B: Backend> Iterator for SharedIter<'_, B> {
    type Item = ReplicaBatch<B>;

    fn next(&mut self) -> Option<ReplicaBatch<B>> {
        self.0.next().map(ReplicaBatch::shared)
    }
}

impl<B: Backend> DataLoaderIterator<ReplicaBatch<B>> for SharedIter<'_, B> {
    fn progress(&self) -> Progress {
        self.0.progress()
    }
}

impl<B: Backend> DataLoader<B, ReplicaBatch<B>> for SharedRows<B> {
    fn iter<'a>(&'a self) -> Box<dyn DataLoaderIterator<ReplicaBatch<B>> + 'a> {
        Box::new(SharedIter(self.0.iter()))
    }

    fn num_items(&self) -> usize {
        self.0.num_items()
    }

    fn to_device(&self, device: &B::Device) -> Arc<dyn DataLoader<B, ReplicaBatch<B>>> {
        Arc::new(Self(self.0.to_device(device)))
    }

    fn slice(&self, start: usize, end: usize) -> Arc<dyn DataLoader<B, ReplicaBatch<B>>> {
        Arc::new(Self(self.0.slice(start, end)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{HostSplit, Labels, Matrix};
    use burn::backend::Flex;

    /// `rows` rows whose one input is the row's index, so a batch shows which rows it took.
    fn split(rows: usize) -> MlpBatch<Flex> {
        let host = HostSplit {
            features: Matrix {
                rows,
                cols: 1,
                values: (0..rows).map(|i| i as f32).collect(),
            },
            scalar: None,
            labels: Labels::Classes(vec![0; rows]),
        };
        MlpBatch::from_host(&host, &Default::default())
    }

    fn loader(seeds: Option<Vec<u64>>) -> ReplicaLoader<Flex> {
        let epoch = EpochCell::default();
        ReplicaLoader::new(split(9), seeds, (3, false), epoch, Default::default())
            .with_blocks(Blocks::of(vec![5, 4]))
    }

    fn values<const D: usize>(t: Tensor<Flex, D>) -> Vec<f32> {
        t.into_data().to_vec().unwrap()
    }

    /// Blocks of 5 and 4 rows in batches of 3: rows 0-2 and 5-7, then 3-4 and 8, the second
    /// replica's batch padded with its block's first row and masked.
    #[test]
    fn each_replica_takes_its_own_block_and_short_batches_are_padded_and_masked() {
        let loader = loader(None);
        assert_eq!(loader.batches_per_epoch(), 2);
        let batches: Vec<ReplicaBatch<Flex>> = loader.iter().collect();
        assert_eq!(batches.len(), 2);
        assert_eq!(
            values(batches[0].rows.inputs.clone()),
            [0., 1., 2., 5., 6., 7.]
        );
        assert_eq!(batches[0].ragged.as_ref().unwrap().counts, [3, 3]);
        assert_eq!(values(batches[1].rows.inputs.clone()), [3., 4., 8., 5.]);
        let ragged = batches[1].ragged.clone().unwrap();
        assert_eq!(ragged.counts, [2, 1]);
        assert_eq!(values(ragged.mask), [1., 1., 1., 0.]);
    }

    /// Shuffled, each replica's order is the permutation its single run draws for its rows.
    #[test]
    fn a_shuffled_replica_takes_its_own_runs_order_of_its_block() {
        let loader = loader(Some(vec![7, 8]));
        let batches: Vec<ReplicaBatch<Flex>> = loader.iter().collect();
        let mut got = [Vec::new(), Vec::new()];
        for b in &batches {
            let v = values(b.rows.inputs.clone());
            let counts = &b.ragged.as_ref().unwrap().counts;
            let len = v.len() / 2;
            for r in 0..2 {
                got[r].extend(v[r * len..r * len + counts[r]].iter().map(|x| *x as usize));
            }
        }
        for (r, (seed, start, count)) in [(7, 0, 5), (8, 5, 4)].into_iter().enumerate() {
            let mut rng = crate::rng::stream(seed, "shuffle", 0);
            let want: Vec<usize> = (crate::rng::permutation(&mut rng, count).into_iter())
                .map(|i| start + i)
                .collect();
            assert_eq!(got[r], want, "replica {r}");
        }
    }
}
