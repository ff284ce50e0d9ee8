//! ember: a command-line trainer for small models on Burn. The data set is uploaded to the
//! device once and every batch is cut there; training runs through Burn's `Learner` on the CUDA
//! or wgpu backend when a GPU is present, on Burn's CPU backend otherwise.

pub mod allocator;
pub mod bench;
pub mod class_report;
pub mod config;
pub mod console;
pub mod data;
pub mod device;
pub mod digits;
pub mod error;
pub mod export;
pub mod fs;
#[cfg(feature = "gpu-kernels")]
pub mod gpu;
pub mod inference;
pub mod init;
pub mod logging;
pub mod model;
pub mod onnx;
pub mod ops;
pub mod optim;
pub mod plot;
pub mod record;
pub mod replicas;
pub mod rng;
pub mod run;
pub mod shell;
pub mod stats;
pub mod sweep;
pub mod tracking;
pub mod train;

/// The Burn release ember is built on (`Cargo.toml` pins it), recorded in every run's summary and
/// safetensors metadata.
pub const BURN_VERSION: &str = "0.21.0";

#[cfg(test)]
mod tests {
    /// `BURN_VERSION` is the burn that `Cargo.lock` resolved.
    #[test]
    fn burn_version_matches_cargo_lock() {
        let lock = include_str!("../Cargo.lock");
        let at = lock
            .find("name = \"burn\"\nversion = \"")
            .expect("burn in Cargo.lock");
        let version = lock[at..].lines().nth(1).expect("a version line");
        assert_eq!(version, format!("version = \"{}\"", super::BURN_VERSION));
    }
}
