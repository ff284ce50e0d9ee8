//! `ember sweep run` and `ember sweep report` end to end: trial folders, processes in parallel, a
//! diverging trial recorded while the others go on, resume of an interrupted trial, and the
//! report's table, JSON and chart.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A tabular-mlp base (8,000 shuffled rows, 40 epochs of 32 steps; ReLU, so that a huge
/// learning rate overflows) and a sweep over two seeds and three learning rates, the last of
/// which diverges.
fn sweep_files(dir: &Path) -> PathBuf {
    config(
        dir,
        "base.toml",
        "job = \"tabular-mlp\"\nepochs = 40\nbatch_size = 256\nshuffle = true\n\
         max_train_rows = 8000\nmax_valid_rows = 2000\n[model]\nactivation = \"relu\"\n\
         [sgd]\nlr = 0.1\n",
    );
    config(
        dir,
        "lr.toml",
        "base = \"base.toml\"\nseeds = [1, 2]\n[grid]\n\"sgd.lr\" = [0.1, 0.3, 1e9]\n",
    )
}

/// A sweep file `name` in `dir` over the base job `base.toml` there, with `text` after `base`.
fn beside_base(dir: &Path, name: &str, text: &str) -> PathBuf {
    config(dir, name, &format!("base = \"base.toml\"\n{text}"))
}

/// Starts trial 0 by hand, as the sweep would, and stops it with Ctrl-C after its first
/// checkpoint: the sweep must resume it.
fn interrupt_trial_0(out: &Path) {
    let trial = out.join("trial-000");
    let (base, trial_str) = (out.join("base.toml"), trial.display().to_string());
    let mut args = vec![
        "--threads",
        "1",
        "train",
        path_str(&base),
        "--out",
        &trial_str,
    ];
    args.extend(["--set", "sgd.lr=0.1", "--set", "seed=1"]);
    args.extend(["--set", "data.split_seed=42", "--device", "cpu", "-q"]);
    args.extend(["--checkpoint-every", "0"]);
    let child = spawn(&args);
    // Any epoch's checkpoint (each replaces the one before).
    let checkpoints = trial.join("checkpoint");
    let start = std::time::Instant::now();
    while std::fs::read_dir(&checkpoints).map_or(true, |d| {
        !d.flatten()
            .any(|e| e.file_name().to_string_lossy().ends_with(".json"))
    }) {
        assert!(start.elapsed() < Duration::from_secs(120), "no checkpoint");
        std::thread::sleep(Duration::from_millis(2));
    }
    let pid = child.id().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let s = summary(&trial);
    assert_eq!(s["status"], "interrupted");
    assert!(s["epochs_done"].as_u64().unwrap() < 40, "{s}");
}

#[test]
fn a_sweep_runs_its_trials_resumes_the_interrupted_and_records_the_diverged() {
    let dir = scratch("sweep-run");
    let sweep = sweep_files(&dir);
    let out = dir.join("out");
    // `sweep slurm` lays out the folder without running anything.
    ok(&ember(&[
        "sweep",
        "slurm",
        path_str(&sweep),
        "--out",
        path_str(&out),
    ]));
    interrupt_trial_0(&out);

    let run = |parallel: &str| {
        ember(&[
            "--threads",
            "1",
            "sweep",
            "run",
            path_str(&sweep),
            "--out",
            path_str(&out),
            "--parallel",
            parallel,
            "--device",
            "cpu",
            // Trials as processes: replicas are tests/replicas.rs's.
            "--processes",
        ])
    };
    let o = run("2");
    ok(&o);
    let text = stdout(&o);
    assert!(
        text.contains("4 complete, 2 failed, 0 interrupted, 0 ended before"),
        "{text}"
    );
    let log = std::fs::read_to_string(out.join("logs/trial-000.log")).unwrap();
    assert!(
        log.contains("\"--resume\""),
        "trial 0 was not resumed:\n{log}"
    );
    for i in 0..6 {
        let s = summary(&out.join(format!("trial-{i:03}")));
        let lr = if i < 2 {
            0.1
        } else if i < 4 {
            0.3
        } else {
            1e9
        };
        let status = if lr > 1.0 { "diverged" } else { "complete" };
        assert_eq!(s["status"], status, "trial {i}");
        let cfg = std::fs::read_to_string(out.join(format!("trial-{i:03}/config.toml"))).unwrap();
        assert!(cfg.contains(&format!("seed = {}", 1 + i % 2)), "{cfg}");
        assert!(lr > 1.0 || cfg.contains(&format!("lr = {lr}")), "{cfg}");
    }

    // The trials are the single runs with their settings (the split pinned to the base's seed):
    // trial 3 against `ember train`.
    let single = dir.join("single");
    ok(&ember(&[
        "--threads",
        "1",
        "train",
        path_str(&dir.join("base.toml")),
        "--set",
        "sgd.lr=0.3",
        "--set",
        "seed=2",
        "--set",
        "data.split_seed=42",
        "--device",
        "cpu",
        "-q",
        "--out",
        path_str(&single),
    ]));
    assert_eq!(losses(&out.join("trial-003")), losses(&single));

    // Again: everything ended, nothing runs.
    let again = run("1");
    ok(&again);
    assert!(
        stdout(&again).contains("0 complete, 0 failed, 0 interrupted, 6 ended before"),
        "{}",
        stdout(&again)
    );

    check_report(&out);
    let runs = ember(&["runs", path_str(&out)]);
    ok(&runs);
    let listed = stdout(&runs);
    let at = |t: &str| {
        listed
            .find(t)
            .unwrap_or_else(|| panic!("{t} not in {listed}"))
    };
    assert!(at("trial-000") < at("trial-001") && at("trial-004") < at("trial-005"));
}

