//! Your own model on your own data, end to end through the CLI: each task on each source, on
//! small data the tests generate with a known answer.

mod common;

use common::{Lcg, bad_input, config, ember, last_valid, ok, path_str, scratch, stdout};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

const ANIMALS: [&str; 3] = ["emu", "cat", "dog"];

/// Three separable blobs in two columns, labelled by name, with an id column to ignore.
fn blobs(path: &Path, rows: usize, seed: u64) {
    let mut rng = Lcg(seed);
    let centres = [(0.0, 0.0), (6.0, 6.0), (0.0, 6.0)];
    let mut text = String::from("id,x1,kind,x2\n");
    for i in 0..rows {
        let c = i % 3;
        let x1 = centres[c].0 + 2.0 * rng.next() - 1.0;
        let x2 = centres[c].1 + 2.0 * rng.next() - 1.0;
        writeln!(text, "{},{x1:.4},{},{x2:.4}", 1000 + i, ANIMALS[c]).unwrap();
    }
    std::fs::write(path, text).unwrap();
}

fn train(cfg: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    common::train_on_cpu(cfg, out, extra)
}

#[test]
fn string_classes_from_a_csv_train_evaluate_and_predict_by_name() {
    let dir = scratch("own-blobs");
    let (data, test) = (dir.join("blobs.csv"), dir.join("test.csv"));
    blobs(&data, 600, 1);
    blobs(&test, 150, 2);
    let cfg = config(
        &dir,
        "blobs.toml",
        &format!(
            "task = \"classification\"\nepochs = 15\nbatch_size = 32\nshuffle = true\n\
             [data]\ncsv = \"{}\"\nlabel = \"kind\"\nignore = [\"id\"]\ntest_csv = \"{}\"\n\
             valid_fraction = 0.2\nstandardize = true\n\
             [model]\nhidden = [16]\nactivation = \"tanh\"\n[adam]\nlr = 0.02\n",
            data.display(),
            test.display()
        ),
    );
    let run = dir.join("run");
    ok(&train(&cfg, &run, &[]));
    let acc = last_valid(&run, "accuracy");
    assert!(acc >= 0.95, "valid accuracy {acc}");
    let resolved = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(
        resolved.contains("classes = [\"cat\", \"dog\", \"emu\"]"),
        "{resolved}"
    );
    assert!(
        resolved.contains("features = [\"x1\", \"x2\"]"),
        "{resolved}"
    );

    let eval = ember(&["eval", path_str(&run), "--split", "test", "--device", "cpu"]);
    ok(&eval);
    let line = stdout(&eval);
    assert!(
        line.contains("mlp test:") && line.contains("(150 rows"),
        "{line}"
    );
    let acc: f64 = line
        .split("accuracy ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(acc >= 95.0, "{line}");

    // The job file as written cannot rebuild the model: it lacks what the data decided.
    let model = run.join("model.mpk");
    let unresolved = ember(&[
        "eval",
        path_str(&model),
        "--config",
        path_str(&cfg),
        "--device",
        "cpu",
    ]);
    bad_input(&unresolved, "is not a run's resolved config");
    let other = ember(&[
        "eval",
        path_str(&run),
        "--data",
        path_str(&test),
        "--device",
        "cpu",
    ]);
    ok(&other);
    assert!(stdout(&other).contains("(150 rows"), "{}", stdout(&other));

    let predicted = dir.join("predicted.csv");
    ok(&ember(&[
        "predict",
        path_str(&run),
        "--input",
        path_str(&test),
        "--out",
        path_str(&predicted),
        "--device",
        "cpu",
    ]));
    let text = std::fs::read_to_string(&predicted).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("class,p_cat,p_dog,p_emu"));
    let right = lines
        .zip((0..).map(|i| ANIMALS[i % 3]))
        .filter(|(l, want)| l.split(',').next() == Some(*want))
        .count();
    assert!(right >= 143, "{right} of 150 predicted right");
}

