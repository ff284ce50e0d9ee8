//! The epoch loop of a replica group, plugged into Burn's `SupervisedTraining` as a custom
//! strategy, as `train::strategy` is for one run. What differs: every figure is a `[K]` vector
//! read once per report for all replicas; clipping and the NaN guard act per replica, and a
//! replica whose loss or weights go non-finite ends alone (its trial is marked diverged) while
//! the others train on; each replica's history goes to its own trial folder; the group
//! checkpoints once.

use crate::device::launches::{self, Meter};
use crate::error::EmberError;
use crate::model::{StepOutput, StepStats, StepTotals as Totals};
use crate::run::checkpoint::CheckpointDir;
use crate::run::history::{EpochRecord, History, SplitRecord};
use crate::train::clip::clip_per_replica;
use crate::train::non_finite::non_finite_weights;
use crate::train::reports::ReportClock;
use crate::train::saver::Saver;
use crate::train::signals::StopSignal;
use crate::train::strategy::{diverged, step_seed};
use burn::data::dataloader::Progress;
use burn::module::{AutodiffModule, Module};
use burn::tensor::backend::AutodiffBackend;
use burn::train::{
    EventProcessorTraining, InferenceStep, Interrupter, Learner, LearnerEvent,
    LearningComponentsTypes, SupervisedLearningStrategy, SupervisedTrainingEventProcessor,
    TrainLoader, TrainStep, TrainingComponents, TrainingItem, TrainingModel, ValidLoader,
};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type Inner<LC> = <<LC as LearningComponentsTypes>::Backend as AutodiffBackend>::InnerBackend;

/// One replica, as the host sees it.
pub struct ReplicaLog {
    /// Its trial's run folder.
    pub dir: PathBuf,
    /// Its epochs, and its `metrics.csv`.
    pub history: History,
    /// Why it ended early (diverged), if it did.
    pub failure: Option<EmberError>,
    /// Whether it still trains: false once it diverged, or when its trial had ended before.
    pub active: bool,
    /// Its learning rate over the Learner's.
    pub lr_factor: f64,
    /// Its trial's MLflow run, when a tracking server is named.
    pub tracker: Option<std::sync::Arc<crate::tracking::mlflow::Tracker>>,
}

/// What the strategy leaves behind: each replica's log, and why the group stopped early.
#[derive(Default)]
pub struct GroupLog {
    pub replicas: Vec<ReplicaLog>,
    pub stopped: Option<EmberError>,
    /// Kernel launches per training step of each epoch, where they are counted.
    pub launches: Vec<f64>,
}

pub struct ReplicaStrategy {
    pub device_epoch: crate::data::loader::EpochCell,
    pub checkpoints: CheckpointDir,
    pub config_hash: String,
    pub log: Arc<Mutex<GroupLog>>,
    pub console: crate::console::Console,
    pub stop: StopSignal,
    pub reports: ReportClock,
    pub checkpoint_every: Duration,
    pub wait_for_checkpoints: bool,
    pub dropout_seed: Option<u64>,
    pub clip_grad_norm: Option<f64>,
}

/// The mean of the active replicas' figures: what the progress bar shows.
fn mean_of(stats: &[StepStats], log: &GroupLog) -> StepStats {
    let active: Vec<&StepStats> = stats
        .iter()
        .zip(&log.replicas)
        .filter(|(_, r)| r.active)
        .map(|(s, _)| s)
        .collect();
    let n = active.len().max(1) as f64;
    let mean = |f: &dyn Fn(&StepStats) -> Option<f64>| {
        let v: Vec<f64> = active.iter().filter_map(|s| f(s)).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / n)
    };
    StepStats {
        loss: mean(&|s| Some(s.loss)).unwrap_or(f64::NAN),
        accuracy: mean(&|s| s.accuracy),
        mae: mean(&|s| s.mae),
        r2: mean(&|s| s.r2),
        rows: stats.first().map_or(0, |s| s.rows),
    }
}

