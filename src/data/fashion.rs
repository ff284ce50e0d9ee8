//! FashionMNIST from its four IDX files: `datasets/fashion-mnist/` (see `datasets/README.md`),
//! or Debian's `dataset-fashion-mnist` package, or any folder the config names.

use super::idx::{read_images, read_labels};
use super::{HostData, HostSplit, Labels, Matrix};
use crate::config::InputScale;
use crate::error::Result;
use crate::input_err;
use std::path::{Path, PathBuf};

/// Where `make data` puts the files.
pub const PROJECT_DIR: &str = "datasets/fashion-mnist";
/// Where Debian's `dataset-fashion-mnist` package installs them.
pub const DEBIAN_DIR: &str = "/usr/share/datasets/fashion-mnist";

const FILES: [&str; 4] = [
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
];

/// The file for `stem` in `dir`, gzipped or not.
fn find(dir: &Path, stem: &str) -> Option<PathBuf> {
    [format!("{stem}.gz"), stem.to_string()]
        .into_iter()
        .map(|name| dir.join(name))
        .find(|p| p.is_file())
}

fn complete(dir: &Path) -> bool {
    FILES.iter().all(|f| find(dir, f).is_some())
}

/// The folder to read: the one named, else the project's, else Debian's.
pub fn locate(dir: Option<&Path>) -> Result<PathBuf> {
    match dir {
        Some(dir) => {
            if let Some(missing) = FILES.iter().find(|f| find(dir, f).is_none()) {
                return Err(input_err!(
                    "{}: {missing}(.gz) not found; data.dir must hold the four FashionMNIST IDX files",
                    dir.display()
                ));
            }
            Ok(dir.to_path_buf())
        }
        None => [PathBuf::from(PROJECT_DIR), PathBuf::from(DEBIAN_DIR)]
            .into_iter()
            .find(|d| complete(d))
            .ok_or_else(|| {
                input_err!(
                    "FashionMNIST not found in {PROJECT_DIR} or {DEBIAN_DIR}; run `make data` (or apt-get install dataset-fashion-mnist), or set data.dir"
                )
            }),
    }
}

fn split(images: &Path, labels: &Path, scale: InputScale) -> Result<HostSplit> {
    let img = read_images(images)?;
    if (img.rows, img.cols) != (28, 28) {
        return Err(input_err!(
            "{}: images are {}x{}, the fashion-mlp model takes 28x28",
            images.display(),
            img.rows,
            img.cols
        ));
    }
    let lab = read_labels(labels, 10)?;
    if lab.len() != img.count {
        return Err(input_err!(
            "{} holds {} labels but {} holds {} images",
            labels.display(),
            lab.len(),
            images.display(),
            img.count
        ));
    }
    Ok(HostSplit {
        features: pixels_to_matrix(&img.pixels, img.count, scale),
        scalar: None,
        labels: Labels::Classes(lab.into_iter().map(i64::from).collect()),
    })
}

/// Bytes to floats, scaled as the recipe says.
pub fn pixels_to_matrix(pixels: &[u8], count: usize, scale: InputScale) -> Matrix {
    let factor = match scale {
        InputScale::Unit => 1.0 / 255.0,
        InputScale::Raw => 1.0,
    };
    Matrix {
        rows: count,
        cols: pixels.len() / count.max(1),
        values: pixels.iter().map(|&p| f32::from(p) * factor).collect(),
    }
}

/// Reads the training and test files; the test set is the validation split, as in the seed.
pub fn load(dir: Option<&Path>, scale: InputScale) -> Result<HostData> {
    let dir = locate(dir)?;
    let file = |stem: &str| find(&dir, stem).expect("locate checked that every file exists");
    let train = split(&file(FILES[0]), &file(FILES[1]), scale)?;
    let valid = split(&file(FILES[2]), &file(FILES[3]), scale)?;
    Ok(HostData {
        train,
        valid,
        source: dir.display().to_string(),
        stats: None,
    })
}
