//! An epoch's two passes over the data and the NaN guard, shared by a single run
//! (`train::strategy`) and a replica group (`replicas::strategy`). The training pass drives
//! Burn's `Learner` step by step (learning rate, dropout seed, train step, clipping, optimizer
//! step), sums each step's figures on the device and reads them a few times a second for the
//! progress bar and the guard; the validation pass sums the figures of the inference model.
//!
//! What differs between one model and K replicas is behind [`Members`]: how the figures are
//! read (one or a `[K]` vector), how gradients are clipped (by the global norm, or each
//! replica's by its own), and what a non-finite figure does (it ends a single run; in a group
//! it ends that replica alone while the others train on).

use crate::device::launches::{self, Meter};
use crate::error::EmberError;
use crate::model::{StepOutput, StepStats, StepTotals as Totals};
use crate::run::checkpoint::CheckpointDir;
use crate::run::history::SplitRecord;
use crate::train::non_finite::non_finite_weights;
use crate::train::reports::ReportClock;
use burn::data::dataloader::Progress;
use burn::module::{AutodiffModule, Module};
use burn::optim::GradientsParams;
use burn::prelude::Backend;
use burn::tensor::backend::AutodiffBackend;
use burn::train::metric::store::EventStoreClient;
use burn::train::{
    EventProcessorTraining, InferenceStep, Interrupter, Learner, LearnerEvent,
    LearningComponentsTypes, SupervisedTrainingEventProcessor, TrainLoader, TrainStep,
    TrainingItem, ValidLoader,
};
use std::time::Instant;

type Inner<LC> = <<LC as LearningComponentsTypes>::Backend as AutodiffBackend>::InnerBackend;
type TrainInput<LC> = <<LC as LearningComponentsTypes>::TrainingModel as TrainStep>::Input;

/// The models one step trains: a single run's one, or a replica group's K.
pub(crate) trait Members {
    /// How many models each step trains.
    fn count(&self) -> usize;
    /// Each model's figures, from the device totals (one host read).
    fn read<B: Backend>(&self, totals: &mut Totals<B>) -> Vec<StepStats>;
    /// The gradients scaled to a norm of at most `max_norm`.
    fn clip<B: AutodiffBackend, M: AutodiffModule<B>>(
        &self,
        model: &M,
        grads: GradientsParams,
        max_norm: f64,
    ) -> GradientsParams;
    /// Acts on the models whose figure is not finite (`finite[i]` false): `what` was seen in
    /// `epoch` at `steps`. An error ends the run.
    fn guard(
        &mut self,
        finite: &[bool],
        what: &str,
        epoch: usize,
        steps: &str,
    ) -> Result<(), EmberError>;
    /// Whether any model still trains.
    fn training(&self) -> bool;
    /// The figures the progress bar shows.
    fn shown(&self, stats: &[StepStats]) -> StepStats;
}

/// A single run: one model, whose first non-finite figure ends the run.
pub(crate) struct OneModel<'a> {
    pub checkpoints: &'a CheckpointDir,
}

impl Members for OneModel<'_> {
    fn count(&self) -> usize {
        1
    }

    fn read<B: Backend>(&self, totals: &mut Totals<B>) -> Vec<StepStats> {
        vec![totals.read()]
    }

    fn clip<B: AutodiffBackend, M: AutodiffModule<B>>(
        &self,
        model: &M,
        grads: GradientsParams,
        max_norm: f64,
    ) -> GradientsParams {
        crate::train::clip::clip_global_norm(model, grads, max_norm)
    }

    fn guard(
        &mut self,
        finite: &[bool],
        what: &str,
        epoch: usize,
        steps: &str,
    ) -> Result<(), EmberError> {
        match finite.iter().all(|f| *f) {
            true => Ok(()),
            false => Err(diverged(self.checkpoints, what, epoch, steps)),
        }
    }

    fn training(&self) -> bool {
        true
    }

    fn shown(&self, stats: &[StepStats]) -> StepStats {
        stats[0]
    }
}

