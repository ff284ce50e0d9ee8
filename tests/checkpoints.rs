//! Checkpoints, resume, export, import, eval and predict, end to end through the CLI.

mod common;
use common::*;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// A fashion-mlp job small enough to take about half a second per epoch, shuffled and with Adam
/// so that a resume must restore the data order and the optimizer's moments.
fn small_config(dir: &Path) -> std::path::PathBuf {
    config(
        dir,
        "small.toml",
        "job = \"fashion-mlp\"\nepochs = 6\nbatch_size = 64\nshuffle = true\n[adam]\nlr = 1e-3\n",
    )
}

#[test]
fn resume_after_sigkill_or_ctrl_c_ends_with_the_same_weights() {
    let dir = scratch("resume");
    let cfg = small_config(&dir);
    let cfg = path_str(&cfg);

    let reference = dir.join("reference");
    ok(&ember(&train_each_epoch_checkpointed(
        cfg,
        path_str(&reference),
    )));
    let expected = std::fs::read(reference.join("model.safetensors")).unwrap();

    // SIGKILL in the middle of epoch 3.
    let killed = dir.join("killed");
    let child = spawn(&train_each_epoch_checkpointed(cfg, path_str(&killed)));
    let (limit, settle) = (Duration::from_secs(120), Duration::from_millis(150));
    kill_mid_epoch(child, &killed, 2, limit, settle);
    assert!(!killed.join("model.safetensors").exists());
    let o = resume_on_cpu(&killed);
    ok(&o);
    let resumed = std::fs::read(killed.join("model.safetensors")).unwrap();
    assert!(
        resumed == expected,
        "resumed weights differ from the uninterrupted run"
    );
    assert_eq!(losses(&killed), losses(&reference));

    // Ctrl-C: stops at the end of the epoch with a checkpoint, exit 130, then resumes.
    let stopped = dir.join("stopped");
    let child = spawn(&train_each_epoch_checkpointed(cfg, path_str(&stopped)));
    wait_for(
        &stopped.join("checkpoint/epoch-1.json"),
        Duration::from_secs(120),
    );
    Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("stopped by Ctrl-C after epoch"), "{err}");
    let done = losses(&stopped).len();
    assert!(done < 6, "{err}");
    assert!(
        stopped
            .join(format!("checkpoint/epoch-{done}.json"))
            .is_file()
    );
    let o = resume_on_cpu(&stopped);
    ok(&o);
    assert!(std::fs::read(stopped.join("model.safetensors")).unwrap() == expected);
}

#[test]
fn a_corrupt_or_truncated_checkpoint_is_a_one_line_error() {
    let dir = scratch("corrupt");
    let cfg = small_config(&dir);
    let run = dir.join("run");
    ok(&ember(&[
        "train",
        path_str(&cfg),
        "--out",
        path_str(&run),
        "-q",
        "--device",
        "cpu",
        "--epochs",
        "2",
        "--max-train-rows",
        "640",
        "--max-valid-rows",
        "100",
    ]));
    let model = run.join("checkpoint/model-2.mpk");
    let bytes = std::fs::read(&model).unwrap();
    std::fs::write(&model, &bytes[..bytes.len() / 2]).unwrap();
    let o = ember(&[
        "train",
        "--resume",
        path_str(&run),
        "--epochs",
        "3",
        "--device",
        "cpu",
    ]);
    bad_input(&o, "model-2.mpk: corrupt checkpoint");
    std::fs::write(run.join("checkpoint/epoch-2.json"), b"{ not json").unwrap();
    let o = ember(&[
        "train",
        "--resume",
        path_str(&run),
        "--epochs",
        "3",
        "--device",
        "cpu",
    ]);
    bad_input(&o, "epoch-2.json: corrupt checkpoint manifest");
}

