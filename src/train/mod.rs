//! `ember train`: turns a checked config into Burn's `SupervisedTraining` + `Learner` run.
//! Data flows one way: config -> host data -> device tensors (once) -> Learner -> artifacts.

pub mod checkpoint;
pub mod history;
pub mod metrics;
pub mod signals;
pub mod strategy;

use crate::config::{DataSpec, JobConfig, JobKind};
use crate::console::Console;
use crate::data::loader::{EpochCell, LoaderBuilder};
use crate::data::{self, HostData};
use crate::device::{self, Backends, Device, DeviceRequest, OnBackend};
use crate::error::{EmberError, Result, write_atomic};
use crate::export::{self, Layout};
use crate::input_err;
use crate::model::fashion::FashionMlp;
use crate::model::linear_scalar::LinearScalar;
use crate::model::tabular::TabularMlp;
use crate::model::{EmberModel, StepOutput};
use crate::ops::TrainBackend;
use crate::optim::Chosen;
use crate::run_dir::{self, RunDir};
use burn::module::AutodiffModule;
use burn::optim::Optimizer;
use burn::train::{
    Learner, LearningComponentsMarker, SupervisedTraining, TrainStep, TrainingStrategy,
};
use history::EpochRecord;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use strategy::{EmberStrategy, RunLog};

/// Checkpoints are written at most this often (and always after the last epoch): tiny epochs
/// would otherwise spend more time on disk writes than on training.
pub const DEFAULT_CHECKPOINT_SECONDS: f64 = 10.0;

/// The running loss is read this often for the progress bar (and the NaN guard): a few times a
/// second is enough for a person, and costs one device sync each.
pub const DEFAULT_PROGRESS_SECONDS: f64 = 0.25;

/// The options of `ember train` (the config file aside).
#[derive(Debug, Clone, clap::Args)]
pub struct TrainArgs {
    /// auto, cpu, cuda[:N] or wgpu[:N] (see ember info).
    #[arg(long, default_value = "auto")]
    pub device: DeviceRequest,
    /// Override the number of epochs.
    #[arg(long)]
    pub epochs: Option<usize>,
    /// Override the seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Artifact folder (default: runs/<job>-<timestamp>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Train on the first N rows only.
    #[arg(long, value_name = "N")]
    pub max_train_rows: Option<usize>,
    /// Validate on the first N rows only.
    #[arg(long, value_name = "N")]
    pub max_valid_rows: Option<usize>,
    /// Continue the run in this folder from its last complete checkpoint.
    #[arg(long, value_name = "RUN_DIR")]
    pub resume: Option<PathBuf>,
    /// Start from weights in a safetensors file in PyTorch layout.
    #[arg(long, value_name = "FILE")]
    pub init_from: Option<PathBuf>,
    /// Burn's full-screen TUI instead of ember's progress bar (slower: it spins a core).
    #[arg(long)]
    pub tui: bool,
    /// Minimum seconds between two checkpoints; 0 checkpoints every epoch. The last epoch
    /// and a Ctrl-C always get one.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_CHECKPOINT_SECONDS)]
    pub checkpoint_every: f64,
    /// Seconds between two reads of the running loss, for the progress bar and the NaN guard;
    /// 0 reads it only at the end of each epoch.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_PROGRESS_SECONDS)]
    pub progress_every: f64,
}

/// What a finished (or stopped) run reports.
pub struct RunReport {
    pub run_dir: PathBuf,
    pub config: JobConfig,
    pub device: Device,
    /// The device's hardware name (see `device::hardware`).
    pub adapter: String,
    pub history: Vec<EpochRecord>,
    pub wall_seconds: f64,
    pub failure: Option<EmberError>,
    pub data_source: String,
    pub params: usize,
    /// Device-to-host reads of this process.
    pub host_reads: usize,
}

