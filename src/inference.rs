//! Using a trained model: `ember eval` (loss and accuracy on a split), `ember predict` (one CSV
//! row per input) and `ember export` (model files from any run or checkpoint). Each opens a run
//! folder (its resolved config says how to rebuild the model and preprocess inputs) or a model
//! file next to one, loads the weights into the model, and runs on the chosen device.

use crate::class_report::ClassReport;
use crate::config::{DataSpec, JobConfig};
use crate::data::fashion::pixels_to_matrix;
use crate::data::loader::LoaderBuilder;
use crate::data::{self, HostSplit, Labels, SplitName, idx, images, table};
use crate::device::TrainBackend;
use crate::device::{Backends, Device, OnBackend};
use crate::error::{EmberError, Result};
use crate::export::{self, Layout};
use crate::fs::write_atomic;
use crate::input_err;
use crate::model::{EmberModel, StepStats, StepTotals, TrainableModel, WithModel};
use crate::ops::EmberBackend;
use crate::run::checkpoint;
use crate::run::folder;
use burn::data::dataloader::DataLoader;
use std::path::{Path, PathBuf};

/// Where a model's weights are.
#[derive(Debug, Clone)]
pub enum Weights {
    /// Burn's record (`model.mpk`).
    Burn(PathBuf),
    /// The model part of a checkpoint, verified against its manifest.
    Checkpoint(PathBuf, checkpoint::Manifest),
    /// A safetensors file in the given layout.
    Safetensors(PathBuf, Layout),
}

impl Weights {
    pub fn describe(&self) -> String {
        match self {
            Weights::Burn(p) | Weights::Safetensors(p, _) => p.display().to_string(),
            Weights::Checkpoint(dir, m) => {
                format!("{} (checkpoint of epoch {})", dir.display(), m.epoch)
            }
        }
    }
}

/// A model to use: the resolved config of its run and its weights.
#[derive(Debug, Clone)]
pub struct ModelSource {
    pub config: JobConfig,
    pub weights: Weights,
}

/// The layout a safetensors file was written in: ember records it in the metadata; a file
/// without ember's metadata is taken to come from PyTorch.
pub fn safetensors_layout(path: &Path) -> Result<Layout> {
    let bytes = crate::fs::read_file(path)?;
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes)
        .map_err(|e| EmberError::file(path, format!("not a safetensors file ({e})")))?;
    let burn = meta
        .metadata()
        .as_ref()
        .and_then(|m| m.get("ember"))
        .is_some_and(|v| v.contains("layout=burn"));
    Ok(if burn { Layout::Burn } else { Layout::Pytorch })
}

/// Opens a run folder, or a model file with `--config` or a `config.toml` beside it.
/// `epoch` picks that epoch's checkpoint in a run folder.
pub fn open(path: &Path, config: Option<&Path>, epoch: Option<usize>) -> Result<ModelSource> {
    let source = open_unchecked(path, config, epoch)?;
    // A job file as written lacks what the run learned from its data (the widths, the classes):
    // only a run's resolved config rebuilds its model.
    let model = &source.config.model;
    if model.inputs.is_none() || model.outputs.is_none() {
        return Err(input_err!(
            "{}: the config has no model.inputs/outputs, so it is not a run's resolved config; pass the config.toml of the run that made the model",
            config.unwrap_or(path).display()
        ));
    }
    Ok(source)
}

