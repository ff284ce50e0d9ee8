//! `ember sweep unit SWEEP_DIR --unit N`, which `ember sweep run` starts for a unit of
//! replicas: the unit's trials as one batched model through Burn's `SupervisedTraining` with
//! the replica strategy. The group's checkpoints go to `unit-NNN/checkpoint`, with the list of
//! its trials beside them; each trial gets an ordinary run folder (config, metrics, summary,
//! curves, model). Running it again resumes the group from its last checkpoint.

use super::folder::{BASE, SweepDir, TrialState};
use super::plan::{Plan, Trial};
use crate::config::JobConfig;
use crate::console::Console;
use crate::data::loader::{EpochCell, LoaderBuilder};
use crate::device::{self, Backends, Device, DeviceRequest, OnBackend, TrainBackend};
use crate::error::{EmberError, Result};
use crate::fs::write_atomic;
use crate::input_err;
use crate::model::mlp::MlpBatch;
use crate::optim::grouped::Group;
use crate::optim::{Chosen, Grouped, PerReplica};
use crate::replicas::folds::GroupData;
use crate::replicas::loader::{ReplicaLoader, SharedRows};
use crate::replicas::model::{ReplicaBatch, ReplicaMlp};
use crate::replicas::strategy::{GroupLog, ReplicaLog, ReplicaStrategy};
use crate::run::checkpoint::{self, CheckpointDir, Manifest};
use crate::run::folder::{self, RunDir};
use crate::run::history::{History, read_csv};
use crate::run::report::RunReport;
use crate::train::metrics::{NullLogger, RunningMetric};
use crate::train::reports::ReportClock;
use crate::train::schedule::Schedule;
use crate::train::{DEFAULT_CHECKPOINT_SECONDS, DEFAULT_PROGRESS_SECONDS, signals};
use burn::data::dataloader::DataLoader;
use burn::module::{AutodiffModule, Module};
use burn::prelude::*;
use burn::train::{Learner, LearningComponentsMarker, SupervisedTraining, TrainingStrategy};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The file in `unit-NNN/` that lists the group's trials, in replica order.
const TRIALS: &str = "trials";

/// Trains unit `unit` of the sweep in `dir` as replicas; returns each trial's summary line.
/// Folds whose training splits make different numbers of batches an epoch train as groups one
/// after another, each group's folds alike. A group in which every replica diverged does not
/// keep the next from training; the unit reports it at the end.
pub fn train<D: Backends>(
    dir: &Path,
    unit: usize,
    request: DeviceRequest,
    console: &Console,
) -> Result<String> {
    let (sweep, plan) = SweepDir::open(dir)?;
    // Held from before the trials' folders are touched until every group has ended.
    let _lock = RunDir::create(Some(&sweep.unit(unit)), "unit", 32 * 1024 * 1024)?;
    let (mut lines, mut diverged, mut left) = (Vec::new(), Vec::new(), usize::MAX);
    loop {
        let (outcome, now_left) = train_group::<D>((&sweep, &plan), unit, request, console)?;
        match outcome {
            Ok(text) => lines.push(text),
            Err(EmberError::Diverged(text)) => diverged.push(text),
            Err(e) => return Err(e),
        }
        // Each group ends its trials; stop once none is left (or, defensively, none ended).
        if now_left == 0 || now_left >= left {
            break;
        }
        left = now_left;
    }
    match lines.is_empty() {
        true => Err(EmberError::Diverged(diverged.join("\n"))),
        false => Ok(lines
            .into_iter()
            .chain(diverged)
            .collect::<Vec<_>>()
            .join("\n")),
    }
}

