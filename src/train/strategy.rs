//! ember's epoch loop, plugged into Burn's `SupervisedTraining` as a custom learning strategy.
//! It drives Burn's `Learner` exactly as Burn's single-device strategy does (lr step, train step,
//! optimizer step, validation, checkpoint), and differs where small models need it:
//! - step losses and correct counts are summed on the device; the host reads those totals a few
//!   times a second for progress and once at the end of each epoch, never once per step;
//! - the event processor (metrics, renderer) gets those reports, not every step;
//! - a non-finite loss or weight stops the run before any checkpoint is written from it;
//! - checkpoints go through ember's atomic checkpointer, and Ctrl-C stops after a checkpoint.

use crate::config::EarlyStopping;
use crate::error::EmberError;
use crate::model::StepOutput;
use crate::run::checkpoint::CheckpointDir;
use crate::run::early_stop;
use crate::run::folder;
use crate::run::history::{EpochRecord, History, SplitRecord};
use crate::train::passes::{OneModel, Parts, Pass, guard_epoch, interrupted};
use crate::train::reports::ReportClock;
use crate::train::saver::Saver;
use crate::train::signals::StopSignal;
use burn::module::AutodiffModule;
use burn::tensor::backend::AutodiffBackend;
use burn::train::checkpoint::{CheckpointingAction, CheckpointingStrategy};
use burn::train::metric::store::EventStoreClient;
use burn::train::{
    InferenceStep, Learner, LearningComponentsTypes, SupervisedLearningStrategy,
    SupervisedTrainingEventProcessor, TrainLoader, TrainStep, TrainingComponents, TrainingModel,
    ValidLoader,
};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Inner<LC> = <<LC as LearningComponentsTypes>::Backend as AutodiffBackend>::InnerBackend;

/// What the strategy leaves behind for `train` to read after `launch` returns.
#[derive(Default)]
pub struct RunLog {
    pub history: Vec<EpochRecord>,
    pub failure: Option<EmberError>,
    /// Kernel launches per training step of each epoch, where they are counted
    /// (`device::launches`).
    pub launches: Vec<f64>,
}

pub struct EmberStrategy<LC: LearningComponentsTypes> {
    pub device: burn::tensor::Device<LC::Backend>,
    pub epoch_cell: crate::data::loader::EpochCell,
    pub checkpoints: CheckpointDir,
    pub config_hash: String,
    pub run_dir: PathBuf,
    pub log: Arc<Mutex<RunLog>>,
    pub console: crate::console::Console,
    pub stop: StopSignal,
    /// When figures go to the progress bar.
    pub reports: ReportClock,
    /// Minimum time between two checkpoints; the last epoch and a Ctrl-C always get one.
    pub checkpoint_every: Duration,
    /// Wait for each checkpoint to be written before training on. Burn 0.21's fusion backends
    /// (CUDA, wgpu) lose a tensor that the checkpointer's thread reads while the training
    /// thread goes on ("Should have handle for tensor" in `burn-ir`); the CPU backend has no
    /// such race, and there the write overlaps the next epoch.
    pub wait_for_checkpoints: bool,
    /// With dropout or augmentation, the run's seed: each step's masks, shifts and mirrors are
    /// drawn from (seed, epoch, step), so a resumed run draws the same ones
    /// (`ops::dropout::seed_step`); no record saves a generator's state.
    pub step_seed: Option<u64>,
    /// Scale the gradients to this global norm at most, between backward and the update.
    pub clip_grad_norm: Option<f64>,
    /// A standardised regression target's deviation: the history is kept in its units.
    pub target_std: Option<f64>,
    /// Write a TensorBoard event file beside `metrics.csv`.
    pub tensorboard: bool,
    /// Log each epoch to MLflow too.
    pub tracker: Option<Arc<crate::tracking::mlflow::Tracker>>,
    pub early_stopping: Option<EarlyStopping>,
    /// Writes the best epoch's model (`model-best.*`) when early stopping is on.
    pub save_best: Option<SaveBest<LC>>,
}

/// Writes a model's files; called with the inference form of the model.
pub type SaveBest<LC> = Box<
    dyn Fn(&<LC as LearningComponentsTypes>::InferenceModel) -> Result<(), EmberError>
        + Send
        + Sync,
>;

/// Saves every epoch; ember's checkpoint commit removes the older ones.
pub(crate) struct EveryEpoch;

impl CheckpointingStrategy for EveryEpoch {
    fn checkpointing(&mut self, _epoch: usize, _: &EventStoreClient) -> Vec<CheckpointingAction> {
        vec![CheckpointingAction::Save]
    }
}

impl<LC> EmberStrategy<LC>
where
    LC: LearningComponentsTypes,
    LC::TrainingModel: TrainStep<Output = StepOutput<LC::Backend>>,
    LC::InferenceModel: InferenceStep<Output = StepOutput<Inner<LC>>>,
{
    /// What every step of `epoch` needs besides the learner and the data.
    fn pass(&self, epoch: usize) -> Pass<'_, LC::Backend> {
        Pass {
            device: &self.device,
            reports: &self.reports,
            step_seed: self.step_seed,
            clip_grad_norm: self.clip_grad_norm,
            epoch,
        }
    }

    /// Records the launches per step of an epoch, where they are counted.
    fn count_launches(&self, launches: Option<f64>) {
        let mut log = self.log.lock().expect("run log lock");
        log.launches.extend(launches);
    }

    fn epoch_line(&self, r: &EpochRecord, epochs: usize) -> String {
        let acc = |s: &SplitRecord| {
            let acc = s.accuracy.map(|a| format!(" acc {:.2} %", 100.0 * a));
            let fit =
                s.r2.map(|r2| format!(" mae {:.4} r2 {r2:.4}", s.mae.unwrap_or(f64::NAN)));
            acc.or(fit).unwrap_or_default()
        };
        format!(
            "epoch {:>width$}/{epochs}  train loss {:.4}{}  valid loss {:.4}{}  {:.2} s  {:.0} steps/s",
            r.epoch,
            r.train.loss,
            acc(&r.train),
            r.valid.loss,
            acc(&r.valid),
            r.train.seconds,
            r.train.steps_per_s(),
            width = epochs.to_string().len()
        )
    }

    fn fail(&self, e: EmberError) {
        let mut log = self.log.lock().expect("run log lock");
        if log.failure.is_none() {
            log.failure = Some(e);
        }
    }
}

