//! The `ember` command line: argument parsing and dispatch only.

use clap::{Parser, Subcommand};
use ember::console::{Console, Verbosity};
use ember::device::{Backends, CpuBackend, Device, DeviceRequest, OnBackend};
use ember::error::Result;
use ember::summary::Summary;
use ember::train::TrainArgs;
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "ember",
    version,
    about = "Train small models fast on Burn: data on the device, CUDA, wgpu or CPU"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Print only the final summary line and errors.
    #[arg(long, short, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// Print extra detail on stderr.
    #[arg(long, short, global = true)]
    verbose: bool,
    /// Threads of the CPU backend (default: one per core).
    #[arg(long, global = true, value_name = "N")]
    threads: Option<usize>,
}

/// Which trained model eval, predict and export read.
#[derive(clap::Args)]
struct ModelArgs {
    /// A run folder, or a model file (.mpk or .safetensors) with a config.toml beside it.
    model: PathBuf,
    /// The resolved config of the model's run (when the model file has none beside it).
    #[arg(long)]
    config: Option<PathBuf>,
    /// A checkpoint of the run (its epoch) instead of its final model.
    #[arg(long)]
    epoch: Option<usize>,
}

impl ModelArgs {
    fn open(&self) -> Result<ember::inference::ModelSource> {
        ember::inference::open(&self.model, self.config.as_deref(), self.epoch)
    }
}

