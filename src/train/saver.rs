//! The checkpointing of one `fit`, shared by the training strategies: Burn's checkpointer of
//! the Learner's three parts, writing through ember's atomic checkpoint folder, at most every
//! `every` (and whenever asked: the last epoch, an early stop, a Ctrl-C).

use crate::error::Result;
use crate::run::history::EpochRecord;
use crate::train::checkpoint::{CheckpointDir, Part};
use crate::train::strategy::EveryEpoch;
use burn::train::checkpoint::AsyncCheckpointer;
use burn::train::metric::store::EventStoreClient;
use burn::train::{Interrupter, Learner, LearningCheckpointer, LearningComponentsTypes};
use std::time::{Duration, Instant};

pub(crate) struct Saver<LC: LearningComponentsTypes> {
    checkpoints: CheckpointDir,
    config_hash: String,
    every: Duration,
    /// Wait for each checkpoint to be on disk before training on (see `EmberStrategy`).
    wait: bool,
    /// Dropped (joining its writer threads) when a stop must wait for the disk.
    writer: Option<LearningCheckpointer<LC>>,
    last_saved: Option<usize>,
    last_time: Instant,
}

impl<LC: LearningComponentsTypes> Saver<LC> {
    /// A saver into `checkpoints`. A failed write stops training through the interrupter
    /// instead of panicking in Burn's writer thread; the failure itself is reported by
    /// [`Saver::save`] or [`Saver::finish`].
    pub fn new(
        checkpoints: &CheckpointDir,
        config_hash: String,
        (every, wait): (Duration, bool),
        interrupter: &Interrupter,
    ) -> Self {
        let writer = LearningCheckpointer::<LC>::new(
            AsyncCheckpointer::new(checkpoints.part(Part::Model))
                .with_interrupter(interrupter.clone()),
            AsyncCheckpointer::new(checkpoints.part(Part::Optim))
                .with_interrupter(interrupter.clone()),
            AsyncCheckpointer::new(checkpoints.part(Part::Scheduler))
                .with_interrupter(interrupter.clone()),
            Box::new(EveryEpoch),
        );
        Self {
            checkpoints: checkpoints.clone(),
            config_hash,
            every,
            wait,
            writer: Some(writer),
            last_saved: None,
            last_time: Instant::now(),
        }
    }

    /// Whether [`Saver::save`] would checkpoint now.
    pub fn due(&self, now: bool) -> bool {
        self.writer.is_some() && (now || self.last_time.elapsed() >= self.every)
    }

    /// Checkpoints `epoch` when one is due, and always when `now`.
    pub fn save(
        &mut self,
        epoch: usize,
        now: bool,
        learner: &Learner<LC>,
        store: &EventStoreClient,
        history: &[EpochRecord],
    ) -> Result<()> {
        let due = self.due(now);
        let Some(writer) = self.writer.as_mut().filter(|_| due) else {
            return Ok(());
        };
        self.checkpoints
            .prepare(epoch, self.config_hash.clone(), history.to_vec());
        writer.checkpoint(learner, epoch, store);
        self.last_saved = Some(epoch);
        self.last_time = Instant::now();
        if self.wait {
            self.checkpoints.wait_for(epoch)?;
        }
        Ok(())
    }

    /// Waits until `epoch`'s checkpoint is on disk (dropping the writer joins its threads).
    pub fn wait_for(&mut self, epoch: usize) -> Result<()> {
        drop(self.writer.take());
        self.checkpoints.wait_for(epoch)
    }

    /// Every checkpoint write finishes before the run is reported done.
    pub fn finish(&mut self) -> Result<()> {
        drop(self.writer.take());
        match self.last_saved {
            Some(epoch) => self.checkpoints.wait_for(epoch),
            None => Ok(()),
        }
    }
}
