//! `ember train` end to end through the command line, on the CPU backend.

mod common;
use common::*;

#[test]
fn each_job_trains_on_a_small_slice_and_its_loss_falls() {
    let dir = scratch("jobs");
    // The seed's raw arange data makes Adam oscillate in the first epochs; standardised, the
    // same job descends steadily.
    let linear = config(
        &dir,
        "linear-scalar.toml",
        "job = \"linear-scalar\"\n[data]\nstandardize = true\n[adam]\nlr = 5e-3\n",
    );
    for (job, cfg, rows) in [
        (
            "fashion-mlp",
            "configs/fashion-mlp.toml".to_string(),
            "3000",
        ),
        (
            "tabular-mlp",
            "configs/tabular-mlp.toml".to_string(),
            "20000",
        ),
        ("linear-scalar", linear.display().to_string(), "4000"),
    ] {
        let out = dir.join(job);
        let o = ember(&[
            "train",
            &cfg,
            "--device",
            "cpu",
            "--epochs",
            "3",
            "--max-train-rows",
            rows,
            "--max-valid-rows",
            "1000",
            "--out",
            path_str(&out),
        ]);
        ok(&o);
        let l = losses(&out);
        assert_eq!(l.len(), 3, "{job}");
        assert!(l[2].0 < l[0].0, "{job}: train loss did not fall: {l:?}");
        assert!(l[2].1 < l[0].1, "{job}: valid loss did not fall: {l:?}");
        for f in [
            "config.toml",
            "metrics.csv",
            "summary.json",
            "model.mpk",
            "model.safetensors",
        ] {
            assert!(out.join(f).is_file(), "{job}: no {f}");
        }
        assert!(out.join("checkpoint/epoch-3.json").is_file(), "{job}");
        let last = stdout(&o).lines().last().unwrap_or_default().to_string();
        assert!(
            last.starts_with(&format!("{job} complete on cpu: 3/3 epochs")),
            "{last}"
        );
    }
}

#[test]
fn one_adam_epoch_on_real_fashion_mnist_reaches_80_percent() {
    let dir = scratch("fashion-adam");
    let cfg = config(
        &dir,
        "adam.toml",
        "job = \"fashion-mlp\"\nepochs = 1\nbatch_size = 64\n[adam]\nlr = 1e-3\n",
    );
    let out = dir.join("run");
    let o = ember(&[
        "train",
        path_str(&cfg),
        "--device",
        "cpu",
        "--out",
        path_str(&out),
        "-q",
    ]);
    ok(&o);
    let l = losses(&out);
    let acc = l[0].2.unwrap();
    assert!(acc >= 0.80, "test accuracy after one epoch: {acc}");
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let dir = scratch("seeded");
    let run = |name: &str, seed: &str| {
        let out = dir.join(name);
        ok(&ember(&[
            "train",
            "configs/fashion-mlp-keras.toml",
            "--device",
            "cpu",
            "--epochs",
            "2",
            "--seed",
            seed,
            "--max-train-rows",
            "1000",
            "--max-valid-rows",
            "500",
            "--out",
            path_str(&out),
            "-q",
        ]));
        (
            losses(&out),
            std::fs::read(out.join("model.safetensors")).unwrap(),
        )
    };
    let a = run("a", "7");
    let b = run("b", "7");
    let c = run("c", "8");
    assert_eq!(a.0, b.0);
    assert!(a.1 == b.1, "same seed, different final weights");
    assert_ne!(a.0, c.0);
}