fn open_unchecked(path: &Path, config: Option<&Path>, epoch: Option<usize>) -> Result<ModelSource> {
    if path.is_dir() {
        let config = crate::config::load(
            &config.map_or_else(|| path.join(folder::CONFIG), Path::to_path_buf),
        )?;
        let ckpt = path.join(folder::CHECKPOINTS);
        let final_model = path.join(folder::MODEL_BURN);
        let weights = match epoch {
            Some(e) => Weights::Checkpoint(
                ckpt.clone(),
                checkpoint::read_manifest(&ckpt, e).map_err(|_| {
                    input_err!(
                        "{}: no complete checkpoint of epoch {e} (kept: {:?})",
                        ckpt.display(),
                        checkpoint::list_epochs(&ckpt)
                    )
                })?,
            ),
            None if final_model.is_file() => {
                crate::run::summary::verify_model_file(&final_model).map_err(|e| {
                    match checkpoint::list_epochs(&ckpt).pop() {
                        Some(n) => e.and_then_say(&format!(
                            "its checkpoint of epoch {n} loads with --epoch {n}"
                        )),
                        None => e,
                    }
                })?;
                Weights::Burn(final_model)
            }
            None => Weights::Checkpoint(ckpt.clone(), checkpoint::latest(&ckpt)?),
        };
        return Ok(ModelSource { config, weights });
    }
    if !path.is_file() {
        return Err(EmberError::file(path, "no such run folder or model file"));
    }
    if epoch.is_some() {
        return Err(input_err!("--epoch needs a run folder, not a model file"));
    }
    let config_path = match config {
        Some(c) => c.to_path_buf(),
        None => {
            let beside = path.parent().unwrap_or(Path::new(".")).join(folder::CONFIG);
            if !beside.is_file() {
                return Err(input_err!(
                    "{}: no {} beside the model file; pass --config with the run's resolved config",
                    path.display(),
                    folder::CONFIG
                ));
            }
            beside
        }
    };
    let config = crate::config::load(&config_path)?;
    crate::run::summary::verify_model_file(path)?;
    let weights = match path.extension().and_then(|e| e.to_str()) {
        Some("safetensors") => Weights::Safetensors(path.to_path_buf(), safetensors_layout(path)?),
        Some("mpk") => Weights::Burn(path.to_path_buf()),
        _ => {
            return Err(EmberError::file(
                path,
                "unknown model file type: use a .mpk (Burn) or .safetensors file",
            ));
        }
    };
    Ok(ModelSource { config, weights })
}

/// `config`'s model with `weights` loaded.
pub fn load_model<B: EmberBackend, M: EmberModel<B>>(
    source: &ModelSource,
    device: &B::Device,
) -> Result<M> {
    let model = M::init(&source.config, device);
    let (model, path) = match &source.weights {
        Weights::Burn(path) => {
            let record = export::burn_record::<B, M>(path, device)?;
            (load_fitting(model, record, path)?, path)
        }
        Weights::Checkpoint(dir, manifest) => {
            let record = checkpoint::load_part::<M::Record, B>(
                dir,
                manifest,
                checkpoint::Part::Model,
                device,
            )?;
            (load_fitting(model, record, dir)?, dir)
        }
        Weights::Safetensors(path, layout) => {
            (export::load_safetensors(model, path, *layout)?, path)
        }
    };
    model
        .check_weights()
        .map_err(|e| EmberError::file(path, e))?;
    Ok(model)
}

/// `record` loaded into `model`, once it fits the config's model: Burn's loading would stop
/// the process where the counts of layers differ ([`EmberModel::fits_record`]).
fn load_fitting<B: EmberBackend, M: EmberModel<B>>(
    model: M,
    record: M::Record,
    path: &std::path::Path,
) -> Result<M> {
    (model.fits_record(&record)).map_err(|e| EmberError::file(path, e))?;
    Ok(model.load_record(record))
}

/// Something to do with a loaded model, on whichever backend was chosen.
pub trait ModelTask {
    type Output;
    fn run<B: EmberBackend, M: EmberModel<B>>(
        self,
        model: M,
        device: &B::Device,
    ) -> Result<Self::Output>;
}