/// Resolves the config (the job file, or the resumed run's own), loads the data, trains, and
/// writes the artifacts. Returns the report even when training stopped early; the caller turns
/// `failure` into the exit code.
pub fn run<D: Backends>(
    config_path: Option<&Path>,
    args: &TrainArgs,
    console: &Console,
) -> Result<RunReport> {
    let started = Instant::now();
    let mut config =
        match &args.resume {
            Some(dir) => {
                let saved = crate::config::load(&dir.join(run_dir::CONFIG))?;
                if let Some(path) = config_path {
                    let given = crate::config::load(path)?;
                    if (JobConfig {
                        epochs: saved.epochs,
                        ..given
                    }) != saved
                    {
                        console.line(&format!(
                        "note: {} differs from the run's config.toml; resuming with the run's own",
                        path.display()
                    ));
                    }
                }
                saved
            }
            None => crate::config::load(config_path.ok_or_else(|| {
                input_err!("ember train needs a config file (or --resume RUN_DIR)")
            })?)?,
        };
    if let Some(e) = args.epochs {
        if e == 0 {
            return Err(input_err!("--epochs 0 must be at least 1"));
        }
        config.epochs = e;
    }
    if let Some(s) = args.seed {
        if args.resume.is_some() && s != config.seed {
            return Err(input_err!(
                "--seed {s}: a resumed run keeps its seed ({})",
                config.seed
            ));
        }
        config.seed = s;
    }

    for (flag, value, field) in [
        (
            "--max-train-rows",
            args.max_train_rows,
            &mut config.max_train_rows,
        ),
        (
            "--max-valid-rows",
            args.max_valid_rows,
            &mut config.max_valid_rows,
        ),
    ] {
        match value {
            Some(0) => return Err(input_err!("{flag} 0 must be at least 1")),
            Some(n) if args.resume.is_some() && Some(n) != *field => {
                return Err(input_err!(
                    "{flag} {n}: a resumed run keeps the rows it started with"
                ));
            }
            Some(n) => *field = Some(n),
            None => {}
        }
    }
    let device = device::choose(args.device)?;
    console.line(&format!(
        "{}: training on {}",
        config.job.name(),
        device::describe(device)
    ));

    console.status("reading data");
    let t = Instant::now();
    let data = data::load_limited(&config)?;
    // The input width and the statistics computed from this run's training split become part
    // of its resolved config, so eval and predict rebuild the same model and preprocessing.
    if let (DataSpec::Table { stats, .. }, Some(s)) = (&mut config.data, &data.stats) {
        *stats = Some(s.clone());
    }
    if config.job != JobKind::FashionMlp {
        let cols = data.train.features.cols;
        match config.inputs {
            Some(n) if n != cols => {
                return Err(input_err!(
                    "model.inputs = {n}, but the data has {cols} input columns"
                ));
            }
            _ => config.inputs = Some(cols),
        }
    }
    console.line(&format!(
        "data: {} ({} train rows, {} valid rows; read in {:.1} s)",
        data.source,
        data.train.rows(),
        data.valid.rows(),
        t.elapsed().as_secs_f64()
    ));

    let log = Arc::new(Mutex::new(RunLog::default()));
    let task = TrainTask {
        config: config.clone(),
        device,
        data: &data,
        args,
        console,
        log: log.clone(),
    };
    let prepared = D::dispatch(device, task)?;
    let log = std::mem::take(&mut *log.lock().expect("run log lock"));
    Ok(RunReport {
        run_dir: prepared.run_dir,
        config,
        device,
        adapter: device::hardware(device),
        history: log.history,
        wall_seconds: started.elapsed().as_secs_f64(),
        failure: log.failure,
        data_source: data.source.clone(),
        params: prepared.params,
        host_reads: device::host_read::count(),
    })
}

struct TrainTask<'a> {
    config: JobConfig,
    device: Device,
    data: &'a HostData,
    args: &'a TrainArgs,
    console: &'a Console,
    log: Arc<Mutex<RunLog>>,
}

/// What the backend-specific part hands back.
struct Trained {
    run_dir: PathBuf,
    params: usize,
}

impl OnBackend for TrainTask<'_> {
    type Output = Result<Trained>;

    fn run<B: TrainBackend>(self, device: B::Device) -> Result<Trained> {
        match self.config.job {
            JobKind::FashionMlp => self.fit::<B, FashionMlp<B>>(device),
            JobKind::TabularMlp => self.fit::<B, TabularMlp<B>>(device),
            JobKind::LinearScalar => self.fit::<B, LinearScalar<B>>(device),
        }
    }
}

