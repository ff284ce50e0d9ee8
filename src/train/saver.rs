//! The checkpointing of one `fit`, shared by the training strategies: Burn's checkpointer of
//! the Learner's three parts, writing through ember's atomic checkpoint folder, at most every
//! `every` (and whenever asked: the last epoch, an early stop, a Ctrl-C).

use crate::error::{EmberError, Result};
use crate::fs::human_bytes;
use crate::run::checkpoint::{CheckpointDir, Part};
use crate::run::history::EpochRecord;
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
    /// A checkpoint's bytes before the first is written (then the last one's are used).
    estimate: u64,
}

/// Whether the disk can take the next checkpoints.
#[derive(Debug, PartialEq, Eq)]
enum Room {
    Plenty,
    /// Room for one checkpoint, not for three: write one now, while it fits.
    Short,
    /// Not even for one (this many bytes free).
    None(u64),
}

impl<LC: LearningComponentsTypes> Saver<LC> {
    /// A saver into `checkpoints`. A failed write stops training through the interrupter
    /// instead of panicking in Burn's writer thread; the failure itself is reported by
    /// [`Saver::save`] or [`Saver::finish`].
    ///
    /// Until the first checkpoint is written, its size is estimated from `learner`'s model (the
    /// weights and two moments of Adam, in f32), for the check of the disk's room.
    pub fn new(
        checkpoints: &CheckpointDir,
        config_hash: String,
        (every, wait): (Duration, bool),
        interrupter: &Interrupter,
        learner: &Learner<LC>,
    ) -> Self {
        use burn::module::Module;
        let estimate = 12 * learner.model().num_params() as u64 + (64 << 10);
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
            estimate,
        }
    }

    /// A checkpoint's bytes: the last one's, or the estimate.
    fn checkpoint_bytes(&self) -> u64 {
        self.checkpoints.committed_bytes().unwrap_or(self.estimate)
    }

    /// The disk's room for the next checkpoints. The old checkpoint stays until the new one is
    /// complete, so a checkpoint needs its own size free. Before the first, whose size is only
    /// estimated (as if for Adam), a checkpoint that may not fit is tried at once: where it
    /// fails, the disk's own error stops the run just the same.
    fn room(&self) -> Room {
        let Ok(free) = fs4::available_space(self.checkpoints.path()) else {
            return Room::Plenty;
        };
        // A little over the last checkpoint's size: a manifest's history grows by an epoch.
        let bytes = self.checkpoint_bytes() + (64 << 10);
        let known = self.checkpoints.committed_bytes().is_some();
        match free {
            f if f < bytes && known => Room::None(f),
            f if f < 3 * bytes => Room::Short,
            _ => Room::Plenty,
        }
    }

    /// Whether [`Saver::save`] would checkpoint now.
    pub fn due(&self, now: bool) -> bool {
        self.writer.is_some() && (now || self.last_time.elapsed() >= self.every)
    }

    /// Checkpoints `epoch` when one is due, and always when `now`; at once, due or not, when
    /// the disk has room for one checkpoint but not for three. A checkpoint that will not fit
    /// stops training with [`EmberError::DiskFull`], the last one left in place.
    pub fn save(
        &mut self,
        epoch: usize,
        now: bool,
        learner: &Learner<LC>,
        store: &EventStoreClient,
        history: &[EpochRecord],
    ) -> Result<()> {
        let room = self.room();
        let due = self.due(now) || (self.writer.is_some() && room == Room::Short);
        let Some(writer) = self.writer.as_mut().filter(|_| due) else {
            return Ok(());
        };
        if let Room::None(free) = room {
            return Err(EmberError::DiskFull(format!(
                "disk full: the checkpoint of epoch {epoch} needs about {} in {}, {} free",
                human_bytes(self.checkpoint_bytes()),
                self.checkpoints.path().display(),
                human_bytes(free)
            )));
        }
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
