//! The device-resident loader: a whole split is uploaded once, and every batch is cut on the
//! device with a `narrow`. When shuffling, the split is first put in the epoch's order with one
//! `select` per tensor (the permutation, drawn on the host from the seed and the epoch number, is
//! the only thing uploaded per epoch). It implements Burn's `DataLoader`, so the Learner takes it
//! as is.
//!
//! One gather per epoch rather than one per batch moves the same bytes with one kernel per
//! tensor instead of one per tensor and batch.
//!
//! Some devices cap the size of one tensor: wgpu binds a tensor as one storage buffer, 128 MiB
//! at most on Mesa's lavapipe and on many integrated GPUs, less than FashionMNIST's 188 MB of
//! training images. There the split is held as several shards of whole batches; a shuffled
//! epoch is gathered shard by shard into the same order as on any other device.

use crate::ops::EmberBackend;
use burn::data::dataloader::{DataLoader, DataLoaderIterator, Progress};
use burn::prelude::*;
use burn::tensor::{Slice, TensorData, TensorPrimitive};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A batch type whose rows can be cut on the device. Each model's batch implements it.
pub trait Rows<B: Backend>: Clone + Send + Sync + 'static {
    /// Number of rows (the first dimension of every tensor).
    fn rows(&self) -> usize;
    /// Rows `start..start + len`.
    fn narrow(&self, start: usize, len: usize) -> Self;
    /// The rows at `indices`, in that order (through [`gather_rows`]).
    fn select(&self, indices: Tensor<B, 1, Int>) -> Self;
    /// The rows of `parts`, one after the other.
    fn cat(parts: Vec<Self>) -> Self;
    /// The same rows on another device.
    fn to_device(&self, device: &B::Device) -> Self;
}

/// Rows `start..start + len` of a data tensor: `narrow`, without a place in an autodiff
/// backend's graph ([`EmberBackend::data_slice`]). No gradient flows to the loader's tensors.
pub fn data_rows<B: EmberBackend, const D: usize>(
    t: &Tensor<B, D>,
    start: usize,
    len: usize,
) -> Tensor<B, D> {
    let dims = t.dims();
    // As `narrow` checks.
    let end = start + len;
    assert!(
        len > 0 && end <= dims[0],
        "rows {start}..{end} of {}",
        dims[0]
    );
    let slices: Vec<Slice> = (0..D)
        .map(|i| match i {
            0 => Slice::from(start..end),
            _ => Slice::from(0..dims[i]),
        })
        .collect();
    let primitive = t.clone().into_primitive().tensor();
    Tensor::from_primitive(TensorPrimitive::Float(B::data_slice(primitive, &slices)))
}

/// `t`'s rows at `indices`, computed before anything else is queued on the device. Burn 0.21's
/// fusion backends merge the gathers of a batch's tensors into one kernel, and when their widths
/// differ (a `[n, 40]` input beside a `[n, 1]` target) the narrower one comes out wrong: the
/// GPU-path tests caught it on wgpu, where shuffled epochs did not train on the rows they were
/// given. A sync after each gather keeps them apart; it runs once per tensor and epoch.
pub fn gather_rows<B: Backend, const D: usize, K>(
    t: &Tensor<B, D, K>,
    indices: &Tensor<B, 1, Int>,
) -> Tensor<B, D, K>
where
    K: burn::tensor::BasicOps<B>,
{
    let rows = t.clone().select(0, indices.clone());
    // A failed sync surfaces again, with its message, at the next read of the device.
    B::sync(&rows.device()).ok();
    rows
}

/// Which epoch's order the next `iter()` uses. `iter` is not told the epoch, so the training
/// strategy sets it before each epoch (a resumed run sets it to the epoch it resumes at).
#[derive(Clone, Default, Debug)]
pub struct EpochCell(Arc<AtomicUsize>);

impl EpochCell {
    pub fn set(&self, epoch: usize) {
        self.0.store(epoch, Ordering::SeqCst);
    }

    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// How a loader orders rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// File order, every epoch.
    Sequential,
    /// A fresh permutation each epoch, drawn from this seed and the epoch number.
    Shuffled { seed: u64 },
}

/// The smallest batch of a pass without gradients. Such a pass keeps no activations for a
/// backward, so it can take larger batches than training, and each batch costs a dozen
/// operations whatever its size: linear-scalar's validation in its 128-row training batches
/// took 3.5 % of its training time, a tenth of an epoch's wall time outside the steps.
pub const EVAL_ROWS: usize = 1024;