/// The report ranks lr 0.3 and 0.1 by their mean over two seeds, and marks lr 1e9's trials.
fn check_report(out: &Path) {
    let o = ember(&["sweep", "report", path_str(out)]);
    ok(&o);
    let table = stdout(&o);
    let rows: Vec<&str> = table.lines().filter(|l| l.contains("sgd.lr=")).collect();
    assert_eq!(rows.len(), 3, "{table}");
    assert!(
        rows[2].contains("0/2") && rows[2].contains("trial 4 diverged"),
        "{table}"
    );
    assert!(rows[0].contains("±") && rows[0].contains("2/2"), "{table}");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("sweep.json")).unwrap()).unwrap();
    assert_eq!(json["metric"], "accuracy");
    let configs = json["configurations"].as_array().unwrap();
    let (first, second) = (configs[0]["mean"].as_f64(), configs[1]["mean"].as_f64());
    assert!(first.unwrap() >= second.unwrap(), "{json}");
    assert_eq!(json["trials"].as_array().unwrap().len(), 6);
    let png = std::fs::read(out.join("sweep.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000);
}

#[test]
fn units_run_alone_and_bad_sweeps_are_one_line_errors() {
    let dir = scratch("sweep-units");
    config(
        &dir,
        "base.toml",
        "job = \"tabular-mlp\"\nepochs = 2\nbatch_size = 256\nmax_train_rows = 2000\n\
         max_valid_rows = 500\n[adam]\nlr = 1e-3\n",
    );
    let sweep = beside_base(
        &dir,
        "widths.toml",
        "seeds = [1, 2]\n[grid]\n\"model.hidden\" = [[4], [6]]\n",
    );
    let out = dir.join("out");
    let unit = |n: &str| {
        ember(&[
            "sweep",
            "run",
            path_str(&sweep),
            "--out",
            path_str(&out),
            "--unit",
            n,
            "--device",
            "cpu",
        ])
    };
    ok(&unit("1"));
    let done: Vec<bool> = (0..4)
        .map(|i| out.join(format!("trial-{i:03}/summary.json")).exists())
        .collect();
    assert_eq!(done, [false, false, true, true]);
    bad_input(&unit("2"), "--unit 2: the sweep widths has 2 units (0..1)");

    let sweep_file = |name: &str, text: &str| {
        let p = beside_base(&dir, name, text);
        let out = dir.join(format!("out-{name}"));
        ember(&["sweep", "run", path_str(&p), "--out", path_str(&out)])
    };
    bad_input(
        &sweep_file("a.toml", "[grid]\n\"adam.lrr\" = [1]\n"),
        "unknown field `lrr`",
    );
    bad_input(
        &sweep_file("b.toml", "[grid]\n\"adam.lr\" = []\n"),
        "grid.\"adam.lr\" = [] gives no trial",
    );
    bad_input(
        &sweep_file("c.toml", "seeds = []\n"),
        "seeds = [] gives no trial",
    );
    let random = "[random]\ntrials = 2\nseed = 1\n\"adam.lr\" = ";
    bad_input(
        &sweep_file(
            "d.toml",
            &format!("{random}{{ log_uniform = [0, 1e-2] }}\n"),
        ),
        "random.\"adam.lr\" must be",
    );
    bad_input(
        &sweep_file("e.toml", &format!("{random}{{ uniform = [0.1, 0.01] }}\n")),
        "0 < a < b",
    );
    bad_input(&sweep_file("f.toml", "grid = 3\n"), "f.toml");
    bad_input(
        &sweep_file("h.toml", "seeds = [1]\n[grid]\nseed = [2]\n"),
        "\"seed\" is swept twice",
    );
    bad_input(
        &sweep_file("i.toml", "name = \"a/b\"\n"),
        "name = \"a/b\": use letters",
    );
    // The folder records the first run's --set; another is refused.
    let other_set = ember(&[
        "sweep",
        "run",
        path_str(&sweep),
        "--out",
        path_str(&out),
        "--set",
        "epochs=1",
    ]);
    bad_input(&other_set, "give the same --set, or none");
    // Another sweep into a folder that holds one.
    let other = config(&dir, "g.toml", "base = \"base.toml\"\nseeds = [3]\n");
    bad_input(
        &ember(&["sweep", "run", path_str(&other), "--out", path_str(&out)]),
        "holds another sweep",
    );
    bad_input(
        &ember(&["sweep", "run", path_str(&other), "--out", path_str(&dir)]),
        "is not empty and holds no sweep",
    );
    // A folder holding only an empty logs/ and a base.toml is a start killed before its sweep
    // file, but only with this base: another base.toml is someone else's file.
    let started = dir.join("started");
    std::fs::create_dir_all(started.join("logs")).unwrap();
    std::fs::write(started.join("base.toml"), "job = \"tabular-mlp\"\n").unwrap();
    bad_input(
        &ember(&[
            "sweep",
            "run",
            path_str(&other),
            "--out",
            path_str(&started),
        ]),
        "is not empty and holds no sweep",
    );
    let left: Vec<bool> = ["a", "b", "c", "d", "e", "f"]
        .iter()
        .map(|n| dir.join(format!("out-{n}.toml")).exists())
        .collect();
    assert_eq!(left, [false; 6], "a bad sweep left a folder");
}

/// `folds = 5` on the penguins table: each configuration runs once per fold, each fold's
/// validation rows are its own and together they are every row, and the report gives each
/// configuration's mean ± std over its folds. Folds out of range are one-line errors.
#[test]
fn cross_validation_runs_each_fold_and_reports_over_them() {
    let dir = scratch("sweep-folds");
    let penguins = root().join("examples/penguins.csv");
    drafted_as(&dir, "base.toml", &penguins, "species", 4);
    let sweep = beside_base(
        &dir,
        "cv.toml",
        "folds = 5\n[grid]\n\"adam.lr\" = [1e-3, 1e-2]\n",
    );
    let plan = ember(&["sweep", "plan", path_str(&sweep)]);
    ok(&plan);
    assert!(stdout(&plan).contains("data.fold=4"), "{}", stdout(&plan));
    // The learning rates and folds of one network: one unit of replicas.
    let text = stdout(&plan);
    let how = "10 replicas of one model, in one process, each of 5 folds on its own rows";
    assert!(text.contains(how), "{text}");
    let out = dir.join("out");
    let run = [
        "sweep",
        "run",
        path_str(&sweep),
        "--out",
        path_str(&out),
        "--device",
        "cpu",
    ];
    ok(&ember(&run));
    let mut held_out = 0;
    for i in 0..5 {
        // Trials 0..4 are the first learning rate's folds 0..4.
        let trial = out.join(format!("trial-{i:03}"));
        let saved = std::fs::read_to_string(trial.join("config.toml")).unwrap();
        assert!(saved.contains("folds = 5\n") && saved.contains(&format!("fold = {i}\n")));
        assert!(!saved.contains("\nvalid_fraction ="), "{saved}");
        let eval = ember(&["eval", path_str(&trial), "--json", "--device", "cpu"]);
        ok(&eval);
        let json: serde_json::Value = serde_json::from_str(&stdout(&eval)).unwrap();
        let rows = json["rows"].as_u64().unwrap();
        assert!((68..=70).contains(&rows), "fold {i}: {rows} rows");
        held_out += rows;
    }
    assert_eq!(held_out, 344);
    let report = ember(&["sweep", "report", path_str(&out)]);
    ok(&report);
    let table = stdout(&report);
    assert!(
        table.contains("(mean ± std over seeds and folds)"),
        "{table}"
    );
    let rows: Vec<&str> = table.lines().filter(|l| l.contains("adam.lr=")).collect();
    assert_eq!(rows.len(), 2, "{table}");
    assert!(
        rows.iter().all(|r| r.contains("5/5") && r.contains("±")),
        "{table}"
    );
    assert!(!rows.iter().any(|r| r.contains("data.fold")), "{table}");

    let bad = |name: &str, text: &str| {
        ember(&["sweep", "plan", path_str(&beside_base(&dir, name, text))])
    };
    bad_input(
        &bad("one.toml", "folds = 1\n"),
        "folds = 1: cross-validation needs at least 2 folds",
    );
    bad_input(
        &bad("twice.toml", "folds = 3\n[grid]\n\"data.fold\" = [1]\n"),
        "\"data.fold\" is set by the sweep's folds",
    );
    let (base, single) = (dir.join("base.toml"), dir.join("single"));
    let train = |sets: &[&str]| {
        let mut args = vec!["train", path_str(&base)];
        sets.iter().for_each(|s| args.extend(["--set", s]));
        args.extend(["--out", path_str(&single), "--device", "cpu"]);
        ember(&args)
    };
    bad_input(
        &train(&["data.folds=5", "data.fold=5", "data.valid_fraction=0"]),
        "data.fold = 5 must be below data.folds = 5",
    );
    bad_input(
        &train(&["data.fold=1"]),
        "data.fold is not used without data.folds",
    );
    bad_input(
        &train(&["data.folds=400", "data.valid_fraction=0"]),
        "344 data rows cannot make data.folds = 400 folds",
    );
}
