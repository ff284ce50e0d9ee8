//! Files ember reads and writes whole: reads that name the file in their error, and writes
//! that a kill never leaves half done.

use crate::error::{EmberError, Result};
use std::path::{Path, PathBuf};

/// Reads a whole file, naming it in the error.
pub fn read_file(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| EmberError::file(path, describe_io(&e)))
}

/// A short description of an I/O error without Rust's `(os error N)` suffix.
pub fn describe_io(err: &std::io::Error) -> String {
    match err.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => {
            let text = err.to_string();
            match text.find(" (os error") {
                Some(i) => text[..i].to_string(),
                None => text,
            }
        }
    }
}

/// Writes `bytes` to `path` atomically: a temporary file in the same folder, fsync, rename,
/// fsync of the folder. A kill at any moment leaves either the old file or the new one, and
/// once this returns the file survives a power cut.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    replace(path, bytes, Durability::Synced)
}

/// Like [`write_atomic`] without the fsyncs: readers and kills still see a whole file, but a
/// power cut may lose it. For files rewritten as a run goes (`metrics.csv`), where the fsyncs
/// would cost more than a small model's epoch.
pub fn write_replace(path: &Path, bytes: &[u8]) -> Result<()> {
    replace(path, bytes, Durability::Unsynced)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Durability {
    Synced,
    Unsynced,
}

/// A temporary file beside `path`, renamed over it.
fn replace(path: &Path, bytes: &[u8], durability: Durability) -> Result<()> {
    let durable = durability == Durability::Synced;
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp: PathBuf = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| -> std::io::Result<()> {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        if durable {
            file.sync_all()?;
        }
        drop(file);
        std::fs::rename(&tmp, path)?;
        // The rename is durable only once the folder entry is on disk.
        if durable && let Ok(d) = std::fs::File::open(dir) {
            d.sync_all().ok();
        }
        Ok(())
    })();
    if let Err(e) = result {
        std::fs::remove_file(&tmp).ok();
        return Err(EmberError::write(path, describe_io(&e)));
    }
    Ok(())
}