/// Trains one group of unit `unit`'s trials (the caller holds the unit's lock); returns the
/// group's outcome (its summary lines), and how many trials of the unit are left for another.
fn train_group<D: Backends>(
    (sweep, plan): (&SweepDir, &Plan),
    unit: usize,
    request: DeviceRequest,
    console: &Console,
) -> Result<(Result<String>, usize)> {
    let started = Instant::now();
    let trials = plan.select(Some(unit))?;
    let unit_dir = sweep.unit(unit);
    let checkpoints = unit_dir.join(folder::CHECKPOINTS);
    let resuming = checkpoint::latest(&checkpoints).is_ok();
    let mut members = members(sweep, &unit_dir, &trials, resuming)?;
    let mut configs: Vec<JobConfig> = members
        .iter()
        .map(|t| plan.config(t))
        .collect::<Result<_>>()?;
    // A group after the first may be one fold's trial alone.
    if let Some(why) = crate::replicas::why_not_group(&configs) {
        return Err(input_err!("unit {unit}: cannot train as replicas: {why}"));
    }
    let device = device::choose(request)?;
    console.line(&format!(
        "unit {unit}: {} trials as replicas on {}",
        members.len(),
        device::describe(device)
    ));
    let (data, left_out) = crate::replicas::folds::load(&mut configs, console)?;
    for &r in left_out.iter().rev() {
        members.remove(r);
    }
    if !left_out.is_empty() {
        console.line(&format!(
            "unit {unit}: {} of them now, the {} whose folds make other batch counts after",
            members.len(),
            left_out.len()
        ));
        let list: Vec<String> = members.iter().map(|t| t.index.to_string()).collect();
        write_atomic(&unit_dir.join(TRIALS), list.join(" ").as_bytes())?;
    }
    let task = UnitTask {
        sweep,
        unit_dir: unit_dir.clone(),
        members: members.iter().map(|t| t.index).collect(),
        configs,
        data: &data,
        device,
        console,
        started,
    };
    let outcome = D::dispatch(device, task);
    // Trials left out of this group (now, or before it was resumed) start a group of their own.
    let left = (trials.iter())
        .filter(|t| matches!(sweep.state(t.index), TrialState::New | TrialState::Lost))
        .count();
    // The next group starts afresh, unless this one stopped to be resumed: its checkpoints
    // are of its own trials, which have ended.
    if left > 0 && matches!(outcome, Ok(_) | Err(EmberError::Diverged(_))) {
        std::fs::remove_dir_all(&checkpoints).map_err(|e| EmberError::write(&checkpoints, e))?;
    }
    Ok((outcome, left))
}

/// The trials the group trains, in replica order: on a fresh start the unit's trials that have
/// neither ended nor a checkpoint of their own (their folders from an earlier try cleared), on a resume the list it started with.
fn members<'p>(
    sweep: &SweepDir,
    unit_dir: &Path,
    trials: &[&'p Trial],
    resuming: bool,
) -> Result<Vec<&'p Trial>> {
    let list = unit_dir.join(TRIALS);
    if resuming {
        let text = String::from_utf8_lossy(&crate::fs::read_file(&list)?).into_owned();
        let wanted: Vec<usize> = text
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        let members: Vec<&Trial> = (trials.iter().copied())
            .filter(|t| wanted.contains(&t.index))
            .collect();
        if members.is_empty() {
            return Err(input_err!(
                "{}: names no trial of this unit",
                list.display()
            ));
        }
        return Ok(members);
    }
    let mut members = Vec::new();
    for t in trials {
        match sweep.state(t.index) {
            // A trial with a checkpoint of its own resumes as a process (`sweep run` starts it,
            // and it may be running now, beside a unit's later group).
            TrialState::Ended(_) | TrialState::Unfinished | TrialState::Busy => {}
            _ => members.push(*t),
        }
    }
    std::fs::create_dir_all(unit_dir).map_err(|e| EmberError::write(unit_dir, e))?;
    for t in &members {
        let dir = sweep.trial(t.index);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| EmberError::write(&dir, e))?;
        }
    }
    let text: Vec<String> = members.iter().map(|t| t.index.to_string()).collect();
    write_atomic(&list, text.join(" ").as_bytes())?;
    Ok(members)
}

/// Everything the chosen backend needs.
struct UnitTask<'a> {
    sweep: &'a SweepDir,
    unit_dir: PathBuf,
    members: Vec<usize>,
    configs: Vec<JobConfig>,
    data: &'a GroupData,
    device: Device,
    console: &'a Console,
    started: Instant,
}

