//! Where a run's numbers go besides `metrics.csv`: TensorBoard event files in the run folder
//! ([`events`], on unless `tensorboard = false`).

pub mod events;
pub mod tfrecord;