/// Loads the model of `source` on `device` and runs `task` with it.
pub fn with_model<D: Backends, T: ModelTask>(
    source: &ModelSource,
    device: Device,
    task: T,
) -> Result<T::Output> {
    struct Run<'a, T> {
        source: &'a ModelSource,
        task: T,
    }
    impl<T: ModelTask> OnBackend for Run<'_, T> {
        type Output = Result<T::Output>;
        fn run<B: TrainBackend>(self, device: B::Device) -> Self::Output {
            let kind = self.source.config.model.kind;
            crate::model::for_model::<B, _>(kind, Load { run: self, device })
        }
    }
    /// Waits for the job's model type, loads it for inference and runs the task.
    struct Load<'a, T, D> {
        run: Run<'a, T>,
        device: D,
    }
    impl<B: TrainBackend, T: ModelTask> WithModel<B> for Load<'_, T, B::Device> {
        type Output = Result<T::Output>;
        fn run<M: TrainableModel<B>>(self) -> Self::Output {
            let model = load_model::<B::Inference, M::Inference>(self.run.source, &self.device)?;
            self.run.task.run(model, &self.device)
        }
    }
    D::dispatch(device, Run { source, task })
}

/// Loss and accuracy of `model` over `split`, in batches cut on the device, the same batches
/// as a run's validation passes (`LoaderBuilder::evaluation`).
pub fn evaluate<B: EmberBackend, M: EmberModel<B>>(
    model: &M,
    split: &HostSplit,
    batch_size: usize,
    max_tensor_bytes: Option<u64>,
    device: &B::Device,
) -> StepStats {
    let loader = LoaderBuilder::evaluation(batch_size)
        .max_tensor_bytes(max_tensor_bytes)
        .build::<B, M::Batch>(split, split.row_bytes(), device.clone(), |rows| {
            M::batch(rows, device)
        });
    let mut totals = StepTotals::<B>::new();
    for batch in loader.iter() {
        totals.add(burn::train::InferenceStep::step(model, batch));
    }
    totals.read()
}

/// The rows `ember eval` reads: one split of the run's own data, as the run used it (its row
/// limits included), or of other data given with `--data` (all its rows).
pub fn eval_split(config: &JobConfig, split: SplitName, data: Option<&Path>) -> Result<HostSplit> {
    let rows = eval_rows(config, split, data)?;
    match data {
        Some(d) => check_width(config, &rows, d)?,
        None => check_width(config, &rows, Path::new(config.name()))?,
    }
    Ok(rows)
}

/// Fails unless `split`'s rows (read from `source`) have the width of the model's inputs.
fn check_width(config: &JobConfig, split: &HostSplit, source: &Path) -> Result<()> {
    match config.model.inputs {
        Some(w) if w != split.features.cols => Err(EmberError::file(
            source,
            format!(
                "rows of {} values; the model takes {w}",
                split.features.cols
            ),
        )),
        _ => Ok(()),
    }
}

fn eval_rows(config: &JobConfig, split: SplitName, data: Option<&Path>) -> Result<HostSplit> {
    let mut config = config.clone();
    if let Some(d) = data {
        config.max_train_rows = None;
        config.max_valid_rows = None;
        // Another CSV file or image folder is one split: all of it.
        match &config.data {
            DataSpec::Table(t) => return data::tables::read_file(&config, t, d),
            DataSpec::Images(i) => return images::read_folder(&config, i, d),
            DataSpec::Idx { .. } => {}
        }
        if let DataSpec::Idx { dir, .. } = &mut config.data {
            *dir = Some(d.to_path_buf());
        }
    }
    let loaded = data::load_limited(&config, &indicatif::ProgressBar::hidden())?;
    // A convolutional network reads its rows as images of its own height and width.
    if let (Some([_, h, w]), Some(size)) = (config.model.image, loaded.image_size)
        && size != [h, w]
    {
        return Err(input_err!(
            "{}: images of {}x{}; the model takes {h}x{w}",
            loaded.source,
            size[0],
            size[1]
        ));
    }
    Ok(match split {
        SplitName::Train => loaded.train,
        SplitName::Valid => loaded.valid,
        SplitName::Test => match (loaded.test, &config.data) {
            (Some(test), _) => test,
            // Without a hold-out, an idx run validates on the test files.
            (None, DataSpec::Idx { .. }) => loaded.valid,
            (None, DataSpec::Table(_)) => {
                return Err(input_err!(
                    "--split test: {} has no test set; data.test_csv names one",
                    config.name()
                ));
            }
            (None, DataSpec::Images(_)) => {
                return Err(input_err!(
                    "--split test: {} has no test set; data.test_dir names one",
                    config.name()
                ));
            }
        },
    })
}

