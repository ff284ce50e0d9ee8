//! Convolutional networks from `[[model.conv]]`, end to end through the CLI on FashionMNIST:
//! they learn, batch norm's running statistics survive a SIGKILL and resume bit for bit, eval
//! and predict use them, sweeps train them as processes, and bad shapes get one line.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Two blocks (the second with batch norm), flattened, a hidden layer of 32: about 10 s an
/// epoch on 2,048 images on two cores.
fn small_cnn(dir: &Path, extra: &str) -> PathBuf {
    config(
        dir,
        "cnn.toml",
        &format!(
            "task = \"classification\"\nseed = 3\nepochs = 3\nbatch_size = 64\nshuffle = true\n\
             max_train_rows = 2048\nmax_valid_rows = 500\n{extra}\
             [data]\nsource = \"idx\"\ninput_scale = \"unit\"\nvalid_fraction = 0.1\n\
             [model]\nhidden = [32]\npooling = \"flatten\"\n\
             [[model.conv]]\nchannels = 8\npool = 2\n\
             [[model.conv]]\nchannels = 16\nbatch_norm = true\npool = 2\n\
             [adam]\nlr = 3e-3\n"
        ),
    )
}

#[test]
fn a_small_cnn_learns_and_eval_and_predict_use_its_batch_norm_statistics() {
    let dir = scratch("cnn-learns");
    let cfg = small_cnn(&dir, "");
    let run = dir.join("run");
    let o = train_on_cpu(&cfg, &run, &[]);
    ok(&o);
    let s = summary(&run);
    let acc = s["final_metrics"]["valid_accuracy"].as_f64().unwrap();
    // The majority class is 10 %; a linear model on 2,048 images reaches about 75 %.
    assert!(acc > 0.7, "valid accuracy {acc}");
    let resolved = std::fs::read_to_string(run.join("config.toml")).unwrap();
    for line in [
        "image = [1, 28, 28]",
        "pooling = \"flatten\"",
        "[[model.conv]]",
    ] {
        assert!(resolved.contains(line), "{line} not in\n{resolved}");
    }
    assert!(resolved.contains("batch_norm = false") && resolved.contains("padding = 1"));

    // eval on the validation split gives training's last validation loss: the running
    // statistics, not the batch's, normalise it (as in training's validation pass).
    let o = ember(&["eval", path_str(&run), "--json", "--device", "cpu"]);
    ok(&o);
    let eval: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let (got, want) = (
        eval["loss"].as_f64().unwrap(),
        s["final_metrics"]["valid_loss"].as_f64().unwrap(),
    );
    assert!(
        (got - want).abs() < 1e-4 * want.abs(),
        "eval {got}, training {want}"
    );

    // predict on a few test images as a CSV of pixels; the same rows twice give one answer
    // each: inference never updates the statistics.
    let input = dir.join("pixels.csv");
    pixels_csv(&input, 6);
    let predict = |out: &Path| {
        let o = ember(&[
            "predict",
            path_str(&run),
            "--input",
            path_str(&input),
            "--out",
            path_str(out),
            "--device",
            "cpu",
        ]);
        ok(&o);
        std::fs::read_to_string(out).unwrap()
    };
    let first = predict(&dir.join("p1.csv"));
    assert_eq!(first, predict(&dir.join("p2.csv")));
    assert_eq!(first.lines().count(), 7, "{first}");
    assert!(first.starts_with("class,p0,"), "{first}");

    // The batch norm (module 4 of the nn.Sequential) counts its 3 epochs of 32 batches.
    let bytes = std::fs::read(run.join("model.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let count = st.tensor("net.4.num_batches_tracked").unwrap();
    assert_eq!(
        (count.dtype(), count.shape()),
        (safetensors::Dtype::I64, &[][..])
    );
    assert_eq!(i64::from_le_bytes(count.data().try_into().unwrap()), 3 * 32);
    numpy_forward_matches(&run, &input, &dir.join("p1.csv"));
}

/// tests/numpy_forward.py's `cnn` check of a run's model.safetensors: the names, shapes and
/// dtypes of the printed nn.Sequential's state_dict, and its forward pass against `predicted`.
fn numpy_forward_matches(run: &Path, input: &Path, predicted: &Path) {
    let what = "the numpy forward pass of a CNN's model.safetensors";
    let Some(python) = test_python(&["numpy", "safetensors"], what) else {
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/numpy_forward.py");
    let o = std::process::Command::new(python)
        .args([path_str(&script), "check", "cnn"])
        .args([run.join("model.safetensors"), run.join("config.toml")])
        .args([input, predicted])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    eprint!("{}", stdout(&o));
}

/// `rows` rows of 784 pixel columns (0..255), patterned.
fn pixels_csv(path: &Path, rows: usize) {
    let header: Vec<String> = (0..784).map(|i| format!("px{i}")).collect();
    let mut text = header.join(",") + "\n";
    for r in 0..rows {
        let cells: Vec<String> = (0..784)
            .map(|i| ((i * 7 + r * 31) % 256).to_string())
            .collect();
        text += &(cells.join(",") + "\n");
    }
    std::fs::write(path, text).unwrap();
}

/// With augmentation on, so that the resumed steps must also draw the same shifts and flips.
#[test]
fn a_cnn_with_batch_norm_resumes_bit_for_bit_after_sigkill() {
    let dir = scratch("cnn-resume");
    let cfg = small_cnn(&dir, "");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, text + "[model.augment]\ncrop_padding = 2\n").unwrap();
    let cfg = path_str(&cfg);
    let args = |out: &str| -> Vec<String> {
        let mut a: Vec<String> = ["train", cfg, "--out", out, "-q", "--checkpoint-every", "0"]
            .map(String::from)
            .to_vec();
        a.extend(["--device", "cpu"].map(String::from));
        a
    };
    let reference = dir.join("reference");
    let a = args(path_str(&reference));
    ok(&ember(&a.iter().map(String::as_str).collect::<Vec<_>>()));
    let expected = std::fs::read(reference.join("model.mpk")).unwrap();

    let killed = dir.join("killed");
    let a = args(path_str(&killed));
    let child = spawn(&a.iter().map(String::as_str).collect::<Vec<_>>());
    // Half an epoch of the reference run after epoch 1's checkpoint: in epoch 2 however fast
    // the machine (a fixed wait outlasted the whole run once the CNN got faster).
    let settle =
        Duration::from_secs_f64(metric(&reference, "seconds", |r| r[..2] == ["2", "train"]) / 2.0);
    kill_mid_epoch(child, &killed, 1, Duration::from_secs(180), settle);
    ok(&resume_on_cpu(&killed));
    // model.mpk holds the running statistics beside the weights.
    assert!(std::fs::read(killed.join("model.mpk")).unwrap() == expected);
    assert_eq!(losses(&killed), losses(&reference));
    let resolved = std::fs::read_to_string(reference.join("config.toml")).unwrap();
    assert!(
        resolved.contains("[model.augment]\ncrop_padding = 2\nflip = true"),
        "{resolved}"
    );
}

/// 100 FashionMNIST test images a class as PNG class folders, for `init --images`.
fn fashion_png_folders(dir: &Path) -> PathBuf {
    use ember::data::idx::{read_images, read_labels};
    let fashion = ember::data::fashion::locate(None).expect("FashionMNIST (make data)");
    let images = read_images(&fashion.join("t10k-images-idx3-ubyte.gz")).unwrap();
    let labels = read_labels(&fashion.join("t10k-labels-idx1-ubyte.gz"), 10).unwrap();
    let folder = dir.join("png");
    let mut written = [0; 10];
    for (i, &label) in labels.iter().enumerate().take(images.count) {
        let class = label as usize;
        if written[class] == 100 {
            continue;
        }
        written[class] += 1;
        let class_dir = folder.join(class.to_string());
        std::fs::create_dir_all(&class_dir).unwrap();
        let file = std::fs::File::create(class_dir.join(format!("{i:05}.png"))).unwrap();
        let mut png = png::Encoder::new(std::io::BufWriter::new(file), 28, 28);
        png.set_color(png::ColorType::Grayscale);
        png.write_header()
            .unwrap()
            .write_image_data(&images.pixels[i * 784..(i + 1) * 784])
            .unwrap();
    }
    folder
}

/// `init --images` on 28x28 images drafts two convolution blocks and offers augmentation
/// (800 training images); the draft, augmentation uncommented, trains and learns.
#[test]
fn init_drafts_a_cnn_for_images_of_16_pixels_or_more() {
    let dir = scratch("cnn-init");
    let folder = fashion_png_folders(&dir);
    let o = ember(&["init", "--images", path_str(&folder)]);
    ok(&o);
    let why = stderr(&o);
    assert!(
        why.contains(
            "a convolutional network: the images are at least 16 pixels on a side; 2 block(s)"
        ),
        "{why}"
    );
    assert!(why.contains("[model.augment] is offered"), "{why}");
    let draft = stdout(&o)
        .replace("# [model.augment]", "[model.augment]")
        .replace("# crop_padding", "crop_padding")
        .replace("# flip", "flip");
    let cfg = config(&dir, "drafted.toml", &draft);
    let run = dir.join("run");
    ok(&train_on_cpu(&cfg, &run, &["--epochs", "4"]));
    let acc = summary(&run)["final_metrics"]["valid_accuracy"]
        .as_f64()
        .unwrap();
    // 10 classes of 80 training images each: chance is 10 %.
    assert!(acc > 0.6, "valid accuracy {acc}");
    let resolved = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(resolved.contains("[model.augment]") && resolved.contains("[[model.conv]]"));
}

#[test]
fn a_sweep_trains_cnn_trials_as_processes() {
    let dir = scratch("cnn-sweep");
    let base = small_cnn(&dir, "");
    let sweep = config(
        &dir,
        "sweep.toml",
        &format!(
            "base = \"{}\"\nseeds = [1, 2]\n[grid]\n\"adam.lr\" = [1e-3]\n",
            base.display()
        ),
    );
    let o = ember(&["sweep", "plan", path_str(&sweep)]);
    ok(&o);
    let plan = stdout(&o);
    assert!(
        plan.contains(
            "processes (replicas are MLPs; a convolutional network trains one per process)"
        ),
        "{plan}"
    );
}

#[test]
fn bad_convolutions_get_one_line() {
    let dir = scratch("cnn-bad");
    let cases = [
        (
            "[[model.conv]]\nchannels = 0\n",
            "model.conv[0].channels = 0 must be at least 1",
        ),
        (
            "[[model.conv]]\nkernel = 29\npadding = 0\n",
            "model.conv[0]: a 29x29 kernel with padding 0 does not fit the 28x28 images",
        ),
        (
            "[[model.conv]]\npool = 4\n[[model.conv]]\npool = 4\n[[model.conv]]\npool = 4\n",
            "model.conv[2]: pool = 4 is larger than the 1x1 maps",
        ),
        ("[[model.conv]]\nstrides = 2\n", "unknown field `strides`"),
        (
            "inputs = 784\n[[model.conv]]\n",
            "model.inputs = 784 without model.image",
        ),
        (
            "inputs = 784\nimage = [1, 28, 27]\n[[model.conv]]\n",
            "model.image = [1, 28, 27] holds 756 values, but model.inputs = 784",
        ),
        (
            "[model.augment]\nflip = true\n",
            "model.augment is not used without [[model.conv]] blocks",
        ),
        (
            "[[model.conv]]\n[model.augment]\ncrop_padding = 28\n",
            "model.augment.crop_padding = 28 must be smaller than the 28x28 images' sides",
        ),
        (
            "[[model.conv]]\n[model.augment]\ncrop_padding = 0\nflip = false\n",
            "model.augment with crop_padding = 0 and flip = false changes nothing",
        ),
        (
            "[[model.conv]]\n[model.augment]\nmirror = true\n",
            "unknown field `mirror`",
        ),
    ];
    for (i, (blocks, needle)) in cases.iter().enumerate() {
        let text = format!(
            "task = \"classification\"\nmax_train_rows = 256\n[data]\nsource = \"idx\"\n\
             [model]\nhidden = []\n{blocks}[sgd]\nlr = 0.1\n"
        );
        let cfg = config(&dir, &format!("bad{i}.toml"), &text);
        let out = dir.join(format!("run{i}"));
        bad_input(&train_on_cpu(&cfg, &out, &[]), needle);
        assert!(!out.exists(), "a run folder for case {i}");
    }
    let table = config(
        &dir,
        "table.toml",
        "task = \"classification\"\n[data]\ncsv = \"examples/wine.csv\"\nlabel = \"cultivar\"\n\
         [model]\nhidden = []\n[[model.conv]]\n[sgd]\nlr = 0.1\n",
    );
    bad_input(
        &train_on_cpu(&table, &dir.join("table-run"), &[]),
        "model.conv: convolutions need images",
    );
}

#[test]
fn a_preset_or_images_of_another_shape_get_one_line() {
    let dir = scratch("cnn-shapes");
    let preset = config(
        &dir,
        "preset.toml",
        "job = \"fashion-mlp\"\n[[model.conv]]\n[sgd]\nlr = 0.1\n",
    );
    bad_input(
        &train_on_cpu(&preset, &dir.join("preset-run"), &[]),
        "model.conv is not used by the fashion-mlp job",
    );
    let cfg = small_cnn(&dir, "");
    let run = dir.join("run");
    ok(&train_on_cpu(
        &cfg,
        &run,
        &["--epochs", "1", "--max-train-rows", "256"],
    ));
    // IDX files of 14x56 images: as many pixels as 28x28, another shape.
    let other = dir.join("wide");
    std::fs::create_dir_all(&other).unwrap();
    let pixels: Vec<u8> = (0..20 * 784).map(|i| (i % 251) as u8).collect();
    let labels: Vec<u8> = (0..20).map(|i| (i % 10) as u8).collect();
    for split in ["train", "t10k"] {
        let images = ember::data::idx::encode(&[20, 14, 56], &pixels);
        std::fs::write(other.join(format!("{split}-images-idx3-ubyte")), images).unwrap();
        let labels = ember::data::idx::encode(&[20], &labels);
        std::fs::write(other.join(format!("{split}-labels-idx1-ubyte")), labels).unwrap();
    }
    let eval = ember(&[
        "eval",
        path_str(&run),
        "--data",
        path_str(&other),
        "--device",
        "cpu",
    ]);
    bad_input(&eval, "images of 14x56; the model takes 28x28");
    let narrow = dir.join("narrow.csv");
    std::fs::write(&narrow, "a,b\n1,2\n").unwrap();
    let args = [
        "predict",
        path_str(&run),
        "--input",
        path_str(&narrow),
        "--device",
        "cpu",
    ];
    bad_input(&ember(&args), "rows of 2 values; the model takes 784");
}
