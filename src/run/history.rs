//! A run's epoch records as they are kept: `metrics.csv`, and the trackers each epoch is sent
//! to (TensorBoard, MLflow).

use crate::error::Result;
use crate::fs::write_replace;
use crate::tracking::events::{self, EventWriter};
use crate::tracking::mlflow::Tracker;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::record::{EpochRecord, SplitRecord};

pub const CSV_HEADER: &str = "epoch,split,loss,accuracy,seconds,steps_per_s,mae,r2,lr";
/// The header before `mae` and `r2` were added; such files still read.
const CSV_HEADER_V1: &str = "epoch,split,loss,accuracy,seconds,steps_per_s";

/// How often `metrics.csv` is rewritten at most while a run goes on. Rewriting it after every
/// epoch cost linear-scalar, whose epochs take 15 ms, 2 % of its time (and a group of K
/// replicas K files an epoch). A killed run loses no row it resumes from: a single run's
/// checkpoints hold its records, and a replica group flushes its trials' files before each
/// checkpoint and resumes from them.
const WRITE_EVERY: Duration = Duration::from_secs(1);

/// A run's epoch records and its `metrics.csv`, rewritten (whole, atomically) after the first
/// epoch, then at most once per [`WRITE_EVERY`], and by [`History::flush`] at the end. The rows
/// already formatted are kept as text, so an epoch formats only its own: a long run (or a
/// group of replicas) would otherwise format its whole history every epoch.
pub struct History {
    records: Vec<EpochRecord>,
    path: PathBuf,
    text: String,
    rows: usize,
    /// When the file was last written.
    written: Option<Instant>,
    /// Records were pushed since.
    dirty: bool,
    /// A standardised target's deviation: records are kept in the target's units.
    target_std: Option<f64>,
    /// The run's TensorBoard event file, when it writes one, and how many records it holds.
    events: Option<(EventWriter, usize)>,
    /// The run's MLflow tracker, sent each record as it is pushed.
    tracker: Option<Arc<Tracker>>,
}

impl History {
    /// The records so far (none, or those of the run being resumed), written to `path`.
    pub fn new(path: PathBuf, records: Vec<EpochRecord>) -> Self {
        Self {
            records,
            path,
            text: format!("{CSV_HEADER}\n"),
            rows: 0,
            written: None,
            dirty: false,
            target_std: None,
            events: None,
            tracker: None,
        }
    }

    /// Sends records pushed from now on to `tracker` too.
    pub fn tracked_by(self, tracker: Option<Arc<Tracker>>) -> Self {
        Self { tracker, ..self }
    }

    /// From now on also writes the records to a new TensorBoard event file in `dir`, as they are written
    /// to `metrics.csv`. Earlier files in `dir` are cut to the records given (a resumed run's),
    /// and the new file starts with those of them no earlier file holds.
    ///
    /// The events are not essential: where they cannot be written, one warning line, and the
    /// run goes on without them.
    pub fn write_events(&mut self, dir: &Path) {
        let last = self.records.last().map_or(0, |r| r.epoch);
        let opened = (|| -> Result<EventWriter> {
            let held = events::keep_through(dir, last)?;
            let mut writer = EventWriter::create(dir)?;
            for r in self.records.iter().filter(|r| !held.contains(&r.epoch)) {
                writer.epoch(r)?;
            }
            writer.flush()?;
            Ok(writer)
        })();
        match opened {
            Ok(writer) => self.events = Some((writer, self.records.len())),
            Err(e) => events_failed(&e),
        }
    }

    /// Records pushed from now on are converted to the units of a target that was trained
    /// standardised by `std` ([`SplitRecord::in_target_units`]).
    pub fn in_target_units(self, std: Option<f64>) -> Self {
        Self {
            target_std: std,
            ..self
        }
    }

    pub fn records(&self) -> &[EpochRecord] {
        &self.records
    }

    pub fn into_records(self) -> Vec<EpochRecord> {
        self.records
    }

    /// Adds `record`, and writes the file when it is due.
    pub fn push(&mut self, mut record: EpochRecord) -> Result<()> {
        if let Some(std) = self.target_std {
            record.train = record.train.in_target_units(std);
            record.valid = record.valid.in_target_units(std);
        }
        self.records.push(record);
        self.dirty = true;
        if let Some(t) = &self.tracker {
            t.epoch(&record);
        }
        match self.written {
            Some(at) if at.elapsed() < WRITE_EVERY => Ok(()),
            _ => self.write(),
        }
    }

    /// Writes the file with every record it was given (a run finished from its checkpoint).
    pub fn write_all(mut self) -> Result<()> {
        self.write()
    }

    /// Writes the file if records were pushed since it was last written. A history that was
    /// given its records and had none pushed (a trial that ended before its group resumed)
    /// leaves the file as it is.
    pub fn flush(&mut self) -> Result<()> {
        match self.dirty {
            true => self.write(),
            false => Ok(()),
        }
    }