#[test]
fn binary_labels_are_strings_and_the_second_sorted_is_positive() {
    let dir = scratch("own-binary");
    let mut rng = Lcg(7);
    let mut text = String::from("a,b,answer\n");
    for i in 0..800 {
        let yes = i % 2 == 1;
        let shift = if yes { 3.0 } else { -3.0 };
        let (a, b) = (shift + 2.0 * rng.next() - 1.0, 2.0 * rng.next() - 1.0);
        writeln!(text, "{a:.4},{b:.4},{}", if yes { "yes" } else { "no" }).unwrap();
    }
    let data = config(&dir, "yes-no.csv", &text);
    let cfg = config(
        &dir,
        "binary.toml",
        &format!(
            "task = \"binary\"\nepochs = 10\nbatch_size = 64\n[data]\ncsv = \"{}\"\nlabel = \"answer\"\n\
             [model]\nhidden = [8, 8]\nactivation = \"gelu\"\n[sgd]\nlr = 0.1\nmomentum = 0.5\n",
            data.display()
        ),
    );
    let run = dir.join("run");
    ok(&train(&cfg, &run, &[]));
    assert!(last_valid(&run, "accuracy") >= 0.95);
    let input = config(&dir, "ask.csv", "b,a\n0.0,3.1\n0.2,-2.9\n");
    let out = ember(&[
        "predict",
        path_str(&run),
        "--input",
        path_str(&input),
        "--device",
        "cpu",
    ]);
    ok(&out);
    let text = stdout(&out);
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(rows[0], ["probability", "label"]);
    assert_eq!((rows[1][1], rows[2][1]), ("yes", "no"), "{text}");
    let p: f64 = rows[1][0].parse().unwrap();
    assert!(p > 0.5, "{text}");
}

#[test]
fn a_linear_target_reaches_r2_above_095_with_mae_reported() {
    let dir = scratch("own-regression");
    let mut rng = Lcg(11);
    let mut text = String::from("u,v,w,y1,y2\n");
    for _ in 0..1000 {
        let (u, v, w) = (rng.next() * 4.0 - 2.0, rng.next() * 4.0 - 2.0, rng.next());
        let noise = 0.05 * (rng.next() - 0.5);
        let (y1, y2) = (3.0 * u - 2.0 * v + 1.0 + noise, 0.5 * u + w + noise);
        writeln!(text, "{u:.5},{v:.5},{w:.5},{y1:.5},{y2:.5}").unwrap();
    }
    let data = config(&dir, "linear.csv", &text);
    let cfg = config(
        &dir,
        "regression.toml",
        &format!(
            "task = \"regression\"\nepochs = 20\nbatch_size = 32\nshuffle = true\n\
             [data]\ncsv = \"{}\"\ntargets = [\"y1\", \"y2\"]\n\
             [model]\nhidden = []\n[adam]\nlr = 0.05\n",
            data.display()
        ),
    );
    let run = dir.join("run");
    ok(&train(&cfg, &run, &[]));
    let r2 = last_valid(&run, "r2");
    let mae = last_valid(&run, "mae");
    assert!(r2 >= 0.95, "R² {r2}");
    assert!(mae > 0.0 && mae < 0.2, "MAE {mae}");
    let input = config(&dir, "x.csv", "u,v,w\n1.0,1.0,0.5\n");
    let out = ember(&[
        "predict",
        path_str(&run),
        "--input",
        path_str(&input),
        "--device",
        "cpu",
    ]);
    ok(&out);
    let text = stdout(&out);
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows[0], "y1,y2");
    let y: Vec<f64> = rows[1].split(',').map(|v| v.parse().unwrap()).collect();
    assert!(
        (y[0] - 2.0).abs() < 0.3 && (y[1] - 1.0).abs() < 0.3,
        "{text}"
    );
}

/// Writes IDX files of 6x6 images: class c lights row c (of 4 classes), with noise.
fn idx_folder(dir: &Path) -> PathBuf {
    let folder = dir.join("idx");
    std::fs::create_dir_all(&folder).unwrap();
    let mut rng = Lcg(5);
    for (stem, count) in [("train", 400usize), ("t10k", 100)] {
        let mut images = vec![0u8, 0, 8, 3, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 6];
        images[4..8].copy_from_slice(&(count as u32).to_be_bytes());
        let mut labels = vec![0u8, 0, 8, 1];
        labels.extend_from_slice(&(count as u32).to_be_bytes());
        for i in 0..count {
            let class = (i % 4) as u8;
            for p in 0..36 {
                let lit = p / 6 == usize::from(class);
                let noise = (rng.next() * 60.0) as u8;
                images.push(if lit { 200 - noise } else { noise });
            }
            labels.push(class + 3); // labels 3..6: classes come from the labels
        }
        std::fs::write(folder.join(format!("{stem}-images-idx3-ubyte")), images).unwrap();
        std::fs::write(folder.join(format!("{stem}-labels-idx1-ubyte")), labels).unwrap();
    }
    folder
}

