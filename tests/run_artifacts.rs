//! Plots, run summaries, the run table, the NaN guard and the faults a user can run into.

mod common;
use common::*;
use std::time::Duration;

fn png_size(path: &std::path::Path) -> (u32, u32) {
    let file = std::fs::File::open(path).unwrap();
    let mut reader = png::Decoder::new(std::io::BufReader::new(file))
        .read_info()
        .unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    // Not a blank image: more than two distinct colours.
    let mut colours: Vec<&[u8]> = buf[..info.buffer_size()].chunks(3).collect();
    colours.sort_unstable();
    colours.dedup();
    assert!(colours.len() > 2, "{} looks blank", path.display());
    (info.width, info.height)
}

#[test]
fn every_run_writes_curves_and_a_summary_and_runs_are_listed_and_overlaid() {
    let dir = scratch("artifacts");
    let mut runs = Vec::new();
    for (name, cfg) in [
        ("torch", "configs/fashion-mlp.toml"),
        ("keras", "configs/fashion-mlp-keras.toml"),
    ] {
        let run = dir.join(name);
        ok(&ember(&[
            "train",
            cfg,
            "--device",
            "cpu",
            "--epochs",
            "3",
            "--max-train-rows",
            "640",
            "--max-valid-rows",
            "300",
            "--out",
            path_str(&run),
            "-q",
        ]));
        assert_eq!(png_size(&run.join("curves.png")), (1400, 580));
        let summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(run.join("summary.json")).unwrap()).unwrap();
        assert_eq!(summary["job"], "fashion-mlp");
        assert_eq!(summary["status"], "complete");
        assert_eq!(summary["epochs_done"], 3);
        assert_eq!(summary["device"], "cpu");
        assert_eq!(summary["burn_version"], "0.21.0");
        assert_eq!(summary["config_hash"].as_str().unwrap().len(), 12);
        let (_, valid_loss, acc) = losses(&run)[2];
        assert_eq!(
            summary["final_metrics"]["valid_loss"].as_f64().unwrap(),
            valid_loss
        );
        assert_eq!(summary["final_metrics"]["valid_accuracy"].as_f64(), acc);
        assert!(summary["steps_per_s"].as_f64().unwrap() > 0.0);
        runs.push(run);
    }
    let o = ember(&["runs", path_str(&dir)]);
    ok(&o);
    let table = stdout(&o);
    assert!(table.lines().next().unwrap().starts_with("run "), "{table}");
    assert_eq!(table.lines().count(), 3, "{table}");
    assert!(table.contains("complete  3/3"), "{table}");

    let overlay = dir.join("both.png");
    ok(&ember(&[
        "plot",
        path_str(&runs[0]),
        path_str(&runs[1]),
        "--out",
        path_str(&overlay),
    ]));
    assert_eq!(png_size(&overlay), (1400, 580));

    // A regression gets loss and R² panels; with a schedule, a third for the learning rate.
    let run = dir.join("linear");
    ok(&ember(&[
        "train",
        "configs/linear-scalar.toml",
        "--device",
        "cpu",
        "--epochs",
        "2",
        "--max-train-rows",
        "512",
        "--out",
        path_str(&run),
        "-q",
    ]));
    assert_eq!(png_size(&run.join("curves.png")), (1400, 580));
    let scheduled = config(
        &dir,
        "step.toml",
        "job = \"linear-scalar\"\n[adam]\nlr = 5e-4\n[schedule]\nkind = \"step\"\nstep_epochs = 1\n",
    );
    let run = dir.join("linear-step");
    ok(&ember(&[
        "train",
        path_str(&scheduled),
        "--device",
        "cpu",
        "--epochs",
        "2",
        "--max-train-rows",
        "512",
        "--out",
        path_str(&run),
        "-q",
    ]));
    assert_eq!(png_size(&run.join("curves.png")), (2100, 580));
}

