//! TensorBoard event files: `events.out.tfevents.<secs>.<host>.<pid>.<n>` in a run's folder,
//! one scalar summary per epoch with the epoch as the step, readable by `tensorboard --logdir`.
//! A resumed run writes a new file: earlier files first lose any epoch after the checkpoint it
//! resumed from, and the new file starts with the resumed epochs no file holds, so every epoch
//! is in the folder exactly once.

use super::tfrecord;
use crate::error::{EmberError, Result};
use crate::record::EpochRecord;
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
        let tail = format!(
            "{}.{}.{}",
            host(),
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        );
        let path = dir.join(file_name(&files(dir), now() as u64, &tail));
        let file =
            std::fs::File::create(&path).map_err(|e| crate::fs::write_error(&path, &e, 0))?;
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
            .map_err(|e| crate::fs::write_error(&self.path, &e, bytes.len() as u64))
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
            .map_err(|e| crate::fs::write_error(&self.path, &e, 0))
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

/// A new event file's name, `<PREFIX><secs>.<tail>`, sorting after every file in `existing`
/// whose seconds field is a number (TensorBoard's and ember's are). TensorBoard and [`files`]
/// read a folder's files in name order, so a resumed session's file must sort after the one it
/// resumed from. By the clock alone it may not: a session resumed within the same second sorts
/// by its pid, and pids are not ordered (a pid past 9999 sorts before 9998; pids wrap). There
/// the seconds field becomes one past the latest file's, so the name runs ahead of the clock by
/// a second for each such session (or more, after the clock steps back); TensorBoard reads
/// nothing else from it.
fn file_name(existing: &[PathBuf], secs: u64, tail: &str) -> String {
    let name = |secs: u64| format!("{PREFIX}{secs}.{tail}");
    let numbered = existing.iter().filter_map(|p| {
        let file = p.file_name()?.to_str()?;
        let secs = file
            .strip_prefix(PREFIX)?
            .split('.')
            .next()?
            .parse::<u64>()
            .ok()?;
        Some((file.to_owned(), secs))
    });
    match numbered.max() {
        Some((latest, latest_secs)) if latest >= name(secs) => name(latest_secs.max(secs) + 1),
        _ => name(secs),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn names(names: &[&str]) -> Vec<PathBuf> {
        names
            .iter()
            .map(|n| PathBuf::from(format!("run/{PREFIX}{n}")))
            .collect()
    }

    #[test]
    fn a_new_file_takes_the_clock_s_second_where_that_sorts_after_the_folder_s_files() {
        let earlier = names(&["1796000000.host.99999.0", "1795999999.host.5.3"]);
        assert_eq!(
            file_name(&earlier, 1796000001, "host.7.0"),
            format!("{PREFIX}1796000001.host.7.0")
        );
        assert_eq!(
            file_name(&[], 1796000001, "host.7.0"),
            format!("{PREFIX}1796000001.host.7.0")
        );
        // Within the same second, a larger pid already sorts after.
        let same = names(&["1796000000.host.5.0"]);
        assert_eq!(
            file_name(&same, 1796000000, "host.6.0"),
            format!("{PREFIX}1796000000.host.6.0")
        );
    }

    #[test]
    fn files_without_a_numbered_seconds_field_do_not_count() {
        let foreign = names(&["zzz.host.1.0", "1796000000.host.5.0"]);
        assert_eq!(
            file_name(&foreign, 1796000000, "host.6.0"),
            format!("{PREFIX}1796000000.host.6.0")
        );
    }

    #[test]
    fn a_session_resumed_within_the_second_by_a_pid_that_sorts_first_still_comes_last() {
        // The resumed session's pid 10000 sorts before the interrupted one's 9999 as text.
        let before = names(&["1796000000.host.9999.0"]);
        let name = file_name(&before, 1796000000, "host.10000.0");
        assert_eq!(name, format!("{PREFIX}1796000001.host.10000.0"));
        let mut all = before.clone();
        all.push(PathBuf::from(format!("run/{name}")));
        let mut sorted = all.clone();
        sorted.sort();
        assert_eq!(sorted, all, "the new file sorts last");
        // A clock behind the folder's latest file (its name was pushed ahead) moves past it too.
        let ahead = names(&["1796000001.host.9999.0"]);
        assert_eq!(
            file_name(&ahead, 1796000000, "host.3.0"),
            format!("{PREFIX}1796000002.host.3.0")
        );
    }
}