impl<LC> EmberStrategy<LC>
where
    LC: LearningComponentsTypes,
    LC::TrainingModel: TrainStep<Output = StepOutput<LC::Backend>>,
    LC::InferenceModel: InferenceStep<Output = StepOutput<Inner<LC>>>,
{
    /// One epoch: train, validate, check for non-finite values, record, checkpoint. Returns
    /// whether training goes on (false when early stopping ends it).
    #[allow(clippy::too_many_arguments)]
    fn epoch(
        &self,
        epoch: usize,
        learner: &mut Learner<LC>,
        parts: &mut Parts<'_, LC>,
        history: &mut History,
        saves: &mut Saver<LC>,
    ) -> Result<bool, EmberError> {
        let pass = self.pass(epoch);
        self.epoch_cell.set(epoch);
        let mut one = OneModel {
            checkpoints: &self.checkpoints,
        };
        let train = pass.train(learner, parts, &mut one)?;
        self.count_launches(train.launches);
        if let Some(e) = interrupted(&self.checkpoints, &parts.interrupter, epoch) {
            return Err(e);
        }
        let model = learner.model().valid();
        let valid = pass.valid(&model, parts, &one);
        guard_epoch(&mut one, &valid, &learner.model(), epoch)?;
        let epochs = parts.epochs;
        let record = EpochRecord {
            epoch,
            train: train.record(0, Some(learner.lr_current())),
            valid: valid.record(0, None),
        };
        history.push(record)?;
        let record = *history.records().last().expect("just pushed");
        let early_stop = self.keep_best(&model, epoch, history.records())?;
        let stopping = self.stop.requested() && epoch < epochs && !early_stop;
        let last = epoch == epochs || early_stop;
        saves.save(
            epoch,
            last || stopping,
            learner,
            parts.event_store,
            history.records(),
        )?;
        self.console.line(&self.epoch_line(&record, epochs));
        if stopping {
            return Err(self.stopped_by_ctrl_c(epoch, epochs, saves));
        }
        if early_stop && epoch < epochs {
            self.console.line(&format!(
                "early stopping after epoch {epoch}: no improvement in {} epochs",
                self.early_stopping.as_ref().map_or(0, |e| e.patience)
            ));
        }
        Ok(!early_stop)
    }

    /// With early stopping: writes `model-best.*` when this epoch is the best so far, and says
    /// whether the history calls for a stop.
    fn keep_best(
        &self,
        model: &LC::InferenceModel,
        epoch: usize,
        history: &[EpochRecord],
    ) -> Result<bool, EmberError> {
        let Some(rule) = &self.early_stopping else {
            return Ok(false);
        };
        let Some(decision) = early_stop::decide(history, rule) else {
            return Ok(false);
        };
        if decision.best_epoch == epoch
            && let Some(save) = &self.save_best
        {
            save(model)?;
        }
        Ok(decision.stop)
    }

    /// After a Ctrl-C: waits until the epoch's checkpoint is on disk (dropping the checkpointer
    /// joins its writer threads), and says how to resume.
    fn stopped_by_ctrl_c(&self, epoch: usize, epochs: usize, saves: &mut Saver<LC>) -> EmberError {
        match saves.wait_for(epoch) {
            Ok(()) => EmberError::Interrupted(format!(
                "stopped by Ctrl-C after epoch {epoch}/{epochs}; resume with: ember train --resume {}",
                self.run_dir.display()
            )),
            Err(e) => e,
        }
    }
}

impl<LC> SupervisedLearningStrategy<LC> for EmberStrategy<LC>
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
        let mut parts = Parts {
            train,
            valid,
            processor: &mut processor,
            interrupter: components.interrupter,
            event_store: &components.event_store,
            epochs: components.num_epochs,
        };
        learner.fork(&self.device);
        let records = self.log.lock().expect("run log lock").history.clone();
        let mut history = History::new(self.run_dir.join(folder::METRICS), records)
            .in_target_units(self.target_std)
            .tracked_by(self.tracker.clone());
        if self.tensorboard {
            history.write_events(&self.run_dir);
        }
        let mut stop = false;
        for epoch in starting_epoch..=parts.epochs {
            if stop {
                break;
            }
            // The one place a failed epoch ends the run.
            match self.epoch(epoch, &mut learner, &mut parts, &mut history, &mut saves) {
                Ok(true) => {}
                Ok(false) => stop = true,
                Err(e) => {
                    self.fail(e);
                    stop = true;
                }
            }
        }
        let flushed = history.flush();
        if let Err(e) = saves.finish().and(flushed) {
            self.fail(e);
        }
        self.log.lock().expect("run log lock").history = history.into_records();
        (learner.model(), processor)
    }
}
