//! ember's error type and the exit code each kind of failure maps to.
//!
//! Every message names the thing at fault (file, field, value) and reads as one line, because
//! `main` prints it as `error: <message>` and exits with [`EmberError::exit_code`].

use std::path::Path;

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

    /// Something outside the user's control failed (an I/O error while writing, the device).
    #[error("{0}")]
    Runtime(String),

    /// A write found the disk (or the user's quota) full.
    #[error("{0}")]
    DiskFull(String),
}

impl EmberError {
    /// The process exit code: 2 for bad input, 3 for divergence, 4 for a full disk, 130 for an
    /// interrupt, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            EmberError::Input(_) => 2,
            EmberError::Diverged(_) => 3,
            EmberError::DiskFull(_) => 4,
            EmberError::Interrupted(_) => 130,
            EmberError::Runtime(_) => 1,
        }
    }

    /// The same kind of error with `more` appended to its message (what to do next).
    pub fn and_then_say(self, more: &str) -> Self {
        let join = |m: String| format!("{m}; {more}");
        match self {
            EmberError::Input(m) => EmberError::Input(join(m)),
            EmberError::Diverged(m) => EmberError::Diverged(join(m)),
            EmberError::Interrupted(m) => EmberError::Interrupted(join(m)),
            EmberError::Runtime(m) => EmberError::Runtime(join(m)),
            EmberError::DiskFull(m) => EmberError::DiskFull(join(m)),
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
