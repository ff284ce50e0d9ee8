//! `ember train`: turns a checked config into Burn's `SupervisedTraining` + `Learner` run.
//! Data flows one way: config -> host data -> device tensors (once) -> Learner -> run folder.
//! This file resolves the config and reads the data; `launch` builds the run on the chosen
//! backend, `strategy` drives its epochs.

mod launch;

pub use launch::{Training, with_model_and_optimizer};
pub mod clip;
pub mod metrics;
pub mod non_finite;
pub(crate) mod passes;
pub mod reports;
pub(crate) mod saver;
pub mod schedule;
pub mod signals;
pub mod strategy;

use crate::config::{self, ClassWeight, DataSpec, JobConfig, ModelKind};
use crate::console::Console;
use crate::data::columns::ColumnKind;
use crate::data::{self, HostData, Labels};
use crate::device::{self, Backends, DeviceRequest};
use crate::error::Result;
use crate::input_err;
pub use crate::run::report::RunReport;
use crate::run::{checkpoint, folder};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use strategy::RunLog;

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
    /// Override a field of the job file, as KEY=VALUE with a TOML value (repeatable):
    /// `--set adam.lr=3e-4 --set model.hidden=[256,256] --set data.label=y`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
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
    /// Also write the final model as `onnx` (`model.onnx`, with the preprocessing inside);
    /// safetensors and burn are always written.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub export: Vec<crate::export::Format>,
    /// Also log the run to the MLflow tracking server at this URI (http[s]://HOST:PORT).
    #[arg(long, value_name = "URI", env = "MLFLOW_TRACKING_URI")]
    pub mlflow: Option<String>,
    /// The MLflow experiment (default: the sweep's name for a sweep's trial, else the job's).
    #[arg(long, value_name = "NAME", env = "MLFLOW_EXPERIMENT_NAME")]
    pub experiment: Option<String>,
    /// The job file's text where `ember train --csv` drafted it: trained instead of a job
    /// file, and kept in the new run folder as `job.toml`.
    #[arg(skip)]
    pub drafted_job: Option<String>,
}

/// Resolves the config (the job file, or the resumed run's own), loads the data, trains, and
/// writes the model files. Returns the report even when training stopped early; the caller
/// turns `failure` into the exit code.
pub fn run<D: Backends>(
    config_path: Option<&Path>,
    args: &TrainArgs,
    console: &Console,
) -> Result<RunReport> {
    let started = Instant::now();
    let args = &never_started_is_new(config_path, args, console);
    let mut config = resolve_config(config_path, args, console)?;
    let device = device::choose(args.device)?;
    console.line(&format!(
        "{}: training on {}",
        config.name(),
        device::describe(device)
    ));
    let data = load_data(&mut config, console)?;
    let tracker = start_tracking(&config, args, device);
    let log = Arc::new(Mutex::new(RunLog::default()));
    let task = launch::TrainTask {
        config: config.clone(),
        device,
        data: &data,
        args,
        console,
        log: log.clone(),
        tracker: tracker.clone(),
    };
    let trained = D::dispatch(device, task)?;
    let log = std::mem::take(&mut *log.lock().expect("run log lock"));
    let failure = (log.failure).map(|e| with_next_step(e, &trained.run_dir, config.epochs));
    Ok(RunReport {
        run_dir: trained.run_dir,
        config,
        device,
        adapter: device::hardware(device),
        history: log.history,
        wall_seconds: started.elapsed().as_secs_f64(),
        failure,
        data_source: data.source.clone(),
        rows_without_label: data.dropped_labels,
        params: trained.params,
        host_reads: device::host_read::count(),
        tracker,
        launches_per_step: device::launches::per_step(&log.launches),
    })
}

/// `ember train JOB --resume DIR` where DIR holds no run (it was killed before it wrote its
/// config, or never started): a new run of JOB there, as with `--out DIR`.
fn never_started_is_new(
    config_path: Option<&Path>,
    args: &TrainArgs,
    console: &Console,
) -> TrainArgs {
    let mut args = args.clone();
    if let (Some(dir), Some(job)) = (&args.resume, config_path)
        && !dir.join(folder::CONFIG).exists()
    {
        console.line(&format!(
            "note: {} holds no run yet; starting one of {} there",
            dir.display(),
            job.display()
        ));
        args.out = args.resume.take();
    }
    args
}

/// The MLflow run of this training run, when a tracking server is named.
fn start_tracking(
    config: &JobConfig,
    args: &TrainArgs,
    device: device::Device,
) -> Option<Arc<crate::tracking::mlflow::Tracker>> {
    let folder = args.out.as_ref().or(args.resume.as_ref());
    let run_name = folder.and_then(|p| p.file_name());
    crate::tracking::mlflow::start_run(
        config,
        args.mlflow.as_deref(),
        args.experiment.clone(),
        run_name.map(|n| n.to_string_lossy().into_owned()),
        device,
    )
}

