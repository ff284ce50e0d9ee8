//! ember: a command-line trainer for small models on Burn. The data set is uploaded to the
//! device once and every batch is cut there; training runs through Burn's `Learner` on the CUDA
//! or wgpu backend when a GPU is present, on Burn's CPU backend otherwise.

pub mod bench;
pub mod config;
pub mod console;
pub mod data;
pub mod device;
pub mod error;
pub mod export;
pub mod inference;
pub mod logging;
pub mod model;
pub mod ops;
pub mod optim;
pub mod plot;
pub mod rng;
pub mod run_dir;
pub mod runs;
pub mod summary;
pub mod train;
