//! Replicas end to end: a unit whose trials differ only in seed and learning rate trains as one
//! batched model (`ember sweep unit`), each replica matching the single run with its settings,
//! a diverging replica ending alone, and an interrupted group resuming from its checkpoint.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A tabular-mlp base with shuffled batches (8,000 rows, 32 steps an epoch; ReLU, so that a
/// huge learning rate overflows), and a sweep of it.
fn files(dir: &Path, epochs: usize, sweep: &str) -> PathBuf {
    config(
        dir,
        "base.toml",
        &format!(
            "job = \"tabular-mlp\"\nepochs = {epochs}\nbatch_size = 256\nshuffle = true\n\
             max_train_rows = 8000\nmax_valid_rows = 2000\n[model]\nactivation = \"relu\"\n\
             [sgd]\nlr = 0.1\n"
        ),
    );
    config(dir, "sweep.toml", &format!("base = \"base.toml\"\n{sweep}"))
}

fn sweep_run(sweep: &Path, out: &Path) -> Vec<String> {
    let args = ["--threads", "2", "sweep", "run", path_str(sweep)];
    let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    args.extend(["--out", path_str(out), "--device", "cpu"].map(String::from));
    args
}

/// Trains trial `i`'s single run (its settings as `--set` overrides, with the sweep's split)
/// and checks that the trial's losses match it within float rounding; gives the run's folder.
fn assert_matches_single_run(dir: &Path, trial: &Path, i: usize, sets: &[String]) -> PathBuf {
    let single = dir.join(format!("single-{i}"));
    let mut extra = vec!["--set", "data.split_seed=42"];
    sets.iter()
        .for_each(|s| extra.extend(["--set", s.as_str()]));
    ok(&train_on_cpu(&dir.join("base.toml"), &single, &extra));
    let (ours, theirs) = (losses(trial), losses(&single));
    assert_eq!((ours.len(), theirs.len()), (3, 3));
    for (a, b) in ours.iter().zip(&theirs) {
        assert!(
            close(a.0, b.0) && close(a.1, b.1),
            "trial {i}: {a:?} vs {b:?}"
        );
    }
    single
}

/// Equal within float rounding.
/// The epochs of a run's TensorBoard event files, in file order.
fn event_steps(run: &Path) -> Vec<i64> {
    let files = ember::tracking::events::files(run);
    let events = files
        .iter()
        .flat_map(|f| ember::tracking::events::read(f).unwrap());
    events
        .filter(|e| e.summary.is_some())
        .map(|e| e.step)
        .collect()
}

fn close(x: f64, y: f64) -> bool {
    (x - y).abs() <= 1e-5 * y.abs().max(1.0)
}

fn status(run: &Path) -> String {
    let s: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("summary.json")).unwrap()).unwrap();
    s["status"].as_str().unwrap().to_string()
}

/// Two seeds by two learning rates, shuffled, 3 epochs, and two replicas at lr = 1e9: those go
/// NaN and end alone; the four others each match the single run with their settings.
#[test]
fn replicas_match_single_runs_and_a_diverging_one_ends_alone() {
    let dir = scratch("replicas");
    let sweep = files(
        &dir,
        3,
        "seeds = [1, 2]\n[grid]\n\"sgd.lr\" = [0.1, 0.3, 1e9]\n",
    );
    let out = dir.join("out");
    let args = sweep_run(&sweep, &out);
    let o = ember(&args.iter().map(String::as_str).collect::<Vec<_>>());
    ok(&o);
    let text = stdout(&o);
    assert!(text.contains("4 complete, 2 failed"), "{text}");
    let log = std::fs::read_to_string(out.join("logs/unit-000.log")).unwrap();
    assert!(log.contains("6 trials as replicas"), "{log}");
    assert!(!out.join("logs/trial-000.log").exists());
    for (i, lr) in [(0, "0.1"), (1, "0.1"), (2, "0.3"), (3, "0.3")] {
        let trial = out.join(format!("trial-{i:03}"));
        assert_eq!(status(&trial), "complete");
        for file in [
            "config.toml",
            "curves.png",
            "model.mpk",
            "model.safetensors",
        ] {
            assert!(trial.join(file).is_file(), "trial {i}: no {file}");
        }
        // Each trial its own TensorBoard file, so `tensorboard --logdir` overlays them.
        assert_eq!(event_steps(&trial), [1, 2, 3], "trial {i}");
        let sets = [format!("seed={}", 1 + i % 2), format!("sgd.lr={lr}")];
        assert_matches_single_run(&dir, &trial, i, &sets);
        // The trial's model is its replica: eval gives its last validation loss.
        let eval = ember(&["eval", path_str(&trial), "--device", "cpu"]);
        ok(&eval);
    }
    for i in [4, 5] {
        assert_eq!(status(&out.join(format!("trial-{i:03}"))), "diverged");
    }
    let again = ember(&args.iter().map(String::as_str).collect::<Vec<_>>());
    ok(&again);
    assert!(
        stdout(&again).contains("6 ended before"),
        "{}",
        stdout(&again)
    );
}

