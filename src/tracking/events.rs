//! TensorBoard event files: `events.out.tfevents.<secs>.<host>.<pid>.<n>` in a run's folder,
//! one scalar summary per epoch with the epoch as the step, readable by `tensorboard --logdir`.
//! A resumed run writes a new file: earlier files first lose any epoch after the checkpoint it
//! resumed from, and the new file starts with the resumed epochs no file holds, so every epoch
//! is in the folder exactly once.

use super::tfrecord;
use crate::error::{EmberError, Result};
use crate::run::history::EpochRecord;
use prost::Message;
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The prefix TensorBoard looks for.
pub const PREFIX: &str = "events.out.tfevents.";

/// `tensorflow.Event`, with the members ember writes.
#[derive(Clone, PartialEq, Message)]
pub struct Event {
    #[prost(double, tag = "1")]
    pub wall_time: f64,
    #[prost(int64, tag = "2")]
    pub step: i64,
    #[prost(string, optional, tag = "3")]
    pub file_version: Option<String>,
    #[prost(message, optional, tag = "5")]
    pub summary: Option<Summary>,
}

/// `tensorflow.Summary`.
#[derive(Clone, PartialEq, Message)]
pub struct Summary {
    #[prost(message, repeated, tag = "1")]
    pub value: Vec<Value>,
}

/// `tensorflow.Summary.Value` holding a scalar.
#[derive(Clone, PartialEq, Message)]
pub struct Value {
    #[prost(string, tag = "1")]
    pub tag: String,
    #[prost(float, optional, tag = "2")]
    pub simple_value: Option<f32>,
}

/// An open event file of a run.
pub struct EventWriter {
    path: PathBuf,
    file: std::io::BufWriter<std::fs::File>,
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn host() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that many bytes.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    match ok {
        true => String::from_utf8_lossy(&buf[..len]).replace(['/', '\\'], "_"),
        false => "localhost".into(),
    }
}

impl EventWriter {
    /// A new event file in `dir`, opened with its version record.
    pub fn create(dir: &Path) -> Result<EventWriter> {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "{PREFIX}{}.{}.{}.{}",
            now() as u64,
            host(),
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        );
        let path = dir.join(name);
        let file = std::fs::File::create(&path)
            .map_err(|e| EmberError::write(&path, crate::fs::describe_io(&e)))?;
        let mut writer = EventWriter {
            path,
            file: std::io::BufWriter::new(file),
        };
        writer.write(&Event {
            wall_time: now(),
            file_version: Some("brain.Event:2".into()),
            ..Default::default()
        })?;
        writer.flush()?;
        Ok(writer)
    }

    fn write(&mut self, event: &Event) -> Result<()> {
        let bytes = tfrecord::frame(&event.encode_to_vec());
        self.file
            .write_all(&bytes)
            .map_err(|e| EmberError::write(&self.path, crate::fs::describe_io(&e)))
    }

    /// Appends `record`'s scalars at its epoch.
    pub fn epoch(&mut self, record: &EpochRecord) -> Result<()> {
        let value = scalars(record)
            .into_iter()
            .map(|(tag, v)| Value {
                tag,
                simple_value: Some(v as f32),
            })
            .collect();
        self.write(&Event {
            wall_time: now(),
            step: record.epoch as i64,
            summary: Some(Summary { value }),
            ..Default::default()
        })
    }

    /// Hands what was written to the file system.
    pub fn flush(&mut self) -> Result<()> {
        self.file
            .flush()
            .map_err(|e| EmberError::write(&self.path, crate::fs::describe_io(&e)))
    }
}

/// The scalars of one epoch, by TensorBoard tag (`loss/train` and `loss/valid` share a chart).
pub fn scalars(r: &EpochRecord) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for (split, s) in [("train", &r.train), ("valid", &r.valid)] {
        let metrics = [
            ("loss", Some(s.loss)),
            ("accuracy", s.accuracy),
            ("mae", s.mae),
            ("r2", s.r2),
        ];
        for (name, v) in metrics {
            if let Some(v) = v {
                out.push((format!("{name}/{split}"), v));
            }
        }
    }
    if let Some(lr) = r.train.lr {
        out.push(("lr".into(), lr));
    }
    out.push(("steps_per_s/train".into(), r.train.steps_per_s()));
    out
}

/// The event files in `dir`, by name (the order TensorBoard reads them in).
pub fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(PREFIX))
        })
        .collect();
    out.sort();
    out
}

/// Every event of the file at `path`, each record's CRCs checked.
pub fn read(path: &Path) -> Result<Vec<Event>> {
    let bytes = crate::fs::read_file(path)?;
    let payloads = tfrecord::payloads(&bytes).map_err(|e| EmberError::file(path, e))?;
    payloads
        .into_iter()
        .map(|p| {
            Event::decode(p).map_err(|e| EmberError::file(path, format!("not an Event ({e})")))
        })
        .collect()
}

/// Makes `dir`'s event files hold no epoch after `last` (the epoch a run resumes from),
/// rewriting those that do (a torn last record is dropped too); returns the epochs they hold.
pub fn keep_through(dir: &Path, last: usize) -> Result<BTreeSet<usize>> {
    let mut held = BTreeSet::new();
    for path in files(dir) {
        let bytes = crate::fs::read_file(&path)?;
        let payloads = tfrecord::intact_payloads(&bytes);
        let mut kept = Vec::new();
        for p in &payloads {
            let Ok(event) = Event::decode(*p) else { break };
            let epoch = usize::try_from(event.step).unwrap_or(usize::MAX);
            if event.summary.is_some() && epoch > last {
                continue;
            }
            if event.summary.is_some() {
                held.insert(epoch);
            }
            kept.extend(tfrecord::frame(p));
        }
        if kept.len() != bytes.len() {
            crate::fs::write_replace(&path, &kept)?;
        }
    }
    Ok(held)
}
