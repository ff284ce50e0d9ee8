//! ember's error type and the exit code each kind of failure maps to.
//!
//! Every message names the thing at fault (file, field, value) and reads as one line, because
//! `main` prints it as `error: <message>` and exits with [`EmberError::exit_code`].

use std::path::{Path, PathBuf};

/// Everything that can stop an ember command.
#[derive(Debug, thiserror::Error)]
pub enum EmberError {
    /// The user's input is wrong: config, data file, command-line value, missing device.
    #[error("{0}")]
    Input(String),

    /// Training produced a non-finite loss or weight.
    #[error("{0}")]
    Diverged(String),

    /// Training was stopped by Ctrl-C after a checkpoint was written.
    #[error("{0}")]
    Interrupted(String),

    /// Something outside the user's control failed (disk full, I/O error while writing).
    #[error("{0}")]
    Runtime(String),
}

impl EmberError {
    /// The process exit code: 2 for bad input, 3 for divergence, 130 for an interrupt, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            EmberError::Input(_) => 2,
            EmberError::Diverged(_) => 3,
            EmberError::Interrupted(_) => 130,
            EmberError::Runtime(_) => 1,
        }
    }

    /// A bad-input error about a file.
    pub fn file(path: &Path, what: impl std::fmt::Display) -> Self {
        EmberError::Input(format!("{}: {what}", path.display()))
    }

    /// A runtime I/O failure while writing `path`.
    pub fn write(path: &Path, err: impl std::fmt::Display) -> Self {
        EmberError::Runtime(format!("cannot write {}: {err}", path.display()))
    }
}

/// Shorthand used across the crate.
pub type Result<T, E = EmberError> = std::result::Result<T, E>;

/// Builds a bad-input error from a format string.
#[macro_export]
macro_rules! input_err {
    ($($arg:tt)*) => { $crate::error::EmberError::Input(format!($($arg)*)) };
}

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
    write_replace(path, bytes, true)
}

/// Like [`write_atomic`] without the fsyncs: readers and kills still see a whole file, but a
/// power cut may lose it. For files rewritten every epoch (`metrics.csv`), where the fsyncs
/// would cost more than a small model's epoch.
pub fn write_replace(path: &Path, bytes: &[u8], durable: bool) -> Result<()> {
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
