//! Replicas: trials that share a model shape and the data, and differ only in seed, learning
//! rate or cross-validation fold, trained as K replicas of one batched model on one device,
//! through the Learner (`ember sweep run` does this by default for such a unit). Each replica
//! has its own initial weights, data order, loss, metrics, optimizer state and learning rate,
//! with folds its own training and validation rows (`folds`), and writes its own trial folder;
//! the group checkpoints once, under `unit-NNN/`.

pub mod bench;
pub mod folds;
pub mod loader;
pub mod model;
pub mod strategy;

use crate::config::{ClassWeight, DataSpec, JobConfig, ModelKind, OptimizerSpec, ScheduleSpec};

/// Why the trials of `configs` cannot train as replicas of one model, or `None` when they can.
pub fn why_not(configs: &[JobConfig]) -> Option<String> {
    if configs.len() == 1 {
        return Some("a single trial".into());
    }
    why_not_group(configs)
}

/// [`why_not`], but for a group that may be one trial (a unit's later group of folds).
pub fn why_not_group(configs: &[JobConfig]) -> Option<String> {
    let Some(first) = configs.first() else {
        return Some("no trial left to train".into());
    };
    if first.model.kind == ModelKind::Cnn {
        return Some("replicas are MLPs; a convolutional network trains one per process".into());
    }
    if first.model.dropout > 0.0 {
        // One draw of masks for all replicas would not be each single run's masks.
        return Some("dropout masks are drawn per run".into());
    }
    if first.early_stopping.is_some() {
        return Some("early stopping ends each trial at its own epoch".into());
    }
    let common = normalised(first);
    if configs.iter().any(|c| normalised(c) != common) {
        return Some("the trials differ in more than seed, learning rate and fold".into());
    }
    if let Some(why) = why_not_folds(configs) {
        return Some(why.into());
    }
    let lrs_differ = configs
        .iter()
        .any(|c| c.optimizer.lr() != first.optimizer.lr());
    if let ScheduleSpec::Cosine { min_lr, .. } = first.schedule
        && min_lr > 0.0
        && lrs_differ
    {
        return Some("a cosine schedule's min_lr does not scale with the learning rate".into());
    }
    None
}

/// Why trials of several folds cannot train as replicas, where they hold several folds.
fn why_not_folds(configs: &[JobConfig]) -> Option<&'static str> {
    let fold = folds::fold_of;
    if configs.iter().all(|c| fold(c) == fold(&configs[0])) {
        return None;
    }
    let first = &configs[0];
    if first.model.kind == ModelKind::LinearScalar {
        return Some("linear-scalar's folds train one per process");
    }
    if matches!(first.class_weight, Some(ClassWeight::Balanced)) {
        return Some("class_weight = \"balanced\" weighs each fold's classes by its own counts");
    }
    None
}

/// `config` with what replicas may differ in (seed, learning rate, fold, the overrides that
/// set them) cleared; the validation split keeps its own seed.
fn normalised(config: &JobConfig) -> JobConfig {
    let mut c = config.clone();
    if let DataSpec::Table(t) = &mut c.data
        && let Some(fold) = &mut t.fold
    {
        fold.index = 0;
    }
    c.split_seed = Some(config.split_seed());
    c.seed = 0;
    c.overrides.clear();
    match &mut c.optimizer {
        OptimizerSpec::Sgd { lr, .. } | OptimizerSpec::Adam { lr, .. } => *lr = 0.0,
    }
    c
}

/// Each replica's learning rate over the first replica's, which the Learner's schedule runs at.
pub fn lr_factors(configs: &[JobConfig]) -> Vec<f64> {
    let base = configs[0].optimizer.lr();
    configs.iter().map(|c| c.optimizer.lr() / base).collect()
}