fn split_record(s: &StepStats, seconds: f64, steps: usize, lr: Option<f64>) -> SplitRecord {
    SplitRecord {
        loss: s.loss,
        accuracy: s.accuracy,
        seconds,
        steps,
        mae: s.mae,
        r2: s.r2,
        lr,
    }
}

/// What `fit` hands to each epoch.
struct Parts<'a, LC: LearningComponentsTypes> {
    train: TrainLoader<LC>,
    valid: ValidLoader<LC>,
    processor: &'a mut SupervisedTrainingEventProcessor<LC>,
    interrupter: Interrupter,
    event_store: &'a burn::train::metric::store::EventStoreClient,
    epochs: usize,
    device: burn::tensor::Device<LC::Backend>,
}

impl ReplicaStrategy {
    /// Marks the active replicas whose figure is not finite as diverged.
    fn check(&self, log: &mut GroupLog, finite: &[bool], what: &str, epoch: usize, steps: &str) {
        for (r, ok) in log.replicas.iter_mut().zip(finite) {
            if r.active && !ok {
                r.active = false;
                r.failure = Some(diverged(&self.checkpoints, what, epoch, steps.to_string()));
            }
        }
    }

    /// One training epoch: every replica's figures, read a few times a second (and at the end)
    /// for the progress bar and the NaN guard.
    fn train_epoch<LC>(
        &self,
        learner: &mut Learner<LC>,
        parts: &mut Parts<'_, LC>,
        epoch: usize,
        log: &mut GroupLog,
    ) -> (Vec<StepStats>, usize)
    where
        LC: LearningComponentsTypes,
        LC::TrainingModel: TrainStep<Output = StepOutput<LC::Backend>>,
    {
        let k = log.replicas.len();
        let mut totals = Totals::<LC::Backend>::new();
        let mut iter = parts.train.iter();
        let (mut step, mut good_until) = (0, 0);
        let mut stats = Vec::new();
        let mut meter = launches::enabled().then(|| Meter::start::<LC::Backend>(&parts.device));
        while let Some(batch) = iter.next() {
            step += 1;
            learner.lr_step();
            if let Some(seed) = self.dropout_seed {
                crate::ops::dropout::seed_step::<LC::Backend>(
                    &parts.device,
                    step_seed(seed, epoch, step),
                );
            }
            let out = learner.train_step(batch);
            let grads = match self.clip_grad_norm {
                Some(max) => clip_per_replica(&learner.model(), out.grads, max, k),
                None => out.grads,
            };
            learner.optimizer_step(grads);
            totals.add(out.item);
            let progress = iter.progress();
            let last = progress.items_processed >= progress.items_total;
            let due = self.reports.step_due(last, last && epoch == parts.epochs);
            if last && let Some(m) = meter.take() {
                let cost = m.stop::<LC::Backend>(&parts.device, step);
                log.launches.extend(cost.launches);
            }
            if last || due {
                stats = totals.read_replicas(k);
                let finite: Vec<bool> = stats.iter().map(|s| s.loss.is_finite()).collect();
                let steps = format!("steps {}-{step}", good_until + 1);
                self.check(log, &finite, "non-finite training loss", epoch, &steps);
                good_until = step;
            }
            if due {
                let shown = mean_of(&stats, log);
                parts
                    .processor
                    .process_train(LearnerEvent::ProcessedItem(TrainingItem::new(
                        Totals::report(shown, &parts.device),
                        progress,
                        Progress::new(epoch, parts.epochs),
                        Some(step),
                        Some(learner.lr_current()),
                    )));
            }
            if parts.interrupter.should_stop() || log.replicas.iter().all(|r| !r.active) {
                break;
            }
        }
        if self.reports.epoch_reported() {
            parts.processor.process_train(LearnerEvent::EndEpoch(epoch));
        }
        if stats.is_empty() {
            stats = totals.read_replicas(k);
        }
        (stats, step)
    }

