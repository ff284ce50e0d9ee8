//! Model files: Burn's own record (`model.mpk`, named MessagePack at full precision) and
//! `model.safetensors` in PyTorch's layout and names, so that the seed's own module loads it
//! with `load_state_dict(strict=True)`. Both go through Burn (burn-core's recorder, burn-store's
//! safetensors store with its PyTorch adapters); ember only renames the layers.

use crate::error::{EmberError, Result};
use crate::fs::write_atomic;
use crate::model::TorchNames;
use burn::module::Module;
use burn::prelude::*;
use burn::record::{FullPrecisionSettings, NamedMpkBytesRecorder, Recorder};
use burn_store::{BurnToPyTorchAdapter, ModuleSnapshot, PyTorchToBurnAdapter, SafetensorsStore};
use std::path::Path;

/// The file formats `ember export` (and `[train] export`) writes a model in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Safetensors,
    Burn,
    Onnx,
}

/// Tensor layout of a safetensors file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Layout {
    /// PyTorch's names and `[out, in]` linear weights.
    Pytorch,
    /// Burn's field names and `[in, out]` linear weights.
    Burn,
}

type Bytes = NamedMpkBytesRecorder<FullPrecisionSettings>;

fn escape(s: &str) -> String {
    s.replace('.', r"\.")
}

/// Burn's record of `model` as bytes.
pub fn burn_bytes<B: Backend, M: Module<B>>(model: &M) -> Result<Vec<u8>> {
    Recorder::<B>::record(&Bytes::default(), model.clone().into_record(), ())
        .map_err(|e| EmberError::Runtime(format!("cannot encode the model: {e}")))
}

/// Writes Burn's record of `model` to `path` (atomically).
pub fn save_burn<B: Backend, M: Module<B>>(model: &M, path: &Path) -> Result<()> {
    write_atomic(path, &burn_bytes::<B, M>(model)?)
}

/// Loads Burn's record from `path` into `model`.
pub fn load_burn<B: Backend, M: Module<B>>(model: M, path: &Path, device: &B::Device) -> Result<M> {
    Ok(model.load_record(burn_record::<B, M>(path, device)?))
}

/// The record of a model file in Burn's format (`model.mpk`), not yet loaded into a model.
pub fn burn_record<B: Backend, M: Module<B>>(path: &Path, device: &B::Device) -> Result<M::Record> {
    let bytes = crate::fs::read_file(path)?;
    Recorder::<B>::load(&Bytes::default(), bytes, device)
        .map_err(|e| EmberError::file(path, format!("not a Burn record of this model ({e})")))
}

/// The safetensors bytes of `model` in `layout`, with the job recorded in the metadata.
pub fn safetensors_bytes<B: Backend, M: ModuleSnapshot<B> + TorchNames>(
    model: &M,
    layout: Layout,
    job: &str,
) -> Result<Vec<u8>> {
    // One metadata entry: Burn keeps metadata in a hash map, so several would be written in a
    // different order each time and two identical models would give different files.
    let mut store = SafetensorsStore::from_bytes(None)
        .clear_metadata()
        .metadata(
            "ember",
            format!(
                "job={job} layout={} ember={} burn={}",
                format!("{layout:?}").to_lowercase(),
                env!("CARGO_PKG_VERSION"),
                crate::BURN_VERSION
            ),
        );
    if layout == Layout::Pytorch {
        store = store.with_to_adapter(BurnToPyTorchAdapter);
        for (burn, torch) in model.torch_names() {
            store = store.with_key_remapping(format!("^{}", escape(&burn)), torch);
        }
    }
    let encoding =
        |e: &dyn std::fmt::Display| EmberError::Runtime(format!("cannot encode safetensors: {e}"));
    model.save_into(&mut store).map_err(|e| encoding(&e))?;
    let bytes = store.get_bytes().map_err(|e| encoding(&e))?;
    match layout {
        Layout::Pytorch => counts::convert(bytes, counts::Way::ToTorch).map_err(|e| encoding(&e)),
        Layout::Burn => Ok(bytes),
    }
}

/// Writes `model` as safetensors to `path` (atomically).
pub fn save_safetensors<B: Backend, M: ModuleSnapshot<B> + TorchNames>(
    model: &M,
    path: &Path,
    layout: Layout,
    job: &str,
) -> Result<()> {
    write_atomic(path, &safetensors_bytes(model, layout, job)?)
}

/// A run's model files: Burn's record at `burn` and, in PyTorch's layout and names, the
/// safetensors at `torch`.
pub fn save_model<B: Backend, M: ModuleSnapshot<B> + TorchNames>(
    model: &M,
    (burn, torch): (&Path, &Path),
    job: &str,
) -> Result<()> {
    save_burn(model, burn)?;
    save_safetensors(model, torch, Layout::Pytorch, job)
}

