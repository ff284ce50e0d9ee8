//! The idx source: FashionMNIST (or MNIST-format) from its four IDX files: `datasets/fashion-mnist/` (see `datasets/README.md`),
//! or Debian's `dataset-fashion-mnist` package, or any folder the config names.

use super::idx::{IdxImages, read_images, read_labels};
use super::table::class_indices;
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

/// Pixels and raw labels of one pair of files.
fn read_pair(images: &Path, labels: &Path) -> Result<(IdxImages, Vec<u8>)> {
    let img = read_images(images)?;
    let lab = read_labels(labels, u8::MAX)?;
    if lab.len() != img.count {
        return Err(input_err!(
            "{} holds {} labels but {} holds {} images",
            labels.display(),
            lab.len(),
            images.display(),
            img.count
        ));
    }
    Ok((img, lab))
}

/// The classes of the training labels, as sorted label numbers.
fn classes_of(labels: &[u8]) -> Vec<String> {
    let mut seen = [false; 256];
    for &l in labels {
        seen[usize::from(l)] = true;
    }
    (0..256)
        .filter(|&l| seen[l])
        .map(|l| l.to_string())
        .collect()
}

fn to_split(
    img: &IdxImages,
    labels: &[u8],
    path: &Path,
    classes: &[String],
    scale: InputScale,
) -> Result<HostSplit> {
    let texts: Vec<String> = labels.iter().map(u8::to_string).collect();
    let indices = class_indices(
        path,
        texts.iter().zip(0u64..).map(|(t, i)| (t.as_str(), i)),
        classes,
    )
    .map_err(|e| input_err!("{}", e.to_string().replace(": line ", ": item ")))?;
    Ok(HostSplit {
        features: pixels_to_matrix(&img.pixels, img.count, scale),
        scalar: None,
        labels: Labels::Classes(indices),
    })
}

/// Bytes to floats, scaled as the recipe says.
pub fn pixels_to_matrix(pixels: &[u8], count: usize, scale: InputScale) -> Matrix {
    let factor = scale.factor();
    Matrix {
        rows: count,
        cols: pixels.len() / count.max(1),
        values: pixels.iter().map(|&p| f32::from(p) * factor).collect(),
    }
}

/// Reads the training and test files; the test set is the validation split, as in the seed.
/// The classes are the training labels' (or `known`, from a resolved config).
pub fn load(dir: Option<&Path>, scale: InputScale, known: Option<&[String]>) -> Result<HostData> {
    let dir = locate(dir)?;
    let file = |stem: &str| find(&dir, stem).expect("locate checked that every file exists");
    let (train_images, train_labels) = (file(FILES[0]), file(FILES[1]));
    let (test_images, test_labels) = (file(FILES[2]), file(FILES[3]));
    let (train, train_lab) = read_pair(&train_images, &train_labels)?;
    let (test, test_lab) = read_pair(&test_images, &test_labels)?;
    if (test.rows, test.cols) != (train.rows, train.cols) {
        return Err(input_err!(
            "{}: images are {}x{}, but the training images are {}x{}",
            test_images.display(),
            test.rows,
            test.cols,
            train.rows,
            train.cols
        ));
    }
    let classes = known.map_or_else(|| classes_of(&train_lab), <[String]>::to_vec);
    Ok(HostData {
        train: to_split(&train, &train_lab, &train_labels, &classes, scale)?,
        valid: to_split(&test, &test_lab, &test_labels, &classes, scale)?,
        test: None,
        source: dir.display().to_string(),
        stats: None,
        classes: Some(classes),
        features: None,
        encoding: None,
        dropped_labels: 0,
        target_stats: None,
        image_size: Some([train.rows, train.cols]),
    })
}
