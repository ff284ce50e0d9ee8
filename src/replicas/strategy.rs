//! The epoch loop of a replica group, plugged into Burn's `SupervisedTraining` as a custom
//! strategy, as `train::strategy` is for one run. What differs: every figure is a `[K]` vector
//! read once per report for all replicas; clipping and the NaN guard act per replica, and a
//! replica whose loss or weights go non-finite ends alone (its trial is marked diverged) while
//! the others train on; each replica's history goes to its own trial folder; the group
//! checkpoints once.

use crate::error::EmberError;
use crate::model::{StepOutput, StepStats, StepTotals as Totals};
use crate::run::checkpoint::CheckpointDir;
use crate::run::history::{EpochRecord, History};
use crate::train::passes::{Figures, Members, Parts, Pass, diverged, guard_epoch, interrupted};
use crate::train::reports::ReportClock;
use crate::train::saver::Saver;
use crate::train::signals::StopSignal;
use burn::module::{AutodiffModule, Module};
use burn::optim::GradientsParams;
use burn::prelude::Backend;
use burn::tensor::backend::AutodiffBackend;
use burn::train::{
    InferenceStep, Learner, LearningComponentsTypes, SupervisedLearningStrategy,
    SupervisedTrainingEventProcessor, TrainLoader, TrainStep, TrainingComponents, TrainingModel,
    ValidLoader,
};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

/// The group as the epoch's passes see it: a replica whose figure goes non-finite ends alone
/// (its trial is marked diverged) while the others train on.
struct Group<'a> {
    log: &'a mut GroupLog,
    checkpoints: &'a CheckpointDir,
}

impl Members for Group<'_> {
    fn count(&self) -> usize {
        self.log.replicas.len()
    }

    fn read<B: Backend>(&self, totals: &mut Totals<B>) -> Vec<StepStats> {
        totals.read_replicas(self.count())
    }

    fn clip<B: AutodiffBackend, M: AutodiffModule<B>>(
        &self,
        model: &M,
        grads: GradientsParams,
        max_norm: f64,
    ) -> GradientsParams {
        crate::train::clip::clip_per_replica(model, grads, max_norm, self.count())
    }

    fn guard(
        &mut self,
        finite: &[bool],
        what: &str,
        epoch: usize,
        steps: &str,
    ) -> Result<(), EmberError> {
        for (r, ok) in self.log.replicas.iter_mut().zip(finite) {
            if r.active && !ok {
                r.active = false;
                r.failure = Some(diverged(self.checkpoints, what, epoch, steps));
            }
        }
        Ok(())
    }

    fn training(&self) -> bool {
        self.log.replicas.iter().any(|r| r.active)
    }

    fn shown(&self, stats: &[StepStats]) -> StepStats {
        mean_of(stats, self.log)
    }
}

impl ReplicaStrategy {
    /// One epoch of the group: train, validate, guard, record, checkpoint. Returns whether
    /// training goes on.
    fn epoch<LC>(
        &self,
        epoch: usize,
        learner: &mut Learner<LC>,
        (parts, device): (&mut Parts<'_, LC>, &burn::tensor::Device<LC::Backend>),
        log: &mut GroupLog,
        saves: &mut Saver<LC>,
    ) -> Result<bool, EmberError>
    where
        LC: LearningComponentsTypes,
        LC::TrainingModel: TrainStep<Output = StepOutput<LC::Backend>>,
        LC::InferenceModel: InferenceStep<Output = StepOutput<Inner<LC>>>,
    {
        self.device_epoch.set(epoch);
        let pass = Pass {
            device,
            reports: &self.reports,
            step_seed: self.dropout_seed,
            clip_grad_norm: self.clip_grad_norm,
            epoch,
        };
        let checkpoints = &self.checkpoints;
        let mut group = Group { log, checkpoints };
        let train = pass.train(learner, parts, &mut group)?;
        log.launches.extend(train.launches);
        if let Some(e) = interrupted(checkpoints, &parts.interrupter, epoch) {
            return Err(e);
        }
        if log.replicas.iter().all(|r| !r.active) {
            return Ok(false);
        }
        let model = learner.model().valid();
        let mut group = Group { log, checkpoints };
        let valid = pass.valid(&model, parts, &group);
        guard_epoch(&mut group, &valid, &learner.model(), epoch)?;
        let stopping = self.stop.requested() && epoch < parts.epochs;
        let last = epoch == parts.epochs;
        // A group's checkpoint holds no records: a resumed group reads them back from the
        // trials' metrics.csv, which must therefore reach the checkpoint's epoch first.
        // Decided once: a checkpoint is written only after the flush.
        let checkpoint = saves.due(last || stopping);
        record_epoch(
            log,
            epoch,
            (&train, &valid),
            learner.lr_current(),
            checkpoint,
        )?;
        if checkpoint {
            saves.save(epoch, true, learner, parts.event_store, &[])?;
        }
        self.console
            .line(&epoch_line(epoch, parts.epochs, log, train.seconds));
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

/// Adds the epoch's record to each active replica's history; with `flush`, writes every
/// trial's metrics.csv.
fn record_epoch(
    log: &mut GroupLog,
    epoch: usize,
    (train, valid): (&Figures, &Figures),
    lr: f64,
    flush: bool,
) -> Result<(), EmberError> {
    for (r, replica) in log.replicas.iter_mut().enumerate() {
        if replica.active {
            replica.history.push(EpochRecord {
                epoch,
                train: train.record(r, Some(lr * replica.lr_factor)),
                valid: valid.record(r, None),
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
        };
        let mut log = std::mem::take(&mut *self.log.lock().expect("group log lock"));
        for epoch in starting_epoch..=parts.epochs {
            let parts = (&mut parts, &device);
            match self.epoch(epoch, &mut learner, parts, &mut log, &mut saves) {
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