/// The error for a non-finite value, naming where it was seen and the last good checkpoint.
pub(crate) fn diverged(
    checkpoints: &CheckpointDir,
    what: &str,
    epoch: usize,
    steps: &str,
) -> EmberError {
    let committed = checkpoints
        .committed()
        .or_else(|| crate::run::checkpoint::list_epochs(checkpoints.path()).pop());
    let last_good = match committed {
        Some(e) => format!(
            "last good checkpoint: epoch {e} in {}",
            checkpoints.path().display()
        ),
        None => "no checkpoint was written yet".to_string(),
    };
    EmberError::Diverged(format!(
        "{what} in epoch {epoch}, {steps}; {last_good}; try a lower learning rate"
    ))
}

/// What every step of an epoch's passes needs besides the learner and the data.
pub(crate) struct Pass<'a, B: Backend> {
    pub device: &'a B::Device,
    pub reports: &'a ReportClock,
    /// With dropout or augmentation, the run's seed (see [`step_seed`]).
    pub step_seed: Option<u64>,
    pub clip_grad_norm: Option<f64>,
    pub epoch: usize,
}

/// What a pass measured: each model's figures, its wall time and steps, and the kernel
/// launches per step where they are counted (`device::launches`).
pub(crate) struct Figures {
    pub stats: Vec<StepStats>,
    pub seconds: f64,
    pub steps: usize,
    pub launches: Option<f64>,
}

impl Figures {
    /// Model `member`'s record of this pass.
    pub fn record(&self, member: usize, lr: Option<f64>) -> SplitRecord {
        let s = &self.stats[member];
        SplitRecord {
            loss: s.loss,
            accuracy: s.accuracy,
            seconds: self.seconds,
            steps: self.steps,
            mae: s.mae,
            r2: s.r2,
            lr,
        }
    }
}

/// What a strategy's `fit` hands to each epoch: Burn's loaders, event processor, interrupter
/// and event store.
pub(crate) struct Parts<'a, LC: LearningComponentsTypes> {
    pub train: TrainLoader<LC>,
    pub valid: ValidLoader<LC>,
    pub processor: &'a mut SupervisedTrainingEventProcessor<LC>,
    pub interrupter: Interrupter,
    pub event_store: &'a EventStoreClient,
    pub epochs: usize,
}