#[derive(Subcommand)]
enum Command {
    /// Train a job from its config file.
    Train {
        /// The job file (configs/*.toml); optional with --resume.
        config: Option<PathBuf>,
        #[command(flatten)]
        args: TrainArgs,
    },
    /// Loss and accuracy of a trained model on a split.
    Eval {
        #[command(flatten)]
        model: ModelArgs,
        /// Which split (default: the one validated during training).
        #[arg(long, value_enum, default_value = "valid")]
        split: ember::data::SplitName,
        /// Other data: a folder of IDX files (fashion-mlp) or a CSV file (table jobs).
        #[arg(long)]
        data: Option<PathBuf>,
        /// auto, cpu, cuda[:N] or wgpu[:N] (see ember info).
        #[arg(long, default_value = "auto")]
        device: DeviceRequest,
    },
    /// One prediction per input row, as CSV.
    Predict {
        #[command(flatten)]
        model: ModelArgs,
        /// IDX images or a CSV file (784 pixel columns for fashion-mlp; the training columns
        /// for the table jobs, the label column optional).
        #[arg(long)]
        input: PathBuf,
        /// Where to write the CSV (default: stdout).
        #[arg(long)]
        out: Option<PathBuf>,
        /// auto, cpu, cuda[:N] or wgpu[:N] (see ember info).
        #[arg(long, default_value = "auto")]
        device: DeviceRequest,
    },
    /// Write a run's model (final, or any kept checkpoint) as a file.
    Export {
        #[command(flatten)]
        model: ModelArgs,
        /// safetensors (for PyTorch and others) or Burn's own record (.mpk).
        #[arg(long, value_enum, default_value = "safetensors")]
        format: ember::inference::ExportFormat,
        /// safetensors only: PyTorch's names and [out, in] weights, or Burn's.
        #[arg(long, value_enum, default_value = "pytorch")]
        layout: ember::export::Layout,
        /// Output file (default: model-export.safetensors / .mpk in the run folder).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Draw the learning curves of one or more runs into one PNG.
    Plot {
        /// Run folders.
        #[arg(required = true)]
        runs: Vec<PathBuf>,
        /// The PNG to write (default: curves.png in the current folder; for one run,
        /// its own curves.png).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// List the runs under a folder (default: runs/).
    Runs {
        /// The folder holding run folders.
        dir: Option<PathBuf>,
    },
    /// Training speed of a job, through the Learner and as a bare step loop.
    Bench {
        /// The job file.
        config: PathBuf,
        /// auto, cpu, cuda[:N] or wgpu[:N] (see ember info).
        #[arg(long, default_value = "auto")]
        device: DeviceRequest,
        /// Epochs to time (the first is reported apart as warm-up).
        #[arg(long, default_value_t = 5)]
        epochs: usize,
        /// Train on the first N rows only.
        #[arg(long, value_name = "N")]
        max_train_rows: Option<usize>,
        /// Print the report as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Version, backends compiled in, devices found.
    Info,
}

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The backends this binary runs on: CUDA and wgpu (each with fusion) when built with their
/// features, and Burn's CPU backend. This is the only place that names them, so Burn's generic
/// code is compiled for them here, once.
struct AllBackends;

impl Backends for AllBackends {
    fn dispatch<T: OnBackend>(device: Device, task: T) -> T::Output {
        match device {
            Device::Cpu => task.run::<CpuBackend>(Default::default()),
            #[cfg(feature = "cuda")]
            Device::Cuda(i) => task.run::<burn::backend::Autodiff<burn::backend::Cuda>>(
                burn::backend::cuda::CudaDevice::new(i),
            ),
            #[cfg(not(feature = "cuda"))]
            Device::Cuda(_) => unreachable!("choose() never picks CUDA without the cuda feature"),
            #[cfg(feature = "wgpu")]
            Device::Wgpu(t) => task.run::<burn::backend::Autodiff<burn::backend::Wgpu>>(
                ember::device::adapters::burn_device(t),
            ),
            #[cfg(not(feature = "wgpu"))]
            Device::Wgpu(_) => unreachable!("choose() never picks wgpu without the wgpu feature"),
        }
    }
}

fn main() {
    // SAFETY: the first thing the process does, while it has one thread.
    unsafe { ember::device::adapters::quiet_wayland_probe() };
    ember::logging::init_from_env();
    let cli = Cli::parse();
    let verbosity = if cli.quiet {
        Verbosity::Quiet
    } else if cli.verbose {
        Verbosity::Verbose
    } else {
        Verbosity::Normal
    };
    let console = Console::new(verbosity);
    let threads = cli.threads;
    let result = ember::device::on_cpu_pool(threads, || run(cli, &console)).and_then(|r| r);
    if let Err(e) = result {
        console.finish();
        eprintln!("error: {e}");
        std::process::exit(e.exit_code());
    }
}

fn run(cli: Cli, console: &Console) -> Result<()> {
    match cli.command {
        Command::Train { config, args } => {
            let report = ember::train::run::<AllBackends>(config.as_deref(), &args, console)?;
            let summary = Summary::from_report(&report);
            summary.write(&report.run_dir.join(ember::run_dir::SUMMARY))?;
            if !report.history.is_empty() {
                ember::plot::draw(
                    &[ember::plot::Curve {
                        label: report.run_dir.display().to_string(),
                        history: report.history.clone(),
                    }],
                    &format!(
                        "{} ({})",
                        report.config.job.name(),
                        report.run_dir.display()
                    ),
                    &report.run_dir.join(ember::run_dir::CURVES),
                )?;
            }
            console.always(&summary.line(&report.run_dir));
            match report.failure {
                Some(e) => Err(e),
                None => Ok(()),
            }
        }
        Command::Eval {
            model,
            split,
            data,
            device,
        } => {
            let source = model.open()?;
            let device = ember::device::choose(device)?;
            let rows = ember::inference::eval_split(&source.config, split, data.as_deref())?;
            let n = rows.rows();
            let stats = ember::inference::with_model::<AllBackends, _>(
                &source,
                device,
                ember::inference::Eval {
                    split: rows,
                    batch_size: source.config.batch_size.max(1024),
                    max_tensor_bytes: ember::device::max_tensor_bytes(device),
                },
            )?;
            let acc = stats
                .accuracy
                .map(|a| format!(", accuracy {:.2} %", 100.0 * a))
                .unwrap_or_default();
            console.always(&format!(
                "{} {}: loss {:.6}{acc} ({n} rows, {}, {device})",
                source.config.job.name(),
                format!("{split:?}").to_lowercase(),
                stats.loss,
                source.weights.describe()
            ));
            Ok(())
        }
        Command::Predict {
            model,
            input,
            out,
            device,
        } => {
            let source = model.open()?;
            let device = ember::device::choose(device)?;
            let inputs = ember::inference::predict_inputs(&source.config, &input)?;
            let (header, rows) = ember::inference::with_model::<AllBackends, _>(
                &source,
                device,
                ember::inference::Predict { inputs },
            )?;
            ember::inference::write_csv(&header, &rows, out.as_deref())?;
            if let Some(out) = out {
                console.line(&format!("{} predictions -> {}", rows.len(), out.display()));
            }
            Ok(())
        }
        Command::Export {
            model,
            format,
            layout,
            out,
        } => {
            let source = model.open()?;
            let model = model.model;
            let out = out.unwrap_or_else(|| {
                let dir = if model.is_dir() {
                    model.clone()
                } else {
                    model.parent().map(PathBuf::from).unwrap_or_default()
                };
                dir.join(match format {
                    ember::inference::ExportFormat::Safetensors => "model-export.safetensors",
                    ember::inference::ExportFormat::Burn => "model-export.mpk",
                })
            });
            ember::inference::with_model::<AllBackends, _>(
                &source,
                Device::Cpu,
                ember::inference::Export {
                    format,
                    layout,
                    out: out.clone(),
                    job: source.config.job.name(),
                },
            )?;
            console.always(&format!(
                "{} -> {}",
                source.weights.describe(),
                out.display()
            ));
            Ok(())
        }
        Command::Plot { runs, out } => {
            let mut curves = Vec::new();
            let mut jobs = Vec::new();
            for run in &runs {
                let history = ember::train::history::read_csv(&run.join(ember::run_dir::METRICS))?;
                if let Ok(c) = ember::config::load(&run.join(ember::run_dir::CONFIG)) {
                    jobs.push(c.job.name());
                }
                let label = run
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| run.display().to_string());
                curves.push(ember::plot::Curve { label, history });
            }
            jobs.dedup();
            let out = out.unwrap_or_else(|| match runs.as_slice() {
                [one] => one.join(ember::run_dir::CURVES),
                _ => PathBuf::from(ember::run_dir::CURVES),
            });
            ember::plot::draw(&curves, &jobs.join(", "), &out)?;
            let what = match runs.len() {
                1 => "curves of 1 run".to_string(),
                n => format!("curves of {n} runs"),
            };
            console.always(&format!("{what} -> {}", out.display()));
            Ok(())
        }
        Command::Runs { dir } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from("runs"));
            let rows = ember::runs::list(&dir)?;
            if rows.is_empty() {
                console.always(&format!("no runs in {}", dir.display()));
            } else {
                console.always(&ember::runs::table(&rows));
            }
            Ok(())
        }
        Command::Bench {
            config,
            device,
            epochs,
            max_train_rows,
            json,
        } => {
            let report = ember::bench::run::<AllBackends>(&config, device, epochs, max_train_rows)?;
            if json {
                console.always(&serde_json::to_string(&report).expect("a report serialises"));
            } else {
                console.always(&report.text());
            }
            Ok(())
        }
        Command::Info => {
            console.always(&format!(
                "ember {} (Burn {})",
                env!("CARGO_PKG_VERSION"),
                ember::summary::BURN_VERSION
            ));
            let cuda = if cfg!(feature = "cuda") {
                "cuda (with fusion)"
            } else {
                "no cuda (built without the `cuda` feature)"
            };
            let wgpu = if cfg!(feature = "wgpu") {
                "wgpu (with fusion)"
            } else {
                "no wgpu (built without the `wgpu` feature)"
            };
            console.always(&format!("backends: cpu (flex), {cuda}, {wgpu}"));
            console.always(&format!("cpu: {} threads", rayon::current_num_threads()));
            match ember::device::cuda_devices() {
                Ok(devices) if !devices.is_empty() => {
                    for (i, name) in devices.iter().enumerate() {
                        console.always(&format!("cuda:{i}: {name}"));
                    }
                }
                Ok(_) => console.always("cuda: no device found"),
                Err(why) => console.always(&format!("cuda: unavailable ({why})")),
            }
            let adapters = ember::device::adapters::list();
            if adapters.is_empty() {
                console.always("wgpu: no adapter found");
            }
            for (i, adapter) in adapters.iter().enumerate() {
                console.always(&format!("wgpu:{i}: {}", adapter.describe()));
            }
            match ember::device::auto_device() {
                Ok(d) => console.always(&format!("--device auto: {d}")),
                Err(e) => console.always(&format!("--device auto: {e}")),
            }
            Ok(())
        }
    }
}