/// linear-scalar's replicas (`x · w + p · f`, with `f` appended to the inputs, and their losses
/// in one fused operation) match its single runs: each trial's losses equal its single run's
/// within float rounding, and its model files (`w` and `p` split back out) evaluate to the same
/// loss within it too. The inputs are standardised and the learning rates large, so that the
/// weights move far in 3 epochs; on the seed's raw inputs (up to 1.5e6), Adam's sign-like first
/// steps turn the fused operation's other rounding into 0.1 % by the third epoch.
#[test]
fn linear_scalar_replicas_equal_single_runs() {
    let dir = scratch("replicas-linear-scalar");
    config(
        &dir,
        "base.toml",
        "job = \"linear-scalar\"\nepochs = 3\nshuffle = true\nmax_train_rows = 8000\n\
         [data]\nstandardize = true\n[adam]\nlr = 100\n",
    );
    let sweep = config(
        &dir,
        "sweep.toml",
        "base = \"base.toml\"\nseeds = [1, 2]\n[grid]\n\"adam.lr\" = [100, 300]\n",
    );
    let out = dir.join("out");
    let args = sweep_run(&sweep, &out);
    ok(&ember(&args.iter().map(String::as_str).collect::<Vec<_>>()));
    let log = std::fs::read_to_string(out.join("logs/unit-000.log")).unwrap();
    assert!(log.contains("4 trials as replicas"), "{log}");
    let eval_loss = |run: &Path| {
        let o = ember(&["eval", path_str(run), "--device", "cpu"]);
        ok(&o);
        let text = stdout(&o);
        let loss = text
            .split("loss ")
            .nth(1)
            .and_then(|t| t.split([' ', ',']).next());
        let loss = loss.and_then(|l| l.parse::<f64>().ok());
        loss.unwrap_or_else(|| panic!("no loss in {text}"))
    };
    for (i, lr) in [(0, "100"), (1, "100"), (2, "300"), (3, "300")] {
        let trial = out.join(format!("trial-{i:03}"));
        let sets = [format!("seed={}", 1 + i % 2), format!("adam.lr={lr}")];
        let single = assert_matches_single_run(&dir, &trial, i, &sets);
        let (a, b) = (eval_loss(&trial), eval_loss(&single));
        assert!(close(a, b), "trial {i}: eval loss {a} vs {b}");
    }
}

/// Replicas on the same rows (an unshuffled job: the first layer one wide product of the shared
/// input, its output side by side for the next layer) match the single runs of their seeds,
/// with a class weight in their training loss.
#[test]
fn replicas_on_shared_rows_match_single_runs() {
    let dir = scratch("replicas-shared");
    config(
        &dir,
        "base.toml",
        "job = \"tabular-mlp\"\nepochs = 3\nbatch_size = 256\nshuffle = false\n\
         max_train_rows = 8000\nmax_valid_rows = 2000\n[adam]\nlr = 3e-3\n\
         [class_weight]\n\"1\" = 3.0\n",
    );
    let sweep = config(
        &dir,
        "sweep.toml",
        "base = \"base.toml\"\nseeds = [1, 2, 3]\n",
    );
    let out = dir.join("out");
    let args = sweep_run(&sweep, &out);
    ok(&ember(&args.iter().map(String::as_str).collect::<Vec<_>>()));
    let log = std::fs::read_to_string(out.join("logs/unit-000.log")).unwrap();
    assert!(log.contains("3 trials as replicas"), "{log}");
    for i in 0..3 {
        let trial = out.join(format!("trial-{i:03}"));
        assert_matches_single_run(&dir, &trial, i, &[format!("seed={}", i + 1)]);
    }
}