impl<B: Backend> Pass<'_, B> {
    /// One training epoch. Ends early on an interrupt or when no model trains any more; a
    /// non-finite loss goes to the members' guard, on every read.
    pub fn train<LC, M>(
        &self,
        learner: &mut Learner<LC>,
        parts: &mut Parts<'_, LC>,
        members: &mut M,
    ) -> Result<Figures, EmberError>
    where
        LC: LearningComponentsTypes<Backend = B>,
        B: AutodiffBackend,
        LC::TrainingModel: TrainStep<Output = StepOutput<B>>,
        M: Members,
    {
        let started = Instant::now();
        let mut totals = Totals::<B>::new();
        let mut iter = parts.train.iter();
        let (mut step, mut good_until, mut launches) = (0, 0, None);
        let mut stats = Vec::new();
        let mut meter = launches::enabled().then(|| Meter::start::<B>(self.device));
        while let Some(batch) = iter.next() {
            step += 1;
            self.step(learner, batch, members, &mut totals, step);
            let progress = iter.progress();
            let last = progress.items_processed >= progress.items_total;
            let due = self
                .reports
                .step_due(last, last && self.epoch == parts.epochs);
            if last && let Some(m) = meter.take() {
                launches = m.stop::<B>(self.device, step).launches;
            }
            if last || due {
                stats = members.read(&mut totals);
                let finite: Vec<bool> = stats.iter().map(|s| s.loss.is_finite()).collect();
                let steps = format!("steps {}-{step}", good_until + 1);
                members.guard(&finite, "non-finite training loss", self.epoch, &steps)?;
                good_until = step;
            }
            if due {
                let item = TrainingItem::new(
                    Totals::report(members.shown(&stats), self.device),
                    progress,
                    Progress::new(self.epoch, parts.epochs),
                    Some(step),
                    Some(learner.lr_current()),
                );
                parts
                    .processor
                    .process_train(LearnerEvent::ProcessedItem(item));
            }
            if parts.interrupter.should_stop() || !members.training() {
                break;
            }
        }
        if self.reports.epoch_reported() {
            parts
                .processor
                .process_train(LearnerEvent::EndEpoch(self.epoch));
        }
        if stats.is_empty() {
            stats = members.read(&mut totals);
        }
        let seconds = started.elapsed().as_secs_f64();
        Ok(Figures {
            stats,
            seconds,
            steps: step,
            launches,
        })
    }

    /// One training step: its learning rate and dropout seed, the step, clipping and the
    /// optimizer's update; its figures are added to `totals` on the device.
    fn step<LC, M>(
        &self,
        learner: &mut Learner<LC>,
        batch: TrainInput<LC>,
        members: &M,
        totals: &mut Totals<B>,
        step: usize,
    ) where
        LC: LearningComponentsTypes<Backend = B>,
        B: AutodiffBackend,
        LC::TrainingModel: TrainStep<Output = StepOutput<B>>,
        M: Members,
    {
        learner.lr_step();
        if let Some(seed) = self.step_seed {
            let seed = step_seed(seed, self.epoch, step);
            crate::ops::dropout::seed_step::<B>(self.device, seed);
        }
        let out = learner.train_step(batch);
        let grads = match self.clip_grad_norm {
            Some(max) => members.clip(&learner.model(), out.grads, max),
            None => out.grads,
        };
        learner.optimizer_step(grads);
        totals.add(out.item);
    }

    /// One validation pass of the inference model (every replica's, each over its own rows).
    pub fn valid<LC, M>(
        &self,
        model: &LC::InferenceModel,
        parts: &mut Parts<'_, LC>,
        members: &M,
    ) -> Figures
    where
        LC: LearningComponentsTypes<Backend = B>,
        B: AutodiffBackend,
        LC::InferenceModel: InferenceStep<Output = StepOutput<Inner<LC>>>,
        M: Members,
    {
        let started = Instant::now();
        let mut totals = Totals::<Inner<LC>>::new();
        let mut iter = parts.valid.iter();
        let mut step = 0;
        for batch in iter.by_ref() {
            step += 1;
            totals.add(model.step(batch));
        }
        let stats = members.read(&mut totals);
        if self.reports.take_epoch() {
            let shown = Totals::report(members.shown(&stats), self.device);
            let progress = Progress::new(self.epoch, parts.epochs);
            let item = TrainingItem::new(shown, iter.progress(), progress, Some(step), None);
            parts
                .processor
                .process_valid(LearnerEvent::ProcessedItem(item));
            parts
                .processor
                .process_valid(LearnerEvent::EndEpoch(self.epoch));
        }
        Figures {
            stats,
            seconds: started.elapsed().as_secs_f64(),
            steps: step,
            launches: None,
        }
    }
}

/// The error that ends a run whose training pass was interrupted, if it was: a failed
/// checkpoint write's own (it stopped training), or the interrupter's message.
pub(crate) fn interrupted(
    checkpoints: &CheckpointDir,
    interrupter: &Interrupter,
    epoch: usize,
) -> Option<EmberError> {
    if !interrupter.should_stop() {
        return None;
    }
    if let Some(e) = checkpoints.failure() {
        return Some(e);
    }
    let why = interrupter.get_message();
    let why = why.unwrap_or_else(|| "training was interrupted".to_string());
    Some(EmberError::Runtime(format!(
        "stopped in epoch {epoch}: {why}"
    )))
}

/// The NaN guard after an epoch's passes: each model's validation loss, then its weights
/// (one device read for all of them).
pub(crate) fn guard_epoch<B: Backend, Model: Module<B>, M: Members>(
    members: &mut M,
    valid: &Figures,
    model: &Model,
    epoch: usize,
) -> Result<(), EmberError> {
    let after = "after the last step";
    let finite: Vec<bool> = valid.stats.iter().map(|s| s.loss.is_finite()).collect();
    members.guard(&finite, "non-finite validation loss", epoch, after)?;
    let bad = non_finite_weights::<B, _>(model, members.count());
    let finite: Vec<bool> = bad.iter().map(|b| !b).collect();
    members.guard(&finite, "non-finite weights", epoch, after)
}

/// The generator seed of one training step's random draws (dropout masks, augmentation): a
/// SplitMix64 mix of the run's seed, the epoch and the step, so that a resumed run draws what
/// the uninterrupted run drew.
pub fn step_seed(seed: u64, epoch: usize, step: usize) -> u64 {
    let mut z = seed ^ ((epoch as u64) << 32) ^ step as u64;
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
