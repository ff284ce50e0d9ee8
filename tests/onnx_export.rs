//! `ember export --format onnx` for every kind of model ember trains: each exported graph, run
//! by tract (and, where `EMBER_TEST_PYTHON` has them, checked by `onnx.checker` and run by
//! onnxruntime), gives `ember predict`'s answers from the same rows. The rows reach the graph as
//! a caller would pass them: a table's cells as text or numbers column by column (NaN where a
//! cell is missing, dates as days since 1970-01-01), images as pixels before scaling.

mod common;

use common::{Lcg, config, ember, ok, path_str, scratch, stderr, stdout};
use ember::config::{DataSpec, JobConfig};
use ember::data::columns::{ColumnKind, dates};
use ember::data::images::{Decode, decode_all, predict_paths};
use ember::data::table::read_text;
use std::path::{Path, PathBuf};
use std::process::Command;
use tract_onnx::prelude::*;

/// The largest difference allowed between the graph's answers and `ember predict`'s, relative
/// to the value where it is above 1 (a regression in grams).
const TOLERANCE: f64 = 1e-5;

/// One graph input: its name, and the values as float32 (NaN missing) or text.
enum Feed {
    Floats(String, Vec<usize>, Vec<f32>),
    Texts(String, Vec<usize>, Vec<String>),
}

/// A trained run, exported, with `ember predict`'s answers on `input`.
struct Case {
    name: String,
    onnx: PathBuf,
    predicted: PathBuf,
    feeds: Vec<Feed>,
}

fn run_cfg(run: &Path) -> JobConfig {
    ember::config::load(&run.join("config.toml")).unwrap()
}

/// `ember export RUN --format onnx --out FILE`, which must succeed.
fn export_onnx(run: &Path, out: &Path) {
    ok(&ember(&[
        "export",
        path_str(run),
        "--format",
        "onnx",
        "--out",
        path_str(out),
    ]));
}

/// Exports `run` as ONNX and predicts `input` with ember.
fn case(dir: &Path, name: &str, run: &Path, input: &Path) -> Case {
    let onnx = dir.join(format!("{name}.onnx"));
    let predicted = dir.join(format!("{name}-predicted.csv"));
    export_onnx(run, &onnx);
    ok(&ember(&[
        "predict",
        path_str(run),
        "--input",
        path_str(input),
        "--out",
        path_str(&predicted),
        "--device",
        "cpu",
    ]));
    Case {
        name: name.into(),
        onnx,
        predicted,
        feeds: feeds(&run_cfg(run), input),
    }
}

/// The graph's inputs for the rows of `input`, as a caller would build them.
fn feeds(cfg: &JobConfig, input: &Path) -> Vec<Feed> {
    match &cfg.data {
        DataSpec::Table(t) => match &t.encoding {
            Some(encodings) => {
                let csv = read_text(input).unwrap();
                let missing = t.missing();
                let n = csv.rows();
                encodings
                    .iter()
                    .map(|e| {
                        let c = csv.column(&e.column, "test").unwrap();
                        let cells: Vec<&str> = csv.texts(c).map(|(s, _)| s).collect();
                        let name = e.column.clone();
                        match e.kind {
                            ColumnKind::Category => Feed::Texts(
                                name,
                                vec![n, 1],
                                cells.iter().map(|s| s.to_string()).collect(),
                            ),
                            kind => Feed::Floats(
                                name,
                                vec![n, 1],
                                cells.iter().map(|s| number(s, kind, &missing)).collect(),
                            ),
                        }
                    })
                    .collect()
            }
            None => numbers(input, t.scalar_column.as_deref()),
        },
        DataSpec::Idx { .. } => {
            let Feed::Floats(_, shape, values) = numbers(input, None).remove(0) else {
                unreachable!()
            };
            vec![Feed::Floats(
                "pixels".into(),
                vec![shape[0], 28, 28],
                values,
            )]
        }
        DataSpec::Images(spec) => {
            let [h, w] = spec.size.unwrap();
            let raw = Decode {
                size: [h, w],
                channels: spec.channels,
                scale: ember::config::InputScale::Raw,
            };
            let paths = predict_paths(input).unwrap();
            let m = decode_all(paths, raw, &indicatif::ProgressBar::hidden()).unwrap();
            let c = m.cols / (h * w);
            let mut shape = vec![m.rows, h, w];
            if c > 1 {
                shape.push(c);
            }
            vec![Feed::Floats("pixels".into(), shape, m.values)]
        }
    }
}