impl OnBackend for UnitTask<'_> {
    type Output = Result<String>;

    fn run<B: TrainBackend>(self, device: B::Device) -> Result<String> {
        self.check_fold_uploads()?;
        let model = ReplicaMlp::<B>::new(&self.configs, &device);
        let factors: Vec<f32> = crate::replicas::lr_factors(&self.configs)
            .iter()
            .map(|f| *f as f32)
            .collect();
        let factors = Tensor::<B::Inference, 1>::from_floats(factors.as_slice(), &device);
        match Chosen::from_spec(&self.configs[0].optimizer) {
            Chosen::Sgd(inner, lr) => self.launch(model, PerReplica { inner, factors }, lr, device),
            Chosen::Adam(inner, lr) => {
                self.launch(model, PerReplica { inner, factors }, lr, device)
            }
        }
    }
}

type Components<B, O> =
    LearningComponentsMarker<B, Schedule, ReplicaMlp<B>, Grouped<O, ReplicaMlp<B>, B>>;

impl UnitTask<'_> {
    fn launch<B, O>(
        self,
        model: ReplicaMlp<B>,
        optimizer: O,
        lr: f64,
        device: B::Device,
    ) -> Result<String>
    where
        B: TrainBackend,
        O: Group<B::Inference> + 'static,
    {
        let config = &self.configs[0];
        let params = model.num_params() / self.members.len();
        let epoch = EpochCell::default();
        let train = self.train_loader::<B>(epoch.clone(), &device);
        let schedule = Schedule::new(&config.schedule, lr, train.batches_per_epoch());
        let optimizer = Grouped::<O, ReplicaMlp<B>, B>::new(optimizer);
        let mut learner: Learner<Components<B, O>> = Learner::new(model, optimizer, schedule);
        let checkpoints = self.unit_dir.join(folder::CHECKPOINTS);
        let resumed = self.resume(&mut learner, &checkpoints, &device)?;
        let (replicas, _trial_locks) = self.trial_folders(resumed.as_ref(), params)?;
        let log = Arc::new(Mutex::new(GroupLog {
            replicas,
            stopped: None,
            launches: Vec::new(),
        }));
        std::fs::create_dir_all(&checkpoints).map_err(|e| EmberError::write(&checkpoints, e))?;
        let strategy = self.strategy(CheckpointDir::new(checkpoints), epoch, log.clone());
        let valid = self.valid_loader::<B::Inference>(&device);
        let steps = train.batches_per_epoch();
        let mut training = SupervisedTraining::new(&self.unit_dir, Arc::new(train), valid)
            .with_training_strategy(TrainingStrategy::Custom(Arc::new(strategy)))
            .with_metric_logger(NullLogger)
            .with_application_logger(None)
            .num_epochs(config.epochs)
            .metric_train_numeric(RunningMetric::loss())
            .metric_valid_numeric(RunningMetric::loss())
            .renderer(self.console.renderer(config.epochs, steps));
        if let Some(m) = &resumed {
            training = training.checkpoint(m.epoch);
        }
        let result = training.launch(learner);
        self.console.finish();
        let log = std::mem::take(&mut *log.lock().expect("group log lock"));
        self.finish::<B>(log, &result.model, params, &device)
    }

    /// With folds, that the device can hold their splits as one tensor each (a wgpu device
    /// binds at most so many bytes); they are uploaded whole, where validation rows shared by
    /// every replica go up in shards.
    fn check_fold_uploads(&self) -> Result<()> {
        let (Some(f), Some(max)) = (&self.data.folds, device::max_tensor_bytes(self.device)) else {
            return Ok(());
        };
        for (what, split) in [("training", &f.train), ("validation", &f.valid)] {
            let bytes = (split.rows() * split.row_bytes()) as u64;
            if bytes > max {
                return Err(input_err!(
                    "folds as replicas: the {} folds' {what} splits take {} MB, more than this \
                     device binds in one tensor ({} MB); run the sweep with --processes",
                    self.members.len(),
                    bytes.div_ceil(1 << 20),
                    max >> 20
                ));
            }
        }
        Ok(())
    }

    /// The replicas' training batches: of the shared split, or each of its own fold's.
    fn train_loader<B: crate::ops::EmberBackend>(
        &self,
        epoch: EpochCell,
        device: &B::Device,
    ) -> ReplicaLoader<B> {
        let config = &self.configs[0];
        let seeds = config
            .shuffle
            .then(|| self.configs.iter().map(|c| c.seed).collect());
        let batching = (config.batch_size, config.drop_last);
        let rows = match &self.data.folds {
            None => &self.data.data.train,
            Some(f) => &f.train,
        };
        let rows = MlpBatch::<B>::from_host(rows, device);
        let loader = ReplicaLoader::new(rows, seeds, batching, epoch, device.clone());
        match &self.data.folds {
            None => loader,
            Some(f) => loader.with_blocks(f.train_blocks.clone()),
        }
    }

    /// The replicas' validation batches, in file order as a single run's: the shared rows, or
    /// each replica's own fold.
    fn valid_loader<B: crate::ops::EmberBackend>(
        &self,
        device: &B::Device,
    ) -> Arc<dyn DataLoader<B, ReplicaBatch<B>>> {
        let batch_size = LoaderBuilder::evaluation(self.configs[0].batch_size).batch_size();
        if let Some(f) = &self.data.folds {
            let rows = MlpBatch::<B>::from_host(&f.valid, device);
            let epoch = EpochCell::default();
            let loader = ReplicaLoader::new(rows, None, (batch_size, false), epoch, device.clone());
            return Arc::new(loader.with_blocks(f.valid_blocks.clone()));
        }
        let valid = &self.data.data.valid;
        let loader = LoaderBuilder::evaluation(self.configs[0].batch_size)
            .max_tensor_bytes(device::max_tensor_bytes(self.device))
            .build(valid, valid.row_bytes(), device.clone(), |rows| {
                MlpBatch::<B>::from_host(rows, device)
            });
        Arc::new(SharedRows(Arc::new(loader)))
    }

    /// With a checkpoint in `dir`, the learner restored from it onto `device`.
    fn resume<B, O>(
        &self,
        learner: &mut Learner<Components<B, O>>,
        dir: &Path,
        device: &B::Device,
    ) -> Result<Option<Manifest>>
    where
        B: TrainBackend,
        O: Group<B::Inference> + 'static,
    {
        let Ok(manifest) = checkpoint::latest(dir) else {
            return Ok(None);
        };
        if manifest.config_hash != self.hash() {
            return Err(input_err!(
                "{}: the checkpoint was made for other trials than {}",
                dir.display(),
                self.sweep.file(BASE).display()
            ));
        }
        checkpoint::restore(learner, dir, &manifest, device)?;
        self.console.line(&format!(
            "resuming {} after epoch {}/{}",
            self.unit_dir.display(),
            manifest.epoch,
            self.configs[0].epochs
        ));
        Ok(Some(manifest))
    }

    /// Replica `r`'s MLflow run, when `ember sweep run` named a server (it passes the URI and
    /// the experiment on in the environment, as to a trial's own process).
    fn tracker(&self, r: usize, dir: &Path) -> Option<Arc<crate::tracking::mlflow::Tracker>> {
        let var = |key: &str| std::env::var(key).ok();
        crate::tracking::mlflow::start_run(
            &self.configs[r],
            var("MLFLOW_TRACKING_URI").as_deref(),
            var("MLFLOW_EXPERIMENT_NAME"),
            dir.file_name().map(|n| n.to_string_lossy().into_owned()),
            self.device,
        )
    }

    /// The group's config hash: its trials', in replica order.
    fn hash(&self) -> String {
        let hashes: Vec<String> = self.configs.iter().map(JobConfig::hash).collect();
        hashes.join("+")
    }

    /// Each trial's run folder, locked: new, with its resolved config; or on a resume, its
    /// history up to the checkpoint (a trial that ended before stays ended).
    fn trial_folders(
        &self,
        resumed: Option<&Manifest>,
        params: usize,
    ) -> Result<(Vec<ReplicaLog>, Vec<RunDir>)> {
        let factors = crate::replicas::lr_factors(&self.configs);
        let needed = 8 * params as u64 + 1024 * 1024;
        let mut logs = Vec::new();
        let mut locks = Vec::new();
        for (r, &index) in self.members.iter().enumerate() {
            let path = self.sweep.trial(index);
            let (run, history, active) = match resumed {
                None => {
                    let run = RunDir::create(Some(&path), self.configs[r].name(), needed)?;
                    write_atomic(
                        &run.file(folder::CONFIG),
                        self.configs[r].to_toml().as_bytes(),
                    )?;
                    (run, Vec::new(), true)
                }
                Some(m) => {
                    let ended = matches!(self.sweep.state(index), TrialState::Ended(_));
                    let run = RunDir::open(&path, needed)?;
                    let mut history = read_csv(&run.file(folder::METRICS)).unwrap_or_default();
                    history.retain(|h| h.epoch <= m.epoch);
                    (run, history, !ended)
                }
            };
            // A trial that had ended before its group resumed writes and tracks nothing more.
            let tracker = active.then(|| self.tracker(r, &path)).flatten();
            let mut history = History::new(path.join(folder::METRICS), history)
                .in_target_units(self.configs[r].target_std())
                .tracked_by(tracker.clone());
            if active && self.configs[r].tensorboard {
                history.write_events(&path);
            }
            logs.push(ReplicaLog {
                history,
                dir: path,
                failure: None,
                active,
                lr_factor: factors[r],
                tracker,
            });
            locks.push(run);
        }
        Ok((logs, locks))
    }

    fn strategy(
        &self,
        checkpoints: CheckpointDir,
        epoch: EpochCell,
        log: Arc<Mutex<GroupLog>>,
    ) -> ReplicaStrategy {
        let config = &self.configs[0];
        ReplicaStrategy {
            device_epoch: epoch,
            checkpoints,
            config_hash: self.hash(),
            log,
            console: self.console.clone(),
            stop: signals::StopSignal::install(),
            reports: ReportClock::new(Some(Duration::from_secs_f64(DEFAULT_PROGRESS_SECONDS))),
            checkpoint_every: Duration::from_secs_f64(DEFAULT_CHECKPOINT_SECONDS),
            wait_for_checkpoints: self.device != Device::Cpu,
            dropout_seed: (config.model.dropout > 0.0).then_some(config.seed),
            clip_grad_norm: config.clip_grad_norm,
        }
    }

    /// Each trial's model files (when it completed), summary and curves; the group's outcome.
    fn finish<B: TrainBackend>(
        &self,
        log: GroupLog,
        model: &<ReplicaMlp<B> as AutodiffModule<B>>::InnerModule,
        params: usize,
        device: &B::Device,
    ) -> Result<String> {
        let mut lines = Vec::new();
        let mut completed = 0;
        for (r, replica) in log.replicas.into_iter().enumerate() {
            if !replica.active && replica.failure.is_none() {
                continue; // ended before this run
            }
            let config = &self.configs[r];
            let failure = replica
                .failure
                .or_else(|| log.stopped.as_ref().map(copy_error));
            if failure.is_none() {
                let burn = replica.dir.join(folder::MODEL_BURN);
                let torch = replica.dir.join(folder::MODEL_SAFETENSORS);
                model.save_replica(r, config, (&burn, &torch), device)?;
                completed += 1;
            }
            let report = RunReport {
                run_dir: replica.dir,
                config: config.clone(),
                device: self.device,
                adapter: device::hardware(self.device),
                history: replica.history.into_records(),
                wall_seconds: self.started.elapsed().as_secs_f64(),
                failure,
                data_source: self.data.data.source.clone(),
                rows_without_label: self.data.data.dropped_labels,
                params,
                host_reads: device::host_read::count(),
                tracker: replica.tracker,
                launches_per_step: device::launches::per_step(&log.launches),
            };
            lines.push(report.write_summary_and_curves()?);
        }
        match log.stopped {
            Some(e) => {
                lines.iter().for_each(|l| self.console.line(l));
                Err(e)
            }
            None if completed == 0 && !lines.is_empty() => Err(EmberError::Diverged(format!(
                "{}\nevery replica diverged",
                lines.join("\n")
            ))),
            None => Ok(lines.join("\n")),
        }
    }
}

/// The group's stop, as each unfinished trial's failure.
fn copy_error(e: &EmberError) -> EmberError {
    match e {
        EmberError::Interrupted(m) => EmberError::Interrupted(m.clone()),
        EmberError::DiskFull(m) => EmberError::DiskFull(m.clone()),
        other => EmberError::Runtime(other.to_string()),
    }
}