/// Builds a [`DeviceLoader`], as Burn's `DataLoaderBuilder` does:
/// `LoaderBuilder::new(64).shuffle(seed).epoch(cell).build(&split, row_bytes, device, upload)`.
#[derive(Clone, Debug)]
pub struct LoaderBuilder {
    batch_size: usize,
    drop_last: bool,
    order: Order,
    epoch: EpochCell,
    max_tensor_bytes: Option<u64>,
}

impl LoaderBuilder {
    /// File order, every row, at most `batch_size` rows a batch.
    pub fn new(batch_size: usize) -> Self {
        assert!(batch_size > 0, "batch_size is checked to be positive");
        Self {
            batch_size,
            drop_last: false,
            order: Order::Sequential,
            epoch: EpochCell::default(),
            max_tensor_bytes: None,
        }
    }

    /// File order, every row, for a pass without gradients (validation, `ember eval`): batches
    /// of [`EVAL_ROWS`] rows, or of the training's `batch_size` when it is larger.
    pub fn evaluation(batch_size: usize) -> Self {
        Self::new(batch_size.max(EVAL_ROWS))
    }

    /// Rows a batch.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// Leave out the last batch when it is partial.
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }

    /// A new order each epoch, from `seed` and the epoch number (`None`: file order).
    pub fn shuffle(mut self, seed: Option<u64>) -> Self {
        self.order = seed.map_or(Order::Sequential, |seed| Order::Shuffled { seed });
        self
    }

    /// The cell the training strategy sets to the epoch about to start.
    pub fn epoch(mut self, cell: EpochCell) -> Self {
        self.epoch = cell;
        self
    }

    /// The largest tensor the device holds (see `device::max_tensor_bytes`).
    pub fn max_tensor_bytes(mut self, bytes: Option<u64>) -> Self {
        self.max_tensor_bytes = bytes;
        self
    }

    /// Rows per shard: every row when the device takes any size, else as many whole batches
    /// of `row_bytes` as fit.
    fn shard_rows(&self, rows: usize, row_bytes: usize) -> usize {
        let Some(max) = self.max_tensor_bytes else {
            return rows.max(1);
        };
        let fit = (max / row_bytes.max(1) as u64) as usize;
        (fit / self.batch_size * self.batch_size)
            .max(self.batch_size)
            .min(rows.max(1))
    }

    /// Uploads `split` (rows of `row_bytes` bytes in its widest tensor) with `upload`, once, in
    /// as many shards as the device needs.
    pub fn build<B: Backend, T: Rows<B>>(
        self,
        split: &super::HostSplit,
        row_bytes: usize,
        device: B::Device,
        upload: impl Fn(&super::HostSplit) -> T,
    ) -> DeviceLoader<B, T> {
        let rows = split.rows();
        let shard_rows = self.shard_rows(rows, row_bytes);
        let shards = if shard_rows >= rows {
            vec![upload(split)]
        } else {
            (0..rows)
                .step_by(shard_rows)
                .map(|start| upload(&split.range(start, shard_rows.min(rows - start))))
                .collect()
        };
        self.from_shards(shards, shard_rows, device)
    }

    /// A loader over rows already on the device, in shards of `shard_rows` rows.
    pub fn from_shards<B: Backend, T: Rows<B>>(
        self,
        shards: Vec<T>,
        shard_rows: usize,
        device: B::Device,
    ) -> DeviceLoader<B, T> {
        DeviceLoader {
            rows: shards.iter().map(Rows::rows).sum(),
            shards,
            shard_rows,
            device,
            batch_size: self.batch_size,
            drop_last: self.drop_last,
            order: self.order,
            epoch: self.epoch,
        }
    }
}

/// A split held on the device, served in batches.
pub struct DeviceLoader<B: Backend, T: Rows<B>> {
    /// The split in file order: consecutive shards of `shard_rows` rows (the last may be
    /// shorter), a whole number of batches each.
    shards: Vec<T>,
    shard_rows: usize,
    rows: usize,
    device: B::Device,
    batch_size: usize,
    drop_last: bool,
    order: Order,
    epoch: EpochCell,
}

impl<B: Backend, T: Rows<B>> Clone for DeviceLoader<B, T> {
    fn clone(&self) -> Self {
        Self {
            shards: self.shards.clone(),
            shard_rows: self.shard_rows,
            rows: self.rows,
            device: self.device.clone(),
            batch_size: self.batch_size,
            drop_last: self.drop_last,
            order: self.order,
            epoch: self.epoch.clone(),
        }
    }
}

