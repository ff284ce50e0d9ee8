//! A replica group's data. Replicas of one split share its rows; folds as replicas (a sweep's
//! `folds = K`) each train on their own fold's split, standardised with that split's own
//! statistics, exactly as the fold's single run reads it. Their splits are uploaded once, one
//! after another, as [`Blocks`] that the replica loader cuts each replica's batches from.

use super::loader::{Blocks, batches_of};
use crate::config::JobConfig;
use crate::console::{Console, Verbosity};
use crate::data::{HostData, HostSplit};
use crate::error::Result;
use crate::train;

/// Each replica's own training and validation rows, laid one replica after another.
pub struct FoldRows {
    pub train: HostSplit,
    pub train_blocks: Blocks,
    pub valid: HostSplit,
    pub valid_blocks: Blocks,
}

/// The data a group trains on: the first replica's, and with folds every replica's own rows.
pub struct GroupData {
    /// The first replica's data (its source, its rows left out for a missing label; without
    /// folds, every replica's rows).
    pub data: HostData,
    pub folds: Option<FoldRows>,
}

/// The held-out fold of `config`, if it has one.
pub(super) fn fold_of(config: &JobConfig) -> Option<usize> {
    config.table().and_then(|t| t.fold).map(|f| f.index)
}

/// Reads the group's data and resolves every config from its own replica's data. With folds,
/// only the replicas whose training splits make as many batches an epoch can share their steps
/// (and the learning-rate schedule): those whose count is not the most common one are left out
/// of `configs`, for a group of their own, and their positions come back.
pub fn load(configs: &mut Vec<JobConfig>, console: &Console) -> Result<(GroupData, Vec<usize>)> {
    let data = train::load_data(&mut configs[0], console)?;
    let first_fold = fold_of(&configs[0]);
    if configs.iter().all(|c| fold_of(c) == first_fold) {
        for c in &mut configs[1..] {
            train::resolve_from_data(c, &data)?;
        }
        let data = data.scalar_as_last_input();
        return Ok((GroupData { data, folds: None }, Vec::new()));
    }
    // One read per fold (a sweep's seeds repeat the folds); quiet after the first. The first
    // replica's config is resolved already.
    let quiet = Console::new(Verbosity::Quiet);
    let mut read: Vec<(Option<usize>, HostData)> = vec![(first_fold, data)];
    let mut each = vec![0];
    for c in &mut configs[1..] {
        let fold = fold_of(c);
        let at = match read.iter().position(|(f, _)| *f == fold) {
            Some(at) => at,
            None => {
                read.push((fold, train::load_data(&mut c.clone(), &quiet)?));
                read.len() - 1
            }
        };
        train::resolve_from_data(c, &read[at].1)?;
        each.push(at);
    }
    let (batch_size, drop_last) = (configs[0].batch_size, configs[0].drop_last);
    let batches: Vec<usize> = (each.iter())
        .map(|&at| batches_of(read[at].1.train.rows(), batch_size, drop_last))
        .collect();
    let common = most_common(&batches);
    let left_out: Vec<usize> = (0..configs.len())
        .filter(|&r| batches[r] != common)
        .collect();
    for &r in left_out.iter().rev() {
        configs.remove(r);
        each.remove(r);
    }
    let rows = |split: fn(&HostData) -> &HostSplit| {
        let parts: Vec<&HostSplit> = each.iter().map(|&at| split(&read[at].1)).collect();
        let blocks = Blocks::of(parts.iter().map(|p| p.rows()).collect());
        (HostSplit::concat(&parts), blocks)
    };
    let (train, train_blocks) = rows(|d| &d.train);
    let (valid, valid_blocks) = rows(|d| &d.valid);
    console.line(&format!(
        "folds as replicas: {} replicas, each on its own fold's split ({})",
        configs.len(),
        describe(&train_blocks, &valid_blocks)
    ));
    let folds = FoldRows {
        train,
        train_blocks,
        valid,
        valid_blocks,
    };
    let group = GroupData {
        data: read.swap_remove(0).1,
        folds: Some(folds),
    };
    Ok((group, left_out))
}

/// The value most of `counts` hold (the first of them on a tie).
fn most_common(counts: &[usize]) -> usize {
    let times = |v: usize| counts.iter().filter(|c| **c == v).count();
    let mut best = counts[0];
    for &c in counts {
        if times(c) > times(best) {
            best = c;
        }
    }
    best
}

/// "train rows 275-276, valid rows 68-69".
fn describe(train: &Blocks, valid: &Blocks) -> String {
    let range = |b: &Blocks| {
        let (lo, hi) = (b.counts.iter().min(), b.counts.iter().max());
        match (lo, hi) {
            (Some(lo), Some(hi)) if lo != hi => format!("{lo}-{hi}"),
            (Some(lo), _) => lo.to_string(),
            _ => "0".into(),
        }
    };
    format!("train rows {}, valid rows {}", range(train), range(valid))
}