    /// One validation pass of every replica over its validation rows (shared, or with folds
    /// its own).
    fn valid_epoch<LC>(
        &self,
        model: &LC::InferenceModel,
        parts: &mut Parts<'_, LC>,
        epoch: usize,
        log: &GroupLog,
    ) -> (Vec<StepStats>, f64, usize)
    where
        LC: LearningComponentsTypes,
        LC::InferenceModel: InferenceStep<Output = StepOutput<Inner<LC>>>,
    {
        let started = Instant::now();
        let mut totals = Totals::<Inner<LC>>::new();
        let mut iter = parts.valid.iter();
        let mut step = 0;
        for batch in iter.by_ref() {
            step += 1;
            totals.add(model.step(batch));
        }
        let stats = totals.read_replicas(log.replicas.len());
        if self.reports.take_epoch() {
            let shown = Totals::report(mean_of(&stats, log), &parts.device);
            let progress = Progress::new(epoch, parts.epochs);
            let item = TrainingItem::new(shown, iter.progress(), progress, Some(step), None);
            parts
                .processor
                .process_valid(LearnerEvent::ProcessedItem(item));
            parts.processor.process_valid(LearnerEvent::EndEpoch(epoch));
        }
        (stats, started.elapsed().as_secs_f64(), step)
    }

    /// One epoch of the group: train, validate, guard, record, checkpoint. Returns whether
    /// training goes on.
    fn epoch<LC>(
        &self,
        epoch: usize,
        learner: &mut Learner<LC>,
        parts: &mut Parts<'_, LC>,
        log: &mut GroupLog,
        saves: &mut Saver<LC>,
    ) -> Result<bool, EmberError>
    where
        LC: LearningComponentsTypes,
        LC::TrainingModel: TrainStep<Output = StepOutput<LC::Backend>>,
        LC::InferenceModel: InferenceStep<Output = StepOutput<Inner<LC>>>,
    {
        let k = log.replicas.len();
        self.device_epoch.set(epoch);
        let started = Instant::now();
        let (train, train_steps) = self.train_epoch(learner, parts, epoch, log);
        let seconds = started.elapsed().as_secs_f64();
        if parts.interrupter.should_stop() {
            // A checkpoint write that failed stopped training: its own error says why.
            if let Some(e) = self.checkpoints.failure() {
                return Err(e);
            }
            let why = parts.interrupter.get_message();
            let why = why.unwrap_or_else(|| "training was interrupted".to_string());
            return Err(EmberError::Runtime(format!(
                "stopped in epoch {epoch}: {why}"
            )));
        }
        if log.replicas.iter().all(|r| !r.active) {
            return Ok(false);
        }
        let model = learner.model().valid();
        let (valid, valid_seconds, valid_steps) = self.valid_epoch(&model, parts, epoch, log);
        let finite: Vec<bool> = valid.iter().map(|s| s.loss.is_finite()).collect();
        self.check(
            log,
            &finite,
            "non-finite validation loss",
            epoch,
            "after the last step",
        );
        let bad = non_finite_weights::<LC::Backend, _>(&learner.model(), k);
        let finite: Vec<bool> = bad.iter().map(|b| !b).collect();
        self.check(
            log,
            &finite,
            "non-finite weights",
            epoch,
            "after the last step",
        );
        let stopping = self.stop.requested() && epoch < parts.epochs;
        let last = epoch == parts.epochs;
        // A group's checkpoint holds no records: a resumed group reads them back from the
        // trials' metrics.csv, which must therefore reach the checkpoint's epoch first.
        // Decided once: a checkpoint is written only after the flush.
        let checkpoint = saves.due(last || stopping);
        let train = (&train[..], seconds, train_steps);
        let valid = (&valid[..], valid_seconds, valid_steps);
        record_epoch(log, epoch, (train, valid), learner.lr_current(), checkpoint)?;
        if checkpoint {
            saves.save(epoch, true, learner, parts.event_store, &[])?;
        }
        self.console
            .line(&epoch_line(epoch, parts.epochs, log, seconds));
        if stopping {
            saves.wait_for(epoch)?;
            return Err(EmberError::Interrupted(format!(
                "stopped by Ctrl-C after epoch {epoch}/{}; run the sweep again to resume",
                parts.epochs
            )));
        }
        Ok(log.replicas.iter().any(|r| r.active))
    }
}