/// How errors name a job that `ember train --csv` drafted.
const DRAFTED: &str = "the drafted job";

/// The job file (or the job `ember train --csv` drafted), or with `--resume` the run's own
/// resolved config, with the command line's overrides applied.
fn resolve_config(
    config_path: Option<&Path>,
    args: &TrainArgs,
    console: &Console,
) -> Result<JobConfig> {
    let mut config = match &args.resume {
        Some(_) if !args.set.is_empty() => {
            return Err(input_err!(
                "--set: a resumed run keeps the config it started with (only --epochs may grow)"
            ));
        }
        Some(dir) => resumed_config(dir, config_path, console)?,
        None => match &args.drafted_job {
            Some(text) => crate::config::parse_with(Path::new(DRAFTED), text, &args.set)?,
            None => crate::config::load_with(
                config_path.ok_or_else(|| {
                    input_err!(
                        "ember train needs a config file (or --resume RUN_DIR, or --csv FILE --label COLUMN)"
                    )
                })?,
                &args.set,
            )?,
        },
    };
    apply_overrides(&mut config, args)?;
    config.fix_schedule_length()?;
    Ok(config)
}

/// A resumed run trains under its own `config.toml`; a job file given beside `--resume` that
/// differs (other than in `epochs`) gets a note.
fn resumed_config(dir: &Path, given: Option<&Path>, console: &Console) -> Result<JobConfig> {
    let path = dir.join(folder::CONFIG);
    if !path.is_file() {
        return Err(folder::no_run(dir));
    }
    let saved = crate::config::load(&path)?;
    if let Some(path) = given {
        let given = crate::config::load(path)?;
        if given.with_data_of(&saved) != saved {
            console.line(&format!(
                "note: {} differs from the run's config.toml; resuming with the run's own",
                path.display()
            ));
        }
    }
    Ok(saved)
}

/// What to run next after a failure that stopped a run with its folder intact (a full disk, a
/// failing write): where its checkpoints stand, and the `--resume` that goes on from there.
pub fn with_next_step(
    e: crate::error::EmberError,
    run_dir: &Path,
    epochs: usize,
) -> crate::error::EmberError {
    use crate::error::EmberError;
    let disk_full = matches!(e, EmberError::DiskFull(_));
    if !(disk_full || matches!(e, EmberError::Runtime(_)))
        || !run_dir.join(folder::CONFIG).is_file()
    {
        return e;
    }
    let state = match checkpoint::list_epochs(&run_dir.join(folder::CHECKPOINTS)).pop() {
        Some(n) if n >= epochs => format!("training is done (checkpoint of epoch {n})"),
        Some(n) => format!("the last complete checkpoint is epoch {n}"),
        None => "no checkpoint was written yet".to_string(),
    };
    let first = if disk_full {
        "free some space, then"
    } else {
        "then"
    };
    e.and_then_say(&format!(
        "{state}; {first} run: ember train --resume {}",
        run_dir.display()
    ))
}

/// `--epochs`, `--seed`, `--max-train-rows` and `--max-valid-rows`; a resumed run may only
/// train longer.
fn apply_overrides(config: &mut JobConfig, args: &TrainArgs) -> Result<()> {
    let resuming = args.resume.is_some();
    if let Some(e) = args.epochs {
        if e == 0 {
            return Err(input_err!("--epochs 0 must be at least 1"));
        }
        config.epochs = e;
    }
    if let Some(s) = args.seed {
        if resuming && s != config.seed {
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
            Some(n) if resuming && Some(n) != *field => {
                return Err(input_err!(
                    "{flag} {n}: a resumed run keeps the rows it started with"
                ));
            }
            Some(n) => *field = Some(n),
            None => {}
        }
    }
    Ok(())
}

/// Reads the job's data. What the data decides (the input and output widths, the class names,
/// the feature columns and the statistics computed from this run's training split) becomes part
/// of its resolved config, so that eval and predict rebuild the same model and preprocessing.
pub(crate) fn load_data(config: &mut JobConfig, console: &Console) -> Result<HostData> {
    console.status("reading data");
    let t = Instant::now();
    let data = data::load_limited(config, &console.counter("reading images"))?;
    resolve_from_data(config, &data)?;
    check_batches(config, data.train.rows())?;
    console.line(&format!(
        "data: {} ({} train rows, {} valid rows; read in {:.2} s)",
        data.source,
        data.train.rows(),
        data.valid.rows(),
        t.elapsed().as_secs_f64()
    ));
    if let DataSpec::Table(t) = &config.data
        && let (Some(encoding), Some(columns)) = (&data.encoding, &t.columns)
    {
        let ignored = columns
            .values()
            .filter(|k| **k == ColumnKind::Ignore)
            .count();
        console.line(&data::columns::describe(encoding, ignored));
    }
    if let Some(line) = describe_class_weights(config) {
        console.line(&line);
    }
    if data.dropped_labels > 0 {
        console.line(&format!(
            "data: {} training rows without a label left out",
            data.dropped_labels
        ));
    }
    Ok(data)
}

