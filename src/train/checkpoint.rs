//! Checkpoints that survive a kill. Burn's `FileCheckpointer` writes straight to the final name
//! and its loader panics on a bad file; ember's checkpointer plugs into the same `Checkpointer`
//! trait (so the Learner's own `LearningCheckpointer` hands it the model, optimizer and scheduler
//! records) but writes each part to a temporary name and renames it, then, once all three parts of
//! an epoch are on disk, writes `epoch-N.json`: the manifest that makes the epoch complete (sha256
//! of each part, the metric history, the config hash). Only then are older epochs deleted.
//! Loading starts from the newest manifest and verifies every part before decoding it.

use crate::error::{EmberError, Result};
use crate::fs::write_atomic;
use crate::run::history::EpochRecord;
use burn::record::{FullPrecisionSettings, NamedMpkBytesRecorder, Record, Recorder};
use burn::tensor::backend::Backend;
use burn::train::checkpoint::{Checkpointer, CheckpointerError};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

/// The three records of a learner, each written by its own checkpointer thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Model,
    Optim,
    Scheduler,
}

impl Part {
    pub const ALL: [Part; 3] = [Part::Model, Part::Optim, Part::Scheduler];

    /// The part's name in manifests and file names (`model-3.mpk`).
    pub fn name(self) -> &'static str {
        match self {
            Part::Model => "model",
            Part::Optim => "optim",
            Part::Scheduler => "scheduler",
        }
    }

    /// The part's file for `epoch`.
    pub fn file(self, epoch: usize) -> String {
        format!("{}-{epoch}.mpk", self.name())
    }
}

/// `epoch-N.json`, the manifest that completes an epoch's checkpoint.
fn manifest_file(epoch: usize) -> String {
    format!("epoch-{epoch}.json")
}

type Bytes = NamedMpkBytesRecorder<FullPrecisionSettings>;

/// One part file of an epoch, as the manifest records it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PartFile {
    pub file: String,
    pub bytes: u64,
    pub sha256: String,
}

/// `epoch-N.json`: what makes an epoch's checkpoint complete.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub epoch: usize,
    pub config_hash: String,
    pub parts: BTreeMap<String, PartFile>,
    /// Metrics of every epoch up to this one, so a resumed run rebuilds `metrics.csv`.
    pub history: Vec<EpochRecord>,
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What the parts of each epoch have reported, and the manifest data the strategy left for them.
#[derive(Default)]
struct Pending {
    parts: BTreeMap<usize, BTreeMap<String, PartFile>>,
    extra: BTreeMap<usize, (String, Vec<EpochRecord>)>,
    committed: Option<usize>,
    failure: Option<String>,
}

/// Shared by the three part checkpointers and the training strategy: collects the parts of each
/// epoch and commits the epoch once all are written.
#[derive(Clone)]
pub struct CheckpointDir {
    dir: PathBuf,
    state: Arc<(Mutex<Pending>, Condvar)>,
}

impl CheckpointDir {
    pub fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            state: Arc::new((Mutex::new(Pending::default()), Condvar::new())),
        }
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Gives epoch `epoch`'s manifest its metric history; called before the parts are saved.
    pub fn prepare(&self, epoch: usize, config_hash: String, history: Vec<EpochRecord>) {
        let mut p = self.state.0.lock().expect("checkpoint state lock");
        p.extra.insert(epoch, (config_hash, history));
    }

    /// A checkpointer for one part, to hand to Burn's `AsyncCheckpointer`.
    pub fn part(&self, part: Part) -> PartCheckpointer {
        PartCheckpointer {
            part,
            dir: self.clone(),
        }
    }

    /// Waits until `epoch` is committed (or a write failed); returns the failure, if any.
    pub fn wait_for(&self, epoch: usize) -> Result<()> {
        let (lock, cvar) = &*self.state;
        let mut p = lock.lock().expect("checkpoint state lock");
        loop {
            if let Some(f) = &p.failure {
                return Err(EmberError::Runtime(f.clone()));
            }
            if p.committed.is_some_and(|c| c >= epoch) {
                return Ok(());
            }
            p = cvar.wait(p).expect("checkpoint state lock");
        }
    }

    /// The last epoch whose checkpoint is complete, in this process.
    pub fn committed(&self) -> Option<usize> {
        self.state
            .0
            .lock()
            .expect("checkpoint state lock")
            .committed
    }

    fn part_written(&self, epoch: usize, part: Part, file: PartFile) -> Result<()> {
        let (lock, cvar) = &*self.state;
        let mut p = lock.lock().expect("checkpoint state lock");
        let parts = p.parts.entry(epoch).or_default();
        parts.insert(part.name().to_string(), file);
        if parts.len() == Part::ALL.len() {
            let parts = p.parts.remove(&epoch).unwrap_or_default();
            let (config_hash, history) = p.extra.remove(&epoch).unwrap_or_default();
            let manifest = Manifest {
                epoch,
                config_hash,
                parts,
                history,
            };
            let result = self.commit(&manifest);
            if let Err(e) = &result {
                p.failure = Some(e.to_string());
            } else {
                p.committed = Some(epoch);
            }
            cvar.notify_all();
            return result;
        }
        Ok(())
    }

    fn fail(&self, message: String) {
        let (lock, cvar) = &*self.state;
        lock.lock().expect("checkpoint state lock").failure = Some(message);
        cvar.notify_all();
    }

    /// Writes the manifest, then removes every older epoch: there is always one complete epoch.
    fn commit(&self, manifest: &Manifest) -> Result<()> {
        let path = self.dir.join(manifest_file(manifest.epoch));
        let text = serde_json::to_vec_pretty(manifest).expect("a manifest always serialises");
        write_atomic(&path, &text)?;
        for old in list_epochs(&self.dir)
            .into_iter()
            .filter(|e| *e < manifest.epoch)
        {
            remove_epoch(&self.dir, old);
        }
        Ok(())
    }
}