/// The figures of a run's `metrics.csv` (loss, accuracy, MAE, R², per epoch and split; empty
/// where the task has none).
fn figures(run: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(run.join("metrics.csv")).unwrap();
    let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    let wanted: Vec<usize> = ["epoch", "split", "loss", "accuracy", "mae", "r2"]
        .iter()
        .map(|c| header.iter().position(|h| h == c).unwrap())
        .collect();
    (text.lines().skip(1))
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            wanted.iter().map(|&i| cells[i].to_string()).collect()
        })
        .collect()
}

/// Whether two runs' figures agree within float rounding.
fn same_figures(a: &Path, b: &Path) -> bool {
    let (a, b) = (figures(a), figures(b));
    a.len() == b.len()
        && a.iter().flatten().zip(b.iter().flatten()).all(|(x, y)| {
            match (x.parse::<f64>(), y.parse::<f64>()) {
                (Ok(x), Ok(y)) => close(x, y),
                _ => x == y,
            }
        })
}

/// Folds as replicas: `folds = 5` on the penguins table trains the five folds as replicas of
/// one model, each on its own fold's training rows, standardised with their own statistics,
/// and validated on its own fold; every trial's figures (loss, accuracy, MAE, R²) match its
/// fold's single run. The species (344 rows: folds of 69, 69, 69, 69 and 68), the sex (a binary
/// label, 11 of them missing) and the body mass (a regression) at batch_size 64: the last
/// batch of an epoch is a row shorter for some folds than for the others, padded and masked.
/// The species at batch_size 55: the fold whose training split has 276 rows makes six batches
/// an epoch where the others make five; it trains after them, as a group of its own.
#[test]
fn folds_as_replicas_match_their_single_runs() {
    let cases = [
        ("species", 64, false),
        ("sex", 64, false),
        ("body_mass_g", 64, false),
    ];
    for (label, batch_size, split) in cases.into_iter().chain([("species", 55, true)]) {
        let dir = scratch(&format!("replicas-folds-{label}-{batch_size}"));
        let penguins = root().join("examples/penguins.csv");
        drafted_as(&dir, "base.toml", &penguins, label, 3);
        let sweep = config(
            &dir,
            "sweep.toml",
            &format!("base = \"base.toml\"\nfolds = 5\n[grid]\nbatch_size = [{batch_size}]\n"),
        );
        let out = dir.join("out");
        let args = sweep_run(&sweep, &out);
        ok(&ember(&args.iter().map(String::as_str).collect::<Vec<_>>()));
        let log = std::fs::read_to_string(out.join("logs/unit-000.log")).unwrap();
        assert!(log.contains("5 trials as replicas"), "{log}");
        assert_eq!(
            log.contains("folds as replicas: 5 replicas"),
            !split,
            "{log}"
        );
        if split {
            assert!(log.contains("4 of them now, the 1 whose folds"), "{log}");
            assert!(log.contains("1 trials as replicas"), "{log}");
        }
        for i in 0..5 {
            let trial = out.join(format!("trial-{i:03}"));
            assert_eq!(status(&trial), "complete", "{label}: trial {i}");
            let single = dir.join(format!("single-{i}"));
            let sets = [
                format!("batch_size={batch_size}"),
                "data.folds=5".into(),
                format!("data.fold={i}"),
                "data.valid_fraction=0".into(),
            ];
            let mut extra = vec![];
            sets.iter()
                .for_each(|s| extra.extend(["--set", s.as_str()]));
            ok(&train_on_cpu(&dir.join("base.toml"), &single, &extra));
            assert!(
                same_figures(&trial, &single),
                "{label}, fold {i}: {:?} vs {:?}",
                figures(&trial),
                figures(&single)
            );
        }
    }
}

