//! Where a run's numbers go besides `metrics.csv`: TensorBoard event files in the run folder
//! ([`events`], on unless `tensorboard = false`), and an MLflow tracking server when one is
//! named ([`mlflow`]).

pub mod events;
pub mod mlflow;
pub mod tfrecord;
