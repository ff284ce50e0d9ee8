//! The images source: a folder of class subfolders of PNG and JPEG files. ember lists the files
//! itself (class folders sorted as label names are: integers numerically, otherwise as text;
//! files by name), holds them in burn-dataset's `InMemDataset`, and decodes them through a
//! `MapperDataset` over the `image` crate (PNG and JPEG only), on every core. Resizing (bilinear,
//! only where an image's size differs), channels (grayscale or RGB, interleaved per pixel) and
//! scaling are ember's, and the resolved config records them.

use super::{HostSplit, Labels, Matrix, class_order};
use crate::config::{Channels, ImageSpec, InputScale, Task};
use crate::error::{EmberError, Result};
use burn_dataset::transform::{Mapper, MapperDataset};
use burn_dataset::{Dataset, InMemDataset};
use rayon::prelude::*;
use std::path::{Path, PathBuf};

/// One image file and its class index.
#[derive(Debug, Clone)]
pub struct Item {
    pub path: PathBuf,
    pub class: usize,
}

/// Whether `path` names a PNG or JPEG file (by its extension).
pub fn is_image(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "png" | "jpg" | "jpeg"))
}

fn entries(dir: &Path) -> Result<Vec<PathBuf>> {
    let list =
        std::fs::read_dir(dir).map_err(|e| EmberError::file(dir, crate::fs::describe_io(&e)))?;
    let mut paths = Vec::new();
    for entry in list {
        paths.push(
            entry
                .map_err(|e| EmberError::file(dir, crate::fs::describe_io(&e)))?
                .path(),
        );
    }
    paths.sort();
    Ok(paths)
}