/// The bounds every ember model meets in training: Burn's train step over device-cut batches
/// with ember's step output, and an inference form that is an [`EmberModel`] itself.
pub trait TrainableModel<B: TrainBackend>:
    EmberModel<B>
    + TrainStep<Input = <Self as EmberModel<B>>::Batch, Output = StepOutput<B>>
    + AutodiffModule<B, InnerModule = Self::Inference>
    + core::fmt::Display
    + 'static
{
    type Inference: EmberModel<B::Inference>;
}

impl<B, M, I> TrainableModel<B> for M
where
    B: TrainBackend,
    I: EmberModel<B::Inference>,
    M: EmberModel<B>
        + TrainStep<Input = <M as EmberModel<B>>::Batch, Output = StepOutput<B>>
        + AutodiffModule<B, InnerModule = I>
        + core::fmt::Display
        + 'static,
{
    type Inference = I;
}

impl TrainTask<'_> {
    fn fit<B: TrainBackend, M: TrainableModel<B>>(self, device: B::Device) -> Result<Trained> {
        let model = M::init(&self.config, &device);
        // ember's optimizers: Burn's formulas, one fused pass per parameter (src/optim.rs).
        match Chosen::from_spec(&self.config.optimizer) {
            Chosen::Sgd(sgd, lr) => self.launch(model, sgd.init(), lr, device),
            Chosen::Adam(adam, lr) => self.launch(model, adam.init(), lr, device),
        }
    }

    fn launch<B, M, O>(
        self,
        mut model: M,
        optimizer: O,
        lr: f64,
        device: B::Device,
    ) -> Result<Trained>
    where
        B: TrainBackend,
        M: TrainableModel<B>,
        O: Optimizer<M, B> + 'static,
    {
        let config = &self.config;
        let params = model.num_params();
        // Checkpoints (model + optimizer state, two epochs at most during a commit) and the
        // final model in two formats, with room to spare.
        let needed = 16 * 4 * params as u64 + 32 * 1024 * 1024;

        if let Some(path) = &self.args.init_from {
            model = export::load_safetensors(model, path, Layout::Pytorch)?;
            self.console
                .line(&format!("initial weights: {}", path.display()));
        }

        let mut learner: Learner<LearningComponentsMarker<B, f64, M, O>> =
            Learner::new(model, optimizer, lr);
        let mut history = Vec::new();
        let (run, resume_epoch) = match &self.args.resume {
            Some(dir) => {
                let run = RunDir::open(dir, needed)?;
                let ckpt_dir = run.file(run_dir::CHECKPOINTS);
                let manifest = checkpoint::latest(&ckpt_dir)?;
                if manifest.config_hash != config.hash() {
                    return Err(input_err!(
                        "{}: the checkpoint was made with another config than {}",
                        ckpt_dir.display(),
                        run.file(run_dir::CONFIG).display()
                    ));
                }
                if manifest.epoch >= config.epochs {
                    return Err(input_err!(
                        "{}: already trained all {} epochs; pass --epochs N (N > {}) to train further",
                        dir.display(),
                        config.epochs,
                        manifest.epoch
                    ));
                }
                learner.load_model(checkpoint::load_part(
                    &ckpt_dir, &manifest, "model", &device,
                )?);
                learner.load_optim(checkpoint::load_part(
                    &ckpt_dir, &manifest, "optim", &device,
                )?);
                learner.load_scheduler(checkpoint::load_part::<_, B>(
                    &ckpt_dir,
                    &manifest,
                    "scheduler",
                    &device,
                )?);
                history = manifest.history.clone();
                self.console.line(&format!(
                    "resuming {} after epoch {}/{}",
                    dir.display(),
                    manifest.epoch,
                    config.epochs
                ));
                (run, Some(manifest.epoch))
            }
            None => {
                let run = RunDir::create(self.args.out.as_deref(), config.job.name(), needed)?;
                write_atomic(&run.file(run_dir::CONFIG), config.to_toml().as_bytes())?;
                (run, None)
            }
        };
        self.console
            .line(&format!("artifacts: {}", run.path.display()));

        self.console.status("uploading data to the device");
        let epoch_cell = EpochCell::default();
        let max_bytes = device::max_tensor_bytes(self.device);
        let train = &self.data.train;
        let train_loader = LoaderBuilder::new(config.batch_size)
            .drop_last(config.drop_last)
            .shuffle(config.shuffle.then_some(config.seed))
            .epoch(epoch_cell.clone())
            .max_tensor_bytes(max_bytes)
            .build(train, train.row_bytes(), device.clone(), |rows| {
                M::batch(rows, &device)
            });
        let steps_per_epoch = train_loader.batches_per_epoch();
        if steps_per_epoch == 0 {
            return Err(input_err!(
                "batch_size = {} with drop_last leaves no full batch of the {} training rows",
                config.batch_size,
                train_loader.num_rows()
            ));
        }
        // Validation never shuffles nor drops rows.
        let valid = &self.data.valid;
        let valid_loader = LoaderBuilder::new(config.batch_size)
            .max_tensor_bytes(max_bytes)
            .build(valid, valid.row_bytes(), device.clone(), |rows| {
                M::Inference::batch(rows, &device)
            });

        self.log.lock().expect("run log lock").history = history;
        let strategy = EmberStrategy {
            device: device.clone(),
            epoch_cell,
            checkpoints: checkpoint::CheckpointDir::new(run.file(run_dir::CHECKPOINTS)),
            config_hash: config.hash(),
            run_dir: run.path.clone(),
            log: self.log.clone(),
            console: self.console.clone(),
            stop: signals::StopSignal::install(),
            report_every: match self.args.progress_every {
                s if s > 0.0 => Duration::from_secs_f64(s),
                _ => Duration::MAX,
            },
            checkpoint_every: Duration::from_secs_f64(self.args.checkpoint_every.max(0.0)),
            wait_for_checkpoints: self.device != Device::Cpu,
        };
        std::fs::create_dir_all(run.file(run_dir::CHECKPOINTS))
            .map_err(|e| EmberError::write(&run.file(run_dir::CHECKPOINTS), e))?;

        let mut training =
            SupervisedTraining::new(&run.path, Arc::new(train_loader), Arc::new(valid_loader))
                .with_training_strategy(TrainingStrategy::Custom(Arc::new(strategy)))
                .with_metric_logger(NullLogger)
                .with_application_logger(None)
                .num_epochs(config.epochs)
                .metric_train_numeric(metrics::RunningMetric::loss())
                .metric_valid_numeric(metrics::RunningMetric::loss());
        if config.job.is_classifier() {
            training = training
                .metric_train_numeric(metrics::RunningMetric::accuracy())
                .metric_valid_numeric(metrics::RunningMetric::accuracy());
        }
        if let Some(epoch) = resume_epoch {
            training = training.checkpoint(epoch);
        }
        training = if self.args.tui && std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            let interrupter = training.interrupter();
            training.renderer(burn::train::renderer::tui::TuiMetricsRendererWrapper::new(
                interrupter,
                resume_epoch,
            ))
        } else {
            training.renderer(self.console.renderer(config.epochs, steps_per_epoch))
        };

        let result = training.launch(learner);
        self.console.finish();

        let failed = self.log.lock().expect("run log lock").failure.is_some();
        if !failed {
            export::save_burn(&result.model, &run.file(run_dir::MODEL_BURN))?;
            export::save_safetensors(
                &result.model,
                &run.file(run_dir::MODEL_SAFETENSORS),
                Layout::Pytorch,
                config.job.name(),
            )?;
        }
        Ok(Trained {
            run_dir: run.path.clone(),
            params,
        })
    }
}

/// Burn's metric logger writes a file per metric and epoch, row by row; ember keeps its own
/// per-epoch `metrics.csv`, so this logger keeps nothing.
struct NullLogger;

impl burn::train::logger::MetricLogger for NullLogger {
    fn log(
        &mut self,
        _: burn::train::metric::store::MetricsUpdate,
        _: usize,
        _: &burn::train::metric::store::Split,
    ) {
    }

    fn read_numeric(
        &mut self,
        _: &str,
        _: usize,
        _: &burn::train::metric::store::Split,
    ) -> std::result::Result<Vec<burn::train::metric::NumericEntry>, String> {
        Ok(Vec::new())
    }

    fn log_metric_definition(&mut self, _: burn::train::metric::MetricDefinition) {}

    fn log_epoch_summary(&mut self, _: burn::train::metric::store::EpochSummary) {}
}