/// Rows served per epoch of `rows`: all, or with `drop_last` the whole batches'.
pub fn served(rows: usize, batch_size: usize, drop_last: bool) -> usize {
    match drop_last {
        true => rows - rows % batch_size,
        false => rows,
    }
}

/// The order of `rows` rows in a shuffled `epoch`, drawn from `seed`: a single run's, and each
/// replica's from its own seed.
pub fn shuffled(seed: u64, epoch: usize, rows: usize) -> Vec<usize> {
    crate::rng::permutation(&mut crate::rng::stream(seed, "shuffle", epoch as u64), rows)
}

impl<B: Backend, T: Rows<B>> DeviceLoader<B, T> {
    /// Rows in the split.
    pub fn num_rows(&self) -> usize {
        self.rows
    }

    /// Rows served per epoch (the partial last batch is dropped with `drop_last`).
    pub fn rows_per_epoch(&self) -> usize {
        served(self.rows, self.batch_size, self.drop_last)
    }

    /// Batches per epoch.
    pub fn batches_per_epoch(&self) -> usize {
        self.rows_per_epoch().div_ceil(self.batch_size)
    }

    /// The row order of `epoch` (file order when not shuffling).
    pub fn order_of(&self, epoch: usize) -> Vec<usize> {
        match self.order {
            Order::Sequential => (0..self.rows).collect(),
            Order::Shuffled { seed } => shuffled(seed, epoch, self.rows),
        }
    }

    fn indices(&self, rows: &[usize]) -> Tensor<B, 1, Int> {
        let values: Vec<i64> = rows.iter().map(|&i| i as i64).collect();
        Tensor::from_data(TensorData::new(values, [rows.len()]), &self.device)
    }

    /// The split in `order`, shard by shard: each output shard gathers its rows from every
    /// source shard they live in, then puts them back in `order` with one more gather.
    fn gathered(&self, order: &[usize]) -> Vec<T> {
        if let [only] = self.shards.as_slice() {
            return vec![only.select(self.indices(order))];
        }
        order
            .chunks(self.shard_rows)
            .map(|wanted| {
                let mut parts = Vec::new();
                let mut place = vec![0; wanted.len()];
                let mut filled = 0;
                for (s, shard) in self.shards.iter().enumerate() {
                    let from = s * self.shard_rows;
                    let local: Vec<usize> = (0..wanted.len())
                        .filter(|&q| wanted[q] / self.shard_rows == s)
                        .collect();
                    if local.is_empty() {
                        continue;
                    }
                    for (k, &q) in local.iter().enumerate() {
                        place[q] = filled + k;
                    }
                    filled += local.len();
                    let rows: Vec<usize> = local.iter().map(|&q| wanted[q] - from).collect();
                    parts.push(shard.select(self.indices(&rows)));
                }
                T::cat(parts).select(self.indices(&place))
            })
            .collect()
    }

    /// Rows `start..start + len` across shards (a slice spans two shards at most).
    fn range(shards: &[T], shard_rows: usize, start: usize, len: usize) -> T {
        let mut parts = Vec::new();
        let mut at = start;
        while at < start + len {
            let (s, off) = (at / shard_rows, at % shard_rows);
            let take = (shard_rows - off).min(start + len - at);
            parts.push(shards[s].narrow(off, take));
            at += take;
        }
        match parts.len() {
            1 => parts.pop().expect("one part"),
            _ => T::cat(parts),
        }
    }
}

struct BatchIter<B: Backend, T: Rows<B>> {
    /// The split in this epoch's order, in shards of `shard_rows` rows.
    shards: Vec<T>,
    shard_rows: usize,
    batch_size: usize,
    next_row: usize,
    total: usize,
    _backend: std::marker::PhantomData<B>,
}

impl<B: Backend, T: Rows<B>> Iterator for BatchIter<B, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        if self.next_row >= self.total {
            return None;
        }
        let len = self.batch_size.min(self.total - self.next_row);
        let batch = DeviceLoader::<B, T>::range(&self.shards, self.shard_rows, self.next_row, len);
        self.next_row += len;
        Some(batch)
    }
}

impl<B: Backend, T: Rows<B>> DataLoaderIterator<T> for BatchIter<B, T> {
    fn progress(&self) -> Progress {
        Progress::new(self.next_row, self.total)
    }
}

