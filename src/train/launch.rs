//! The backend-specific half of `ember train`: on the chosen backend, the job's model and
//! optimizer, the run folder (new or resumed), the device loaders, and Burn's
//! `SupervisedTraining` with ember's strategy; then the final model files.

use super::metrics::{NullLogger, RunningMetric};
use super::reports::ReportClock;
use super::schedule::Schedule;
use super::strategy::SaveBest;
use super::strategy::{EmberStrategy, RunLog};
use super::{TrainArgs, signals};
use crate::config::JobConfig;
use crate::console::Console;
use crate::data::HostData;
use crate::data::loader::{DeviceLoader, EpochCell, LoaderBuilder};
use crate::device::{self, Device, OnBackend, TrainBackend};
use crate::error::{EmberError, Result};
use crate::export::{self, Layout};
use crate::fs::write_atomic;
use crate::input_err;
use crate::model::{EmberModel, TrainableModel, WithModel};
use crate::optim::{Chosen, WithOptimizer};
use crate::run::checkpoint;
use crate::run::folder::{self, RunDir};
use crate::run::history::{EpochRecord, History};
use burn::optim::Optimizer;
use burn::train::{Learner, LearningComponentsMarker, SupervisedTraining, TrainingStrategy};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Everything `ember train` hands to the chosen backend.
pub(super) struct TrainTask<'a> {
    pub config: JobConfig,
    pub device: Device,
    pub data: &'a HostData,
    pub args: &'a TrainArgs,
    pub console: &'a Console,
    pub log: Arc<Mutex<RunLog>>,
    /// The run's MLflow tracker, when a server is named.
    pub tracker: Option<Arc<crate::tracking::mlflow::Tracker>>,
}

/// What the backend-specific part hands back.
pub(super) struct Trained {
    pub run_dir: PathBuf,
    pub params: usize,
}

impl OnBackend for TrainTask<'_> {
    type Output = Result<Trained>;

    fn run<B: TrainBackend>(self, device: B::Device) -> Result<Trained> {
        let config = self.config.clone();
        with_model_and_optimizer::<B, _>(&config, device, self)
    }
}

impl<B: TrainBackend> Training<B> for TrainTask<'_> {
    type Output = Result<Trained>;

    fn run<M, O>(self, model: M, optimizer: O, lr: f64, device: B::Device) -> Result<Trained>
    where
        M: TrainableModel<B>,
        O: Optimizer<M, B> + 'static,
    {
        self.launch(model, optimizer, lr, device)
    }
}

/// Work that trains a job's model with its optimizer: `ember train` and the bench's bare loop.
pub trait Training<B: TrainBackend> {
    type Output;
    fn run<M, O>(self, model: M, optimizer: O, lr: f64, device: B::Device) -> Self::Output
    where
        M: TrainableModel<B>,
        O: Optimizer<M, B> + 'static;
}

/// Runs `task` with the model of `config`'s job (initial weights drawn from its seed) and the
/// optimizer of its `[sgd]` or `[adam]` section: the one generic entry into training.
pub fn with_model_and_optimizer<B: TrainBackend, T: Training<B>>(
    config: &JobConfig,
    device: B::Device,
    task: T,
) -> T::Output {
    struct ForModel<'c, D, T> {
        config: &'c JobConfig,
        device: D,
        task: T,
    }
    impl<B: TrainBackend, T: Training<B>> WithModel<B> for ForModel<'_, B::Device, T> {
        type Output = T::Output;
        fn run<M: TrainableModel<B>>(self) -> T::Output {
            let model = M::init(self.config, &self.device);
            let optimizer = Chosen::from_spec(&self.config.optimizer);
            optimizer.run(ForOptimizer { with: self, model })
        }
    }
    struct ForOptimizer<'c, D, T, M> {
        with: ForModel<'c, D, T>,
        model: M,
    }
    impl<B, T, M> WithOptimizer<B, M> for ForOptimizer<'_, B::Device, T, M>
    where
        B: TrainBackend,
        T: Training<B>,
        M: TrainableModel<B>,
    {
        type Output = T::Output;
        fn run<O: Optimizer<M, B> + 'static>(self, optimizer: O, lr: f64) -> T::Output {
            let ForModel { device, task, .. } = self.with;
            task.run(self.model, optimizer, lr, device)
        }
    }
    let task = ForModel {
        config,
        device,
        task,
    };
    crate::model::for_model::<B, _>(config.model.kind, task)
}

