//! Files ember reads and writes whole: reads that name the file in their error, and writes
//! that a kill never leaves half done. A write that fails on a full disk says so, with what it
//! needed and what was free ([`write_error`]).

pub mod faults;

use crate::error::{EmberError, Result};
use faults::{Fault, Phase};
use std::path::{Path, PathBuf};

/// Reads a whole file, naming it in the error.
pub fn read_file(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| EmberError::file(path, describe_io(&e)))
}

/// The SHA-256 of `bytes`, as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
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

/// The name of the temporary file that [`write_atomic`] and [`write_replace`] write `name`'s
/// bytes into, beside it, before renaming it over `name`.
fn temporary_name(name: &str) -> String {
    format!(".{name}.tmp-{}", std::process::id())
}

/// The file a temporary file named `name` was to become, where `name` is one (of this process
/// or of another, killed before its rename).
pub fn temporary_of(name: &str) -> Option<&str> {
    let (file, pid) = name.strip_prefix('.')?.rsplit_once(".tmp-")?;
    pid.bytes().all(|b| b.is_ascii_digit()).then_some(file)
}

/// A temporary file beside `path`, renamed over it. The bytes go in two halves, so that an
/// injected fault (`faults`) can strike between them as a kill or a full disk would.
fn replace(path: &Path, bytes: &[u8], durability: Durability) -> Result<()> {
    let durable = durability == Durability::Synced;
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp: PathBuf = dir.join(temporary_name(&name));
    let fault = faults::for_write(path);
    let result = (|| -> std::io::Result<()> {
        Fault::at(fault, Phase::Before)?;
        let mut file = std::fs::File::create(&tmp)?;
        let (first, rest) = bytes.split_at(bytes.len() / 2);
        file.write_all(first)?;
        Fault::at(fault, Phase::Partial)?;
        if !Fault::is_short(fault) {
            file.write_all(rest)?;
        }
        if durable {
            file.sync_all()?;
        }
        // A disk that took fewer bytes than it said must not get the final name.
        let on_disk = file.metadata()?.len();
        if on_disk != bytes.len() as u64 {
            let why = format!(
                "only {on_disk} of its {} bytes reached the disk",
                bytes.len()
            );
            return Err(std::io::Error::other(why));
        }
        drop(file);
        Fault::at(fault, Phase::Written)?;
        std::fs::rename(&tmp, path)?;
        // The rename is durable only once the folder entry is on disk.
        if durable && let Ok(d) = std::fs::File::open(dir) {
            d.sync_all().ok();
        }
        Fault::at(fault, Phase::Renamed)
    })();
    if let Err(e) = result {
        std::fs::remove_file(&tmp).ok();
        return Err(write_error(path, &e, bytes.len() as u64));
    }
    Ok(())
}

/// Whether an I/O error means the disk (or the user's quota) is full.
pub fn is_disk_full(err: &std::io::Error) -> bool {
    matches!(err.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

/// The error for a failed write of `path`, which needed about `needed` bytes: on a full disk
/// [`EmberError::DiskFull`] with the space needed and free, else a runtime error.
pub fn write_error(path: &Path, err: &std::io::Error, needed: u64) -> EmberError {
    if !is_disk_full(err) {
        return EmberError::write(path, describe_io(err));
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let free = fs4::available_space(dir.unwrap_or(Path::new(".")))
        .map(human_bytes)
        .unwrap_or_else(|_| "an unknown amount".to_string());
    EmberError::DiskFull(format!(
        "disk full: cannot write {} (it needs {}, {free} free)",
        path.display(),
        human_bytes(needed)
    ))
}

/// A byte count for people: `512 kB`, `3.4 MB`, `1.2 GB`.
pub fn human_bytes(b: u64) -> String {
    match b {
        0..1_000_000 => format!("{:.0} kB", b as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", b as f64 / 1e6),
        _ => format!("{:.1} GB", b as f64 / 1e9),
    }
}

/// This ember binary's absolute path: what a sweep's trials, its Slurm tasks and
/// `ember bench --replicas`' single runs run.
pub fn ember_binary() -> Result<std::path::PathBuf> {
    std::env::current_exe()
        .map_err(|e| EmberError::Runtime(format!("cannot find the ember binary: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temporary_name_says_which_file_it_was_to_become() {
        let tmp = temporary_name("base.toml");
        assert_eq!(temporary_of(&tmp), Some("base.toml"));
        assert_eq!(temporary_of(".epoch-3.json.tmp-41"), Some("epoch-3.json"));
        assert_eq!(temporary_of("base.toml"), None);
        assert_eq!(temporary_of(".base.toml"), None);
    }
}
