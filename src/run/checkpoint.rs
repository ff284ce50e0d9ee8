//! Checkpoints that survive a kill. Burn's `FileCheckpointer` writes straight to the final name
//! and its loader panics on a bad file; ember's checkpointer plugs into the same `Checkpointer`
//! trait (so the Learner's own `LearningCheckpointer` hands it the model, optimizer and scheduler
//! records) but writes each part to a temporary name and renames it, then, once all three parts of
//! an epoch are on disk, writes `epoch-N.json`: the manifest that makes the epoch complete (sha256
//! of each part, the metric history, the config hash). Only then are older epochs deleted.
//! Loading starts from the newest manifest and verifies every part before decoding it.

use crate::error::{EmberError, Result};
use crate::fs::{sha256_hex, write_atomic};
use crate::record::EpochRecord;
use burn::record::{FullPrecisionSettings, NamedMpkBytesRecorder, Record, Recorder};
use burn::tensor::backend::Backend;
use burn::train::checkpoint::{Checkpointer, CheckpointerError};
use serde::{Deserialize, Serialize};
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

/// What the parts of each epoch have reported, and the manifest data the strategy left for them.
#[derive(Default)]
struct Pending {
    parts: BTreeMap<usize, BTreeMap<String, PartFile>>,
    extra: BTreeMap<usize, (String, Vec<EpochRecord>)>,
    committed: Option<usize>,
    /// The bytes of the last committed checkpoint, parts and manifest.
    committed_bytes: Option<u64>,
    failure: Option<Failure>,
}

/// A failed checkpoint write, kept as its kind and message (an `EmberError` is not `Clone`).
#[derive(Clone)]
struct Failure {
    disk_full: bool,
    message: String,
}

impl Failure {
    fn of(e: &EmberError) -> Self {
        Failure {
            disk_full: matches!(e, EmberError::DiskFull(_)),
            message: e.to_string(),
        }
    }

    fn error(&self) -> EmberError {
        match self.disk_full {
            true => EmberError::DiskFull(self.message.clone()),
            false => EmberError::Runtime(self.message.clone()),
        }
    }
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
                return Err(f.error());
            }
            if p.committed.is_some_and(|c| c >= epoch) {
                return Ok(());
            }
            p = cvar.wait(p).expect("checkpoint state lock");
        }
    }

    /// The first checkpoint write that failed in this process, if one did.
    pub fn failure(&self) -> Option<EmberError> {
        let p = self.state.0.lock().expect("checkpoint state lock");
        p.failure.as_ref().map(Failure::error)
    }

    /// The bytes of the last checkpoint committed in this process.
    pub fn committed_bytes(&self) -> Option<u64> {
        self.state
            .0
            .lock()
            .expect("checkpoint state lock")
            .committed_bytes
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
            match &result {
                Err(e) => p.failure = Some(Failure::of(e)),
                Ok(bytes) => (p.committed, p.committed_bytes) = (Some(epoch), Some(*bytes)),
            }
            cvar.notify_all();
            return result.map(|_| ());
        }
        Ok(())
    }

    /// Records the first failed write; later ones (the other parts of the same checkpoint)
    /// add nothing.
    fn fail(&self, e: &EmberError) {
        let (lock, cvar) = &*self.state;
        let mut p = lock.lock().expect("checkpoint state lock");
        p.failure.get_or_insert_with(|| Failure::of(e));
        cvar.notify_all();
    }

    /// Writes the manifest, then removes every older epoch: there is always one complete epoch.
    /// Returns the checkpoint's bytes, parts and manifest.
    fn commit(&self, manifest: &Manifest) -> Result<u64> {
        let path = self.dir.join(manifest_file(manifest.epoch));
        let text = serde_json::to_vec_pretty(manifest).expect("a manifest always serialises");
        write_atomic(&path, &text)?;
        for old in list_epochs(&self.dir)
            .into_iter()
            .filter(|e| *e < manifest.epoch)
        {
            remove_epoch(&self.dir, old);
        }
        let parts: u64 = manifest.parts.values().map(|p| p.bytes).sum();
        Ok(parts + text.len() as u64)
    }
}

/// Removes what no complete checkpoint in `dir` refers to: temporary files of writes a kill
/// or a failure cut short, and the parts of epochs whose manifest was never written. Called
/// by the one process that holds the run's lock, before it writes checkpoints of its own.
pub fn remove_leftovers(dir: &Path) {
    let kept: Vec<String> = list_epochs(dir)
        .into_iter()
        .filter_map(|e| read_manifest(dir, e).ok())
        .flat_map(|m| m.parts.into_values().map(|p| p.file))
        .collect();
    let names = std::fs::read_dir(dir).into_iter().flatten().flatten();
    for name in names.map(|e| e.file_name().to_string_lossy().into_owned()) {
        let temporary = crate::fs::temporary_of(&name).is_some();
        let part = Part::ALL
            .iter()
            .any(|p| name.starts_with(&format!("{}-", p.name())) && name.ends_with(".mpk"));
        if temporary || (part && !kept.contains(&name)) {
            std::fs::remove_file(dir.join(&name)).ok();
        }
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
            self.dir.fail(&e);
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

/// The newest checkpoint in `dir` whose manifest reads and whose parts match it byte for byte,
/// with a note for each newer one passed over (a disk that lost or flipped its bytes); `None`
/// where `dir` holds no checkpoint. Where every checkpoint is damaged, the newest one's error,
/// which names the file.
pub fn latest_intact(dir: &Path) -> Result<Option<(Manifest, Vec<String>)>> {
    let mut notes = Vec::new();
    let mut first_error = None;
    for epoch in list_epochs(dir).into_iter().rev() {
        match read_manifest(dir, epoch).and_then(|m| verify_parts(dir, &m).map(|()| m)) {
            Ok(m) => return Ok(Some((m, notes))),
            Err(e) => {
                notes.push(format!("passed over the checkpoint of epoch {epoch}: {e}"));
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(None), Err)
}

/// Checks that each part of `manifest` has the size and sha256 it records.
fn verify_parts(dir: &Path, manifest: &Manifest) -> Result<()> {
    for part in Part::ALL {
        part_bytes(dir, manifest, part)?;
    }
    Ok(())
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
    let bytes = part_bytes(dir, manifest, part)?;
    let path = dir.join(part.file(manifest.epoch));
    Recorder::<B>::load(&Bytes::default(), bytes, device)
        .map_err(|e| EmberError::file(&path, format!("cannot decode the checkpoint ({e})")))
}

/// One part's bytes, checked against the size and sha256 its manifest records.
fn part_bytes(dir: &Path, manifest: &Manifest, part: Part) -> Result<Vec<u8>> {
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
    Ok(bytes)
}
