//! `ember bench`: training speed of a job, measured two ways side by side in one process:
//! - through Burn's Learner, exactly as `ember train` runs it (a throw-away run folder), and
//! - as a bare step loop (forward, backward, optimizer step; no metrics, no events),
//!
//! so the Learner's own overhead is visible. The first epoch (warm-up: allocations, kernel
//! compilation on CUDA) is reported apart; steps/s is the median over the following epochs.

use crate::config::JobConfig;
use crate::console::{Console, Verbosity};
use crate::data::loader::{EpochCell, LoaderBuilder};
use crate::data::{self, HostData};
use crate::device::launches::{Meter, StepCost};
use crate::device::thread_time::ThreadClock;
use crate::device::{self, Backends, Device, DeviceRequest, OnBackend, TrainBackend};
use crate::error::Result;
use crate::model::{StepTotals, TrainableModel};
use crate::stats::median;
use crate::train::{TrainArgs, Training};
use burn::data::dataloader::DataLoader;
use burn::optim::Optimizer;
use burn::train::TrainStep;
use serde::Serialize;
use std::path::Path;
use std::time::Instant;

/// Speed of one way of training.
#[derive(Debug, Clone, Serialize)]
pub struct Speed {
    /// Seconds of the first (warm-up) epoch.
    pub first_epoch_s: f64,
    /// Median steps per second over the epochs after the first.
    pub steps_per_s: f64,
    /// Median milliseconds per step over the epochs after the first.
    pub ms_per_step: f64,
    /// Seconds of every epoch, the first included.
    pub epoch_s: Vec<f64>,
}

/// What `ember bench` reports.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub job: String,
    pub device: String,
    pub threads: usize,
    pub batch_size: usize,
    pub steps_per_epoch: usize,
    pub epochs: usize,
    pub learner: Speed,
    pub bare: Speed,
    /// `ember train`'s wall time from start to summary, over steps / (steady steps/s).
    pub wall_over_steps: f64,
    /// The run's final validation loss and accuracy, so a speed comes with its accuracy.
    pub final_valid_loss: f64,
    pub final_valid_accuracy: Option<f64>,
    /// What a bare-loop step costs (medians over the epochs after the first).
    pub step: StepReport,
    /// Kernel launches per step through the Learner, where they are counted.
    pub learner_launches_per_step: Option<f64>,
    /// On a GPU, the way each of ember's operations ran: its kernel, or Burn's composition
    /// and why (`gpu::path`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gpu_path: Vec<String>,
}

/// What one training step costs, beyond its time: kernel launches on a GPU device (with
/// `--launches`), and CPU time (`device::thread_time`) on the host's threads, the steps issued
/// one at a time ([`host_cost`]), and on the device's server threads, which on a software
/// device (lavapipe) run the kernels too.
#[derive(Debug, Clone, Serialize)]
pub struct StepReport {
    pub launches: Option<f64>,
    pub host_cpu_ms: f64,
    pub device_cpu_ms: f64,
}

impl StepReport {
    fn of(costs: &[StepCost], host_cpu_ms: f64) -> StepReport {
        let steady = |f: fn(&StepCost) -> f64| median(costs.iter().skip(1).map(f).collect());
        StepReport {
            launches: costs[0]
                .launches
                .map(|_| steady(|c| c.launches.unwrap_or(f64::NAN))),
            host_cpu_ms,
            device_cpu_ms: steady(|c| c.device_ms),
        }
    }

    fn text(&self) -> String {
        let launches = self
            .launches
            .map(|l| format!("{l:.1} launches, "))
            .unwrap_or_default();
        format!(
            "  per step {launches}host threads {:.3} ms CPU (steps one at a time), device threads {:.3} ms CPU",
            self.host_cpu_ms, self.device_cpu_ms
        )
    }
}

fn speed(epoch_s: Vec<f64>, steps: usize) -> Speed {
    let steady = median(epoch_s.iter().skip(1).copied().collect());
    Speed {
        first_epoch_s: epoch_s.first().copied().unwrap_or(f64::NAN),
        steps_per_s: steps as f64 / steady,
        ms_per_step: 1000.0 * steady / steps as f64,
        epoch_s,
    }
}