/// Writes into `config` what the data decided, checking it against what the config said.
pub(crate) fn resolve_from_data(config: &mut JobConfig, data: &HostData) -> Result<()> {
    match &mut config.data {
        DataSpec::Table(t) => {
            if let Some(s) = &data.stats {
                t.stats = Some(s.clone());
            }
            if t.features.is_none() {
                t.features = data.features.clone();
            }
            if t.encoding.is_none() {
                t.encoding = data.encoding.clone();
            }
            t.target_stats = t.target_stats.or(data.target_stats);
        }
        DataSpec::Images(i) => i.size = data.image_size,
        DataSpec::Idx { .. } => {}
    }
    if data.classes.is_some() {
        config.classes = data.classes.clone();
    }
    let outputs = match (&data.train.labels, &config.classes) {
        (Labels::Binary(_), _) => 1,
        (Labels::Classes(_), Some(classes)) => classes.len(),
        (Labels::Values(v), _) => v.cols,
        (Labels::Classes(_), None) => unreachable!("class labels come with their names"),
    };
    let inputs = data.train.features.cols;
    for (field, known, found) in [
        ("model.inputs", &mut config.model.inputs, inputs),
        ("model.outputs", &mut config.model.outputs, outputs),
    ] {
        match known {
            Some(n) if *n != found => {
                return Err(input_err!("{field} = {n}, but the data gives {found}"));
            }
            _ => *known = Some(found),
        }
    }
    if config.model.kind == ModelKind::Cnn {
        resolve_image(config, data)?;
    }
    resolve_class_weights(config, &data.train.labels)
}

/// A convolutional network's input `[channels, height, width]` from the data, checked against
/// what the config said and against what its blocks can take.
fn resolve_image(config: &mut JobConfig, data: &HostData) -> Result<()> {
    let channels = match &config.data {
        DataSpec::Images(i) => i.channels.count(),
        _ => 1,
    };
    let [h, w] = data
        .image_size
        .expect("the image sources (the only ones a model.conv job accepts) give a size");
    let found = [channels, h, w];
    match config.model.image {
        Some(known) if known != found => {
            return Err(input_err!(
                "model.image = {known:?}, but the data gives {found:?} ([channels, height, width])"
            ));
        }
        _ => config.model.image = Some(found),
    }
    if let Some(augment) = config.model.augment {
        augment.check_fits(found)?;
    }
    config::conv::feature_shape(found, &config.model.conv).map(|_| ())
}

/// Each class's loss weight from `class_weight` and the training labels, unless the config
/// already holds them (a resumed run, or one loaded from its folder).
fn resolve_class_weights(config: &mut JobConfig, labels: &Labels) -> Result<()> {
    let (Some(given), None) = (&config.class_weight, &config.class_weights) else {
        return Ok(());
    };
    let names = class_names(config);
    let counts = match labels {
        Labels::Classes(l) | Labels::Binary(l) => config::class_counts(l, names.len()),
        Labels::Values(_) => unreachable!("the config check allows class_weight for classifiers"),
    };
    config.class_weights = Some(given.resolve(&names, &counts)?);
    Ok(())
}

/// A classifier's class names; a binary task without them has labels 0 and 1.
fn class_names(config: &JobConfig) -> Vec<String> {
    match &config.classes {
        Some(classes) => classes.clone(),
        None => vec!["0".to_string(), "1".to_string()],
    }
}

/// The class weights line of a run's start, e.g. `class weights (balanced): no 0.57, yes 4.2`.
fn describe_class_weights(config: &JobConfig) -> Option<String> {
    let (given, weights) = (
        config.class_weight.as_ref()?,
        config.class_weights.as_ref()?,
    );
    let how = match given {
        ClassWeight::Balanced => "balanced",
        ClassWeight::Given(_) => "given",
    };
    let pairs: Vec<String> = (class_names(config).iter().zip(weights))
        .map(|(name, w)| format!("{name} {}", crate::digits::significant(*w, 3)))
        .collect();
    Some(format!(
        "class weights ({how}, training loss only): {}",
        pairs.join(", ")
    ))
}

/// With `drop_last`, a batch larger than the training split would leave no step at all.
fn check_batches(config: &JobConfig, rows: usize) -> Result<()> {
    if config.drop_last && config.batch_size > rows {
        return Err(input_err!(
            "batch_size = {} is larger than the {rows} training rows, and drop_last = true leaves no batch",
            config.batch_size
        ));
    }
    Ok(())
}