fn remove_epoch(dir: &Path, epoch: usize) {
    // The manifest goes first, so a kill in between never leaves a manifest without its parts.
    std::fs::remove_file(dir.join(manifest_file(epoch))).ok();
    for part in Part::ALL {
        std::fs::remove_file(dir.join(part.file(epoch))).ok();
    }
}

/// Epochs that have a manifest in `dir`, in increasing order.
pub fn list_epochs(dir: &Path) -> Vec<usize> {
    let mut epochs: Vec<usize> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_prefix("epoch-")?
                .strip_suffix(".json")?
                .parse()
                .ok()
        })
        .collect();
    epochs.sort_unstable();
    epochs
}

/// Writes one part (`model`, `optim` or `scheduler`) of each epoch's checkpoint.
pub struct PartCheckpointer {
    part: Part,
    dir: CheckpointDir,
}

impl<R: Record<B>, B: Backend> Checkpointer<R, B> for PartCheckpointer {
    fn save(&self, epoch: usize, record: R) -> std::result::Result<(), CheckpointerError> {
        let result = (|| -> Result<()> {
            let bytes = Recorder::<B>::record(&Bytes::default(), record, ()).map_err(|e| {
                EmberError::Runtime(format!(
                    "cannot encode the {} checkpoint: {e}",
                    self.part.name()
                ))
            })?;
            let file = self.part.file(epoch);
            write_atomic(&self.dir.dir.join(&file), &bytes)?;
            self.dir.part_written(
                epoch,
                self.part,
                PartFile {
                    file,
                    bytes: bytes.len() as u64,
                    sha256: sha256_hex(&bytes),
                },
            )
        })();
        result.map_err(|e| {
            self.dir.fail(e.to_string());
            CheckpointerError::Unknown(e.to_string())
        })
    }

    fn delete(&self, _epoch: usize) -> std::result::Result<(), CheckpointerError> {
        // Old epochs are removed by the commit of a newer one, never by Burn's strategy.
        Ok(())
    }

    fn restore(
        &self,
        epoch: usize,
        device: &B::Device,
    ) -> std::result::Result<R, CheckpointerError> {
        let manifest = read_manifest(&self.dir.dir, epoch)
            .map_err(|e| CheckpointerError::Unknown(e.to_string()))?;
        load_part(&self.dir.dir, &manifest, self.part, device)
            .map_err(|e| CheckpointerError::Unknown(e.to_string()))
    }
}

/// Reads and parses `epoch-N.json`.
pub fn read_manifest(dir: &Path, epoch: usize) -> Result<Manifest> {
    let path = dir.join(manifest_file(epoch));
    let bytes = crate::fs::read_file(&path)?;
    serde_json::from_slice(&bytes)
        .map_err(|e| EmberError::file(&path, format!("corrupt checkpoint manifest ({e})")))
}

/// The newest complete checkpoint in `dir`.
pub fn latest(dir: &Path) -> Result<Manifest> {
    let epoch = list_epochs(dir).pop().ok_or_else(|| {
        EmberError::Input(format!(
            "{}: no complete checkpoint (epoch-N.json) to resume from",
            dir.display()
        ))
    })?;
    read_manifest(dir, epoch)
}

/// Restores `learner`'s model, optimizer and schedule from the checkpoint `manifest` in
/// `dir`, onto `device` (Burn 0.21's own checkpoint loading would put them on the default one).
pub fn restore<LC: burn::train::LearningComponentsTypes>(
    learner: &mut burn::train::Learner<LC>,
    dir: &Path,
    manifest: &Manifest,
    device: &burn::tensor::Device<LC::Backend>,
) -> Result<()> {
    learner.load_model(load_part(dir, manifest, Part::Model, device)?);
    learner.load_optim(load_part(dir, manifest, Part::Optim, device)?);
    learner.load_scheduler(load_part::<_, LC::Backend>(
        dir,
        manifest,
        Part::Scheduler,
        device,
    )?);
    Ok(())
}

/// Reads one part, checks its size and sha256 against the manifest, and decodes it.
pub fn load_part<R: Record<B>, B: Backend>(
    dir: &Path,
    manifest: &Manifest,
    part: Part,
    device: &B::Device,
) -> Result<R> {
    let part = part.name();
    let entry = manifest.parts.get(part).ok_or_else(|| {
        EmberError::Input(format!(
            "{}: checkpoint of epoch {} lists no {part} file",
            dir.display(),
            manifest.epoch
        ))
    })?;
    let path = dir.join(&entry.file);
    let bytes = crate::fs::read_file(&path)?;
    if bytes.len() as u64 != entry.bytes || sha256_hex(&bytes) != entry.sha256 {
        return Err(EmberError::file(
            &path,
            format!(
                "corrupt checkpoint: {} bytes with another sha256 than the {} bytes epoch-{}.json recorded",
                bytes.len(),
                entry.bytes,
                manifest.epoch
            ),
        ));
    }
    Recorder::<B>::load(&Bytes::default(), bytes, device)
        .map_err(|e| EmberError::file(&path, format!("cannot decode the checkpoint ({e})")))
}