#[test]
fn idx_files_of_any_size_hold_out_validation_and_keep_the_test_files() {
    let dir = scratch("own-idx");
    let folder = idx_folder(&dir);
    let cfg = config(
        &dir,
        "idx.toml",
        &format!(
            "task = \"classification\"\nepochs = 8\nbatch_size = 16\n[data]\ndir = \"{}\"\n\
             valid_fraction = 0.25\n[model]\nhidden = [12]\nactivation = \"sigmoid\"\n[adam]\nlr = 0.01\n",
            folder.display()
        ),
    );
    let run = dir.join("run");
    ok(&train(&cfg, &run, &[]));
    assert!(last_valid(&run, "accuracy") >= 0.95);
    let resolved = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(
        resolved.contains("classes = [\"3\", \"4\", \"5\", \"6\"]"),
        "{resolved}"
    );
    assert!(resolved.contains("inputs = 36"), "{resolved}");
    for (split, rows) in [
        ("valid", "(100 rows"),
        ("test", "(100 rows"),
        ("train", "(300 rows"),
    ] {
        let out = ember(&["eval", path_str(&run), "--split", split, "--device", "cpu"]);
        ok(&out);
        assert!(stdout(&out).contains(rows), "{split}: {}", stdout(&out));
    }
}

#[test]
fn dropout_masks_come_from_seed_epoch_and_step_so_resume_is_bit_exact() {
    let dir = scratch("own-dropout");
    let data = dir.join("blobs.csv");
    blobs(&data, 300, 3);
    let job = |dropout: f64| {
        format!(
            "task = \"classification\"\nepochs = 4\nbatch_size = 16\nshuffle = true\n\
             [data]\ncsv = \"{}\"\nlabel = \"kind\"\nignore = [\"id\"]\n\
             [model]\nhidden = [32, 32]\ndropout = {dropout}\n[sgd]\nlr = 0.05\n",
            data.display()
        )
    };
    let cfg = config(&dir, "dropout.toml", &job(0.3));
    let (whole, split) = (dir.join("whole"), dir.join("split"));
    ok(&train(&cfg, &whole, &[]));
    ok(&train(&cfg, &split, &["--epochs", "2"]));
    ok(&ember(&[
        "train",
        "--resume",
        path_str(&split),
        "--epochs",
        "4",
        "--device",
        "cpu",
        "--threads",
        "2",
        "--quiet",
    ]));
    let losses = |run: &Path| -> Vec<String> {
        let text = std::fs::read_to_string(run.join("metrics.csv")).unwrap();
        text.lines()
            .skip(1)
            .map(|l| l.split(',').nth(2).unwrap().to_string())
            .collect()
    };
    assert_eq!(losses(&whole), losses(&split));
    let bytes = |run: &Path| std::fs::read(run.join("model.safetensors")).unwrap();
    assert_eq!(bytes(&whole), bytes(&split), "the resumed weights differ");
    // The masks are real: without dropout the same run trains differently.
    let plain = dir.join("plain");
    ok(&train(&config(&dir, "plain.toml", &job(0.0)), &plain, &[]));
    assert_ne!(losses(&whole)[0], losses(&plain)[0]);
}

