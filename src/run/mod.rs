//! A run folder and everything that describes it: the folder and its lock (`folder`), the
//! per-epoch history (`history`, `metrics.csv`) and what early stopping makes of it
//! (`early_stop`), the checkpoints (`checkpoint`), what a finished run reports (`report`), its
//! `summary.json` (`summary`), its curves (`curves`) and the listing of many runs (`listing`).
//! Training writes into these; nothing here knows how training works.

pub mod checkpoint;
pub mod curves;
pub mod early_stop;
pub mod folder;
pub mod history;
pub mod listing;
pub mod report;
pub mod summary;