/// The names, shapes and dtypes in a safetensors file, sorted by name.
fn tensors(path: &Path) -> Vec<(String, Vec<usize>, Vec<f32>)> {
    let bytes = std::fs::read(path).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut out: Vec<_> = st
        .tensors()
        .into_iter()
        .map(|(name, view)| {
            assert_eq!(view.dtype(), safetensors::Dtype::F32, "{name}");
            let values = view
                .data()
                .chunks(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            (name, view.shape().to_vec(), values)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn transpose(values: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    (0..cols)
        .flat_map(|c| (0..rows).map(move |r| values[r * cols + c]))
        .collect()
}

/// Trains `job` briefly and returns the run folder.
fn trained(dir: &Path, job: &str, rows: &str) -> std::path::PathBuf {
    let run = dir.join(job);
    ok(&ember(&[
        "train",
        &format!("configs/{job}.toml"),
        "--device",
        "cpu",
        "--epochs",
        "1",
        "--max-train-rows",
        rows,
        "--max-valid-rows",
        "500",
        "--out",
        path_str(&run),
        "-q",
    ]));
    run
}

#[test]
fn safetensors_have_the_seed_modules_names_shapes_and_values() {
    let dir = scratch("names");
    for (job, rows, expected) in [
        (
            "fashion-mlp",
            "640",
            vec![
                ("linear_relu_stack.0.bias", vec![512]),
                ("linear_relu_stack.0.weight", vec![512, 784]),
                ("linear_relu_stack.2.bias", vec![512]),
                ("linear_relu_stack.2.weight", vec![512, 512]),
                ("linear_relu_stack.4.bias", vec![10]),
                ("linear_relu_stack.4.weight", vec![10, 512]),
            ],
        ),
        (
            "tabular-mlp",
            "4096",
            vec![
                ("fc.0.bias", vec![20]),
                ("fc.0.weight", vec![20, 61]),
                ("fc.2.bias", vec![10]),
                ("fc.2.weight", vec![10, 20]),
                ("fc.4.bias", vec![1]),
                ("fc.4.weight", vec![1, 10]),
            ],
        ),
        (
            "linear-scalar",
            "1280",
            vec![("lin.weight", vec![1, 40]), ("par", vec![1])],
        ),
    ] {
        let run = trained(&dir, job, rows);
        let torch = tensors(&run.join("model.safetensors"));
        let got: Vec<(&str, Vec<usize>)> = torch
            .iter()
            .map(|(n, s, _)| (n.as_str(), s.clone()))
            .collect();
        assert_eq!(got, expected, "{job}");
        // The Burn layout holds the same numbers, linear weights transposed.
        let burn_file = dir.join(format!("{job}-burn.safetensors"));
        ok(&ember(&[
            "export",
            path_str(&run),
            "--layout",
            "burn",
            "--out",
            path_str(&burn_file),
        ]));
        let burn = tensors(&burn_file);
        for ((_, shape, t), (bname, bshape, b)) in torch.iter().zip(&burn) {
            if shape.len() == 2 {
                assert_eq!(bshape, &vec![shape[1], shape[0]], "{bname}");
                assert_eq!(&transpose(b, shape[1], shape[0]), t, "{bname}");
            } else {
                assert_eq!(b, t, "{bname}");
            }
        }
    }
}

#[test]
fn exported_models_reload_with_identical_outputs_and_eval_matches_training() {
    let dir = scratch("reload");
    let run = trained(&dir, "tabular-mlp", "8192");
    let input = dir.join("rows.csv");
    // 50 rows of the built-in table's shape: 61 inputs, with a label column to be ignored.
    let mut csv = (0..61)
        .map(|i| format!("x{i}"))
        .collect::<Vec<_>>()
        .join(",")
        + ",label\n";
    for r in 0..50 {
        let row: Vec<String> = (0..61)
            .map(|c| format!("{:.3}", ((r * 61 + c) % 17) as f32 / 5.0 - 1.6))
            .collect();
        csv += &(row.join(",") + ",1\n");
    }
    std::fs::write(&input, csv).unwrap();

    let predict = |model: &Path, extra: &[&str]| {
        let mut args = vec![
            "predict",
            path_str(model),
            "--input",
            path_str(&input),
            "--device",
            "cpu",
        ];
        args.extend_from_slice(extra);
        let o = ember(&args);
        ok(&o);
        stdout(&o)
    };
    let from_run = predict(&run, &[]);
    assert!(from_run.starts_with("probability,label\n"), "{from_run}");
    assert_eq!(from_run.lines().count(), 51);

    let cfg = run.join("config.toml");
    for (format, layout, file) in [
        ("safetensors", "pytorch", "a.safetensors"),
        ("safetensors", "burn", "b.safetensors"),
        ("burn", "pytorch", "c.mpk"),
    ] {
        let out = dir.join(file);
        ok(&ember(&[
            "export",
            path_str(&run),
            "--format",
            format,
            "--layout",
            layout,
            "--out",
            path_str(&out),
        ]));
        let again = predict(&out, &["--config", path_str(&cfg)]);
        assert_eq!(again, from_run, "{format}/{layout}");
    }

    // eval reports what training reported for the validation split.
    let o = ember(&["eval", path_str(&run), "--device", "cpu"]);
    ok(&o);
    let (_, valid_loss, valid_acc) = losses(&run)[0];
    let line = stdout(&o);
    assert!(
        line.contains(&format!("loss {valid_loss:.6}")),
        "{line} vs {valid_loss}"
    );
    assert!(
        line.contains(&format!("accuracy {:.2} %", 100.0 * valid_acc.unwrap())),
        "{line}"
    );
}

#[test]
fn training_starts_from_imported_pytorch_weights() {
    let dir = scratch("import");
    let source = trained(&dir, "linear-scalar", "1280");
    let cfg = config(
        &dir,
        "tiny-lr.toml",
        "job = \"linear-scalar\"\nepochs = 1\n[adam]\nlr = 1e-30\n",
    );
    let run = dir.join("imported");
    ok(&ember(&[
        "train",
        path_str(&cfg),
        "--init-from",
        path_str(&source.join("model.safetensors")),
        "--max-train-rows",
        "256",
        "--out",
        path_str(&run),
        "--device",
        "cpu",
        "-q",
    ]));
    // With a learning rate of 1e-30 the weights cannot move: they are the imported ones.
    let a = tensors(&source.join("model.safetensors"));
    let b = tensors(&run.join("model.safetensors"));
    assert_eq!(a, b);
    // A file that does not fit the model is refused by name.
    let fashion = trained(&dir, "fashion-mlp", "640");
    let o = ember(&[
        "train",
        path_str(&cfg),
        "--init-from",
        path_str(&fashion.join("model.safetensors")),
        "--out",
        path_str(&dir.join("misfit")),
        "--device",
        "cpu",
    ]);
    bad_input(&o, "does not fit this model");
    assert!(!dir.join("misfit").exists());
}

#[test]
fn numpy_forward_pass_of_each_export_matches_predict() {
    let Some(python) = test_python(
        &["numpy", "safetensors"],
        "numpy_forward_pass_of_each_export_matches_predict",
    ) else {
        return;
    };
    let dir = scratch("numpy");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/numpy_forward.py");
    for (job, rows) in [
        ("fashion-mlp", "640"),
        ("tabular-mlp", "4096"),
        ("linear-scalar", "1280"),
    ] {
        let run = trained(&dir, job, rows);
        let input = dir.join(format!("{job}-input.csv"));
        let o = Command::new(&python)
            .args([path_str(&script), "make-input", job, path_str(&input)])
            .output()
            .unwrap();
        ok(&o);
        let predicted = dir.join(format!("{job}-predicted.csv"));
        ok(&ember(&[
            "predict",
            path_str(&run),
            "--input",
            path_str(&input),
            "--out",
            path_str(&predicted),
            "--device",
            "cpu",
        ]));
        let o = Command::new(&python)
            .args([
                path_str(&script),
                "check",
                job,
                path_str(&run.join("model.safetensors")),
                path_str(&run.join("config.toml")),
                path_str(&input),
                path_str(&predicted),
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{job}: {}{}", stdout(&o), stderr(&o));
        assert!(stdout(&o).contains("max abs diff"), "{}", stdout(&o));
        eprint!("{}", stdout(&o));
    }
}