#[test]
fn bad_own_data_gets_one_line_naming_the_file_and_value() {
    let dir = scratch("own-bad");
    let data = config(
        &dir,
        "train.csv",
        "a,b,y\n1,2,cat\n3,4,dog\n5,6,cat\n7,8,dog\n",
    );
    let mut made = 0;
    let mut job = |extra_data: &str, model: &str, top: &str| {
        made += 1;
        config(
            &dir,
            &format!("job-{made}.toml"),
            &format!(
                "task = \"classification\"\n{top}[data]\ncsv = \"{}\"\nlabel = \"y\"\n{extra_data}\
                 [model]\n{model}[adam]\nlr = 0.01\n",
                data.display()
            ),
        )
    };
    let out = dir.join("run");
    let unseen = config(&dir, "valid.csv", "a,b,y\n1,2,cat\n3,4,emu\n");
    let cases: Vec<(PathBuf, String)> = vec![
        (
            job(
                &format!("valid_csv = \"{}\"\n", unseen.display()),
                "hidden = [4]\n",
                "",
            ),
            "valid.csv: line 3: label \"emu\" is not one of the training classes (cat, dog)".into(),
        ),
        (
            job(
                &format!(
                    "test_csv = \"{}\"\n",
                    config(&dir, "test.csv", "a,b,y\n1,x,cat\n").display()
                ),
                "hidden = [4]\n",
                "",
            ),
            "test.csv: line 2: column \"b\" holds \"x\", not a finite number".into(),
        ),
        (
            job("", "hidden = [4, 0]\n", ""),
            "model.hidden = [4, 0] holds a width of 0".into(),
        ),
        (
            job("", "hidden = [4]\nactivation = \"swish\"\n", ""),
            "unknown variant `swish`".into(),
        ),
        (
            job("", "hidden = [4]\n", "batch_size = 64\ndrop_last = true\n"),
            "batch_size = 64 is larger than the 3 training rows, and drop_last = true".into(),
        ),
    ];
    let empty = config(&dir, "empty.csv", "a,b,y\n");
    let more: Vec<(PathBuf, String)> = vec![
        (
            job(
                &format!("valid_csv = \"{}\"\n", empty.display()),
                "hidden = [4]\n",
                "",
            ),
            "empty.csv: no data rows, only a header".into(),
        ),
        (
            config(
                &dir,
                "idx-regression.toml",
                "task = \"regression\"\n[data]\ndir = \"somewhere\"\n[model]\nhidden = []\n[sgd]\nlr = 0.1\n",
            ),
            "task = \"regression\": an idx source gives classes".into(),
        ),
        (
            config(
                &dir,
                "ls-targets.toml",
                &format!(
                    "job = \"linear-scalar\"\n[data]\ncsv = \"{}\"\ntargets = [\"a\", \"b\"]\n[adam]\nlr = 0.01\n",
                    data.display()
                ),
            ),
            "the linear-scalar job predicts one target".into(),
        ),
        (
            job(
                "",
                "hidden = [4]\n",
                "epochs = 2\n[schedule]\nkind = \"warmup-cosine\"\nwarmup_epochs = 2\n",
            ),
            "schedule.warmup_epochs = 2 must be shorter than the schedule (2 epochs".into(),
        ),
    ];
    for (cfg, needle) in cases.into_iter().chain(more) {
        bad_input(&train(&cfg, &out, &[]), &needle);
        assert!(!out.exists(), "{needle}: a run folder was left");
    }
    let nan = config(&dir, "nan.csv", "a,y\n1,0.5\n2,nan\n3,1.5\n");
    let cfg = config(
        &dir,
        "nan.toml",
        &format!(
            "task = \"regression\"\n[data]\ncsv = \"{}\"\nlabel = \"y\"\n[model]\nhidden = []\n[adam]\nlr = 0.01\n",
            nan.display()
        ),
    );
    bad_input(
        &train(&cfg, &out, &[]),
        "nan.csv: line 3: column \"y\" holds \"nan\"",
    );
}

#[test]
fn init_drafts_a_job_file_that_trains_on_the_users_csv() {
    let dir = scratch("own-init");
    let blobs_csv = dir.join("blobs.csv");
    blobs(&blobs_csv, 900, 4);
    // A text column different in every row, which init must leave out of the inputs.
    let text = std::fs::read_to_string(&blobs_csv).unwrap();
    let named: String = text
        .lines()
        .enumerate()
        .map(|(i, l)| match i {
            0 => format!("{l},name\n"),
            _ => format!("{l},row-{i}\n"),
        })
        .collect();
    let data = config(&dir, "named.csv", &named);
    let out = ember(&["init", "--csv", path_str(&data), "--label", "kind"]);
    ok(&out);
    let why = common::stderr(&out);
    assert_eq!(
        why.lines().last().unwrap(),
        "inferred task = \"classification\": \"kind\" holds text: 3 classes (cat, dog, emu)"
    );
    let job = stdout(&out);
    assert!(
        job.contains("name = \"ignore\"  # an ID or a name: different text in every row"),
        "{job}"
    );
    assert!(job.contains("batch_size = 16"), "{job}");
    let cfg = config(&dir, "drafted.toml", &job);
    let run = dir.join("run");
    ok(&train(&cfg, &run, &[]));
    assert!(last_valid(&run, "accuracy") >= 0.95);

    let y = config(&dir, "reg.csv", "a,y\n1,0.5\n2,1.25\n3,1.75\n4,2.5\n");
    let out = ember(&["init", "--csv", path_str(&y), "--label", "y"]);
    ok(&out);
    assert!(common::stderr(&out).contains("inferred task = \"regression\""));
    let out = ember(&["init", "--csv", path_str(&y), "--label", "nope"]);
    bad_input(&out, "reg.csv: no column named \"nope\" (--label)");
    // A label with one value (a missing cell aside) has nothing to tell apart.
    let one = config(&dir, "one.csv", "a,y\n1,yes\n2,yes\n3,NA\n4,yes\n");
    let out = ember(&["init", "--csv", path_str(&one), "--label", "y"]);
    bad_input(
        &out,
        "one.csv: \"y\" holds one value (yes) in every row with a label: nothing to learn",
    );
}