/// The Learner type of a model and optimizer on a backend.
type LearnerOf<B, M, O> = Learner<Components<B, M, O>>;

/// The Learner's components: ember's one schedule type beside the model and optimizer.
pub type Components<B, M, O> = LearningComponentsMarker<B, Schedule, M, O>;

/// A run folder opened for training: new, or resumed after its last checkpoint.
struct OpenRun {
    run: RunDir,
    resume_epoch: Option<usize>,
    history: Vec<EpochRecord>,
    /// Its training has ended, but not its final files: they are written from the checkpoint.
    finishing: bool,
}

impl TrainTask<'_> {
    fn launch<B, M, O>(self, model: M, optimizer: O, lr: f64, device: B::Device) -> Result<Trained>
    where
        B: TrainBackend,
        M: TrainableModel<B>,
        O: Optimizer<M, B> + 'static,
    {
        let params = model.num_params();
        let model = self.initial_weights(model)?;
        let schedule = Schedule::new(&self.config.schedule, lr, self.steps_per_epoch());
        let mut learner: LearnerOf<B, M, O> = Learner::new(model, optimizer, schedule);
        let open = self.open_run(&mut learner, params, &device)?;
        self.console
            .line(&format!("artifacts: {}", open.run.path.display()));
        if open.finishing {
            return self.finish_run::<B, M, O>(&learner, &open, params);
        }
        let epoch_cell = EpochCell::default();
        let (train, valid) = self.loaders::<B, M>(&epoch_cell, &device)?;
        let steps_per_epoch = train.batches_per_epoch();
        self.log.lock().expect("run log lock").history = open.history.clone();
        let strategy = self.strategy(&open.run, epoch_cell, device);
        std::fs::create_dir_all(open.run.file(folder::CHECKPOINTS))
            .map_err(|e| EmberError::write(&open.run.file(folder::CHECKPOINTS), e))?;
        let training = self.supervised(&open, strategy, train, valid, steps_per_epoch);
        let result = training.launch(learner);
        self.console.finish();
        if self.log.lock().expect("run log lock").failure.is_none() {
            self.save_final_model::<B, M::Inference>(&result.model, &open.run);
        }
        Ok(Trained {
            run_dir: open.run.path.clone(),
            params,
        })
    }

    /// A run whose training ended without its final files (the disk filled, a kill): the
    /// model files from its last checkpoint, its `metrics.csv` from the checkpoint's records.
    fn finish_run<B, M, O>(
        &self,
        learner: &LearnerOf<B, M, O>,
        open: &OpenRun,
        params: usize,
    ) -> Result<Trained>
    where
        B: TrainBackend,
        M: TrainableModel<B>,
        O: Optimizer<M, B> + 'static,
    {
        let records = open.history.clone();
        self.log.lock().expect("run log lock").history = records.clone();
        let metrics = History::new(open.run.file(folder::METRICS), records).write_all();
        match metrics {
            Ok(()) => self.save_final_model::<B, M::Inference>(&learner.model().valid(), &open.run),
            Err(e) => self.log.lock().expect("run log lock").failure = Some(e),
        }
        Ok(Trained {
            run_dir: open.run.path.clone(),
            params,
        })
    }

    /// Batches per training epoch, as the loader will cut them.
    fn steps_per_epoch(&self) -> usize {
        let (rows, size) = (self.data.train.rows(), self.config.batch_size);
        if self.config.drop_last {
            rows / size
        } else {
            rows.div_ceil(size)
        }
    }

    /// The model with `--init-from`'s weights, when given.
    fn initial_weights<B: TrainBackend, M: TrainableModel<B>>(&self, model: M) -> Result<M> {
        let Some(path) = &self.args.init_from else {
            return Ok(model);
        };
        let model = export::load_safetensors(model, path, Layout::Pytorch)?;
        self.console
            .line(&format!("initial weights: {}", path.display()));
        Ok(model)
    }

    /// A new run folder with the resolved config, or, with `--resume`, the given one with the
    /// learner restored from its last complete checkpoint onto `device` (Burn 0.21's own
    /// checkpoint loading would put it on the default device).
    fn open_run<B, M, O>(
        &self,
        learner: &mut LearnerOf<B, M, O>,
        params: usize,
        device: &B::Device,
    ) -> Result<OpenRun>
    where
        B: TrainBackend,
        M: TrainableModel<B>,
        O: Optimizer<M, B> + 'static,
    {
        // Checkpoints (model + optimizer state, two epochs at most during a commit) and the
        // final model in two formats, with room to spare.
        let needed = 16 * 4 * params as u64 + 32 * 1024 * 1024;
        let Some(dir) = &self.args.resume else {
            let run = RunDir::create(self.args.out.as_deref(), self.config.name(), needed)?;
            write_atomic(&run.file(folder::CONFIG), self.config.to_toml().as_bytes())?;
            if let Some(job) = &self.args.drafted_job {
                write_atomic(&run.file(folder::DRAFTED_JOB), job.as_bytes())?;
            }
            return Ok(OpenRun {
                run,
                resume_epoch: None,
                history: Vec::new(),
                finishing: false,
            });
        };
        let run = RunDir::open(dir, needed)?;
        let ckpt_dir = run.file(folder::CHECKPOINTS);
        let Some((manifest, notes)) = checkpoint::latest_intact(&ckpt_dir)? else {
            self.console.line(&format!(
                "note: {} holds no complete checkpoint; training it again from epoch 1 with its {}",
                dir.display(),
                folder::CONFIG
            ));
            return Ok(OpenRun {
                run,
                resume_epoch: None,
                history: Vec::new(),
                finishing: false,
            });
        };
        notes
            .iter()
            .for_each(|n| self.console.line(&format!("note: {n}")));
        checkpoint::remove_leftovers(&ckpt_dir);
        let finishing = self.check_resumable(&run, &manifest)?;
        checkpoint::restore(learner, &ckpt_dir, &manifest, device)?;
        self.console.line(&match finishing {
            true => format!(
                "finishing {}: training ended after epoch {}; writing its final files",
                dir.display(),
                manifest.epoch
            ),
            false => format!(
                "resuming {} after epoch {}/{}",
                dir.display(),
                manifest.epoch,
                self.config.epochs
            ),
        });
        Ok(OpenRun {
            run,
            resume_epoch: Some(manifest.epoch),
            history: manifest.history,
            finishing,
        })
    }

    /// A checkpoint resumes only under the config it was made with, and only with epochs left,
    /// or, where training has ended, to write final files that are missing: returns whether
    /// that is what is left to do.
    fn check_resumable(&self, run: &RunDir, manifest: &checkpoint::Manifest) -> Result<bool> {
        if manifest.config_hash != self.config.hash() {
            return Err(input_err!(
                "{}: the checkpoint was made with another config than {}",
                run.file(folder::CHECKPOINTS).display(),
                run.file(folder::CONFIG).display()
            ));
        }
        let stopped_early = (self.config.early_stopping.as_ref())
            .and_then(|rule| crate::run::early_stop::decide(&manifest.history, rule))
            .is_some_and(|d| d.stop);
        let ended = stopped_early || manifest.epoch >= self.config.epochs;
        if ended && !final_files_written(run) {
            return Ok(true);
        }
        if let Some(rule) = self
            .config
            .early_stopping
            .as_ref()
            .filter(|_| stopped_early)
        {
            return Err(input_err!(
                "{}: early stopping ended this run after epoch {} ({} epochs without an improvement); its best model is {}",
                run.path.display(),
                manifest.epoch,
                rule.patience,
                folder::MODEL_BEST_BURN
            ));
        }
        if manifest.epoch >= self.config.epochs {
            return Err(input_err!(
                "{}: already trained all {} epochs; pass --epochs N (N > {}) to train further",
                run.path.display(),
                self.config.epochs,
                manifest.epoch
            ));
        }
        Ok(false)
    }

    /// The training and validation splits, uploaded once. Validation never shuffles nor drops
    /// rows.
    #[allow(clippy::type_complexity)]
    fn loaders<B: TrainBackend, M: TrainableModel<B>>(
        &self,
        epoch_cell: &EpochCell,
        device: &B::Device,
    ) -> Result<(
        DeviceLoader<B, M::Batch>,
        DeviceLoader<B::Inference, <M::Inference as EmberModel<B::Inference>>::Batch>,
    )> {
        let config = &self.config;
        self.console.status("uploading data to the device");
        let max_bytes = device::max_tensor_bytes(self.device);
        let train = &self.data.train;
        let train_loader = LoaderBuilder::new(config.batch_size)
            .drop_last(config.drop_last)
            .shuffle(config.shuffle.then_some(config.seed))
            .epoch(epoch_cell.clone())
            .max_tensor_bytes(max_bytes)
            .build(train, train.row_bytes(), device.clone(), |rows| {
                M::batch(rows, device)
            });
        if train_loader.batches_per_epoch() == 0 {
            return Err(input_err!(
                "batch_size = {} with drop_last leaves no full batch of the {} training rows",
                config.batch_size,
                train_loader.num_rows()
            ));
        }
        let valid = &self.data.valid;
        let valid_loader = LoaderBuilder::evaluation(config.batch_size)
            .max_tensor_bytes(max_bytes)
            .build(valid, valid.row_bytes(), device.clone(), |rows| {
                M::Inference::batch(rows, device)
            });
        Ok((train_loader, valid_loader))
    }

    fn strategy<B: TrainBackend, M, O>(
        &self,
        run: &RunDir,
        epoch_cell: EpochCell,
        device: B::Device,
    ) -> EmberStrategy<Components<B, M, O>>
    where
        M: TrainableModel<B>,
        O: Optimizer<M, B> + 'static,
    {
        EmberStrategy {
            device,
            epoch_cell,
            checkpoints: checkpoint::CheckpointDir::new(run.file(folder::CHECKPOINTS)),
            config_hash: self.config.hash(),
            run_dir: run.path.clone(),
            log: self.log.clone(),
            console: self.console.clone(),
            stop: signals::StopSignal::install(),
            reports: ReportClock::new(
                (self.args.progress_every > 0.0)
                    .then(|| Duration::from_secs_f64(self.args.progress_every)),
            ),
            checkpoint_every: Duration::from_secs_f64(self.args.checkpoint_every.max(0.0)),
            wait_for_checkpoints: self.device != Device::Cpu,
            step_seed: self
                .config
                .model
                .draws_per_step()
                .then_some(self.config.seed),
            clip_grad_norm: self.config.clip_grad_norm,
            target_std: self.config.target_std(),
            tensorboard: self.config.tensorboard,
            tracker: self.tracker.clone(),
            early_stopping: self.config.early_stopping.clone(),
            save_best: self
                .config
                .early_stopping
                .is_some()
                .then(|| self.best_saver::<B, M, O>(run)),
        }
    }

    /// Burn's `SupervisedTraining` with ember's strategy, loaders, metrics and renderer.
    #[allow(clippy::type_complexity)]
    fn supervised<B: TrainBackend, M: TrainableModel<B>, O: Optimizer<M, B> + 'static>(
        &self,
        open: &OpenRun,
        strategy: EmberStrategy<Components<B, M, O>>,
        train: DeviceLoader<B, M::Batch>,
        valid: DeviceLoader<B::Inference, <M::Inference as EmberModel<B::Inference>>::Batch>,
        steps_per_epoch: usize,
    ) -> SupervisedTraining<Components<B, M, O>> {
        let epochs = self.config.epochs;
        let mut training =
            SupervisedTraining::new(&open.run.path, Arc::new(train), Arc::new(valid))
                .with_training_strategy(TrainingStrategy::Custom(Arc::new(strategy)))
                .with_metric_logger(NullLogger)
                .with_application_logger(None)
                .num_epochs(epochs)
                .metric_train_numeric(RunningMetric::loss())
                .metric_valid_numeric(RunningMetric::loss());
        if self.config.task.is_classifier() {
            training = training
                .metric_train_numeric(RunningMetric::accuracy())
                .metric_valid_numeric(RunningMetric::accuracy());
        }
        if let Some(epoch) = open.resume_epoch {
            training = training.checkpoint(epoch);
        }
        if self.args.tui && std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            let interrupter = training.interrupter();
            training.renderer(burn::train::renderer::tui::TuiMetricsRendererWrapper::new(
                interrupter,
                open.resume_epoch,
            ))
        } else {
            training.renderer(self.console.renderer(epochs, steps_per_epoch))
        }
    }

    /// Writes `model-best.mpk` and `model-best.safetensors`, for early stopping.
    fn best_saver<B, M, O>(&self, run: &RunDir) -> SaveBest<Components<B, M, O>>
    where
        B: TrainBackend,
        M: TrainableModel<B>,
        O: Optimizer<M, B> + 'static,
    {
        let burn_path = run.file(folder::MODEL_BEST_BURN);
        let torch_path = run.file(folder::MODEL_BEST_SAFETENSORS);
        let name = self.config.name();
        Box::new(move |model: &M::Inference| {
            export::save_model(model, (&burn_path, &torch_path), name)
        })
    }

    /// `model.mpk` (Burn's record) and `model.safetensors` (PyTorch's layout and names), and
    /// with `--export onnx`, `model.onnx`. A failure is the run's: its checkpoint stays, and
    /// `--resume` writes the files again.
    fn save_final_model<B: TrainBackend, M: EmberModel<B::Inference>>(
        &self,
        model: &M,
        run: &RunDir,
    ) {
        if let Err(e) = self.write_final_files::<B, M>(model, run) {
            self.log.lock().expect("run log lock").failure = Some(e);
        }
    }

    fn write_final_files<B: TrainBackend, M: EmberModel<B::Inference>>(
        &self,
        model: &M,
        run: &RunDir,
    ) -> Result<()> {
        let files = (
            run.file(folder::MODEL_BURN),
            run.file(folder::MODEL_SAFETENSORS),
        );
        let restored = self.restore_best::<B, M>(model, run)?;
        let model = restored.as_ref().unwrap_or(model);
        export::save_model(model, (&files.0, &files.1), self.config.name())?;
        if self.args.export.contains(&crate::export::Format::Onnx) {
            let bytes = crate::onnx::bytes(&self.config, &model.network())?;
            crate::fs::write_atomic(&run.file(folder::MODEL_ONNX), &bytes)?;
        }
        Ok(())
    }

    /// With `restore_best`, where the best epoch is not the last: `model` with the best
    /// epoch's weights, read back from `model-best.mpk` (written when that epoch ended).
    fn restore_best<B: TrainBackend, M: EmberModel<B::Inference>>(
        &self,
        model: &M,
        run: &RunDir,
    ) -> Result<Option<M>> {
        let log = self.log.lock().expect("run log lock");
        let history = &log.history;
        let kept =
            crate::run::early_stop::model_epoch(history, self.config.early_stopping.as_ref());
        if kept == history.last().map(|r| r.epoch) {
            return Ok(None);
        }
        let device = model.devices().into_iter().next().unwrap_or_default();
        let best = export::load_burn(model.clone(), &run.file(folder::MODEL_BEST_BURN), &device)?;
        Ok(Some(best))
    }
}

/// Whether a run's final files are all written: its model files, and a summary that says it
/// completed (a run stopped while writing them says otherwise, or has none).
fn final_files_written(run: &RunDir) -> bool {
    let models = [folder::MODEL_BURN, folder::MODEL_SAFETENSORS];
    let summary = crate::run::summary::Summary::read(&run.file(folder::SUMMARY));
    models.iter().all(|f| run.file(f).is_file()) && summary.is_ok_and(|s| s.status == "complete")
}