    fn write(&mut self) -> Result<()> {
        for r in &self.records[self.rows..] {
            self.text.push_str(&csv_rows(r));
        }
        self.rows = self.records.len();
        write_replace(&self.path, self.text.as_bytes())?;
        self.write_events_due();
        (self.written, self.dirty) = (Some(Instant::now()), false);
        Ok(())
    }

    /// Appends the records the event file lacks. The events are not essential: where they
    /// cannot be written, one warning, and the run goes on without them (a resumed run writes
    /// the epochs its event files lack).
    fn write_events_due(&mut self) {
        let Some((writer, written)) = &mut self.events else {
            return;
        };
        let result = (self.records[*written..].iter())
            .try_for_each(|r| writer.epoch(r))
            .and_then(|()| writer.flush());
        match result {
            Ok(()) => *written = self.records.len(),
            Err(e) => {
                events_failed(&e);
                self.events = None;
            }
        }
    }
}

fn events_failed(e: &crate::error::EmberError) {
    crate::console::warn_once(
        "events",
        &format!("TensorBoard events not written ({e}); training goes on without them"),
    );
}

fn csv_rows(r: &EpochRecord) -> String {
    let cell = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
    let row = |split: &str, s: &SplitRecord| {
        format!(
            "{},{split},{},{},{:.4},{:.1},{},{},{}\n",
            r.epoch,
            s.loss,
            cell(s.accuracy),
            s.seconds,
            s.steps_per_s(),
            cell(s.mae),
            cell(s.r2),
            cell(s.lr)
        )
    };
    row("train", &r.train) + &row("valid", &r.valid)
}

/// Reads `metrics.csv` back (for `ember plot` and `ember runs`).
pub fn read_csv(path: &Path) -> Result<Vec<EpochRecord>> {
    let bytes = crate::fs::read_file(path)?;
    let text = String::from_utf8_lossy(&bytes);
    let mut lines = text.lines();
    let header = lines.next();
    let fields = if header == Some(CSV_HEADER) { 9 } else { 6 };
    if header != Some(CSV_HEADER) && header != Some(CSV_HEADER_V1) {
        return Err(crate::error::EmberError::file(
            path,
            format!("not an ember metrics file (the header must be {CSV_HEADER})"),
        ));
    }
    let mut out: Vec<EpochRecord> = Vec::new();
    for (i, line) in lines.enumerate() {
        let f: Vec<&str> = line.split(',').collect();
        let bad = || {
            crate::error::EmberError::file(
                path,
                format!("line {}: malformed row \"{line}\"", i + 2),
            )
        };
        if f.len() != fields {
            return Err(bad());
        }
        let num = |s: &str| s.parse::<f64>().map_err(|_| bad());
        let optional = |i: usize| match f.get(i) {
            None | Some(&"") => Ok(None),
            Some(s) => num(s).map(Some),
        };
        let epoch: usize = f[0].parse().map_err(|_| bad())?;
        let seconds = num(f[4])?;
        let split = SplitRecord {
            loss: num(f[2])?,
            accuracy: optional(3)?,
            seconds,
            steps: (num(f[5])? * seconds).round() as usize,
            mae: optional(6)?,
            r2: optional(7)?,
            lr: optional(8)?,
        };
        match f[1] {
            "train" => out.push(EpochRecord {
                epoch,
                train: split,
                valid: split,
            }),
            "valid" => match out.last_mut() {
                Some(last) if last.epoch == epoch => last.valid = split,
                _ => return Err(bad()),
            },
            _ => return Err(bad()),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_round_trips() {
        let rec = |e, l| EpochRecord {
            epoch: e,
            train: SplitRecord {
                loss: l,
                accuracy: Some(0.5),
                seconds: 2.0,
                steps: 100,
                mae: None,
                r2: None,
                lr: Some(0.001),
            },
            valid: SplitRecord {
                loss: l + 0.1,
                accuracy: None,
                seconds: 0.5,
                steps: 10,
                mae: Some(0.25),
                r2: Some(0.875),
                lr: None,
            },
        };
        let history = vec![rec(1, 1.0), rec(2, 0.75)];
        let path = crate::data::test_dir("history").join("metrics.csv");
        // Written epoch by epoch, as a run does: the first epoch at once, the next one within
        // a second only when flushed, and the flush keeps the first row.
        let mut written = History::new(path.clone(), Vec::new());
        for r in &history {
            written.push(*r).unwrap();
        }
        assert_eq!(read_csv(&path).unwrap(), history[..1]);
        written.flush().unwrap();
        assert_eq!(read_csv(&path).unwrap(), history);
        // A resumed run starts from the records it had: its first write holds them all.
        std::fs::remove_file(&path).unwrap();
        let mut resumed = History::new(path.clone(), vec![history[0]]);
        resumed.push(history[1]).unwrap();
        assert_eq!(read_csv(&path).unwrap(), history);
        assert_eq!(resumed.into_records(), history);
        // One given its records and none pushed (a trial that ended before its group resumed)
        // leaves the file alone.
        let mut ended = History::new(path.clone(), vec![history[0]]);
        ended.flush().unwrap();
        assert_eq!(read_csv(&path).unwrap(), history);
    }
}
