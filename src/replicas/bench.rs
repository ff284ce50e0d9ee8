//! `ember bench JOB --replicas K`: the wall time of K seeds of a job trained three ways, side by
//! side, each as a user would run it from the command line, against one plain run:
//! - as K replicas of one batched model (`ember sweep run`, the default);
//! - as K processes two at a time, one thread each (`--processes --parallel 2 --threads 1`);
//! - as K processes one after another, with every core (`--processes --parallel 1`).
//!
//! Rounds alternate the order of the ways; each figure is the median over the rounds.

use crate::device::DeviceRequest;
use crate::error::{EmberError, Result};
use crate::input_err;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The ways, in the order of the report.
const WAYS: [&str; 4] = ["one run", "replicas", "parallel 2", "sequential"];

#[derive(Debug, Clone, Serialize)]
pub struct ReplicaBench {
    pub job: String,
    pub replicas: usize,
    pub epochs: Option<usize>,
    pub rounds: usize,
    /// Median wall seconds of each way, in the order of `WAYS`.
    pub seconds: Vec<f64>,
    /// Every round's wall seconds of each way.
    pub all_seconds: Vec<Vec<f64>>,
}

/// Times the ways `rounds` times on `device`, in a scratch folder that is removed after.
pub fn run(
    config: &Path,
    replicas: usize,
    (epochs, max_train_rows): (Option<usize>, Option<usize>),
    device: DeviceRequest,
    rounds: usize,
) -> Result<ReplicaBench> {
    if replicas < 2 || rounds == 0 {
        return Err(input_err!(
            "--replicas needs at least 2 and --rounds at least 1"
        ));
    }
    let job = crate::config::load(config)?;
    let configs: Vec<_> = (1..=replicas as u64)
        .map(|seed| crate::config::JobConfig {
            seed,
            split_seed: Some(job.split_seed()),
            ..job.clone()
        })
        .collect();
    if let Some(why) = super::why_not(&configs) {
        return Err(input_err!(
            "{}: cannot train as replicas: {why}",
            config.display()
        ));
    }
    let scratch = std::env::temp_dir().join(format!("ember-bench-replicas-{}", std::process::id()));
    let sweep = write_sweep(&scratch, config, replicas)?;
    let mut sets: Vec<String> = Vec::new();
    sets.extend(epochs.map(|e| format!("epochs={e}")));
    sets.extend(max_train_rows.map(|n| format!("max_train_rows={n}")));
    let mut all = vec![Vec::new(); WAYS.len()];
    for round in 0..rounds {
        for step in 0..WAYS.len() {
            // Rounds go through the ways in turn from a different start.
            let way = (round + step) % WAYS.len();
            let out = scratch.join(format!("{}-{round}", way));
            let args = way_args(way, config, &sweep, &out, &sets, device);
            all[way].push(timed(&args)?);
        }
    }
    std::fs::remove_dir_all(&scratch).ok();
    Ok(ReplicaBench {
        job: job.name().to_string(),
        replicas,
        epochs,
        rounds,
        seconds: all
            .iter()
            .map(|v| crate::stats::median(v.clone()))
            .collect(),
        all_seconds: all,
    })
}

/// A sweep of `replicas` seeds of `config`.
fn write_sweep(scratch: &Path, config: &Path, replicas: usize) -> Result<PathBuf> {
    std::fs::create_dir_all(scratch).map_err(|e| EmberError::write(scratch, e))?;
    let base =
        std::fs::canonicalize(config).map_err(|e| EmberError::file(config, e.to_string()))?;
    let seeds: Vec<String> = (1..=replicas).map(|s| s.to_string()).collect();
    let text = format!(
        "base = {}\nseeds = [{}]\n",
        toml::Value::String(base.display().to_string()),
        seeds.join(", ")
    );
    let path = scratch.join("replicas.toml");
    crate::fs::write_atomic(&path, text.as_bytes())?;
    Ok(path)
}

/// The command line of way `way`.
fn way_args(
    way: usize,
    config: &Path,
    sweep: &Path,
    out: &Path,
    sets: &[String],
    device: DeviceRequest,
) -> Vec<String> {
    let text = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut args = match way {
        0 => text(&["train", &config.display().to_string(), "--quiet"]),
        2 => text(&[
            "--threads",
            "1",
            "sweep",
            "run",
            "--processes",
            "--parallel",
            "2",
        ]),
        3 => text(&["sweep", "run", "--processes"]),
        _ => text(&["sweep", "run"]),
    };
    if way != 0 {
        args.push(sweep.display().to_string());
    }
    args.extend(text(&[
        "--out",
        &out.display().to_string(),
        "--device",
        &device.to_string(),
    ]));
    for set in sets {
        args.extend(text(&["--set", set]));
    }
    args
}

/// Runs this binary with `args`; its wall seconds.
fn timed(args: &[String]) -> Result<f64> {
    let started = Instant::now();
    let status = Command::new(crate::fs::ember_binary()?)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .map_err(|e| EmberError::Runtime(format!("cannot run ember {}: {e}", args.join(" "))))?;
    if !status.success() {
        return Err(EmberError::Runtime(format!(
            "ember {} failed ({status})",
            args.join(" ")
        )));
    }
    Ok(started.elapsed().as_secs_f64())
}

impl ReplicaBench {
    pub fn text(&self) -> String {
        let one = self.seconds[0];
        let mut lines = vec![format!(
            "{}: {} seeds, {} epochs, median wall time over {} round(s)",
            self.job,
            self.replicas,
            self.epochs
                .map_or("the job's".to_string(), |e| e.to_string()),
            self.rounds
        )];
        for (way, s) in WAYS.iter().zip(&self.seconds) {
            lines.push(format!("{way:<12} {s:>8.2} s  {:>6.2}x one run", s / one));
        }
        lines.join("\n")
    }
}