/// The rows `ember predict` reads from `input`, preprocessed as in training, and for images
/// the file of each row.
pub fn predict_inputs(
    config: &JobConfig,
    input: &Path,
) -> Result<(HostSplit, Option<Vec<String>>)> {
    let mut names = None;
    let split = match &config.data {
        DataSpec::Images(spec) => {
            let paths = images::predict_paths(input)?;
            names = Some(paths.iter().map(|p| p.display().to_string()).collect());
            let decode = images::decoder(spec, &paths[0])?;
            let features = images::decode_all(paths, decode, &indicatif::ProgressBar::hidden())?;
            let rows = features.rows;
            HostSplit {
                features,
                scalar: None,
                labels: Labels::Classes(vec![0; rows]),
            }
        }
        DataSpec::Idx { input_scale, .. } => {
            let (pixels, count) = pixels_of(input)?;
            HostSplit {
                features: pixels_to_matrix(&pixels, count, *input_scale),
                scalar: None,
                labels: Labels::Classes(vec![0; count]),
            }
        }
        DataSpec::Table(spec) => {
            let (features, scalar) = table::read_inputs(input, spec)?;
            let rows = features.rows;
            let mut split = HostSplit {
                features,
                scalar,
                labels: Labels::Classes(vec![0; rows]),
            };
            if let Some(s) = &spec.stats {
                data::apply_stats(&mut split, s);
            }
            split
        }
    };
    check_width(config, &split, input)?;
    Ok((split, names))
}

/// Pixels from a CSV file of pixel columns (0..255) or an IDX image file, and the image count.
fn pixels_of(input: &Path) -> Result<(Vec<u8>, usize)> {
    if input.extension().is_some_and(|e| e == "csv") {
        let csv = table::read_text(input)?;
        let all: Vec<usize> = (0..csv.header.len()).collect();
        let m = csv.numbers(&all)?;
        let pixels = m.values.iter().map(|v| v.clamp(0.0, 255.0) as u8).collect();
        Ok((pixels, m.rows))
    } else {
        let images = idx::read_images(input)?;
        Ok((images.pixels, images.count))
    }
}

/// Writes `rows` under `header` as CSV to `out`, or to stdout.
pub fn write_csv(header: &[String], rows: &[Vec<String>], out: Option<&Path>) -> Result<()> {
    // The csv crate quotes a cell with a comma or a quote (a kept ID, a class name).
    let mut writer = csv::Writer::from_writer(Vec::new());
    for r in std::iter::once(header).chain(rows.iter().map(Vec::as_slice)) {
        writer
            .write_record(r)
            .expect("writing CSV to memory cannot fail");
    }
    let text = writer
        .into_inner()
        .expect("writing CSV to memory cannot fail");
    match out {
        Some(path) => write_atomic(path, &text),
        None => {
            use std::io::Write;
            let _ = std::io::stdout().lock().write_all(&text);
            Ok(())
        }
    }
}

/// `ember eval`.
pub struct Eval {
    pub split: HostSplit,
    /// The run's training batch size.
    pub batch_size: usize,
    /// The device's cap on one tensor (`device::max_tensor_bytes`).
    pub max_tensor_bytes: Option<u64>,
}

impl ModelTask for Eval {
    type Output = StepStats;
    fn run<B: EmberBackend, M: EmberModel<B>>(
        self,
        model: M,
        device: &B::Device,
    ) -> Result<StepStats> {
        Ok(evaluate(
            &model,
            &self.split,
            self.batch_size,
            self.max_tensor_bytes,
            device,
        ))
    }
}

/// `ember predict`.
pub struct Predict {
    pub inputs: HostSplit,
}

impl ModelTask for Predict {
    type Output = (Vec<String>, Vec<Vec<String>>);
    fn run<B: EmberBackend, M: EmberModel<B>>(
        self,
        model: M,
        device: &B::Device,
    ) -> Result<Self::Output> {
        Ok((model.header(), model.predict(&self.inputs, device)))
    }
}

