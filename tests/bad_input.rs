//! Bad input gets one `error:` line naming the file, field or value, exit code 2, no panic, and
//! no run folder.

mod common;
use common::*;
use std::path::Path;

const MINIMAL_FASHION: &str = "job = \"fashion-mlp\"\n[sgd]\nlr = 1e-3\n";

fn train(cfg: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "train",
        path_str(cfg),
        "--device",
        "cpu",
        "--out",
        path_str(out),
    ];
    args.extend_from_slice(extra);
    ember(&args)
}

fn config_error(name: &str, text: &str, needle: &str) {
    let dir = scratch(&format!("bad-{name}"));
    let cfg = config(&dir, "job.toml", text);
    let out = dir.join("run");
    bad_input(&train(&cfg, &out, &[]), needle);
    assert!(!out.exists(), "a run folder was created for a bad {name}");
}

#[test]
fn unknown_config_key() {
    config_error(
        "key",
        "job = \"fashion-mlp\"\nlearning_rate = 1\n[sgd]\nlr = 1e-3\n",
        "job.toml:2: unknown field `learning_rate`",
    );
}

#[test]
fn wrong_value_type() {
    config_error(
        "type",
        "job = \"fashion-mlp\"\nepochs = \"ten\"\n[sgd]\nlr = 1e-3\n",
        "job.toml:2: invalid type: string \"ten\"",
    );
}

#[test]
fn zero_batch_size() {
    config_error(
        "batch",
        "job = \"fashion-mlp\"\nbatch_size = 0\n[sgd]\nlr = 1e-3\n",
        "batch_size = 0",
    );
}

#[test]
fn non_positive_learning_rate() {
    config_error(
        "lr",
        "job = \"tabular-mlp\"\n[adam]\nlr = 0.0\n",
        "adam.lr = 0",
    );
    config_error(
        "lr-neg",
        "job = \"fashion-mlp\"\n[sgd]\nlr = -0.1\n",
        "sgd.lr = -0.1",
    );
}

#[test]
fn missing_config_file() {
    let dir = scratch("bad-missing-config");
    let out = dir.join("run");
    bad_input(
        &train(&dir.join("nope.toml"), &out, &[]),
        "nope.toml: no such file or directory",
    );
}

#[test]
fn missing_data_folder() {
    config_error(
        "datadir",
        "job = \"fashion-mlp\"\n[data]\ndir = \"/nonexistent/fmnist\"\n[sgd]\nlr = 1e-3\n",
        "/nonexistent/fmnist: train-images-idx3-ubyte(.gz) not found",
    );
}

#[test]
fn corrupt_and_truncated_idx_files() {
    let src = Path::new("/usr/share/datasets/fashion-mnist");
    let dir = scratch("bad-idx");
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    for f in [
        "train-images-idx3-ubyte.gz",
        "train-labels-idx1-ubyte.gz",
        "t10k-images-idx3-ubyte.gz",
        "t10k-labels-idx1-ubyte.gz",
    ] {
        std::fs::copy(src.join(f), data.join(f)).expect("FashionMNIST is installed (make data)");
    }
    let cfg = config(
        &dir,
        "job.toml",
        &format!(
            "job = \"fashion-mlp\"\n[data]\ndir = \"{}\"\n[sgd]\nlr = 1e-3\n",
            data.display()
        ),
    );
    // A truncated gzip stream.
    let labels = data.join("t10k-labels-idx1-ubyte.gz");
    let bytes = std::fs::read(&labels).unwrap();
    std::fs::write(&labels, &bytes[..bytes.len() / 2]).unwrap();
    let out = dir.join("run");
    bad_input(
        &train(&cfg, &out, &[]),
        "t10k-labels-idx1-ubyte.gz: corrupt or truncated gzip data",
    );
    assert!(!out.exists());
    // An uncompressed file that is not IDX at all.
    std::fs::remove_file(&labels).unwrap();
    std::fs::write(data.join("t10k-labels-idx1-ubyte"), b"hello, world").unwrap();
    bad_input(
        &train(&cfg, &out, &[]),
        "t10k-labels-idx1-ubyte: not an IDX file",
    );
    assert!(!out.exists());
}

#[test]
fn csv_with_a_short_row_or_a_word() {
    let dir = scratch("bad-csv");
    let short = config(&dir, "short.csv", "a,b,label\n1,2,0\n3,4\n");
    let word = config(&dir, "word.csv", "a,b,label\n1,2,0\n3,four,1\n");
    // CRLF line ends (Excel, Python's csv module) and a blank line before the bad row: the
    // line named is still the file's own (the csv crate's count is one short after either).
    let crlf = config(
        &dir,
        "crlf.csv",
        "a,b,label\r\n1,2,0\r\n\r\n5,6,1\r\n3,four,1\r\n",
    );
    let blank = config(&dir, "blank.csv", "a,b,label\n1,2,0\n\n3,four,1\n");
    for (file, needle) in [
        (
            &short,
            "short.csv: line 3: 2 fields, but the header has 3".to_string(),
        ),
        (
            &word,
            "word.csv: line 3: column \"b\" holds \"four\", not a finite number".to_string(),
        ),
        (
            &crlf,
            "crlf.csv: line 5: column \"b\" holds \"four\", not a finite number".to_string(),
        ),
        (
            &blank,
            "blank.csv: line 4: column \"b\" holds \"four\", not a finite number".to_string(),
        ),
    ] {
        let cfg = config(
            &dir,
            "job.toml",
            &format!(
                "job = \"tabular-mlp\"\n[data]\ncsv = \"{}\"\n[adam]\nlr = 1e-3\n",
                file.display()
            ),
        );
        let out = dir.join("run");
        bad_input(&train(&cfg, &out, &[]), &needle);
        assert!(!out.exists());
    }
}

