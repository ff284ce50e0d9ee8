//! The `ember` command line: argument parsing and dispatch only.

use clap::{Parser, Subcommand};
use ember::console::{Console, Verbosity};
use ember::device::{Backends, CpuBackend, Device, DeviceRequest, OnBackend};
use ember::error::Result;
use ember::train::TrainArgs;
use std::path::{Path, PathBuf};

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

// Parsed once per process: boxing the largest variant (train's options) would save nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Train a job from its config file, or the job `ember init` drafts for a CSV file.
    Train {
        /// The job file (configs/*.toml); optional with --resume or --csv.
        config: Option<PathBuf>,
        #[command(flatten)]
        draft: DraftArgs,
        #[command(flatten)]
        args: TrainArgs,
    },
    /// Loss and accuracy of a trained model on a split; for a classifier, per-class
    /// precision, recall and F1, the confusion matrix, and a binary task's ROC AUC.
    Eval {
        #[command(flatten)]
        model: ModelArgs,
        /// Which split (default: the one validated during training).
        #[arg(long, value_enum, default_value = "valid")]
        split: ember::data::SplitName,
        /// Other data: a folder of IDX files (idx source) or a CSV file (csv source).
        #[arg(long)]
        data: Option<PathBuf>,
        /// Everything as one JSON object on stdout.
        #[arg(long)]
        json: bool,
        /// auto, cpu, cuda[:N] or wgpu[:N] (see ember info).
        #[arg(long, default_value = "auto")]
        device: DeviceRequest,
    },
    /// One prediction per input row, as CSV.
    Predict {
        #[command(flatten)]
        model: ModelArgs,
        /// IDX images or a CSV file of pixel columns (idx source); a CSV file with the
        /// training's feature columns, the label optional (csv source).
        #[arg(long)]
        input: PathBuf,
        /// Where to write the CSV (default: stdout).
        #[arg(long)]
        out: Option<PathBuf>,
        /// A column of the input CSV to copy into the output, first (an ID, to join the
        /// predictions back); may be repeated.
        #[arg(long, value_name = "COLUMN")]
        keep: Vec<String>,
        /// auto, cpu, cuda[:N] or wgpu[:N] (see ember info).
        #[arg(long, default_value = "auto")]
        device: DeviceRequest,
    },
    /// Write a run's model (final, or any kept checkpoint) as a file.
    Export {
        #[command(flatten)]
        model: ModelArgs,
        /// safetensors (for PyTorch and others), Burn's own record (.mpk), or ONNX with the
        /// preprocessing inside (for onnxruntime and other runtimes).
        #[arg(long, value_enum, default_value = "safetensors")]
        format: ember::export::Format,
        /// safetensors only: PyTorch's names and [out, in] weights, or Burn's.
        #[arg(long, value_enum, default_value = "pytorch")]
        layout: ember::export::Layout,
        /// Output file (default: model-export.safetensors / .mpk, or model.onnx, in the run
        /// folder).
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
    /// Training speed of a job: through the Learner and as a bare step loop, or with
    /// `--replicas K`, K seeds as replicas against K processes.
    Bench(BenchArgs),
    /// Version, backends compiled in, devices found.
    Info,
    /// A shell's completions for ember, to stdout (for example
    /// `ember completions bash > ~/.local/share/bash-completion/completions/ember`).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// ember's man page (roff), to stdout: `ember man > ember.1; man ./ember.1`.
    Man,
    /// Many trials of one job (seeds, a grid, random draws): `ember sweep plan SWEEP.toml`.
    Sweep {
        #[command(subcommand)]
        action: SweepAction,
    },
    /// Write a commented job file for your own data to stdout, inferred from the data.
    Init(InitArgs),
}

/// `ember init`'s arguments.
#[derive(clap::Args)]
struct InitArgs {
    /// A CSV file with a header row.
    #[arg(
        long,
        requires = "label",
        conflicts_with = "images",
        value_name = "FILE"
    )]
    csv: Option<PathBuf>,
    /// The CSV column to predict.
    #[arg(long, value_name = "COLUMN")]
    label: Option<String>,
    /// A column to type as a category whatever it holds, such as integer codes of people,
    /// products or places (repeat for more).
    #[arg(long, value_name = "COLUMN", requires = "csv")]
    category: Vec<String>,
    /// A folder of class subfolders of PNG or JPEG images.
    #[arg(long, value_name = "DIR", required_unless_present = "csv")]
    images: Option<PathBuf>,
}

/// `ember train --csv FILE --label COLUMN`: the job `ember init` would draft, trained at once
/// and kept in the run folder as `job.toml`.
#[derive(clap::Args)]
struct DraftArgs {
    /// Draft the job for this CSV file as `ember init --csv` does, and train it.
    #[arg(
        long,
        requires = "label",
        conflicts_with_all = ["config", "resume"],
        value_name = "FILE"
    )]
    csv: Option<PathBuf>,
    /// With --csv: the column to predict.
    #[arg(long, value_name = "COLUMN", requires = "csv")]
    label: Option<String>,
    /// With --csv: a column to type as a category whatever it holds (repeat for more).
    #[arg(long, value_name = "COLUMN", requires = "csv")]
    category: Vec<String>,
}