/// `ember export`.
pub struct Export {
    pub format: export::Format,
    pub layout: Layout,
    pub out: PathBuf,
    /// The run's resolved config: the job's name, and for ONNX its preprocessing.
    pub config: JobConfig,
}

impl ModelTask for Export {
    type Output = ();
    fn run<B: EmberBackend, M: EmberModel<B>>(self, model: M, _: &B::Device) -> Result<()> {
        match self.format {
            export::Format::Burn => export::save_burn(&model, &self.out),
            export::Format::Safetensors => {
                export::save_safetensors(&model, &self.out, self.layout, self.config.name())
            }
            export::Format::Onnx => write_atomic(
                &self.out,
                &crate::onnx::bytes(&self.config, &model.network())?,
            ),
        }
    }
}

/// `ember eval`: the loss (and accuracy) of `source`'s model on a split, as one line, and for
/// a classifier the per-class report; with `json`, all of it as one JSON object.
pub fn eval_command<D: Backends>(
    source: &ModelSource,
    split: SplitName,
    data: Option<&Path>,
    json: bool,
    device: Device,
) -> Result<String> {
    let rows = eval_split(&source.config, split, data)?;
    let n = rows.rows();
    let report = class_report::<D>(source, &rows, device)?;
    let stats = with_model::<D, _>(
        source,
        device,
        Eval {
            split: rows,
            batch_size: source.config.batch_size,
            max_tensor_bytes: crate::device::max_tensor_bytes(device),
        },
    )?;
    // A target trained standardised: the loss (its mean squared error) and MAE in the
    // target's units.
    let std = source.config.target_std().unwrap_or(1.0);
    let stats = StepStats {
        loss: stats.loss * std * std,
        mae: stats.mae.map(|m| m * std),
        ..stats
    };
    let acc = stats
        .accuracy
        .map(|a| format!(", accuracy {:.2} %", 100.0 * a))
        .unwrap_or_default();
    let mae = stats.mae.map(|m| format!(", mae {m:.6}"));
    let r2 = stats.r2.map(|r| format!(", r2 {r:.4}"));
    let acc = acc + &mae.unwrap_or_default() + &r2.unwrap_or_default();
    // What was evaluated: the run's split, or the file given with --data.
    let what = match data {
        Some(path) => path.display().to_string(),
        None => format!("{split:?}").to_lowercase(),
    };
    if json {
        let mut out = serde_json::json!({
            "job": source.config.name(),
            "evaluated": what,
            "rows": n,
            "loss": stats.loss,
            "accuracy": stats.accuracy,
            "mae": stats.mae,
            "r2": stats.r2,
            "model": source.weights.describe(),
            "device": device.to_string(),
        });
        if let Some(r) = &report {
            out["report"] = r.json();
        }
        return Ok(serde_json::to_string_pretty(&out).expect("JSON of numbers and strings"));
    }
    let line = format!(
        "{} {what}: loss {:.6}{acc} ({n} rows, {}, {device})",
        source.config.name(),
        stats.loss,
        source.weights.describe()
    );
    Ok(match report {
        Some(r) => format!("{line}\n{}", r.table()),
        None => line,
    })
}

/// A classifier's per-class report on `rows`, from its predictions; `None` for a regression.
fn class_report<D: Backends>(
    source: &ModelSource,
    rows: &HostSplit,
    device: Device,
) -> Result<Option<ClassReport>> {
    let (truth, binary) = match &rows.labels {
        Labels::Classes(t) => (t, false),
        Labels::Binary(t) => (t, true),
        Labels::Values(_) => return Ok(None),
    };
    let Some(classes) = source.config.classes.clone() else {
        return Ok(None);
    };
    let inputs = rows.clone();
    let (_, predicted) = with_model::<D, _>(source, device, Predict { inputs })?;
    let index = |name: &str| classes.iter().position(|c| c == name).unwrap_or(0);
    // A classifier's rows are `class, p_...`; a binary one's `probability, label`.
    let (guess, positive): (Vec<usize>, Option<Vec<f64>>) = if binary {
        let p: Vec<f64> = predicted
            .iter()
            .map(|r| r[0].parse().unwrap_or(f64::NAN))
            .collect();
        (predicted.iter().map(|r| index(&r[1])).collect(), Some(p))
    } else {
        (predicted.iter().map(|r| index(&r[0])).collect(), None)
    };
    let truth: Vec<usize> = truth.iter().map(|&t| t as usize).collect();
    Ok(Some(ClassReport::new(
        &classes,
        &truth,
        &guess,
        positive.as_deref(),
    )))
}