/// A numeric or date cell as the graph takes it.
fn number(cell: &str, kind: ColumnKind, missing: &ember::data::columns::Missing) -> f32 {
    if missing.is(cell) {
        return f32::NAN;
    }
    match kind {
        ColumnKind::Date => dates::parse(cell).unwrap() as f32,
        _ => cell.parse::<f64>().unwrap() as f32,
    }
}

/// A table of numbers as `x` (every column but `scalar`) and `f` (`scalar`).
fn numbers(input: &Path, scalar: Option<&str>) -> Vec<Feed> {
    let csv = read_text(input).unwrap();
    let n = csv.rows();
    let mut x = Vec::new();
    let mut f = Vec::new();
    for r in 0..n {
        for (name, cell) in csv.header.iter().zip(csv.record(r)) {
            let v = cell.parse::<f64>().unwrap() as f32;
            match Some(name.as_str()) == scalar {
                true => f.push(v),
                false => x.push(v),
            }
        }
    }
    let width = x.len() / n;
    let mut out = vec![Feed::Floats("x".into(), vec![n, width], x)];
    if scalar.is_some() {
        out.push(Feed::Floats("f".into(), vec![n, 1], f));
    }
    out
}

impl Feed {
    fn name(&self) -> &str {
        match self {
            Feed::Floats(n, ..) | Feed::Texts(n, ..) => n,
        }
    }

    fn tensor(&self) -> Tensor {
        match self {
            Feed::Floats(_, shape, v) => {
                tract_ndarray::ArrayD::from_shape_vec(shape.clone(), v.clone())
                    .unwrap()
                    .into_tensor()
            }
            Feed::Texts(_, shape, v) => {
                tract_ndarray::ArrayD::from_shape_vec(shape.clone(), v.clone())
                    .unwrap()
                    .into_tensor()
            }
        }
    }

    /// The feed as JSON, for the Python check (NaN as null).
    fn json(&self) -> serde_json::Value {
        match self {
            Feed::Floats(n, shape, v) => serde_json::json!({
                "name": n, "type": "float", "shape": shape,
                "values": v.iter().map(|x| if x.is_nan() { None } else { Some(*x) }).collect::<Vec<_>>(),
            }),
            Feed::Texts(n, shape, v) => serde_json::json!({
                "name": n, "type": "string", "shape": shape, "values": v,
            }),
        }
    }
}

/// Runs the graph in tract; returns each output by name, as text cells.
fn run_tract(case: &Case) -> Vec<(String, Vec<usize>, Vec<String>)> {
    let mut model = tract_onnx::onnx().model_for_path(&case.onnx).unwrap();
    let inputs: Vec<String> = model
        .input_outlets()
        .unwrap()
        .iter()
        .map(|o| model.node(o.node).name.clone())
        .collect();
    let mut values = TVec::new();
    for (i, name) in inputs.iter().enumerate() {
        let feed = case
            .feeds
            .iter()
            .find(|f| f.name() == name)
            .unwrap_or_else(|| panic!("{}: the graph's input {name:?} has no feed", case.name));
        let t = feed.tensor();
        model
            .set_input_fact(i, InferenceFact::dt_shape(t.datum_type(), t.shape()))
            .unwrap();
        values.push(t.into_tvalue());
    }
    let outputs: Vec<String> = model
        .output_outlets()
        .unwrap()
        .iter()
        .map(|o| {
            model
                .outlet_label(*o)
                .unwrap_or(&model.node(o.node).name)
                .to_string()
        })
        .collect();
    let plan = model.into_optimized().unwrap().into_runnable().unwrap();
    let result = plan.run(values).unwrap();
    outputs
        .into_iter()
        .zip(result.iter())
        .map(|(name, t)| {
            let cells: Vec<String> = match t.datum_type() {
                DatumType::String => t
                    .to_plain_array_view::<String>()
                    .unwrap()
                    .iter()
                    .cloned()
                    .collect(),
                _ => {
                    let v = t.cast_to::<f64>().unwrap();
                    let view = v.to_plain_array_view::<f64>().unwrap();
                    view.iter().map(f64::to_string).collect()
                }
            };
            (name, t.shape().to_vec(), cells)
        })
        .collect()
}

