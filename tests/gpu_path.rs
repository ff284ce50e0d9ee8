//! ember's GPU path, end to end through the CLI: the device-resident loader, device-side metric
//! totals, Burn's fusion, ember's ops through their default compositions, checkpoints and resume
//! of device tensors, and export, on every GPU device this machine has.
//!
//! It runs on `--device wgpu` (in CI: Mesa's lavapipe, a software Vulkan device) and on
//! `--device cuda` wherever a CUDA device answers. `EMBER_GPU_DEVICES=cuda,wgpu` names the devices
//! instead; `EMBER_BIN`, `EMBER_ROOT` and `EMBER_SCRATCH` let `scripts/gpu-check.sh` run this
//! test binary against a packed ember on a GPU machine. Under `CI=true` a machine without a GPU
//! device fails the suite; elsewhere it prints a skip line.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

/// Per-epoch losses of a GPU run agree with the CPU's within this relative difference.
const PARITY: f64 = 1e-3;

/// A device to test, with the hardware name its runs must report in `summary.json`.
#[derive(Clone, Debug)]
struct Gpu {
    device: String,
    adapter: String,
}

/// The GPU devices to test: `EMBER_GPU_DEVICES` where set, else the first wgpu adapter and the
/// first CUDA device that `ember info` lists.
fn gpus() -> &'static [Gpu] {
    static GPUS: OnceLock<Vec<Gpu>> = OnceLock::new();
    GPUS.get_or_init(|| {
        let info = ember(&["info"]);
        ok(&info);
        let info = stdout(&info);
        // `wgpu:0: NAME [kind, api, driver]` and `cuda:0: NAME`.
        let listed = |prefix: &str| -> Option<Gpu> {
            let line = info
                .lines()
                .find(|l| l.starts_with(&format!("{prefix}:0: ")))?;
            let rest = &line[prefix.len() + 4..];
            let adapter = match prefix {
                "wgpu" => rest[..rest.rfind(" [").unwrap_or(rest.len())].to_string(),
                _ => rest.to_string(),
            };
            Some(Gpu {
                device: format!("{prefix}:0"),
                adapter,
            })
        };
        let wanted: Vec<String> = match std::env::var("EMBER_GPU_DEVICES") {
            Ok(v) => v.split(',').map(|s| s.trim().to_string()).collect(),
            Err(_) => vec!["wgpu".into(), "cuda".into()],
        };
        let found: Vec<Gpu> = wanted.iter().filter_map(|w| listed(w)).collect();
        if std::env::var("EMBER_GPU_DEVICES").is_ok() {
            assert_eq!(
                found.len(),
                wanted.len(),
                "EMBER_GPU_DEVICES={wanted:?}, but ember info lists:\n{info}"
            );
        }
        found
    })
}

/// The devices a test runs on; none (with a skip line) only outside CI.
fn devices(test: &str) -> Vec<Gpu> {
    let gpus = gpus().to_vec();
    if gpus.is_empty() {
        cannot_run(
            test,
            "ember finds no Vulkan or CUDA device (.ci/run installs mesa-vulkan-drivers and \
             libvulkan1 for a software Vulkan device)",
        );
    }
    gpus
}

/// The small slice of a job that each run trains on: train rows, valid rows.
fn slice(job: &str) -> (&'static str, &'static str) {
    match job {
        "fashion-mlp" => ("640", "500"),
        "tabular-mlp" => ("8192", "1000"),
        _ => ("1280", "256"),
    }
}

