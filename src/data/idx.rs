//! A reader for the IDX files MNIST and FashionMNIST ship in, gzipped or not.
//!
//! Every check names the file: magic number, dimension count, item count, the bytes that are
//! missing from a truncated file, and labels out of range.

use crate::error::{EmberError, Result};
use crate::fs::read_file;
use std::io::Read;
use std::path::Path;

/// Images as stored: `count` images of `rows x cols` bytes, row-major.
#[derive(Debug, Clone)]
pub struct IdxImages {
    pub count: usize,
    pub rows: usize,
    pub cols: usize,
    pub pixels: Vec<u8>,
}

const MAGIC_IMAGES: u32 = 0x0000_0803; // unsigned bytes, 3 dimensions
const MAGIC_LABELS: u32 = 0x0000_0801; // unsigned bytes, 1 dimension

/// The file's bytes, inflated when they start with the gzip magic number.
fn contents(path: &Path) -> Result<Vec<u8>> {
    let bytes = read_file(path)?;
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::with_capacity(bytes.len() * 4);
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_end(&mut out)
            .map_err(|e| EmberError::file(path, format!("corrupt or truncated gzip data ({e})")))?;
        Ok(out)
    } else {
        Ok(bytes)
    }
}

fn header(path: &Path, bytes: &[u8], magic: u32, dims: usize) -> Result<Vec<usize>> {
    let word = |i: usize| u32::from_be_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
    let need = 4 + 4 * dims;
    let too_short = || {
        EmberError::file(
            path,
            format!(
                "too short for an IDX header ({} bytes, need {need})",
                bytes.len()
            ),
        )
    };
    if bytes.len() < 4 {
        return Err(too_short());
    }
    let found = word(0);
    if found != magic {
        return Err(EmberError::file(
            path,
            format!(
                "not an IDX file of {dims}-d unsigned bytes (magic number {found:#010x}, expected {magic:#010x})"
            ),
        ));
    }
    if bytes.len() < need {
        return Err(too_short());
    }
    Ok((0..dims).map(|d| word(4 + 4 * d) as usize).collect())
}

fn body<'a>(path: &Path, bytes: &'a [u8], offset: usize, expected: usize) -> Result<&'a [u8]> {
    let have = bytes.len() - offset;
    match have.cmp(&expected) {
        std::cmp::Ordering::Less => Err(EmberError::file(
            path,
            format!("truncated: the header announces {expected} data bytes but only {have} follow"),
        )),
        std::cmp::Ordering::Greater => Err(EmberError::file(
            path,
            format!(
                "{} bytes of trailing data after the {expected} the header announces",
                have - expected
            ),
        )),
        std::cmp::Ordering::Equal => Ok(&bytes[offset..]),
    }
}

/// Reads an IDX image file (`idx3-ubyte`).
pub fn read_images(path: &Path) -> Result<IdxImages> {
    let bytes = contents(path)?;
    let dims = header(path, &bytes, MAGIC_IMAGES, 3)?;
    let (count, rows, cols) = (dims[0], dims[1], dims[2]);
    let pixels = body(path, &bytes, 16, count * rows * cols)?.to_vec();
    Ok(IdxImages {
        count,
        rows,
        cols,
        pixels,
    })
}

/// Reads an IDX label file (`idx1-ubyte`) whose labels must all be below `classes`.
pub fn read_labels(path: &Path, classes: u8) -> Result<Vec<u8>> {
    let bytes = contents(path)?;
    let dims = header(path, &bytes, MAGIC_LABELS, 1)?;
    let labels = body(path, &bytes, 8, dims[0])?.to_vec();
    if let Some((i, l)) = labels.iter().enumerate().find(|(_, l)| **l >= classes) {
        return Err(EmberError::file(
            path,
            format!(
                "label {l} at index {i} is out of range (expected 0..{})",
                classes - 1
            ),
        ));
    }
    Ok(labels)
}

/// Writes an IDX file: used by the tests and by `ember predict`'s own tests.
pub fn encode(dims: &[usize], data: &[u8]) -> Vec<u8> {
    let magic = 0x0000_0800u32 | dims.len() as u32;
    let mut out = magic.to_be_bytes().to_vec();
    for d in dims {
        out.extend_from_slice(&(*d as u32).to_be_bytes());
    }
    out.extend_from_slice(data);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn temp(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        crate::data::test_file("idx", name, bytes)
    }

    fn gz(bytes: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn reads_plain_and_gzipped_images() {
        let pixels: Vec<u8> = (0..2 * 3 * 4).map(|i| i as u8).collect();
        let raw = encode(&[2, 3, 4], &pixels);
        for (name, bytes) in [("a-idx3", raw.clone()), ("a-idx3.gz", gz(&raw))] {
            let img = read_images(&temp(name, &bytes)).unwrap();
            assert_eq!((img.count, img.rows, img.cols), (2, 3, 4));
            assert_eq!(img.pixels, pixels);
        }
    }

    #[test]
    fn reads_labels_and_rejects_out_of_range() {
        let path = temp("l-idx1", &encode(&[3], &[0, 9, 4]));
        assert_eq!(read_labels(&path, 10).unwrap(), vec![0, 9, 4]);
        let path = temp("bad-idx1", &encode(&[3], &[0, 10, 4]));
        let err = read_labels(&path, 10).unwrap_err().to_string();
        assert!(err.contains("label 10 at index 1"), "{err}");
    }

    #[test]
    fn wrong_magic_is_named() {
        let path = temp("m-idx1", &encode(&[3], &[0, 1, 2]));
        let err = read_images(&path).unwrap_err().to_string();
        assert!(err.contains("magic number 0x00000801"), "{err}");
        assert!(err.contains("m-idx1"), "{err}");
    }

    #[test]
    fn truncated_plain_and_gzipped_files_are_errors() {
        let raw = encode(&[2, 2, 2], &[1; 8]);
        let path = temp("t-idx3", &raw[..raw.len() - 3]);
        let err = read_images(&path).unwrap_err().to_string();
        assert!(err.contains("truncated"), "{err}");
        let zipped = gz(&raw);
        let path = temp("t-idx3.gz", &zipped[..zipped.len() - 10]);
        let err = read_images(&path).unwrap_err().to_string();
        assert!(err.contains("gzip"), "{err}");
        let path = temp("h-idx3", &raw[..6]);
        assert!(
            read_images(&path)
                .unwrap_err()
                .to_string()
                .contains("too short")
        );
    }

    #[test]
    fn trailing_bytes_are_errors() {
        let mut raw = encode(&[1, 2, 2], &[1; 4]);
        raw.push(0);
        let err = read_images(&temp("x-idx3", &raw)).unwrap_err().to_string();
        assert!(err.contains("trailing"), "{err}");
    }
}