/// `ember predict`'s columns, without the file column of an image job.
fn predicted(case: &Case) -> (Vec<String>, Vec<Vec<String>>) {
    let csv = read_text(&case.predicted).unwrap();
    let skip = usize::from(csv.header[0] == "file");
    let rows = (0..csv.rows())
        .map(|r| csv.record(r).skip(skip).map(String::from).collect())
        .collect();
    (csv.header[skip..].to_vec(), rows)
}

/// Compares the graph's outputs with ember's; returns the largest difference.
fn compare(case: &Case, outputs: &[(String, Vec<usize>, Vec<String>)]) -> f64 {
    let (header, rows) = predicted(case);
    let output = |name: &str| {
        let (_, shape, cells) = outputs.iter().find(|(n, ..)| n == name).unwrap_or_else(|| {
            panic!(
                "{}: no output {name:?} in {:?}",
                case.name,
                outputs.iter().map(|o| &o.0).collect::<Vec<_>>()
            )
        });
        assert_eq!(shape[0], rows.len(), "{}: {name} rows", case.name);
        (cells.len() / rows.len(), cells.clone())
    };
    // Which of ember's columns each output holds: (output, ember's first column, is text).
    let layout: Vec<(&str, usize, bool)> = match header[0].as_str() {
        "class" => vec![("class", 0, true), ("probabilities", 1, false)],
        "probability" => vec![("probability", 0, false), ("label", 1, true)],
        _ => vec![("values", 0, false)],
    };
    let mut worst = 0f64;
    for (name, first, text) in layout {
        let (width, cells) = output(name);
        for (r, row) in rows.iter().enumerate() {
            for k in 0..width {
                let (ours, theirs) = (&cells[r * width + k], &row[first + k]);
                if text {
                    assert_eq!(ours, theirs, "{}: {name} of row {r}", case.name);
                    continue;
                }
                let (a, b): (f64, f64) = (ours.parse().unwrap(), theirs.parse().unwrap());
                let diff = (a - b).abs() / b.abs().max(1.0);
                assert!(
                    diff <= TOLERANCE,
                    "{}: {name}[{r}][{k}] = {a}, ember {b}",
                    case.name
                );
                worst = worst.max(diff);
            }
        }
    }
    worst
}