impl<B: Backend, T: Rows<B>> DataLoader<B, T> for DeviceLoader<B, T> {
    fn iter<'a>(&'a self) -> Box<dyn DataLoaderIterator<T> + 'a> {
        let shards = match self.order {
            Order::Sequential => self.shards.clone(),
            Order::Shuffled { .. } => self.gathered(&self.order_of(self.epoch.get())),
        };
        Box::new(BatchIter {
            shards,
            shard_rows: self.shard_rows,
            batch_size: self.batch_size,
            next_row: 0,
            total: self.rows_per_epoch(),
            _backend: std::marker::PhantomData,
        })
    }

    fn num_items(&self) -> usize {
        self.rows_per_epoch()
    }

    fn to_device(&self, device: &B::Device) -> Arc<dyn DataLoader<B, T>> {
        Arc::new(DeviceLoader {
            shards: self.shards.iter().map(|s| s.to_device(device)).collect(),
            device: device.clone(),
            ..self.clone()
        })
    }

    fn slice(&self, start: usize, end: usize) -> Arc<dyn DataLoader<B, T>> {
        let end = end.min(self.rows);
        let start = start.min(end);
        let shards: Vec<T> = (start..end)
            .step_by(self.shard_rows)
            .map(|at| {
                Self::range(
                    &self.shards,
                    self.shard_rows,
                    at,
                    self.shard_rows.min(end - at),
                )
            })
            .collect();
        Arc::new(DeviceLoader {
            rows: end - start,
            shards,
            ..self.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::Flex;

    type B = Flex;

    /// A one-column batch whose values are the row numbers.
    #[derive(Clone)]
    struct Ids(Tensor<B, 1>);

    impl Rows<B> for Ids {
        fn rows(&self) -> usize {
            self.0.dims()[0]
        }
        fn narrow(&self, start: usize, len: usize) -> Self {
            Ids(self.0.clone().narrow(0, start, len))
        }
        fn select(&self, indices: Tensor<B, 1, Int>) -> Self {
            Ids(gather_rows(&self.0, &indices))
        }
        fn cat(parts: Vec<Self>) -> Self {
            Ids(Tensor::cat(parts.into_iter().map(|p| p.0).collect(), 0))
        }
        fn to_device(&self, device: &burn::tensor::Device<B>) -> Self {
            Ids(self.0.clone().to_device(device))
        }
    }

    fn ids(start: usize, len: usize) -> Ids {
        let values: Vec<f32> = (start..start + len).map(|i| i as f32).collect();
        Ids(Tensor::from_data(
            TensorData::new(values, [len]),
            &Default::default(),
        ))
    }

    #[test]
    fn data_rows_cut_what_narrow_cuts_and_gradients_flow_through_what_a_model_makes_of_them() {
        type A = burn::backend::Autodiff<Flex>;
        let device = Default::default();
        let values: Vec<f32> = (0..24).map(|i| i as f32 * 0.5).collect();
        let table = Tensor::<A, 2>::from_data(TensorData::new(values.clone(), [8, 3]), &device);
        let column = Tensor::<A, 1>::from_data(TensorData::new(values, [24]), &device);
        let cut = data_rows(&table, 2, 5);
        assert_eq!(cut.dims(), [5, 3]);
        assert_eq!(cut.to_data(), table.clone().narrow(0, 2, 5).to_data());
        assert_eq!(
            data_rows(&column, 23, 1).to_data(),
            column.narrow(0, 23, 1).to_data()
        );
        // A gradient still flows through what a model computes from the rows.
        let w = Tensor::<A, 2>::ones([3, 1], &device).require_grad();
        let grads = cut.matmul(w.clone()).sum().backward();
        let dw = w.grad(&grads).expect("w's gradient");
        let want: Vec<f32> = (0..3)
            .map(|c| (2..7).map(|r| (r * 3 + c) as f32 * 0.5).sum())
            .collect();
        assert_eq!(dw.to_data(), TensorData::new(want, [3, 1]));
    }

    fn loader(n: usize, batch: usize, drop_last: bool, order: Order) -> DeviceLoader<B, Ids> {
        let seed = match order {
            Order::Sequential => None,
            Order::Shuffled { seed } => Some(seed),
        };
        LoaderBuilder::new(batch)
            .drop_last(drop_last)
            .shuffle(seed)
            .from_shards(vec![ids(0, n)], n, Default::default())
    }

    /// The same rows held as shards of `shard_rows` rows, as on a device with a size cap.
    fn sharded(n: usize, batch: usize, shard_rows: usize, seed: u64) -> DeviceLoader<B, Ids> {
        let shards = (0..n)
            .step_by(shard_rows)
            .map(|s| ids(s, shard_rows.min(n - s)))
            .collect();
        LoaderBuilder::new(batch).shuffle(Some(seed)).from_shards(
            shards,
            shard_rows,
            Default::default(),
        )
    }

    fn epoch_rows(l: &DeviceLoader<B, Ids>, epoch: usize) -> (Vec<usize>, Vec<usize>) {
        l.epoch.set(epoch);
        let mut rows = Vec::new();
        let mut sizes = Vec::new();
        let mut it = l.iter();
        for b in it.by_ref() {
            let v: Vec<f32> = b.0.into_data().to_vec().unwrap();
            sizes.push(v.len());
            rows.extend(v.into_iter().map(|x| x as usize));
        }
        assert_eq!(it.progress().items_processed, it.progress().items_total);
        (rows, sizes)
    }

    #[test]
    fn sequential_epoch_is_file_order_with_partial_last_batch() {
        let l = loader(10, 4, false, Order::Sequential);
        let (rows, sizes) = epoch_rows(&l, 1);
        assert_eq!(rows, (0..10).collect::<Vec<_>>());
        assert_eq!(sizes, vec![4, 4, 2]);
        assert_eq!((l.num_items(), l.batches_per_epoch()), (10, 3));
    }

    #[test]
    fn drop_last_drops_the_partial_batch() {
        let l = loader(10, 4, true, Order::Sequential);
        let (rows, sizes) = epoch_rows(&l, 1);
        assert_eq!(sizes, vec![4, 4]);
        assert_eq!(rows, (0..8).collect::<Vec<_>>());
        assert_eq!(l.num_items(), 8);
    }

    #[test]
    fn shuffled_epoch_visits_every_row_once_in_a_new_order_each_epoch() {
        let l = loader(50, 8, false, Order::Shuffled { seed: 3 });
        let (e1, _) = epoch_rows(&l, 1);
        let (e2, _) = epoch_rows(&l, 2);
        for e in [&e1, &e2] {
            let mut sorted = e.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..50).collect::<Vec<_>>());
        }
        assert_ne!(e1, e2);
        assert_ne!(e1, (0..50).collect::<Vec<_>>());
        // The same seed and epoch give the same order, in a fresh loader too.
        let again = loader(50, 8, false, Order::Shuffled { seed: 3 });
        assert_eq!(epoch_rows(&again, 2).0, e2);
        let other = loader(50, 8, false, Order::Shuffled { seed: 4 });
        assert_ne!(epoch_rows(&other, 2).0, e2);
    }

    #[test]
    fn a_sharded_split_serves_the_same_order_as_a_whole_one() {
        // 50 rows in shards of 16 (two batches of 8), the last shard of 2.
        let whole = loader(50, 8, false, Order::Shuffled { seed: 3 });
        let parts = sharded(50, 8, 16, 3);
        assert_eq!(parts.shards.len(), 4);
        for epoch in 1..=3 {
            let (a, sizes_a) = epoch_rows(&whole, epoch);
            let (b, sizes_b) = epoch_rows(&parts, epoch);
            assert_eq!(a, b, "epoch {epoch}");
            assert_eq!(a, whole.order_of(epoch));
            assert_eq!(sizes_a, sizes_b);
        }
        let s = parts.slice(5, 40);
        let mut it = s.iter();
        let first: Vec<f32> = it.next().unwrap().0.into_data().to_vec().unwrap();
        assert_eq!(s.num_items(), 35);
        assert_eq!(first.len(), 8);
    }

    #[test]
    fn shards_hold_whole_batches_within_the_size_cap() {
        let b = LoaderBuilder::new(64).max_tensor_bytes(Some(128 << 20));
        // FashionMNIST's 60,000 images of 784 f32 do not fit in 128 MiB: 668 batches a shard.
        assert_eq!(b.shard_rows(60_000, 784 * 4), 42_752);
        assert_eq!(LoaderBuilder::new(64).shard_rows(60_000, 784 * 4), 60_000);
        // A cap below one batch still gives whole batches.
        let tiny = LoaderBuilder::new(64).max_tensor_bytes(Some(1000));
        assert_eq!(tiny.shard_rows(60_000, 784 * 4), 64);
    }

    #[test]
    fn slice_serves_only_its_rows() {
        let l = loader(10, 3, false, Order::Sequential);
        let s = l.slice(2, 7);
        assert_eq!(s.num_items(), 5);
        let mut it = s.iter();
        let first: Vec<f32> = it.next().unwrap().0.into_data().to_vec().unwrap();
        assert_eq!(first, vec![2.0, 3.0, 4.0]);
    }
}