#[test]
fn a_diverging_run_stops_with_exit_3_and_no_checkpoint_from_bad_weights() {
    let dir = scratch("nan");
    let cfg = config(
        &dir,
        "huge-lr.toml",
        "job = \"linear-scalar\"\n[sgd]\nlr = 1e6\n",
    );
    let run = dir.join("run");
    let o = ember(&[
        "train",
        path_str(&cfg),
        "--device",
        "cpu",
        "--epochs",
        "3",
        "--out",
        path_str(&run),
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_default();
    assert!(
        line.contains("non-finite training loss in epoch 1, steps 1-"),
        "{err}"
    );
    assert!(line.contains("no checkpoint was written yet"), "{err}");
    assert!(!run.join("checkpoint/epoch-1.json").exists());
    assert!(!run.join("model.safetensors").exists());
    let summary = std::fs::read_to_string(run.join("summary.json")).unwrap();
    assert!(summary.contains("\"status\": \"diverged\""), "{summary}");
}

#[test]
fn an_unusable_out_folder_fails_before_training() {
    let dir = scratch("unwritable");
    let file = dir.join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let o = ember(&[
        "train",
        "configs/linear-scalar.toml",
        "--device",
        "cpu",
        "--out",
        path_str(&file.join("run")),
    ]);
    bad_input(&o, "cannot create the folder");
    assert!(!stdout(&o).contains("epoch 1/"), "training started");
}

#[test]
fn a_full_disk_fails_before_training() {
    let dir = scratch("full-disk");
    let Some(disk) = Tmpfs::mount(&dir, 4) else {
        return;
    };
    let o = ember(&[
        "train",
        "configs/fashion-mlp.toml",
        "--device",
        "cpu",
        "--max-train-rows",
        "64",
        "--out",
        path_str(&disk.path.join("run")),
    ]);
    failed_with(&o, 4, &["disk full: ", "free, the run needs about"]);
}

#[test]
fn two_runs_cannot_share_an_out_folder_and_a_finished_run_is_not_overwritten() {
    let dir = scratch("lock");
    let run = dir.join("run");
    let mut first = spawn(&[
        "train",
        "configs/tabular-mlp.toml",
        "--device",
        "cpu",
        "--epochs",
        "200",
        "--out",
        path_str(&run),
        "-q",
    ]);
    wait_for(&run.join("config.toml"), Duration::from_secs(60));
    let o = ember(&[
        "train",
        "configs/tabular-mlp.toml",
        "--device",
        "cpu",
        "--out",
        path_str(&run),
    ]);
    bad_input(&o, "another ember process (pid");
    first.kill().unwrap();
    first.wait().unwrap();
    // The folder now holds a (killed) run: a new run must not write over it.
    let o = ember(&[
        "train",
        "configs/tabular-mlp.toml",
        "--device",
        "cpu",
        "--out",
        path_str(&run),
    ]);
    bad_input(&o, "already holds a run");
}

#[test]
fn a_data_file_changed_during_the_run_is_not_reread() {
    let dir = scratch("changed-data");
    let csv = dir.join("table.csv");
    let mut text = String::from("a,b,label\n");
    for i in 0..4000 {
        text += &format!(
            "{},{},{}\n",
            (i % 7) as f32 / 7.0,
            (i % 11) as f32 / 11.0,
            i % 2
        );
    }
    std::fs::write(&csv, &text).unwrap();
    let cfg = config(
        &dir,
        "job.toml",
        &format!(
            "job = \"tabular-mlp\"\nbatch_size = 64\n[data]\ncsv = \"{}\"\n[adam]\nlr = 1e-3\n",
            csv.display()
        ),
    );
    let run = dir.join("run");
    let child = spawn(&[
        "train",
        path_str(&cfg),
        "--device",
        "cpu",
        "--epochs",
        "8",
        "--out",
        path_str(&run),
        "-q",
    ]);
    wait_for(&run.join("metrics.csv"), Duration::from_secs(60));
    std::fs::write(&csv, "garbage\n").unwrap();
    let o = child.wait_with_output().unwrap();
    ok(&o);
    assert_eq!(losses(&run).len(), 8);
}