/// The Python check, where `EMBER_TEST_PYTHON` names a Python with onnx and onnxruntime
/// (required under CI=true).
fn python_check(dir: &Path, cases: &[Case]) {
    let Some(python) = common::test_python(&["onnx", "onnxruntime"], "the onnxruntime check")
    else {
        return;
    };
    let list: Vec<serde_json::Value> = cases
        .iter()
        .map(|c| {
            serde_json::json!({
                "name": c.name, "onnx": c.onnx, "predicted": c.predicted,
                "feeds": c.feeds.iter().map(Feed::json).collect::<Vec<_>>(),
            })
        })
        .collect();
    let file = dir.join("cases.json");
    std::fs::write(&file, serde_json::to_string(&list).unwrap()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/onnx_check.py");
    let o = Command::new(&python)
        .args([path_str(&script), path_str(&file)])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    eprint!("{}", stdout(&o));
}

/// Checks every case in tract, then in onnxruntime.
fn check_all(dir: &Path, cases: &[Case]) {
    for case in cases {
        let worst = compare(case, &run_tract(case));
        eprintln!("{}: tract within {worst:.2e} of ember predict", case.name);
    }
    python_check(dir, cases);
}

/// `ember init` on a penguins table, trained briefly with `extra` arguments.
fn penguins(dir: &Path, name: &str, label: &str, extra: &[&str]) -> PathBuf {
    let table = common::root().join("examples/penguins-raw.csv");
    let out = ember(&["init", "--csv", path_str(&table), "--label", label]);
    ok(&out);
    let job = common::with_epochs(&stdout(&out), 3);
    let cfg = config(dir, &format!("{name}.toml"), &job);
    let run = dir.join(name);
    ok(&common::train_on_cpu(&cfg, &run, extra));
    run
}

#[test]
fn mixed_tables_export_with_their_preprocessing_for_every_task_and_activation() {
    let dir = scratch("onnx-tables");
    let table = common::root().join("examples/penguins-raw.csv");
    let mut cases: Vec<Case> = [
        ("species-relu", "Species", "model.activation=\"relu\""),
        // An embedded category: its index is looked up in the exported table.
        ("species-embedded", "Species", "data.embed.Island=3"),
        ("species-sigmoid", "Species", "model.activation=\"sigmoid\""),
        // Piecewise-linear bins of a column with missing cells.
        (
            "species-bins",
            "Species",
            "data.scaling.\"Flipper Length (mm)\"=\"piecewise-linear\"",
        ),
        ("sex-gelu", "Sex", "model.activation=\"gelu\""),
        ("mass-tanh", "Body Mass (g)", "model.activation=\"tanh\""),
        (
            "mass-identity",
            "Body Mass (g)",
            "model.activation=\"identity\"",
        ),
    ]
    .iter()
    .map(|(name, label, set)| {
        case(
            &dir,
            name,
            &penguins(&dir, name, label, &["--set", set]),
            &table,
        )
    })
    .collect();
    // A heavy tail scaled robustly (the day's rain), and a date.
    let weather = common::root().join("examples/seattle-weather.csv");
    let (job, _) = common::drafted_as(&dir, "weather.toml", &weather, "temp_max", 3);
    assert!(
        std::fs::read_to_string(&job)
            .unwrap()
            .contains("precipitation = \"robust\"")
    );
    let run = dir.join("temp-robust");
    ok(&common::train_on_cpu(&job, &run, &[]));
    cases.push(case(&dir, "temp-robust", &run, &weather));
    check_all(&dir, &cases);
    // `train --export onnx` writes the same file as `ember export` afterwards.
    let run = penguins(
        &dir,
        "trained-with-export",
        "Species",
        &["--export", "onnx"],
    );
    let again = dir.join("again.onnx");
    export_onnx(&run, &again);
    assert_eq!(
        std::fs::read(run.join("model.onnx")).unwrap(),
        std::fs::read(&again).unwrap()
    );
}

/// A preset trained on `rows` rows for one epoch.
fn preset(dir: &Path, job: &str, rows: &str) -> PathBuf {
    let run = dir.join(job);
    let cfg = common::root().join(format!("configs/{job}.toml"));
    ok(&common::train_on_cpu(
        &cfg,
        &run,
        &[
            "--epochs",
            "1",
            "--max-train-rows",
            rows,
            "--max-valid-rows",
            "500",
        ],
    ));
    run
}

/// A convolutional network (batch norm, max-pools, global average pooling, gelu) trained for
/// an epoch on 640 images: its running statistics are no longer the identity.
fn cnn(dir: &Path) -> PathBuf {
    let cfg = config(
        dir,
        "cnn.toml",
        "task = \"classification\"\nepochs = 1\n[data]\nsource = \"idx\"\n\
         [model]\nhidden = [16]\nactivation = \"gelu\"\npooling = \"average\"\n\
         [[model.conv]]\nchannels = 4\nkernel = 5\nstride = 2\nbatch_norm = true\npool = 2\n\
         [[model.conv]]\nchannels = 6\nbatch_norm = true\n[adam]\nlr = 1e-3\n",
    );
    let run = dir.join("cnn");
    let rows = ["--max-train-rows", "640", "--max-valid-rows", "500"];
    ok(&common::train_on_cpu(&cfg, &run, &rows));
    run
}

/// A CSV of `rows` rows of `header`'s columns, values from `value`.
fn number_table(path: &Path, header: &[String], rows: usize, mut value: impl FnMut() -> f64) {
    let mut text = header.join(",") + "\n";
    for _ in 0..rows {
        let cells: Vec<String> = header.iter().map(|_| format!("{:.4}", value())).collect();
        text += &(cells.join(",") + "\n");
    }
    std::fs::write(path, text).unwrap();
}

#[test]
fn presets_and_images_export() {
    let dir = scratch("onnx-presets");
    let mut rng = Lcg(7);
    let mut cases = Vec::new();
    let columns = |n: usize, p: &str| (0..n).map(|i| format!("{p}{i}")).collect::<Vec<_>>();
    let input = dir.join("pixels.csv");
    number_table(&input, &columns(784, "px"), 40, || {
        (rng.next() * 255.0).floor()
    });
    cases.push(case(
        &dir,
        "fashion-mlp",
        &preset(&dir, "fashion-mlp", "640"),
        &input,
    ));
    cases.push(case(&dir, "cnn", &cnn(&dir), &input));
    let input = dir.join("tabular.csv");
    number_table(&input, &columns(61, "x"), 40, || rng.next() * 4.0 - 2.0);
    cases.push(case(
        &dir,
        "tabular-mlp",
        &preset(&dir, "tabular-mlp", "4096"),
        &input,
    ));
    let input = dir.join("scalar.csv");
    let mut header = columns(40, "x");
    header.push("f".into());
    number_table(&input, &header, 40, || rng.next() * 200.0 - 100.0);
    cases.push(case(
        &dir,
        "linear-scalar",
        &preset(&dir, "linear-scalar", "1280"),
        &input,
    ));
    let (run, test_dir) = colour_images(&dir);
    cases.push(case(&dir, "images-rgb", &run, &test_dir));
    check_all(&dir, &cases);
}

/// An RGB image job of two classes of mixed sizes, trained; and its test folder.
fn colour_images(dir: &Path) -> (PathBuf, PathBuf) {
    for (split, count) in [("train", 12), ("test", 4)] {
        for (class, rgb) in [("red", [220u8, 30, 30]), ("blue", [30, 30, 220])] {
            let folder = dir.join(split).join(class);
            std::fs::create_dir_all(&folder).unwrap();
            for i in 0..count {
                let (w, h) = if i % 3 == 0 { (12, 9) } else { (8, 8) };
                let img = image::RgbImage::from_fn(w, h, |x, y| {
                    let n = ((x * 31 + y * 17 + i * 7) % 40) as u8;
                    image::Rgb(rgb.map(|c| c.saturating_sub(n)))
                });
                img.save(folder.join(format!("{i:03}.png"))).unwrap();
            }
        }
    }
    let cfg = config(
        dir,
        "colours.toml",
        &format!(
            "task = \"classification\"\nepochs = 2\nbatch_size = 8\n[data]\nsource = \"images\"\ndir = \"{}\"\n\
             image_size = [6, 6]\nchannels = \"rgb\"\nvalid_fraction = 0.25\n[model]\nhidden = [8]\n[adam]\nlr = 0.01\n",
            dir.join("train").display()
        ),
    );
    let run = dir.join("images-rgb");
    ok(&common::train_on_cpu(&cfg, &run, &[]));
    (run, dir.join("test"))
}

#[test]
fn a_corrupted_graph_is_refused() {
    let dir = scratch("onnx-corrupt");
    let run = penguins(&dir, "species", "Species", &[]);
    let onnx = dir.join("model.onnx");
    export_onnx(&run, &onnx);
    let bytes = std::fs::read(&onnx).unwrap();
    assert!(tract_onnx::onnx().model_for_path(&onnx).is_ok());
    // Cut short: not a whole protobuf message.
    let cut = dir.join("cut.onnx");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    assert!(tract_onnx::onnx().model_for_path(&cut).is_err());
    // An operator renamed to one that does not exist.
    let at = bytes.windows(6).position(|w| w == b"MatMul").unwrap();
    let mut renamed = bytes.clone();
    renamed[at..at + 6].copy_from_slice(b"MatMux");
    let bad = dir.join("renamed.onnx");
    std::fs::write(&bad, &renamed).unwrap();
    let refused = tract_onnx::onnx()
        .model_for_path(&bad)
        .and_then(|m| m.into_optimized());
    assert!(refused.is_err());
}
