//! The `ember` command line: argument parsing and dispatch only.

use clap::{Parser, Subcommand};
use ember::console::{Console, Verbosity};
use ember::device::DeviceRequest;
use ember::error::{EmberError, Result};
use ember::summary::Summary;
use ember::train::TrainArgs;
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "ember",
    version,
    about = "Train small models fast on Burn: data on the device, CUDA or CPU"
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

#[derive(Subcommand)]
enum Command {
    /// Train a job from its config file.
    Train {
        /// The job file (configs/*.toml); optional with --resume.
        config: Option<PathBuf>,
        /// auto, cpu, cuda or cuda:N.
        #[arg(long, default_value = "auto")]
        device: DeviceRequest,
        /// Override the number of epochs.
        #[arg(long)]
        epochs: Option<usize>,
        /// Override the seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Artifact folder (default: runs/<job>-<timestamp>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Train on the first N rows only.
        #[arg(long, value_name = "N")]
        max_train_rows: Option<usize>,
        /// Validate on the first N rows only.
        #[arg(long, value_name = "N")]
        max_valid_rows: Option<usize>,
        /// Continue the run in this folder from its last complete checkpoint.
        #[arg(long, value_name = "RUN_DIR")]
        resume: Option<PathBuf>,
        /// Start from weights in a safetensors file in PyTorch layout.
        #[arg(long, value_name = "FILE")]
        init_from: Option<PathBuf>,
        /// Burn's full-screen TUI instead of ember's progress bar (slower: it spins a core).
        #[arg(long)]
        tui: bool,
    },
    /// Version, backends compiled in, devices found.
    Info,
}

fn main() {
    let cli = Cli::parse();
    let verbosity = if cli.quiet {
        Verbosity::Quiet
    } else if cli.verbose {
        Verbosity::Verbose
    } else {
        Verbosity::Normal
    };
    let console = Console::new(verbosity);
    if let Err(e) = run(cli, &console) {
        console.finish();
        eprintln!("error: {e}");
        std::process::exit(e.exit_code());
    }
}

fn run(cli: Cli, console: &Console) -> Result<()> {
    if let Some(n) = cli.threads {
        if n == 0 {
            return Err(EmberError::Input("--threads 0 must be at least 1".into()));
        }
        ember::device::set_cpu_threads(n)?;
    }
    match cli.command {
        Command::Train {
            config,
            device,
            epochs,
            seed,
            out,
            max_train_rows,
            max_valid_rows,
            resume,
            init_from,
            tui,
        } => {
            let args = TrainArgs {
                device,
                epochs,
                seed,
                out,
                max_train_rows,
                max_valid_rows,
                resume,
                init_from,
                tui,
            };
            let report = ember::train::run(config.as_deref(), &args, console)?;
            let summary = Summary::from_report(&report);
            summary.write(&report.run_dir.join(ember::run_dir::SUMMARY))?;
            console.always(&summary.line(&report.run_dir));
            match report.failure {
                Some(e) => Err(e),
                None => Ok(()),
            }
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
            console.always(&format!("backends: cpu (flex), {cuda}"));
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
            Ok(())
        }
    }
}
