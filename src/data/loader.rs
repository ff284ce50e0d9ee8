//! The device-resident loader: a whole split is uploaded once, and every batch is cut on the
//! device with a `narrow`. When shuffling, the split is first put in the epoch's order with one
//! `select` per tensor (the permutation, drawn on the host from the seed and the epoch number, is
//! the only thing uploaded per epoch). It implements Burn's `DataLoader`, so the Learner takes it
//! as is.
//!
//! One gather per epoch rather than one per batch moves the same bytes with one kernel per
//! tensor instead of one per tensor and batch.

use burn::data::dataloader::{DataLoader, DataLoaderIterator, Progress};
use burn::prelude::*;
use burn::tensor::TensorData;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A batch type whose rows can be cut on the device. Each model's batch implements it.
pub trait Rows<B: Backend>: Clone + Send + Sync + 'static {
    /// Number of rows (the first dimension of every tensor).
    fn rows(&self) -> usize;
    /// Rows `start..start + len`.
    fn narrow(&self, start: usize, len: usize) -> Self;
    /// The rows at `indices`, in that order.
    fn select(&self, indices: Tensor<B, 1, Int>) -> Self;
    /// The same rows on another device.
    fn to_device(&self, device: &B::Device) -> Self;
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

/// A split held on the device, served in batches.
pub struct DeviceLoader<B: Backend, T: Rows<B>> {
    data: T,
    device: B::Device,
    batch_size: usize,
    drop_last: bool,
    order: Order,
    epoch: EpochCell,
}

impl<B: Backend, T: Rows<B>> DeviceLoader<B, T> {
    pub fn new(
        data: T,
        device: B::Device,
        batch_size: usize,
        drop_last: bool,
        order: Order,
        epoch: EpochCell,
    ) -> Self {
        assert!(batch_size > 0, "batch_size is checked to be positive");
        Self {
            data,
            device,
            batch_size,
            drop_last,
            order,
            epoch,
        }
    }

    /// Rows in the split.
    pub fn num_rows(&self) -> usize {
        self.data.rows()
    }

    /// Rows served per epoch (the partial last batch is dropped with `drop_last`).
    pub fn rows_per_epoch(&self) -> usize {
        let n = self.data.rows();
        if self.drop_last {
            n - n % self.batch_size
        } else {
            n
        }
    }

    /// Batches per epoch.
    pub fn batches_per_epoch(&self) -> usize {
        self.rows_per_epoch().div_ceil(self.batch_size)
    }

    /// The row order of `epoch` (file order when not shuffling).
    pub fn order_of(&self, epoch: usize) -> Vec<usize> {
        match self.order {
            Order::Sequential => (0..self.data.rows()).collect(),
            Order::Shuffled { seed } => crate::rng::permutation(
                &mut crate::rng::stream(seed, "shuffle", epoch as u64),
                self.data.rows(),
            ),
        }
    }
}

struct BatchIter<B: Backend, T: Rows<B>> {
    /// The split in this epoch's order.
    data: T,
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
        let batch = self.data.narrow(self.next_row, len);
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
        let data = match self.order {
            Order::Sequential => self.data.clone(),
            Order::Shuffled { .. } => {
                let order: Vec<i64> = self
                    .order_of(self.epoch.get())
                    .into_iter()
                    .map(|i| i as i64)
                    .collect();
                let n = order.len();
                self.data
                    .select(Tensor::from_data(TensorData::new(order, [n]), &self.device))
            }
        };
        Box::new(BatchIter {
            data,
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
            data: self.data.to_device(device),
            device: device.clone(),
            batch_size: self.batch_size,
            drop_last: self.drop_last,
            order: self.order,
            epoch: self.epoch.clone(),
        })
    }

    fn slice(&self, start: usize, end: usize) -> Arc<dyn DataLoader<B, T>> {
        let end = end.min(self.data.rows());
        let start = start.min(end);
        Arc::new(DeviceLoader {
            data: self.data.narrow(start, end - start),
            device: self.device.clone(),
            batch_size: self.batch_size,
            drop_last: self.drop_last,
            order: self.order,
            epoch: self.epoch.clone(),
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
            Ids(self.0.clone().select(0, indices))
        }
        fn to_device(&self, device: &burn::tensor::Device<B>) -> Self {
            Ids(self.0.clone().to_device(device))
        }
    }

    fn loader(n: usize, batch: usize, drop_last: bool, order: Order) -> DeviceLoader<B, Ids> {
        let device = Default::default();
        let ids = Tensor::<B, 1>::from_data(
            TensorData::new((0..n).map(|i| i as f32).collect::<Vec<_>>(), [n]),
            &device,
        );
        DeviceLoader::new(
            Ids(ids),
            device,
            batch,
            drop_last,
            order,
            EpochCell::default(),
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
    fn slice_serves_only_its_rows() {
        let l = loader(10, 3, false, Order::Sequential);
        let s = l.slice(2, 7);
        assert_eq!(s.num_items(), 5);
        let mut it = s.iter();
        let first: Vec<f32> = it.next().unwrap().0.into_data().to_vec().unwrap();
        assert_eq!(first, vec![2.0, 3.0, 4.0]);
    }
}