/// Runs the benchmark of `config_path` for `epochs` epochs (at least 2).
pub fn run<D: Backends>(
    config_path: &Path,
    request: DeviceRequest,
    epochs: usize,
    max_train_rows: Option<usize>,
) -> Result<BenchReport> {
    let epochs = epochs.max(2);
    // A bad job file fails before any device is opened.
    crate::config::load(config_path)?;
    let device = device::choose(request)?;
    #[cfg(feature = "gpu-kernels")]
    crate::gpu::path::watch();
    let scratch = std::env::temp_dir().join(format!("ember-bench-{}", std::process::id()));
    std::fs::remove_dir_all(&scratch).ok();

    // Through the Learner, as `ember train` does it, timed from start to summary.
    let started = Instant::now();
    let args = scratch_run(request, epochs, &scratch, max_train_rows);
    let report = crate::train::run::<D>(Some(config_path), &args, &Console::new(Verbosity::Quiet));
    let wall = started.elapsed().as_secs_f64();
    std::fs::remove_dir_all(&scratch).ok();
    let report = report?;
    if let Some(e) = report.failure {
        return Err(e);
    }
    let steps = report.history[0].train.steps;
    let learner = speed(
        report.history.iter().map(|e| e.train.seconds).collect(),
        steps,
    );
    let last = report.history.last().expect("a finished run has epochs");

    // The bare loop on the same data and model: the run's config, resolved from its data.
    let mut config = report.config.clone();
    config.epochs = epochs;
    let data = data::load_limited(&config, &indicatif::ProgressBar::hidden())?;
    let (bare_epochs, costs, host_ms) = D::dispatch(
        device,
        BareLoop {
            config: &config,
            data: &data,
            max_tensor_bytes: device::max_tensor_bytes(device),
        },
    );
    let bare = speed(bare_epochs, steps);

    Ok(BenchReport {
        job: config.name().to_string(),
        device: device.to_string(),
        threads: if device == Device::Cpu {
            rayon::current_num_threads()
        } else {
            0
        },
        batch_size: config.batch_size,
        steps_per_epoch: steps,
        epochs,
        wall_over_steps: wall / ((epochs * steps) as f64 / learner.steps_per_s),
        learner,
        bare,
        final_valid_loss: last.valid.loss,
        final_valid_accuracy: last.valid.accuracy,
        step: StepReport::of(&costs, host_ms),
        learner_launches_per_step: report.launches_per_step,
        gpu_path: gpu_path(),
    })
}

/// The ways ember's GPU operations ran, where its GPU kernels are built in.
fn gpu_path() -> Vec<String> {
    #[cfg(feature = "gpu-kernels")]
    return crate::gpu::path::taken();
    #[cfg(not(feature = "gpu-kernels"))]
    Vec::new()
}

/// `ember train`'s arguments for the benchmark's run through the Learner, into `scratch`.
fn scratch_run(
    request: DeviceRequest,
    epochs: usize,
    scratch: &Path,
    max_train_rows: Option<usize>,
) -> TrainArgs {
    TrainArgs {
        device: request,
        epochs: Some(epochs),
        seed: None,
        out: Some(scratch.to_path_buf()),
        max_train_rows,
        max_valid_rows: None,
        resume: None,
        set: Vec::new(),
        init_from: None,
        tui: false,
        checkpoint_every: crate::train::DEFAULT_CHECKPOINT_SECONDS,
        progress_every: crate::train::DEFAULT_PROGRESS_SECONDS,
        export: Vec::new(),
        // A benchmark's scratch run is not tracked, whatever MLFLOW_TRACKING_URI says.
        mlflow: None,
        experiment: None,
        drafted_job: None,
    }
}

impl BenchReport {
    /// A few lines for people.
    pub fn text(&self) -> String {
        let line = |name: &str, s: &Speed| {
            format!(
                "  {name:<8} first epoch {:.3} s, then {:.1} steps/s ({:.3} ms/step, median of {} epochs)",
                s.first_epoch_s,
                s.steps_per_s,
                s.ms_per_step,
                s.epoch_s.len().saturating_sub(1)
            )
        };
        let acc = self
            .final_valid_accuracy
            .map(|a| format!(", valid accuracy {:.2} %", 100.0 * a))
            .unwrap_or_default();
        format!(
            "{} on {}{}, batch {}, {} steps/epoch, {} epochs\n{}\n{}\n{}\n  learner/bare {:.2}; train wall time / (steps / steps/s) {:.2}; valid loss {:.4}{acc}",
            self.job,
            self.device,
            if self.threads > 0 {
                format!(" ({} threads)", self.threads)
            } else {
                String::new()
            },
            self.batch_size,
            self.steps_per_epoch,
            self.epochs,
            line("learner", &self.learner),
            line("bare", &self.bare),
            self.step.text(),
            self.learner.steps_per_s / self.bare.steps_per_s,
            self.wall_over_steps,
            self.final_valid_loss,
        ) + &self.gpu_path_text()
    }