/// A pass's statistics per replica, its seconds and its steps.
type Pass<'a> = (&'a [StepStats], f64, usize);

/// Adds the epoch's record to each active replica's history; with `flush`, writes every
/// trial's metrics.csv.
fn record_epoch(
    log: &mut GroupLog,
    epoch: usize,
    (train, valid): (Pass<'_>, Pass<'_>),
    lr: f64,
    flush: bool,
) -> Result<(), EmberError> {
    for (r, replica) in log.replicas.iter_mut().enumerate() {
        if replica.active {
            replica.history.push(EpochRecord {
                epoch,
                train: split_record(&train.0[r], train.1, train.2, Some(lr * replica.lr_factor)),
                valid: split_record(&valid.0[r], valid.1, valid.2, None),
            })?;
        }
        if flush {
            replica.history.flush()?;
        }
    }
    Ok(())
}

/// The epoch's line: the active replicas' validation figures side by side.
fn epoch_line(epoch: usize, epochs: usize, log: &GroupLog, seconds: f64) -> String {
    let figures: Vec<String> = log
        .replicas
        .iter()
        .map(|r| match (r.active, r.history.records().last()) {
            (true, Some(h)) => match h.valid.accuracy {
                Some(a) => format!("{:.2} %", 100.0 * a),
                None => format!("{:.4}", h.valid.loss),
            },
            _ => "ended".to_string(),
        })
        .collect();
    format!(
        "epoch {epoch:>width$}/{epochs}  valid {}  {seconds:.2} s",
        figures.join(" | "),
        width = epochs.to_string().len()
    )
}

impl<LC> SupervisedLearningStrategy<LC> for ReplicaStrategy
where
    LC: LearningComponentsTypes,
    LC::TrainingModel: TrainStep<Output = StepOutput<LC::Backend>>,
    LC::InferenceModel: InferenceStep<Output = StepOutput<Inner<LC>>>,
{
    fn fit(
        &self,
        components: TrainingComponents<LC>,
        mut learner: Learner<LC>,
        train: TrainLoader<LC>,
        valid: ValidLoader<LC>,
        starting_epoch: usize,
    ) -> (TrainingModel<LC>, SupervisedTrainingEventProcessor<LC>) {
        let mut processor = components.event_processor;
        let mut saves = Saver::new(
            &self.checkpoints,
            self.config_hash.clone(),
            (self.checkpoint_every, self.wait_for_checkpoints),
            &components.interrupter,
            &learner,
        );
        let device = learner
            .model()
            .devices()
            .into_iter()
            .next()
            .unwrap_or_default();
        learner.fork(&device);
        let mut parts = Parts {
            train,
            valid,
            processor: &mut processor,
            interrupter: components.interrupter,
            event_store: &components.event_store,
            epochs: components.num_epochs,
            device,
        };
        let mut log = std::mem::take(&mut *self.log.lock().expect("group log lock"));
        for epoch in starting_epoch..=parts.epochs {
            match self.epoch(epoch, &mut learner, &mut parts, &mut log, &mut saves) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    log.stopped = Some(e);
                    break;
                }
            }
        }
        let flushed = log.replicas.iter_mut().try_for_each(|r| r.history.flush());
        if let Err(e) = saves.finish().and(flushed) {
            log.stopped.get_or_insert(e);
        }
        *self.log.lock().expect("group log lock") = log;
        (learner.model(), processor)
    }
}