/// `ember bench`'s arguments.
#[derive(clap::Args)]
struct BenchArgs {
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
    /// Time K seeds of the job as replicas of one batched model, against K processes two
    /// at a time on one thread each, K processes one after another, and one run.
    #[arg(long, value_name = "K")]
    replicas: Option<usize>,
    /// With --replicas: rounds to take the median of.
    #[arg(long, default_value_t = 1, requires = "replicas")]
    rounds: usize,
    /// Count the kernel launches of each training step on a GPU device (CubeCL's launch log;
    /// the same as EMBER_LAUNCHES=1).
    #[arg(long, conflicts_with = "replicas")]
    launches: bool,
}

#[derive(Subcommand)]
enum SweepAction {
    /// List the trials a sweep file expands into, with their overrides and units.
    Plan {
        /// The sweep file: `base`, `seeds`, `[grid]`, `[random]`.
        sweep: PathBuf,
        /// Override a field of every trial (KEY=VALUE, repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
    },
    /// Train the trials into one sweep folder, a trial-NNN run folder each (again: resume).
    Run {
        /// The sweep file.
        sweep: PathBuf,
        #[command(flatten)]
        args: ember::sweep::run::RunArgs,
    },
    /// Write a Slurm job-array script that runs the sweep, one array task per unit.
    Slurm {
        /// The sweep file.
        sweep: PathBuf,
        #[command(flatten)]
        args: ember::sweep::slurm::SlurmArgs,
    },
    /// Train one unit of a sweep folder as replicas of one batched model (what `sweep run`
    /// starts for such a unit).
    #[command(hide = true)]
    Unit {
        /// The sweep folder.
        dir: PathBuf,
        /// The unit.
        #[arg(long, value_name = "N")]
        unit: usize,
        /// auto, cpu, cuda[:N] or wgpu[:N].
        #[arg(long, default_value = "auto")]
        device: ember::device::DeviceRequest,
    },
    /// Rank a sweep's configurations; writes sweep.json and sweep.png into its folder.
    Report {
        /// The sweep folder.
        dir: PathBuf,
        /// The ranking metric (default: accuracy where the trials report it, else loss).
        #[arg(long, value_enum)]
        metric: Option<ember::sweep::report::RankBy>,
    },
}

const VERSION: &str = env!("CARGO_PKG_VERSION");

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The backends this binary runs on: CUDA and wgpu (each with fusion) when built with their
/// features, and Burn's CPU backend. This is the only place that names them, so Burn's generic
/// code is compiled for them here, once.
struct AllBackends;