/// Loads weights from a safetensors file in `layout` into `model`; every parameter must be
/// present with the right shape, and nothing else may be in the file.
pub fn load_safetensors<B: Backend, M: ModuleSnapshot<B> + TorchNames>(
    mut model: M,
    path: &Path,
    layout: Layout,
) -> Result<M> {
    if !path.is_file() {
        return Err(EmberError::file(path, "no such file"));
    }
    let unreadable = |e: &dyn std::fmt::Display| {
        EmberError::file(path, format!("not a readable safetensors file ({e})"))
    };
    let mut bytes = crate::fs::read_file(path)?;
    if layout == Layout::Pytorch {
        bytes = counts::convert(bytes, counts::Way::FromTorch).map_err(|e| unreadable(&e))?;
    }
    // Shapes that differ are reported below with the missing and unexpected names, not as the
    // store's validation error ("not a readable safetensors file" for a file that reads).
    let mut store = SafetensorsStore::from_bytes(Some(bytes))
        .allow_partial(true)
        .validate(false);
    if layout == Layout::Pytorch {
        store = store.with_from_adapter(PyTorchToBurnAdapter);
        for (burn, torch) in model.torch_names() {
            store = store.with_key_remapping(format!("^{}", escape(&torch)), burn);
        }
    }
    let result = model.load_from(&mut store).map_err(|e| unreadable(&e))?;
    let mut problems = Vec::new();
    if !result.missing.is_empty() {
        let names: Vec<&str> = result.missing.iter().map(|(n, _)| n.as_str()).collect();
        problems.push(format!("missing {}", names.join(", ")));
    }
    if !result.unused.is_empty() {
        problems.push(format!("unexpected {}", result.unused.join(", ")));
    }
    if !result.errors.is_empty() {
        let errs: Vec<String> = result.errors.iter().map(|e| e.to_string()).collect();
        problems.push(errs.join("; "));
    }
    if !problems.is_empty() {
        return Err(EmberError::file(
            path,
            format!(
                "does not fit this model in {} layout: {}",
                format!("{layout:?}").to_lowercase(),
                problems.join("; ")
            ),
        ));
    }
    Ok(model)
}

/// Batch norm's count of training batches (`num_batches_tracked`): an int64 scalar in
/// PyTorch's state_dict, a one-element f32 running state in ember's model (Burn's running
/// states are float). The PyTorch layout converts it on the way out and back in.
mod counts {
    use safetensors::{Dtype, SafeTensors, tensor::TensorView};

    const NAME: &str = ".num_batches_tracked";

    #[derive(Clone, Copy, PartialEq, Eq)]
    pub enum Way {
        ToTorch,
        FromTorch,
    }

    /// `bytes` with every count converted; the same bytes when the file holds none.
    pub fn convert(bytes: Vec<u8>, way: Way) -> Result<Vec<u8>, String> {
        let file = SafeTensors::deserialize(&bytes).map_err(|e| e.to_string())?;
        let mut counts = Vec::new();
        for (name, view) in file.iter().filter(|(name, _)| name.ends_with(NAME)) {
            counts.push((name.to_string(), count_bytes(name, &view, way)?));
        }
        if counts.is_empty() {
            return Ok(bytes);
        }
        let mut out = Vec::new();
        for (name, view) in file.tensors() {
            let view = match counts.iter().find(|(n, _)| *n == name) {
                Some((_, (dtype, shape, data))) => {
                    TensorView::new(*dtype, shape.clone(), data).map_err(|e| e.to_string())?
                }
                None => view,
            };
            out.push((name, view));
        }
        let (_, header) = SafeTensors::read_metadata(&bytes).map_err(|e| e.to_string())?;
        safetensors::serialize(out, header.metadata().clone()).map_err(|e| e.to_string())
    }

    /// One count in the other layout: its dtype, shape and bytes.
    fn count_bytes(
        name: &str,
        view: &TensorView,
        way: Way,
    ) -> Result<(Dtype, Vec<usize>, Vec<u8>), String> {
        let data = view.data();
        match (way, view.dtype(), view.shape()) {
            (Way::ToTorch, Dtype::F32, [1]) => {
                let count = f32::from_le_bytes(data.try_into().expect("4 bytes")) as i64;
                Ok((Dtype::I64, vec![], count.to_le_bytes().to_vec()))
            }
            (Way::FromTorch, Dtype::I64, [] | [1]) => {
                let count = i64::from_le_bytes(data.try_into().expect("8 bytes")) as f32;
                Ok((Dtype::F32, vec![1], count.to_le_bytes().to_vec()))
            }
            (_, dtype, shape) => Err(format!(
                "{name} is {dtype:?} of shape {shape:?}, not a batch count"
            )),
        }
    }
}