/// The image files of `dir`'s class subfolders, and the class names. With `known` classes (a
/// validation or test folder), every subfolder must be one of them.
pub fn list(dir: &Path, known: Option<&[String]>) -> Result<(Vec<Item>, Vec<String>)> {
    let folders: Vec<PathBuf> = entries(dir)?.into_iter().filter(|p| p.is_dir()).collect();
    let names: Vec<String> = folders
        .iter()
        .map(|f| {
            f.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .collect();
    if folders.is_empty() {
        return Err(EmberError::file(
            dir,
            "no class subfolders (one folder per class, holding its PNG or JPEG files)",
        ));
    }
    let classes = match known {
        Some(k) => k.to_vec(),
        None => class_order(names.clone()),
    };
    let mut items = Vec::new();
    for (folder, name) in folders.iter().zip(&names) {
        let Some(class) = classes.iter().position(|c| c == name) else {
            return Err(EmberError::file(
                folder,
                format!(
                    "class \"{name}\" is not one of the training classes ({})",
                    classes.join(", ")
                ),
            ));
        };
        let files: Vec<PathBuf> = entries(folder)?
            .into_iter()
            .filter(|p| is_image(p))
            .collect();
        if files.is_empty() {
            return Err(EmberError::file(
                folder,
                "no PNG or JPEG images in this class folder",
            ));
        }
        items.extend(files.into_iter().map(|path| Item { path, class }));
    }
    items.sort_by_key(|i| i.class);
    Ok((items, classes))
}

/// Decodes, resizes, converts and scales one file into a row of floats.
#[derive(Debug, Clone, Copy)]
pub struct Decode {
    /// `[height, width]`.
    pub size: [usize; 2],
    pub channels: Channels,
    pub scale: InputScale,
}

impl Mapper<PathBuf, Result<Vec<f32>>> for Decode {
    fn map(&self, path: &PathBuf) -> Result<Vec<f32>> {
        let fail = |e: image::ImageError| {
            EmberError::file(path, format!("not a readable PNG or JPEG image ({e})"))
        };
        let reader = image::ImageReader::open(path)
            .map_err(|e| EmberError::file(path, crate::fs::describe_io(&e)))?
            .with_guessed_format()
            .map_err(|e| EmberError::file(path, crate::fs::describe_io(&e)))?;
        let mut img = reader.decode().map_err(fail)?;
        let [h, w] = self.size;
        if (img.height() as usize, img.width() as usize) != (h, w) {
            img = img.resize_exact(w as u32, h as u32, image::imageops::FilterType::Triangle);
        }
        let bytes = match self.channels {
            Channels::Grayscale => img.to_luma8().into_raw(),
            Channels::Rgb => img.to_rgb8().into_raw(),
        };
        let factor = self.scale.factor();
        Ok(bytes.into_iter().map(|b| f32::from(b) * factor).collect())
    }
}

/// The `[height, width]` of the image at `path`.
pub fn size_of(path: &Path) -> Result<[usize; 2]> {
    let (w, h) = image::image_dimensions(path)
        .map_err(|e| EmberError::file(path, format!("not a readable PNG or JPEG image ({e})")))?;
    Ok([h as usize, w as usize])
}

/// Decodes `paths` on every core, in order, ticking `progress` per file.
pub fn decode_all(
    paths: Vec<PathBuf>,
    decode: Decode,
    progress: &indicatif::ProgressBar,
) -> Result<Matrix> {
    let rows = paths.len();
    let dataset = MapperDataset::new(InMemDataset::new(paths), decode);
    progress.set_length(rows as u64);
    let decoded: Vec<Result<Vec<f32>>> = (0..rows)
        .into_par_iter()
        .map(|i| {
            let row = dataset.get(i).expect("an index below the dataset's length");
            progress.inc(1);
            row
        })
        .collect();
    let cols = decode.size[0] * decode.size[1] * decode.channels.count();
    let mut values = Vec::with_capacity(rows * cols);
    for row in decoded {
        values.extend(row?);
    }
    Ok(Matrix { rows, cols, values })
}

/// One folder of class subfolders as a split, labelled for `task`.
pub fn read_split(
    items: Vec<Item>,
    decode: Decode,
    task: Task,
    progress: &indicatif::ProgressBar,
) -> Result<HostSplit> {
    let labels: Vec<i64> = items.iter().map(|i| i.class as i64).collect();
    let features = decode_all(
        items.into_iter().map(|i| i.path).collect(),
        decode,
        progress,
    )?;
    Ok(HostSplit {
        features,
        scalar: None,
        labels: if task == Task::Binary {
            Labels::Binary(labels)
        } else {
            Labels::Classes(labels)
        },
    })
}

/// The decoder a spec describes, its size taken from `first` when the spec has none.
pub fn decoder(spec: &ImageSpec, first: &Path) -> Result<Decode> {
    Ok(Decode {
        size: match spec.size {
            Some(s) => s,
            None => size_of(first)?,
        },
        channels: spec.channels,
        scale: spec.input_scale,
    })
}

/// Loads an images job's splits: the training folder, a held-out share of it or the validation
/// folder, and the test folder.
pub fn load(
    config: &crate::config::JobConfig,
    spec: &ImageSpec,
    progress: &indicatif::ProgressBar,
) -> Result<super::HostData> {
    let (items, classes) = list(&spec.dir, config.classes.as_deref())?;
    super::class_count_fits(&classes, config.task)
        .map_err(|why| EmberError::file(&spec.dir, format!("the class folders give {why}")))?;
    let decode = decoder(spec, &items[0].path)?;
    let all = read_split(
        ordered(items, config.split_seed()),
        decode,
        config.task,
        progress,
    )?;
    let other = |dir: &PathBuf| -> Result<HostSplit> {
        let (items, _) = list(dir, Some(&classes))?;
        read_split(items, decode, config.task, progress)
    };
    let valid = spec.valid_dir.as_ref().map(other).transpose()?;
    let test = spec.test_dir.as_ref().map(other).transpose()?;
    let (train, valid) = match valid {
        Some(valid) => (all, valid),
        None => super::split(all, spec.valid_fraction, config.split_seed()),
    };
    Ok(super::HostData {
        train,
        valid,
        test,
        source: spec.dir.display().to_string(),
        stats: None,
        classes: Some(classes),
        features: None,
        encoding: None,
        dropped_labels: 0,
        target_stats: None,
        image_size: Some(decode.size),
    })
}

/// The training images in a seeded random order (as Keras' `image_dataset_from_directory`
/// shuffles its file list): the class-major listing would otherwise make row limits keep the
/// first classes only, and unshuffled batches hold one class each.
pub fn ordered(items: Vec<Item>, seed: u64) -> Vec<Item> {
    let perm = crate::rng::permutation(&mut crate::rng::stream(seed, "images", 0), items.len());
    perm.into_iter().map(|i| items[i].clone()).collect()
}

/// One folder of class subfolders (`ember eval --data`), on the run's classes.
pub fn read_folder(
    config: &crate::config::JobConfig,
    spec: &ImageSpec,
    dir: &Path,
) -> Result<HostSplit> {
    let (items, _) = list(dir, config.classes.as_deref())?;
    let decode = decoder(spec, &items[0].path)?;
    read_split(
        items,
        decode,
        config.task,
        &indicatif::ProgressBar::hidden(),
    )
}

/// The images `ember predict` reads: one file, or every PNG and JPEG file under a folder (in
/// path order), with their paths.
pub fn predict_paths(input: &Path) -> Result<Vec<PathBuf>> {
    if !input.is_dir() {
        return Ok(vec![input.to_path_buf()]);
    }
    let mut found = Vec::new();
    let mut pending = vec![input.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for path in entries(&dir)? {
            if path.is_dir() {
                pending.push(path);
            } else if is_image(&path) {
                found.push(path);
            }
        }
    }
    found.sort();
    if found.is_empty() {
        return Err(EmberError::file(input, "no PNG or JPEG images here"));
    }
    Ok(found)
}