/// A copy of `configs/JOB.toml` in `dir`, with `shuffle` set, plus `extra` appended.
fn job_config(dir: &Path, job: &str, shuffle: bool, extra: &str) -> PathBuf {
    let text = std::fs::read_to_string(root().join(format!("configs/{job}.toml"))).unwrap();
    let text: String = text
        .lines()
        .map(|l| {
            if l.starts_with("shuffle =") {
                format!("shuffle = {shuffle}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let name = format!(
        "{job}-{}.toml",
        if shuffle { "shuffled" } else { "ordered" }
    );
    config(dir, &name, &(text + extra))
}

/// `ember train` of 2 epochs of a job's slice, progress reports off.
fn train(job: &str, cfg: &Path, out: &Path, device: &str, more: &[&str]) -> Output {
    train_rows(job, cfg, out, device, slice(job).0, more)
}

/// [`train`] on the first `rows` training rows.
fn train_rows(
    job: &str,
    cfg: &Path,
    out: &Path,
    device: &str,
    rows: &str,
    more: &[&str],
) -> Output {
    let valid = slice(job).1;
    let mut args = vec![
        "train",
        path_str(cfg),
        "--out",
        path_str(out),
        "--device",
        device,
        "--epochs",
        "2",
        "--max-train-rows",
        rows,
        "--max-valid-rows",
        valid,
        "--progress-every",
        "0",
        "-q",
    ];
    args.extend_from_slice(more);
    ember(&args)
}

fn summary(run: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(run.join("summary.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn relative(a: f64, b: f64) -> f64 {
    (a - b).abs() / a.abs().max(b.abs()).max(f64::MIN_POSITIVE)
}

/// The largest relative difference between the per-epoch train and valid losses of two runs.
fn loss_gap(a: &Path, b: &Path) -> f64 {
    let (a, b) = (losses(a), losses(b));
    assert_eq!(a.len(), b.len(), "epochs differ");
    a.iter()
        .zip(&b)
        .flat_map(|(x, y)| [relative(x.0, y.0), relative(x.1, y.1)])
        .fold(0.0, f64::max)
}

/// A GPU run's `summary.json` names the device and the adapter it ran on, so that a silent
/// fall-back to the CPU fails.
fn assert_ran_on(run: &Path, gpu: &Gpu) {
    let s = summary(run);
    assert_eq!(s["device"], gpu.device.as_str(), "{s}");
    assert_eq!(s["adapter"], gpu.adapter.as_str(), "{s}");
    assert_eq!(s["status"], "complete", "{s}");
}

/// Each job trains 2 epochs on the GPU and on the CPU, from the same seed (so the same initial
/// weights, drawn on the host, and the same data order), shuffled and in file order; their
/// per-epoch losses agree within `PARITY`, and a CPU run with the next seed does not.
fn parity(job: &str) {
    for gpu in devices(job) {
        let dir = scratch(&format!("gpu-parity-{job}-{}", gpu.device.replace(':', "")));
        for shuffle in [false, true] {
            let cfg = job_config(&dir, job, shuffle, "");
            let cpu = dir.join(format!("cpu-{shuffle}"));
            let on_gpu = dir.join(format!("gpu-{shuffle}"));
            ok(&train(job, &cfg, &cpu, "cpu", &[]));
            ok(&train(job, &cfg, &on_gpu, &gpu.device, &[]));
            assert_ran_on(&on_gpu, &gpu);
            let gap = loss_gap(&cpu, &on_gpu);
            assert!(
                gap <= PARITY,
                "{job} shuffle={shuffle} on {}: losses differ by {gap:e}\ncpu {:?}\ngpu {:?}",
                gpu.device,
                losses(&cpu),
                losses(&on_gpu)
            );
            if !shuffle {
                // The check can fail: another seed falls outside the tolerance.
                let other = dir.join("cpu-next-seed");
                ok(&train(job, &cfg, &other, "cpu", &["--seed", "43"]));
                let gap = loss_gap(&cpu, &other);
                assert!(gap > PARITY, "{job}: seed 43 is within {gap:e} of seed 42");
            }
        }
    }
}

#[test]
fn fashion_mlp_losses_on_the_gpu_match_the_cpu() {
    parity("fashion-mlp");
}

#[test]
fn tabular_mlp_losses_on_the_gpu_match_the_cpu() {
    parity("tabular-mlp");
}

#[test]
fn linear_scalar_losses_on_the_gpu_match_the_cpu() {
    parity("linear-scalar");
}

/// The loader, seen through the loss. A linear-scalar table whose rows are x = f = y = i
/// (i = 1..=40), trained with a learning rate too small to move the weights: a row's loss is
/// (w + p - 1)² i², so an epoch's mean loss is the same in any order when every row comes once
/// with its own x, f and y, and moves by a thousandth or more when a row is repeated, missing, or
/// paired with another row's target (which Burn 0.21's fusion did to shuffled batches before
/// `data::loader::gather_rows`).
#[test]
fn the_device_loader_serves_every_row_once_per_epoch_on_the_gpu() {
    for gpu in devices("loader") {
        let dir = scratch(&format!("gpu-loader-{}", gpu.device.replace(':', "")));
        let mut csv = String::from("y,f,x0\n");
        for i in 1..=40 {
            csv += &format!("{i},{i},{i}\n");
        }
        std::fs::write(dir.join("rows.csv"), csv).unwrap();
        let cfg = |shuffle: bool| {
            let text = format!(
                "job = \"linear-scalar\"\nepochs = 3\nbatch_size = 8\nshuffle = {shuffle}\n\
                 [data]\ncsv = \"{}\"\nlabel_column = \"y\"\nscalar_column = \"f\"\n\
                 valid_fraction = 0.1\n[sgd]\nlr = 1e-30\n",
                path_str(&dir.join("rows.csv"))
            );
            config(&dir, &format!("rows-{shuffle}.toml"), &text)
        };
        let run = |shuffle: bool, device: &str| {
            let out = dir.join(format!("{device}-{shuffle}").replace(':', ""));
            let cfg = cfg(shuffle);
            ok(&ember(&[
                "train",
                path_str(&cfg),
                "--out",
                path_str(&out),
                "--device",
                device,
                "-q",
            ]));
            losses(&out)
        };
        let ordered = run(false, "cpu");
        let shuffled = run(true, &gpu.device);
        let (train, valid) = (ordered[0].0, ordered[0].1);
        assert!(train > 1.0, "{ordered:?}");
        for (epoch, (t, v, _)) in shuffled.iter().enumerate() {
            assert!(
                relative(*t, train) < 1e-5 && relative(*v, valid) < 1e-5,
                "epoch {}: mean loss {t} (valid {v}) on {}, {train} (valid {valid}) in file order",
                epoch + 1,
                gpu.device
            );
        }
    }
}

/// `kill -9` in mid-epoch on the GPU with a checkpoint every epoch, then `--resume`: the run
/// finishes within tolerance of an uninterrupted one, and the resumed process opens only the
/// device it was given (on wgpu, `WgpuDevice::Cpu` and `DefaultDevice` are separate CubeCL
/// devices even on one adapter: a second one would log a second compute server). The finished
/// run's `model.safetensors` then evaluates on the CPU as the GPU evaluates it.
#[test]
fn a_killed_gpu_run_resumes_onto_its_device_and_exports_for_the_cpu() {
    let job =
        "job = \"fashion-mlp\"\nepochs = 6\nbatch_size = 64\nshuffle = true\n[adam]\nlr = 1e-3\n";
    for gpu in devices("resume") {
        killed_run_resumes(&gpu, "mlp", job);
    }
}

/// The same for a convolutional network with batch norm: its running statistics, which the
/// validation passes use, come back with the weights.
#[test]
fn a_killed_gpu_cnn_resumes_with_its_batch_norm_statistics() {
    let job = "task = \"classification\"\nepochs = 6\nshuffle = true\n[data]\nsource = \"idx\"\n\
               [model]\nhidden = [16]\n\
               [[model.conv]]\nchannels = 4\nbatch_norm = true\npool = 2\n\
               [[model.conv]]\nchannels = 8\nbatch_norm = true\npool = 2\n[adam]\nlr = 1e-3\n";
    for gpu in devices("resume a cnn") {
        killed_run_resumes(&gpu, "cnn", job);
    }
}

fn killed_run_resumes(gpu: &Gpu, name: &str, job: &str) {
    let dir = scratch(&format!(
        "gpu-resume-{name}-{}",
        gpu.device.replace(':', "")
    ));
    let cfg = config(&dir, "small.toml", job);
    let args = |out: &Path| -> Vec<String> {
        [
            "train",
            path_str(&cfg),
            "--out",
            path_str(out),
            "--device",
            &gpu.device,
            "--checkpoint-every",
            "0",
            "--max-train-rows",
            "1280",
            "--max-valid-rows",
            "500",
            "-q",
        ]
        .map(String::from)
        .to_vec()
    };
    let reference = dir.join("reference");
    let a = args(&reference);
    ok(&ember(&a.iter().map(String::as_str).collect::<Vec<_>>()));

    let killed = dir.join("killed");
    let a = args(&killed);
    let child = spawn(&a.iter().map(String::as_str).collect::<Vec<_>>());
    // Epochs 1 and 2 compile kernels; epoch 3 times one, and the kill lands in the 4th of 6.
    kill_half_an_epoch_after(child, &killed, (3, 6), Duration::from_secs(300));

    let resumed = Command::new(bin())
        .args([
            "train",
            "--resume",
            path_str(&killed),
            "--device",
            &gpu.device,
            "-q",
        ])
        .current_dir(root())
        .env("EMBER_LOG", "info")
        .output()
        .unwrap();
    ok(&resumed);
    assert_ran_on(&killed, gpu);
    let gap = loss_gap(&reference, &killed);
    assert!(gap <= PARITY, "resumed run differs by {gap:e}");
    if gpu.device.starts_with("wgpu") {
        let servers = stderr(&resumed)
            .lines()
            .filter(|l| l.contains("Created wgpu compute server"))
            .count();
        assert_eq!(servers, 1, "{}", stderr(&resumed));
    }

    // Export: the resumed GPU run's safetensors (with a CNN's restored batch-norm statistics),
    // evaluated on the CPU.
    let accuracy = |o: &Output| -> f64 {
        ok(o);
        let out = stdout(o);
        let at = out.find("accuracy ").expect("an accuracy") + "accuracy ".len();
        out[at..].split(' ').next().unwrap().parse().unwrap()
    };
    let on_gpu = accuracy(&ember(&[
        "eval",
        path_str(&killed),
        "--device",
        &gpu.device,
    ]));
    let on_cpu = accuracy(&ember(&[
        "eval",
        path_str(&killed.join("model.safetensors")),
        "--config",
        path_str(&killed.join("config.toml")),
        "--device",
        "cpu",
    ]));
    assert!(
        (on_gpu - on_cpu).abs() <= 0.05,
        "eval on {}: {on_gpu} %, its safetensors on the CPU: {on_cpu} %",
        gpu.device
    );
}

#[test]
fn the_nan_guard_exits_3_on_the_gpu() {
    for gpu in devices("nan") {
        let dir = scratch(&format!("gpu-nan-{}", gpu.device.replace(':', "")));
        let cfg = config(
            &dir,
            "diverging.toml",
            "job = \"linear-scalar\"\nbatch_size = 128\n[sgd]\nlr = 1e6\n",
        );
        let out = dir.join("run");
        let o = train("linear-scalar", &cfg, &out, &gpu.device, &[]);
        assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
        assert!(stderr(&o).contains("non-finite"), "{}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
        assert_eq!(summary(&out)["status"], "diverged");
    }
}

/// Every device-to-host read goes through one counting function, and with progress reports off
/// their number does not grow with the steps of an epoch: the same at 10 and at 100 steps.
#[test]
fn host_reads_per_epoch_do_not_grow_with_steps_on_the_gpu() {
    for gpu in devices("host reads") {
        let dir = scratch(&format!("gpu-reads-{}", gpu.device.replace(':', "")));
        let cfg = job_config(&dir, "linear-scalar", false, "");
        let reads = |rows: &str| {
            let out = dir.join(format!("rows-{rows}"));
            ok(&train_rows(
                "linear-scalar",
                &cfg,
                &out,
                &gpu.device,
                rows,
                &[],
            ));
            let s = summary(&out);
            assert_ran_on(&out, &gpu);
            s["host_reads"]
                .as_u64()
                .expect("host_reads in summary.json")
        };
        let (ten, hundred) = (reads("1280"), reads("12800"));
        assert!(ten > 0);
        assert_eq!(ten, hundred, "10 steps/epoch: {ten} reads; 100: {hundred}");
    }
}

/// A table of text, missing cells and a date (`examples/penguins-raw.csv`, typed as `ember
/// init` drafts it, with one category embedded) trains to the same losses on the GPU as on the
/// CPU: its encoded inputs take the same device path as any table's, and the embedding's
/// lookup and its gradient run on the device.
#[test]
fn a_mixed_table_trains_alike_on_the_gpu() {
    for gpu in devices("a mixed table") {
        let dir = scratch(&format!("gpu-mixed-{}", gpu.device.replace(':', "")));
        let data = root().join("examples/penguins-raw.csv");
        let drafted = ember(&["init", "--csv", path_str(&data), "--label", "Species"]);
        ok(&drafted);
        let job = common::stdout(&drafted) + "\n[data.embed]\nIsland = 3\n";
        let cfg = config(&dir, "penguins.toml", &job);
        let (cpu, on_gpu) = (dir.join("cpu"), dir.join("gpu"));
        ok(&train("penguins", &cfg, &cpu, "cpu", &[]));
        ok(&train("penguins", &cfg, &on_gpu, &gpu.device, &[]));
        assert_ran_on(&on_gpu, &gpu);
        let gap = loss_gap(&cpu, &on_gpu);
        assert!(
            gap <= PARITY,
            "penguins on {}: losses differ by {gap:e}\ncpu {:?}\ngpu {:?}",
            gpu.device,
            losses(&cpu),
            losses(&on_gpu)
        );
    }
}

#[test]
fn a_cnn_with_batch_norm_trains_alike_on_the_gpu() {
    for gpu in devices("a cnn") {
        let dir = scratch(&format!("gpu-cnn-{}", gpu.device.replace(':', "")));
        let cfg = config(
            &dir,
            "cnn.toml",
            "task = \"classification\"\nshuffle = true\n[data]\nsource = \"idx\"\n\
             [model]\nhidden = [16]\n\
             [[model.conv]]\nchannels = 4\nbatch_norm = true\npool = 2\n\
             [[model.conv]]\nchannels = 8\nbatch_norm = true\npool = 2\n[adam]\nlr = 1e-3\n",
        );
        let (cpu, on_gpu) = (dir.join("cpu"), dir.join("gpu"));
        ok(&train("fashion-mlp", &cfg, &cpu, "cpu", &[]));
        ok(&train("fashion-mlp", &cfg, &on_gpu, &gpu.device, &[]));
        assert_ran_on(&on_gpu, &gpu);
        let gap = loss_gap(&cpu, &on_gpu);
        assert!(
            gap <= PARITY,
            "cnn on {}: losses differ by {gap:e}\ncpu {:?}\ngpu {:?}",
            gpu.device,
            losses(&cpu),
            losses(&on_gpu)
        );
    }
}

/// Kernel launches per training step, counted from CubeCL's launch log (`ember bench
/// --launches`: a bare step loop and the Learner's), measured on Mesa's lavapipe with ember's
/// GPU kernels (`src/gpu`; Burn's compositions took 42, 35, 11 and 134 a bare step); a change
/// that adds launches fails here. Lower a budget when a change takes launches away.
///
/// fashion-cnn's bare loop counted 2 more once the running totals waited to be added 8 steps
/// at a time (`model::StepTotals`): its step's addition already fused into the next step's
/// first kernel, so the whole run's launches stayed the same (2,646 against 2,647) and only
/// where they fall within the counted epoch moved; through the Learner it took 1 fewer. Its
/// augmentation, a dozen launches of Burn's integer operations, is one of ember's since.
///
/// fashion-mlp's classifier head (its output layer and loss) is one launch where its logits fit
/// one cube (64 rows into 10 classes), two before; linear-scalar's model and loss are one
/// launch each way and its two small parameters' updates one, where Burn's compositions took
/// 11. fashion-cnn's batch norms are one launch each way, its dropout one, and its head the
/// MLP's one-launch head: 90 / 90.25 became 49 / 49.
const LAUNCH_BUDGETS: [(&str, &str, f64, f64); 4] = [
    // (job, training rows, bare loop, Learner)
    ("fashion-mlp", "640", 8.1, 8.1),
    ("tabular-mlp", "8192", 10.0, 10.0),
    ("linear-scalar", "1280", 4.1, 4.1),
    ("fashion-cnn", "256", 49.0, 49.0),
];

/// A sweep unit of 16 tabular-mlp replicas, per step of the batched model (Burn's compositions
/// of its layers and updates took 68.75).
const REPLICA_UNIT_BUDGET: f64 = 27.0;

/// Each preset's training step, and fashion-cnn's, stays within its launch budget.
#[test]
fn each_preset_s_step_stays_within_its_launch_budget() {
    for gpu in devices("launch budgets") {
        for (job, rows, bare, learner) in LAUNCH_BUDGETS {
            let config = root().join(format!("configs/{job}.toml"));
            let o = ember(&[
                "bench",
                path_str(&config),
                "--device",
                &gpu.device,
                "--launches",
                "--epochs",
                "2",
                "--max-train-rows",
                rows,
                "--json",
            ]);
            ok(&o);
            let report: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
            let counted = |v: &serde_json::Value| v.as_f64().expect("a launch count");
            let (got_bare, got_learner) = (
                counted(&report["step"]["launches"]),
                counted(&report["learner_launches_per_step"]),
            );
            eprintln!(
                "{job} on {}: {got_bare} launches a bare step, {got_learner} through the Learner",
                gpu.device
            );
            assert!(got_bare > 0.0, "{job}: no launch counted");
            assert!(
                got_bare <= bare && got_learner <= learner,
                "{job} on {}: {got_bare} launches a bare step (budget {bare}), {got_learner} through the Learner (budget {learner})",
                gpu.device
            );
        }
    }
}

/// A sweep unit of 16 replicas records its launches per step in each trial's summary
/// (`EMBER_LAUNCHES=1`), within its budget.
#[test]
fn a_16_replica_unit_stays_within_its_launch_budget() {
    for gpu in devices("the replica unit's launch budget") {
        let dir = scratch(&format!(
            "gpu-unit-launches-{}",
            gpu.device.replace(':', "")
        ));
        config(
            &dir,
            "base.toml",
            "job = \"tabular-mlp\"\nepochs = 2\nmax_train_rows = 8192\nmax_valid_rows = 1000\n\
             [adam]\nlr = 1e-3\n",
        );
        let seeds: Vec<String> = (1..=16).map(|s| s.to_string()).collect();
        let sweep = config(
            &dir,
            "sweep.toml",
            &format!("base = \"base.toml\"\nseeds = [{}]\n", seeds.join(", ")),
        );
        let out = dir.join("out");
        let o = std::process::Command::new(bin())
            .args(["sweep", "run", path_str(&sweep), "--out", path_str(&out)])
            .args(["--device", &gpu.device])
            .env("EMBER_LAUNCHES", "1")
            .current_dir(root())
            .output()
            .unwrap();
        ok(&o);
        assert!(stdout(&o).contains("16 complete"), "{}", stdout(&o));
        let s = summary(&out.join("trial-000"));
        let got = s["launches_per_step"]
            .as_f64()
            .expect("launches_per_step in summary.json");
        eprintln!("16 replicas on {}: {got} launches a step", gpu.device);
        assert!(
            got > 0.0 && got <= REPLICA_UNIT_BUDGET,
            "{got} launches a step (budget {REPLICA_UNIT_BUDGET})"
        );
    }
}