/// Runs the sweep `args` and stops it with Ctrl-C once its unit's `log` shows epoch 2 of 400;
/// its stderr must say `interrupted`.
fn interrupt_after_epoch_2(args: &[String], log: &Path, interrupted: &str) {
    let child = spawn(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let start = Instant::now();
    while !std::fs::read_to_string(log).is_ok_and(|l| l.contains(" 2/400")) {
        assert!(start.elapsed() < Duration::from_secs(120), "no epoch 2");
        std::thread::sleep(Duration::from_millis(2));
    }
    let pid = child.id().to_string();
    let mut kill = std::process::Command::new("kill");
    assert!(kill.args(["-INT", &pid]).status().unwrap().success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}\n{}", stdout(&o), stderr(&o));
    assert!(stderr(&o).contains(interrupted), "{}", stderr(&o));
}

/// Folds as replicas stopped with Ctrl-C in the first of their two groups (batch_size 55: four
/// folds, then the fifth): running the sweep again resumes the first group from its checkpoint
/// and then trains the fifth fold, each trial ending as the uninterrupted sweep's, bit for bit.
#[test]
fn an_interrupted_fold_group_resumes_and_the_fold_left_out_trains_after() {
    let dir = scratch("replicas-folds-resume");
    let penguins = root().join("examples/penguins.csv");
    drafted_as(&dir, "base.toml", &penguins, "species", 400);
    let text = "base = \"base.toml\"\nfolds = 5\n[grid]\nbatch_size = [55]\n";
    let sweep = config(&dir, "sweep.toml", text);
    let out = dir.join("out");
    let args = sweep_run(&sweep, &out);
    let log = out.join("logs/unit-000.log");
    // The fifth fold's group had not begun: interrupted too.
    interrupt_after_epoch_2(&args, &log, "5 interrupted");
    assert_eq!(status(&out.join("trial-000")), "interrupted");
    assert!(!out.join("trial-004").join("metrics.csv").exists());
    ok(&ember(&args.iter().map(String::as_str).collect::<Vec<_>>()));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("resuming"), "{text}");
    let whole = dir.join("whole");
    let args = sweep_run(&sweep, &whole);
    ok(&ember(&args.iter().map(String::as_str).collect::<Vec<_>>()));
    for i in 0..5 {
        let t = format!("trial-{i:03}");
        assert_eq!(status(&out.join(&t)), "complete", "{t}");
        assert_eq!(losses(&out.join(&t)), losses(&whole.join(&t)), "{t}");
    }
}

/// Ctrl-C stops the group after an epoch's checkpoint; running the sweep again resumes it from
/// `unit-000/checkpoint`, and the result is the uninterrupted group's, bit for bit.
#[test]
fn an_interrupted_group_resumes_from_its_checkpoint() {
    let dir = scratch("replicas-resume");
    let sweep = files(&dir, 400, "seeds = [1, 2]\n");
    let out = dir.join("out");
    let args = sweep_run(&sweep, &out);
    let log = out.join("logs/unit-000.log");
    interrupt_after_epoch_2(&args, &log, "2 interrupted");
    assert_eq!(status(&out.join("trial-000")), "interrupted");
    let done = losses(&out.join("trial-000")).len();
    assert!(done < 400, "{done} epochs before the stop");

    let o = ember(&args.iter().map(String::as_str).collect::<Vec<_>>());
    ok(&o);
    assert!(stdout(&o).contains("2 complete"), "{}", stdout(&o));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains(&format!("after epoch {done}/400")), "{text}");

    let whole = dir.join("whole");
    let args = sweep_run(&sweep, &whole);
    ok(&ember(&args.iter().map(String::as_str).collect::<Vec<_>>()));
    for t in ["trial-000", "trial-001"] {
        assert_eq!(status(&out.join(t)), "complete");
        assert_eq!(losses(&out.join(t)), losses(&whole.join(t)), "{t}");
        // Every epoch once across the two sessions' event files.
        assert_eq!(ember::tracking::events::files(&out.join(t)).len(), 2, "{t}");
        assert_eq!(
            event_steps(&out.join(t)),
            (1..=400).collect::<Vec<_>>(),
            "{t}"
        );
    }
}