    /// The GPU path's lines, where there is one.
    fn gpu_path_text(&self) -> String {
        let mut text = String::new();
        if !self.gpu_path.is_empty() {
            text.push_str("\n  GPU path:");
            for way in &self.gpu_path {
                text.push_str(&format!("\n    {way}"));
            }
        }
        text
    }
}

struct BareLoop<'a> {
    config: &'a JobConfig,
    data: &'a HostData,
    max_tensor_bytes: Option<u64>,
}

/// Each epoch's seconds, what its steps cost, and the host's CPU milliseconds per step issued
/// one at a time.
type Timed = (Vec<f64>, Vec<StepCost>, f64);

impl OnBackend for BareLoop<'_> {
    type Output = Timed;

    fn run<B: TrainBackend>(self, device: B::Device) -> Timed {
        crate::train::with_model_and_optimizer::<B, _>(self.config, device, self)
    }
}

impl<B: TrainBackend> Training<B> for BareLoop<'_> {
    type Output = Timed;

    fn run<M, O>(self, model: M, optimizer: O, lr: f64, device: B::Device) -> Timed
    where
        M: TrainableModel<B>,
        O: Optimizer<M, B> + 'static,
    {
        self.time(model, optimizer, lr, device)
    }
}

impl BareLoop<'_> {
    fn time<B: TrainBackend, M: TrainableModel<B>, O: Optimizer<M, B>>(
        self,
        mut model: M,
        mut optim: O,
        lr: f64,
        device: B::Device,
    ) -> Timed {
        let c = self.config;
        let epoch = EpochCell::default();
        let train = &self.data.train;
        let loader = LoaderBuilder::new(c.batch_size)
            .drop_last(c.drop_last)
            .shuffle(c.shuffle.then_some(c.seed))
            .epoch(epoch.clone())
            .max_tensor_bytes(self.max_tensor_bytes)
            .build(train, train.row_bytes(), device.clone(), |rows| {
                M::batch(rows, &device)
            });
        let (mut times, mut costs) = (Vec::new(), Vec::new());
        for e in 1..=c.epochs {
            epoch.set(e);
            let started = Instant::now();
            let mut totals = StepTotals::<B>::new();
            let iter = loader.iter();
            let (meter, mut steps) = (Meter::start::<B>(&device), 0);
            for batch in iter {
                let out = TrainStep::step(&model, batch);
                totals.add(out.item);
                model = optim.step(lr, model, out.grads);
                steps += 1;
            }
            costs.push(meter.stop::<B>(&device, steps));
            // One read per epoch, as the Learner path does, so both wait for the device.
            let _ = totals.read();
            times.push(started.elapsed().as_secs_f64());
        }
        let host = host_cost(&loader, &mut model, &mut optim, lr, &device);
        (times, costs, host)
    }
}

/// The host's CPU milliseconds per step, the steps issued one at a time: each waits for the
/// device before the next, so that no thread of the host spins on a full queue while a slow
/// device (lavapipe) catches up. Up to 20 steps of an epoch.
fn host_cost<B: TrainBackend, M: TrainableModel<B>, O: Optimizer<M, B>>(
    loader: &impl DataLoader<B, M::Batch>,
    model: &mut M,
    optim: &mut O,
    lr: f64,
    device: &B::Device,
) -> f64 {
    let _ = B::sync(device);
    let (mut host_ns, mut steps) = (0, 0);
    for batch in loader.iter().take(20) {
        let before = ThreadClock::now();
        let out = TrainStep::step(model, batch);
        *model = optim.step(lr, model.clone(), out.grads);
        let _ = B::sync(device);
        host_ns += ThreadClock::now().since(&before).host_ns;
        steps += 1;
    }
    host_ns as f64 / 1e6 / steps.max(1) as f64
}
