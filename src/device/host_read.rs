//! The one way ember reads a tensor back from the device. On a GPU every read is a sync that
//! stalls the queue, so ember keeps them rare (a few per epoch, never one per step), and this
//! function counts them so that a test can hold it to that.

use burn::prelude::*;
use burn::tensor::{BasicOps, Element, TensorData};
use std::sync::atomic::{AtomicUsize, Ordering};

static READS: AtomicUsize = AtomicUsize::new(0);

/// Reads `t` back to the host, counting the read.
pub fn read<B: Backend, const D: usize, K>(t: Tensor<B, D, K>) -> TensorData
where
    K: BasicOps<B>,
    K::Elem: Element,
{
    READS.fetch_add(1, Ordering::Relaxed);
    t.into_data()
}

/// The single value of a one-element tensor, as f64 (NaN if it has none).
pub fn scalar<B: Backend, K>(t: Tensor<B, 1, K>) -> f64
where
    K: BasicOps<B>,
    K::Elem: Element,
{
    read(t)
        .convert::<f64>()
        .to_vec::<f64>()
        .ok()
        .and_then(|v| v.first().copied())
        .unwrap_or(f64::NAN)
}

/// Reads made so far by this process (ember's own; Burn's record writers read checkpoints
/// and exported models through their own code).
pub fn count() -> usize {
    READS.load(Ordering::Relaxed)
}
