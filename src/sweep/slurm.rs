//! `ember sweep slurm`: a Slurm job-array script for a sweep, one array task per unit. Each task
//! runs `ember sweep run --unit $SLURM_ARRAY_TASK_ID` on the copy of the sweep in the sweep
//! folder, with this binary's absolute path, from the folder the script was written in (job
//! files name their data relative to it). Every unit writes into the one shared sweep folder.

use super::folder::{LOGS, SCRIPT, SWEEP, SweepDir};
use crate::device::DeviceRequest;
use crate::error::{EmberError, Result};
use crate::input_err;
use crate::shell::quote;
use std::path::{Path, PathBuf};

/// The options of `ember sweep slurm`.
#[derive(Debug, Clone, clap::Args)]
pub struct SlurmArgs {
    /// The sweep folder (default: runs/<sweep>-<timestamp>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The partition (queue) to submit to (default: the cluster's).
    #[arg(long)]
    pub partition: Option<String>,
    /// Time limit of each array task, in Slurm's format (`30`, `2:00:00`, `1-00:00:00`).
    #[arg(long, value_name = "T")]
    pub time: Option<String>,
    /// GPUs per array task.
    #[arg(long, value_name = "G")]
    pub gpus: Option<usize>,
    /// CPUs per array task (its trials' threads).
    #[arg(long, value_name = "C", default_value_t = 1)]
    pub cpus: usize,
    /// At most M array tasks at once (`%M`).
    #[arg(long, value_name = "M")]
    pub max_parallel: Option<usize>,
    /// auto, cpu, cuda[:N] or wgpu[:N], for every trial.
    #[arg(long, default_value = "auto")]
    pub device: DeviceRequest,
    /// Override a field of every trial (KEY=VALUE, repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

/// Writes `SWEEP_DIR/sweep.sbatch` and returns the lines that say how to submit it.
pub fn write(sweep: &Path, args: &SlurmArgs) -> Result<String> {
    check(args)?;
    let given = super::plan(sweep, &args.set)?;
    let cwd = std::env::current_dir()
        .map_err(|e| EmberError::Runtime(format!("cannot read the current folder: {e}")))?;
    let exe = crate::fs::ember_binary()?;
    let out = args.out.as_deref().map(|o| cwd.join(o));
    for p in [Some(&cwd), out.as_ref(), Some(&exe)].into_iter().flatten() {
        if p.to_string_lossy()
            .contains(|c: char| c.is_whitespace() || c == '%')
        {
            return Err(input_err!(
                "{}: a space or '%' in the path, which #SBATCH lines cannot hold",
                p.display()
            ));
        }
    }
    let (dir, plan) = SweepDir::prepare(sweep, given, args.out.as_deref(), &args.set)?;
    let abs = std::fs::canonicalize(&dir.path).map_err(|e| EmberError::file(&dir.path, e))?;
    let script = script(&Script {
        name: &plan.name,
        units: plan.units,
        trials: plan.trials.len(),
        dir: &abs,
        cwd: &cwd,
        exe: &exe,
        args,
    });
    let path = dir.file(SCRIPT);
    crate::fs::write_atomic(&path, script.as_bytes())?;
    make_executable(&path)?;
    Ok(format!(
        "sweep {}: {} trials in {} array tasks -> {}\nsubmit: sbatch {}\nreport: ember sweep report {}",
        plan.name,
        plan.trials.len(),
        plan.units,
        path.display(),
        path.display(),
        dir.path.display()
    ))
}

/// The values that go into `#SBATCH` lines, checked before anything is written.
fn check(args: &SlurmArgs) -> Result<()> {
    if args.cpus == 0 {
        return Err(input_err!("--cpus 0 must be at least 1"));
    }
    if args.max_parallel == Some(0) {
        return Err(input_err!("--max-parallel 0 must be at least 1"));
    }
    if let Some(t) = &args.time
        && (t.is_empty()
            || !t
                .chars()
                .all(|c| c.is_ascii_digit() || c == ':' || c == '-'))
    {
        return Err(input_err!(
            "--time {t}: not a Slurm time (minutes, H:MM:SS or D-HH:MM:SS)"
        ));
    }
    if let Some(p) = &args.partition
        && (p.is_empty()
            || !p
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-.,".contains(c)))
    {
        return Err(input_err!("--partition {p}: not a partition name"));
    }
    Ok(())
}

struct Script<'a> {
    name: &'a str,
    units: usize,
    trials: usize,
    dir: &'a Path,
    cwd: &'a Path,
    exe: &'a Path,
    args: &'a SlurmArgs,
}

/// The job-array script's text.
fn script(s: &Script) -> String {
    let a = s.args;
    let mut lines = vec![
        "#!/bin/bash".to_string(),
        format!(
            "# ember sweep {}: {} trials in {} units, one array task per unit.",
            s.name, s.trials, s.units
        ),
        format!("# Submit with: sbatch {}", s.dir.join(SCRIPT).display()),
        format!("#SBATCH --job-name=ember-{}", s.name),
        format!(
            "#SBATCH --array=0-{}{}",
            s.units - 1,
            a.max_parallel.map_or(String::new(), |m| format!("%{m}"))
        ),
        format!("#SBATCH --cpus-per-task={}", a.cpus),
        format!("#SBATCH --output={}/{LOGS}/unit-%a.out", s.dir.display()),
        "#SBATCH --open-mode=append".to_string(),
        // A requeued task finds its trials' run locks and checkpoints, and goes on.
        "#SBATCH --requeue".to_string(),
        // SIGINT to ember two minutes before the time limit: its trials stop after their
        // epoch's checkpoint, and a resubmission goes on from there.
        "#SBATCH --signal=B:INT@120".to_string(),
        format!("#SBATCH --chdir={}", s.cwd.display()),
    ];
    lines.extend(a.time.as_ref().map(|t| format!("#SBATCH --time={t}")));
    lines.extend(
        a.partition
            .as_ref()
            .map(|p| format!("#SBATCH --partition={p}")),
    );
    lines.extend(a.gpus.map(|g| format!("#SBATCH --gres=gpu:{g}")));
    let mut command = vec![
        "exec".to_string(),
        quote(&s.exe.display().to_string()),
        "sweep run".to_string(),
        quote(&s.dir.join(SWEEP).display().to_string()),
        format!("--out {}", quote(&s.dir.display().to_string())),
        "--unit \"$SLURM_ARRAY_TASK_ID\"".to_string(),
        format!("--threads \"${{SLURM_CPUS_PER_TASK:-{}}}\"", a.cpus),
        format!("--device {}", a.device),
    ];
    command.extend(a.set.iter().map(|s| format!("--set {}", quote(s))));
    lines.push("set -eu".to_string());
    lines.push(command.join(" "));
    lines.join("\n") + "\n"
}

fn make_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| EmberError::write(path, e))
}