#[test]
fn a_closed_stdout_pipe_neither_panics_nor_hangs() {
    use std::process::{Command, Stdio};
    let dir = scratch("pipe");
    let mut child = Command::new(EMBER)
        .args([
            "train",
            "configs/linear-scalar.toml",
            "--device",
            "cpu",
            "--epochs",
            "5",
            "--max-train-rows",
            "2000",
            "--out",
            path_str(&dir.join("run")),
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // as `| head -0` would
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"));
}

#[test]
fn info_lists_the_backends() {
    let o = ember(&["info"]);
    ok(&o);
    let s = stdout(&o);
    assert!(s.contains("backends: cpu (flex)"), "{s}");
    assert!(s.contains("cuda"), "{s}");
}

/// docs/ARCHITECTURE.md stays true: every module it names exists.
#[test]
fn every_module_the_architecture_page_names_exists() {
    let page = std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    let mut named = 0;
    for part in page.split('`') {
        if part.starts_with("src/") && (part.ends_with(".rs") || part.ends_with('/')) {
            named += 1;
            assert!(
                root().join(part).exists(),
                "docs/ARCHITECTURE.md names {part}"
            );
        }
    }
    assert!(named > 30, "only {named} modules named");
}

#[test]
fn bench_times_the_learner_and_the_bare_loop_of_each_preset() {
    for job in ["fashion-mlp", "tabular-mlp", "linear-scalar"] {
        let cfg = format!("configs/{job}.toml");
        let out = ember(&[
            "bench",
            &cfg,
            "--device",
            "cpu",
            "--epochs",
            "2",
            "--max-train-rows",
            "2048",
            "--json",
        ]);
        ok(&out);
        let report: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(report["job"], job);
        for part in ["learner", "bare"] {
            let rate = report[part]["steps_per_s"].as_f64().unwrap();
            assert!(rate > 0.0, "{job} {part}: {rate}");
        }
    }
}

#[test]
fn set_overrides_fields_checks_them_and_records_them() {
    let dir = scratch("set-overrides");
    let run = dir.join("run");
    ok(&ember(&[
        "train",
        "configs/tabular-mlp.toml",
        "--device",
        "cpu",
        "--max-train-rows",
        "2048",
        "--set",
        "adam.lr=3e-4",
        "--set",
        "model.hidden=[8, 4]",
        "--set",
        "epochs=1",
        "--out",
        path_str(&run),
        "-q",
    ]));
    let resolved = std::fs::read_to_string(run.join("config.toml")).unwrap();
    for want in [
        "lr = 0.0003",
        "hidden = [8, 4]",
        "epochs = 1",
        "overrides = [",
    ] {
        assert!(resolved.contains(want), "{want} not in {resolved}");
    }
    let bad = dir.join("bad");
    for (set, needle) in [
        ("adam.lrr=1", "--set adam.lrr=1: unknown field `lrr`"),
        (
            "epochs=ten",
            "--set epochs=ten: invalid type: string \"ten\"",
        ),
        (
            "model.activation=swish",
            "--set model.activation=swish: unknown variant `swish`",
        ),
    ] {
        let out = ember(&[
            "train",
            "configs/tabular-mlp.toml",
            "--device",
            "cpu",
            "--set",
            set,
            "--out",
            path_str(&bad),
        ]);
        bad_input(&out, needle);
        assert!(!bad.exists());
    }
}

#[test]
fn sweep_plan_lists_numbered_trials_and_their_units() {
    let dir = scratch("sweep-plan");
    let base = root().join("configs/tabular-mlp.toml");
    let sweep = dir.join("lr.toml");
    std::fs::write(
        &sweep,
        format!(
            "base = \"{}\"\nseeds = [1, 2]\n[grid]\n\"adam.lr\" = [0.001, 0.0003]\n\
             \"model.hidden\" = [[8], [16, 8]]\n",
            base.display()
        ),
    )
    .unwrap();
    let out = ember(&["sweep", "plan", path_str(&sweep), "--set", "epochs=3"]);
    ok(&out);
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("sweep lr (base "), "{text}");
    assert!(lines[0].ends_with(": 8 trials in 2 units"), "{text}");
    assert_eq!(lines.len(), 2 + 8 + 1 + 2, "{text}");
    assert!(
        lines[2].contains("adam.lr=0.001 model.hidden=[8] seed=1 data.split_seed=42"),
        "{text}"
    );
    // Each width is a unit whose trials differ only in seed and learning rate: replicas.
    assert_eq!(lines[10], "unit  trains as", "{text}");
    assert_eq!(lines[11], "   0  4 replicas of one model, in one process");
    assert_eq!(lines[12], "   1  4 replicas of one model, in one process");
    let bad = ember(&["sweep", "plan", path_str(&sweep), "--set", "epochs=zero"]);
    bad_input(&bad, "trial 0: --set epochs=zero: invalid type");
}

/// Completions for each shell and the man page come from the same clap definitions as the
/// commands: each names a flag a command has (eval's `--json`, predict's `--keep`).
#[test]
fn completions_and_the_man_page_are_generated_from_the_commands() {
    for (shell, mark) in [
        ("bash", "_ember()"),
        ("zsh", "#compdef ember"),
        ("fish", "complete -c ember"),
    ] {
        let o = ember(&["completions", shell]);
        ok(&o);
        let text = stdout(&o);
        assert!(
            text.contains(mark),
            "{shell}: {mark:?} not in its completions"
        );
        assert!(text.contains("keep") && text.contains("json"), "{shell}");
    }
    let o = ember(&["man"]);
    ok(&o);
    let page = stdout(&o);
    assert!(
        page.starts_with(".ie \\n(.g .ds Aq") || page.contains(".TH ember"),
        "{page}"
    );
    assert!(
        page.contains("completions") && page.contains("predict"),
        "{page}"
    );
    // A reader that stops early (`| head -1`) closes the pipe: no panic.
    let mut child = std::process::Command::new(bin())
        .args(["completions", "bash"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    let o = ember(&["completions", "tcsh"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
}