impl Backends for AllBackends {
    fn dispatch<T: OnBackend>(device: Device, task: T) -> T::Output {
        match device {
            // The CPU backend's work begins here: keep the pool's workers awake for it.
            Device::Cpu => {
                ember::device::with_warm_workers(|| task.run::<CpuBackend>(Default::default()))
            }
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
    ember::allocator::keep_freed_memory();
    ember::allocator::small_pages();
    ember::logging::init_from_env();
    if std::env::var_os("EMBER_LAUNCHES").is_some_and(|v| v == "1") {
        ember::device::launches::enable();
    }
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

/// `shell`'s completion script for ember, made in memory: clap_complete panics on a write
/// error, such as a closed pipe.
fn completions(shell: clap_complete::Shell) -> Vec<u8> {
    let mut cli = <Cli as clap::CommandFactory>::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cli, "ember", &mut script);
    script
}

/// ember's man page, as roff.
fn man_page() -> Vec<u8> {
    let page = clap_mangen::Man::new(<Cli as clap::CommandFactory>::command());
    let mut roff = Vec::new();
    page.render(&mut roff)
        .expect("rendering into memory cannot fail");
    roff
}

/// Writes `bytes` to stdout; a closed pipe (`| head`) is not an error.
fn write_stdout(bytes: &[u8]) {
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(bytes);
}

/// `ember train`: the job file, or with `--csv` the job `ember init` drafts.
fn train(
    config: Option<&Path>,
    draft: DraftArgs,
    mut args: TrainArgs,
    console: &Console,
) -> Result<()> {
    if let (Some(csv), Some(label)) = (&draft.csv, &draft.label) {
        args.drafted_job = Some(drafted(csv, label, &draft.category)?);
    }
    let report = ember::train::run::<AllBackends>(config, &args, console)?;
    finish_train(report, console)
}

/// The job `ember init` drafts for `csv` and `label`, its column table and reason on stderr.
fn drafted(csv: &Path, label: &str, categories: &[String]) -> Result<String> {
    let draft = ember::init::from_csv(csv, label, categories)?;
    tell(&draft);
    Ok(draft.toml)
}

/// What `ember init` inferred, on stderr: the column table, then why.
fn tell(draft: &ember::init::Draft) {
    if let Some(columns) = &draft.columns {
        eprint!("{columns}");
    }
    eprintln!("{}", draft.why);
}

/// `ember init`: the drafted job file on stdout, and why on stderr.
fn init(args: InitArgs) -> Result<()> {
    let draft = match (args.csv, args.label, args.images) {
        (Some(csv), Some(label), _) => ember::init::from_csv(&csv, &label, &args.category)?,
        (_, _, Some(dir)) => ember::init::from_images(&dir)?,
        _ => unreachable!("clap requires --csv with --label, or --images"),
    };
    print!("{}", draft.toml);
    tell(&draft);
    Ok(())
}

/// `ember bench`: the Learner against a bare loop, or with `--replicas`, replicas against
/// processes.
fn bench<D: ember::device::Backends>(a: BenchArgs) -> Result<String> {
    if a.launches {
        ember::device::launches::enable();
    }
    let report = match a.replicas {
        Some(k) => {
            let rows = (Some(a.epochs), a.max_train_rows);
            let r = ember::replicas::bench::run(&a.config, k, rows, a.device, a.rounds)?;
            (serde_json::to_string(&r), r.text())
        }
        None => {
            let r = ember::bench::run::<D>(&a.config, a.device, a.epochs, a.max_train_rows)?;
            (serde_json::to_string(&r), r.text())
        }
    };
    Ok(match a.json {
        true => report.0.expect("a report serialises"),
        false => report.1,
    })
}

/// `ember sweep`'s actions; returns the lines to print.
fn sweep(action: SweepAction, threads: Option<usize>, console: &Console) -> Result<String> {
    use ember::sweep;
    match action {
        SweepAction::Plan { sweep, set } => sweep::plan(&sweep, &set)?.text(),
        SweepAction::Run { sweep, args } => sweep::run::run(&sweep, &args, threads, console),
        SweepAction::Slurm { sweep, args } => sweep::slurm::write(&sweep, &args),
        SweepAction::Report { dir, metric } => sweep::report::report(&dir, metric),
        SweepAction::Unit { dir, unit, device } => {
            ember::sweep::unit::train::<AllBackends>(&dir, unit, device, console)
        }
    }
}

/// Writes a trained run's summary and curves, and prints its line. Where training failed, that
/// failure is the error, whatever the summary's write did; where only the summary failed, its
/// error says how to write it again.
fn finish_train(report: ember::train::RunReport, console: &Console) -> Result<()> {
    let written = report.write_summary_and_curves();
    match (report.failure, written) {
        (Some(failure), Ok(line)) => {
            console.always(&line);
            Err(failure)
        }
        (Some(failure), Err(_)) => Err(failure),
        (None, Ok(line)) => {
            console.always(&line);
            Ok(())
        }
        (None, Err(e)) => Err(ember::train::with_next_step(
            e,
            &report.run_dir,
            report.config.epochs,
        )),
    }
}

/// Runs one command; what it reports goes to stdout through `console`.
fn run(cli: Cli, console: &Console) -> Result<()> {
    use ember::device::choose;
    use ember::inference::{eval_command, export_command, predict_command};
    type D = AllBackends;
    let lines: Vec<String> = match cli.command {
        Command::Train {
            config,
            draft,
            args,
        } => return train(config.as_deref(), draft, args, console),
        Command::Eval {
            model,
            split,
            data,
            json,
            device,
        } => {
            let (source, device) = (model.open()?, choose(device)?);
            vec![eval_command::<D>(
                &source,
                split,
                data.as_deref(),
                json,
                device,
            )?]
        }
        Command::Predict {
            model,
            input,
            out,
            keep,
            device,
        } => {
            let (source, device) = (model.open()?, choose(device)?);
            // Predictions may go to stdout: the line about them is not for --quiet.
            let line = predict_command::<D>(&source, &input, &keep, out.as_deref(), device)?;
            line.iter().for_each(|l| console.line(l));
            vec![]
        }
        Command::Export {
            model,
            format,
            layout,
            out,
        } => {
            let source = model.open()?;
            vec![export_command::<D>(
                &source,
                &model.model,
                format,
                layout,
                out,
            )?]
        }
        Command::Plot { runs, out } => vec![ember::run::curves::draw_runs(&runs, out)?],
        Command::Runs { dir } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from("runs"));
            vec![ember::run::listing::report(&dir)?]
        }
        Command::Bench(args) => vec![bench::<D>(args)?],
        Command::Sweep { action } => vec![sweep(action, cli.threads, console)?],
        Command::Init(args) => {
            init(args)?;
            vec![]
        }
        Command::Completions { shell } => {
            write_stdout(&completions(shell));
            vec![]
        }
        Command::Man => {
            write_stdout(&man_page());
            vec![]
        }
        Command::Info => std::iter::once(format!("ember {VERSION} (Burn {})", ember::BURN_VERSION))
            .chain(ember::device::info_lines())
            .collect(),
    };
    lines.iter().for_each(|l| console.always(l));
    Ok(())
}
