//! Training options end to end through the CLI: learning-rate schedules (and their length
//! across a resume), gradient clipping by the global norm, and early stopping with the best
//! epoch's model kept.

mod common;

use common::{config, ember, ok, path_str, scratch, stdout};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Rows of two noise columns with a label that is noise too, or the sign of `a` (`learnable`).
fn table(dir: &Path, name: &str, rows: usize, learnable: bool) -> PathBuf {
    let mut state = 12345u64;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut text = String::from("a,b,c,y\n");
    for _ in 0..rows {
        let (a, b, c) = (next() - 0.5, next() - 0.5, next() - 0.5);
        let y = if learnable { a > 0.0 } else { next() > 0.5 };
        writeln!(text, "{a:.5},{b:.5},{c:.5},{}", u8::from(y)).unwrap();
    }
    config(dir, name, &text)
}

fn train(cfg: &Path, out: &Path, extra: &[&str]) {
    ok(&common::train_on_cpu(cfg, out, extra));
}

/// One column of every `split` row of metrics.csv, by name.
fn column(run: &Path, split: &str, name: &str) -> Vec<f64> {
    let text = std::fs::read_to_string(run.join("metrics.csv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let at = header.iter().position(|h| *h == name).unwrap();
    lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|f| f[1] == split)
        .map(|f| f[at].parse().unwrap())
        .collect()
}

#[test]
fn warmup_cosine_steps_per_batch_and_keeps_its_length_on_resume() {
    let dir = scratch("opt-schedule");
    let data = table(&dir, "t.csv", 100, true);
    let cfg = config(
        &dir,
        "s.toml",
        &format!(
            "task = \"binary\"\nepochs = 4\nbatch_size = 20\n[data]\ncsv = \"{}\"\nlabel = \"y\"\n\
             valid_fraction = 0.2\n[model]\nhidden = [8]\n[sgd]\nlr = 0.4\n\
             [schedule]\nkind = \"warmup-cosine\"\nwarmup_epochs = 1\nmin_lr = 0.01\n",
            data.display()
        ),
    );
    let run = dir.join("run");
    train(&cfg, &run, &[]);
    ok(&ember(&[
        "train",
        "--resume",
        path_str(&run),
        "--epochs",
        "6",
        "--device",
        "cpu",
        "--quiet",
    ]));
    // 80 training rows in batches of 20: 4 steps an epoch, 4 of warm-up, 16 in all. The rate
    // recorded is the one of each epoch's last step (0-based step 4e - 1).
    let rate = |step: usize| -> f64 {
        if step < 4 {
            return 0.4 * (step + 1) as f64 / 4.0;
        }
        let progress = ((step - 4) as f64 / 12.0).min(1.0);
        0.01 + (0.4 - 0.01) * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos())
    };
    let want: Vec<f64> = (1..=6).map(|e| rate(4 * e - 1)).collect();
    let got = column(&run, "train", "lr");
    assert_eq!(got.len(), 6);
    for (g, w) in got.iter().zip(&want) {
        assert!((g - w).abs() < 1e-12, "{got:?} vs {want:?}");
    }
    assert_eq!(got[4], 0.01, "past its length the schedule stays at min_lr");
    let resolved = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(resolved.contains("epochs = 4.0"), "{resolved}");
    assert!(run.join("curves.png").is_file());
}

#[test]
fn clipping_by_the_global_norm_holds_the_weights_back() {
    let dir = scratch("opt-clip");
    let data = table(&dir, "t.csv", 200, true);
    let job = |clip: &str| {
        format!(
            "task = \"binary\"\nepochs = 2\nbatch_size = 16\n{clip}[data]\ncsv = \"{}\"\nlabel = \"y\"\n\
             [model]\nhidden = [8]\n[sgd]\nlr = 0.5\n",
            data.display()
        )
    };
    let (free, held) = (dir.join("free"), dir.join("held"));
    train(&config(&dir, "free.toml", &job("")), &free, &[]);
    train(
        &config(&dir, "held.toml", &job("clip_grad_norm = 1e-7\n")),
        &held,
        &[],
    );
    let change = |run: &Path| {
        let v = column(run, "valid", "loss");
        (v[1] - v[0]).abs()
    };
    assert!(change(&free) > 1e-3, "{}", change(&free));
    assert!(change(&held) < 1e-5, "{}", change(&held));
}

#[test]
fn early_stopping_stops_where_the_history_says_and_restores_the_best_model() {
    let dir = scratch("opt-early");
    let data = table(&dir, "noise.csv", 120, false);
    let cfg = config(
        &dir,
        "e.toml",
        &format!(
            "task = \"binary\"\nepochs = 80\nbatch_size = 10\n[data]\ncsv = \"{}\"\nlabel = \"y\"\n\
             valid_fraction = 0.5\n[model]\nhidden = [64, 64]\n[adam]\nlr = 0.01\n\
             [early_stopping]\npatience = 4\nmin_delta = 0.001\nrestore_best = true\n",
            data.display()
        ),
    );
    let run = dir.join("run");
    train(&cfg, &run, &[]);
    let valid = column(&run, "valid", "loss");
    // Keras' rule, on the recorded losses.
    let (mut best, mut best_epoch, mut waited, mut stop) = (f64::INFINITY, 0, 0, None);
    for (i, v) in valid.iter().enumerate() {
        if *v < best - 0.001 {
            (best, best_epoch, waited) = (*v, i + 1, 0);
        } else {
            waited += 1;
        }
        if waited >= 4 {
            stop = Some(i + 1);
            break;
        }
    }
    let stop = stop.expect("noise labels overfit: the run must stop early");
    assert_eq!(valid.len(), stop, "trained {} epochs", valid.len());
    assert!(stop < 80);
    let summary = common::summary(&run);
    assert_eq!(summary["best_epoch"], best_epoch);
    assert_eq!(summary["stopped_early"], true);
    assert_eq!(summary["status"], "complete");
    assert_eq!(summary["model_epoch"], best_epoch);
    let want = valid[best_epoch - 1];
    assert_eq!(summary["final_metrics"]["valid_loss"].as_f64(), Some(want));
    // `model-best.*` and the run's final model (restored) are the best epoch's.
    for model in [run.join("model-best.mpk"), run.clone()] {
        let out = ember(&[
            "eval",
            path_str(&model),
            "--split",
            "valid",
            "--device",
            "cpu",
        ]);
        ok(&out);
        let line = stdout(&out);
        let loss: f64 = line
            .split("loss ")
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            (loss - want).abs() <= 1e-5 * want,
            "{}: {line} vs epoch {best_epoch}: {want}",
            model.display()
        );
    }
    assert_eq!(
        std::fs::read(run.join("model-best.safetensors")).unwrap(),
        std::fs::read(run.join("model.safetensors")).unwrap()
    );
    let again = ember(&[
        "train",
        "--resume",
        path_str(&run),
        "--epochs",
        "90",
        "--device",
        "cpu",
    ]);
    common::bad_input(&again, "early stopping ended this run after epoch");
}