#[test]
fn cuda_requested_where_there_is_none() {
    let dir = scratch("bad-cuda");
    let cfg = config(&dir, "job.toml", MINIMAL_FASHION);
    let out = dir.join("run");
    let o = ember(&[
        "train",
        path_str(&cfg),
        "--device",
        "cuda",
        "--out",
        path_str(&out),
    ]);
    if ember::device::cuda_devices().is_ok_and(|d| !d.is_empty()) {
        eprintln!("skipped: this machine has a CUDA device");
        return;
    }
    bad_input(&o, "--device cuda:");
    assert!(!out.exists());
}

#[test]
fn a_bad_device_name_is_a_usage_error() {
    let o = ember(&["train", "configs/fashion-mlp.toml", "--device", "gpu"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("\"gpu\" is not a device"),
        "{}",
        stderr(&o)
    );
}

/// `VK_ICD_FILENAMES` naming no driver leaves the Vulkan loader with no device, as on a machine
/// without one: a one-line error, never cubecl-wgpu's panic.
#[test]
fn wgpu_requested_where_no_adapter_answers() {
    let dir = scratch("bad-wgpu");
    let cfg = config(&dir, "job.toml", MINIMAL_FASHION);
    let out = dir.join("run");
    let o = std::process::Command::new(bin())
        .args([
            "train",
            path_str(&cfg),
            "--device",
            "wgpu",
            "--out",
            path_str(&out),
        ])
        .current_dir(root())
        .env("VK_ICD_FILENAMES", dir.join("no-such-driver.json"))
        .output()
        .unwrap();
    bad_input(&o, "no wgpu adapter found");
    assert!(!out.exists());
}

#[test]
fn a_wgpu_row_past_the_adapter_list_is_a_one_line_error() {
    let dir = scratch("bad-wgpu-row");
    let cfg = config(&dir, "job.toml", MINIMAL_FASHION);
    for command in ["train", "bench"] {
        let o = ember(&[command, path_str(&cfg), "--device", "wgpu:99"]);
        bad_input(&o, "--device wgpu:99");
    }
}

/// A run whose `config.toml` was edited after training no longer fits its model file: `eval`
/// says so in one line, for the final model and a checkpoint, where Burn's loading would stop
/// the process (other counts of layers) or take the file's shapes over the config's.
#[test]
fn a_model_that_does_not_fit_its_edited_config_is_refused() {
    let dir = scratch("bad-unfit");
    let rows: String = (0..40)
        .map(|i| format!("{},{},{}\n", i % 7, i % 5, i % 2))
        .collect();
    let csv = config(&dir, "t.csv", &format!("a,b,label\n{rows}"));
    let text = format!(
        "task = \"binary\"\nepochs = 1\n[data]\ncsv = \"{}\"\nlabel = \"label\"\n\
         [model]\nhidden = [8, 8]\n[adam]\nlr = 1e-3\n",
        csv.display()
    );
    let run = dir.join("run");
    ok(&train(&config(&dir, "job.toml", &text), &run, &[]));
    let saved = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(saved.contains("hidden = [8, 8]"), "{saved}");
    for (hidden, needle) in [
        (
            "[8]",
            "the model file has 3 layers where the config (model.hidden, and the data's inputs \
             and outputs) gives 2",
        ),
        (
            "[8, 4]",
            "the model file's layer 2 is [8, 8] where the config",
        ),
    ] {
        let edited = saved.replace("hidden = [8, 8]", &format!("hidden = {hidden}"));
        std::fs::write(run.join("config.toml"), edited).unwrap();
        for extra in [&[][..], &["--epoch", "1"]] {
            let mut args = vec!["eval", path_str(&run), "--device", "cpu"];
            args.extend_from_slice(extra);
            bad_input(&ember(&args), needle);
        }
        // The safetensors export beside the same config: refused by the tensor's name.
        let exported = run.join("model.safetensors");
        let config = run.join("config.toml");
        let (exported, config) = (path_str(&exported), path_str(&config));
        let o = ember(&["eval", exported, "--config", config, "--device", "cpu"]);
        bad_input(
            &o,
            "model.safetensors: does not fit this model in pytorch layout: ",
        );
        assert!(stderr(&o).contains("Shape mismatch for"), "{}", stderr(&o));
    }
}