/// `ember predict`: one CSV row per input row, to `out` or stdout; returns a line to print
/// when the rows went to a file.
pub fn predict_command<D: Backends>(
    source: &ModelSource,
    input: &Path,
    keep: &[String],
    out: Option<&Path>,
    device: Device,
) -> Result<Option<String>> {
    let kept = kept_columns(&source.config, input, keep)?;
    let (inputs, names) = predict_inputs(&source.config, input)?;
    let (mut header, mut rows) = with_model::<D, _>(source, device, Predict { inputs })?;
    if let DataSpec::Table(t) = &source.config.data
        && let Some((mean, std)) = t.target_stats
    {
        to_target_units(&mut rows, mean, std);
    }
    let names = names.map(|n| {
        (
            vec!["file".to_string()],
            n.into_iter().map(|f| vec![f]).collect(),
        )
    });
    for (names, columns) in names.into_iter().chain(kept) {
        header.splice(0..0, names);
        for (row, cells) in rows.iter_mut().zip(columns) {
            row.splice(0..0, cells);
        }
    }
    write_csv(&header, &rows, out)?;
    Ok(out.map(|out| format!("{} predictions -> {}", rows.len(), out.display())))
}

/// A regression's predicted values, trained standardised, in the target's units.
fn to_target_units(rows: &mut [Vec<String>], mean: f64, std: f64) {
    for cell in rows.iter_mut().flatten() {
        let v: f64 = cell.parse().expect("a regression's cells are numbers");
        *cell = ((v * std + mean) as f32).to_string();
    }
}

/// The `--keep` columns of a CSV input, row by row, with their names; `None` when none is asked.
type Kept = Option<(Vec<String>, Vec<Vec<String>>)>;

fn kept_columns(config: &JobConfig, input: &Path, keep: &[String]) -> Result<Kept> {
    if keep.is_empty() {
        return Ok(None);
    }
    if !matches!(config.data, DataSpec::Table(_)) {
        return Err(input_err!(
            "--keep copies columns of a CSV input; {} does not read tables",
            config.name()
        ));
    }
    let csv = table::read_text(input)?;
    let cols: Vec<usize> = keep
        .iter()
        .map(|k| csv.column(k, "--keep"))
        .collect::<Result<_>>()?;
    let mut rows = vec![Vec::with_capacity(cols.len()); csv.rows()];
    for &c in &cols {
        for (row, (cell, _)) in rows.iter_mut().zip(csv.texts(c)) {
            row.push(cell.to_string());
        }
    }
    Ok(Some((keep.to_vec(), rows)))
}

/// `ember export`: `source`'s model as a file, by default `model-export.*` beside the model.
/// Returns the line to print.
pub fn export_command<D: Backends>(
    source: &ModelSource,
    model: &Path,
    format: export::Format,
    layout: Layout,
    out: Option<PathBuf>,
) -> Result<String> {
    let out = out.unwrap_or_else(|| {
        let dir = if model.is_dir() {
            model.to_path_buf()
        } else {
            model.parent().map(PathBuf::from).unwrap_or_default()
        };
        dir.join(match format {
            export::Format::Safetensors => "model-export.safetensors",
            export::Format::Burn => "model-export.mpk",
            export::Format::Onnx => folder::MODEL_ONNX,
        })
    });
    let task = Export {
        format,
        layout,
        out: out.clone(),
        config: source.config.clone(),
    };
    with_model::<D, _>(source, Device::Cpu, task)?;
    Ok(format!(
        "{} -> {}",
        source.weights.describe(),
        out.display()
    ))
}
