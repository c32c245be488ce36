//! The trainer for Burn 0.22 users: DenseNet-BC on real images (or the GPT on a text) through
//! burn-train's `Learner` and `SupervisedTraining`, once per checkpoint method asked for, every
//! method from the same seed, and the table of memory, time per step and accuracy at the end.

use std::io::IsTerminal;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail, ensure};
use app_kit::args::{Sgd, byte_size, positive};
use app_kit::densenet::DenseNetShape;
use app_kit::out_of_memory::{RanOutOfMemory, Refused};
use app_kit::output::{writable_dir, writable_file};
use app_kit::save::SaveDir;
use app_kit::schedule;
use app_kit::table::{MethodRow, PlanPeaks};
use app_kit::timeline::TimelineArgs;

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::Dataset;
use burn::data::dataset::transform::PartialDataset;
use burn::lr_scheduler::LrSchedulerConfig;
use burn::lr_scheduler::module_lr_scheduler::ModuleLrScheduler;
use burn::lr_scheduler::sequential::SequentialLrSchedulerConfig;
use burn::module::Module;
use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{ModuleOptimizer, SgdConfig};
use burn::store::ModuleRecord;
use burn::tensor::{Bytes, Device};
use burn::train::metric::{AccuracyMetric, LossMetric};
use burn::train::{
    ExecutionStrategy, Learner, MultiDeviceOptim, SupervisedTraining, TrainingStrategy,
};
use burn_checkpoint_22::memory::{MemoryMeter, Meter, OutOfMemory, Timeline};
use burn_checkpoint_22::planner::{Base, Candidates, FitError, Profile, Treatment, autodiff_on};
use burn_checkpoint_22_models::densenet::DenseNet;
use burn_checkpoint_22_models::gpt::Gpt;
use burn_checkpoint_22_models::{Cut, initialised};
use burn_checkpoint_core::memory::{mib, size};
use clap::{Parser, ValueEnum};
use image_data::seeds::{Purpose, derive};
use image_data::{DataSource, Images, Splits};

use crate::budget::Guard;
use crate::classifier::{Batch, Classifier, Network, Probe, Probed};
use crate::devices::Devices;
use crate::images::{ImageBatcher, ImageDataset};
use crate::parameters;
use crate::save::{self, SavedMethod, SavedPlan, SavedRun, Saving, Settings};
use crate::stop::{Interrupted, StopRequest};
use crate::text::{Text, TokenBatcher, VOCAB};

/// Trains DenseNet-BC (or a GPT, `--model gpt`) on Burn 0.22 through burn-train's Learner, with
/// Burn's own checkpointing and with checkpoint regions, and prints a table of peak step memory,
/// time per step and accuracy per method. The defaults are the 0.21 trainer's (the reference
/// "memory-efficient DenseNet" demo: DenseNet-BC-100, growth 12, batch 64, SGD lr 0.1, Nesterov
/// momentum 0.9, weight decay 1e-4, the rate divided by 10 at 50% and 75% of the epochs).
#[derive(Parser, Debug, Clone)]
#[command(name = "train22", version, args_override_self = true)]
pub struct Options {
    /// The network: densenet (DenseNet-BC on --data's images, a region per dense layer) or gpt
    /// (a GPT predicting each next byte of --text, a region per block).
    #[arg(long, value_enum, default_value = "densenet")]
    pub model: Model,

    /// The data set. fashion-mnist: Debian's dataset-fashion-mnist package (or --data-dir);
    /// cifar10: the binary version in --data-dir; synthetic: random CIFAR-shaped images.
    #[arg(long, value_enum, default_value = "fashion-mnist")]
    pub data: DataSource,

    /// Where the data set's files are (Fashion-MNIST: default /usr/share/datasets/fashion-mnist;
    /// CIFAR-10: required).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,

    /// The text the GPT learns (--model gpt): any file, its bytes the tokens, the last tenth
    /// of it the validation split (e.g. /usr/share/common-licenses/GPL-3).
    #[arg(long, value_name = "FILE")]
    pub text: Option<PathBuf>,

    /// The methods to train, comma-separated, each from the same seed. plain: plain autodiff;
    /// balanced: Burn's gradient checkpointing (the Learner's `gradient_checkpointing()`);
    /// regions: a region per dense layer (per block, --model gpt), on top of balanced;
    /// regions-save: the same regions keeping their compute-bound outputs (matmul, conv,
    /// pooling: `Policy::SaveComputeBound`).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "regions")]
    pub checkpoint: Vec<Method>,

    /// Images (text windows, --model gpt) per training step and per validation batch.
    #[arg(long, default_value_t = 64, value_parser = positive())]
    pub batch_size: usize,

    /// The devices to train on, comma-separated, all of one kind: cpu (burn-flex; also flex),
    /// wgpu (the default adapter: Mesa's lavapipe where there is no GPU) or wgpu:N (discrete
    /// GPUs; `--features wgpu`), cuda or cuda:N (`--features cuda`); or a count, N CPU devices.
    /// With more than one, burn-train's multi-device strategy (each device a share of the
    /// training images and a batch of its own per step, the gradients summed on the first, one
    /// optimizer update). The memory column is the host's on the CPU (all devices' steps
    /// together), the first device's pools on wgpu and CUDA (bytes in use, and reserved).
    #[arg(long, visible_alias = "device", default_value = "cpu", value_parser = Devices::parse)]
    pub devices: Devices,

    /// Epochs to train.
    #[arg(long, default_value_t = 1, value_parser = positive())]
    pub epochs: usize,

    /// The optimizer: `--lr`, `--momentum`, `--weight-decay`.
    #[command(flatten)]
    pub sgd: Sgd,

    /// The DenseNet-BC: `--depth`, `--growth` (also `--growth-rate`).
    #[command(flatten)]
    pub densenet: DenseNetShape,

    /// GPT blocks (--model gpt).
    #[arg(long, default_value_t = 4, value_parser = positive())]
    pub blocks: usize,

    /// GPT width (--model gpt), a multiple of --heads.
    #[arg(long, default_value_t = 128, value_parser = positive())]
    pub d_model: usize,

    /// GPT attention heads (--model gpt).
    #[arg(long, default_value_t = 4, value_parser = positive())]
    pub heads: usize,

    /// GPT context (--model gpt): bytes each window gives it to predict from.
    #[arg(long, default_value_t = 128, value_parser = positive())]
    pub context: usize,

    /// GPT attention dropout (--model gpt), from 0 to below 1. Above 0, every block's region
    /// reseeds the generator for its masks: regions then train another (equally random) run
    /// than none and balanced, the same one run after run.
    #[arg(long, default_value_t = 0.0)]
    pub dropout: f64,

    /// Seed of the initial weights and the shuffling.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Training batches per epoch (the first ones of the training split), for quick runs.
    #[arg(long, value_name = "N", value_parser = positive())]
    pub limit: Option<usize>,

    /// Validation batches per evaluation (the first ones of the test split); default: all.
    #[arg(long, value_name = "N", value_parser = positive())]
    pub valid_limit: Option<usize>,

    /// Before training with regions, profile a step region by region on a copy of the model
    /// (every region kept, then recomputed) and print the memory report.
    #[arg(long)]
    pub memory_report: bool,

    /// Fit each training step with regions in SIZE (6GiB, 512MiB, 1.5GB, or bytes): the budget
    /// planner chooses, for each region (dense layer, block), keep or recompute at the least
    /// recompute time, from steps profiled on a copy of the model, checks the plan on a step, and
    /// every training step runs under it; an error says the smallest peak reachable if SIZE cannot
    /// be met. SIZE is, on the CPU, the step's peak above what it starts with (the table's
    /// Memory); on a device, what its pools hold during the step, the model's pages included
    /// (the table's Reserved). Needs regions in --checkpoint.
    #[arg(long, value_name = "SIZE", value_parser = byte_size)]
    pub memory_budget: Option<u64>,

    /// Where burn-train writes its logs, metrics and checkpoints (one folder per method);
    /// default: a temporary folder, removed at the end.
    #[arg(long)]
    pub artifact_dir: Option<PathBuf>,

    /// Write the table's rows to FILE as JSON, each method's as it finishes (atomically: a
    /// run stopped at any point leaves the rows of the methods that finished).
    #[arg(long)]
    pub json: Option<PathBuf>,

    /// Save the run in DIR at each epoch's end: each method's model, optimizer state, schedule
    /// and what its steps measured, written atomically with their SHA-256 (a run stopped at any
    /// point leaves its last complete epoch loadable), and the rows of the methods that
    /// finished. DIR must be new or empty, or hold this run (--resume).
    #[arg(long, value_name = "DIR")]
    pub save: Option<PathBuf>,

    /// Continue the run saved in --save DIR: the methods that finished are read back, the one
    /// in progress goes on from its last complete epoch, with the results of an uninterrupted
    /// run (on the CPU bit for bit); the settings must be the saved run's.
    #[arg(long, requires = "save")]
    pub resume: bool,

    /// Stop after N epochs of this invocation (counted across the methods), the run saved for
    /// --resume.
    #[arg(long, value_name = "N", requires = "save", value_parser = positive())]
    pub stop_after: Option<usize>,

    /// A training step's memory over time: `--memory-timeline FILE` (`.svg`, `.png`, `.json`),
    /// `--timeline-step N`, `--timeline-overlay FILE.json`.
    #[command(flatten)]
    pub timeline: TimelineArgs,
}

/// Where a run stopped by a failed allocation was when the planner's steps failed
/// ([`RanOutOfMemory::during`]): no budget can be suggested then.
pub const PLANNING: &str = "planning (a profiled or checked step)";

/// The network the trainer trains.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Model {
    /// DenseNet-BC on images.
    Densenet,
    /// A GPT on a text's bytes.
    Gpt,
}

app_kit::method_names! {
    /// What a training step keeps between forward and backward, by the names of app-kit's one table
    /// (`MethodName`): the Burn 0.21 trainer's words are aliases (`none`, `layer`, `layer-save`,
    /// `regions-save-compute`).
    pub enum Method {
        /// Plain autodiff: every activation backward needs is held.
        Plain,
        /// Burn's gradient checkpointing (Balanced): cheap, memory-bound ops are recomputed.
        Balanced,
        /// A region per dense layer (GPT block) on top of Balanced: their activations are
        /// recomputed in backward ([`Cut::Regions`]).
        Regions,
        /// The same regions keeping their compute-bound outputs
        /// ([`Cut::RegionsSave`]).
        RegionsSave,
    }
}

impl Method {
    /// What the method trains on: Burn's checkpointing (Balanced) for every method but plain.
    fn base(self) -> Base {
        match self {
            Method::Plain => Base::Plain,
            _ => Base::Balanced,
        }
    }

    /// Where the network's regions go.
    fn cut(self) -> Cut {
        match self {
            Method::Plain | Method::Balanced => Cut::None,
            Method::Regions => Cut::Regions,
            Method::RegionsSave => Cut::RegionsSave,
        }
    }
}

/// What one method's training gave.
#[derive(Debug, Clone)]
pub struct Trained {
    /// The table's row.
    pub row: MethodRow,
    /// The trained parameters (running statistics included), named, in visiting order.
    pub parameters: Vec<(String, Vec<f32>)>,
    /// Each training step's peak memory, in bytes.
    pub step_peaks: Vec<u64>,
    /// On a device, the most bytes its pools reserved over the training (steps, updates,
    /// validation): what a `--memory-budget` promises to hold ([`Probed::run_reserved`]).
    pub run_reserved_bytes: Option<u64>,
    /// Where a device run kept the budget step by step ([`Guard`]): how many times a step ran
    /// another plan than the step before.
    pub plan_changes: Option<usize>,
    /// The timeline of `--timeline-step`, where `--memory-timeline` asked for it and the run
    /// had that many steps.
    pub timeline: Option<Timeline>,
}

/// Where a method starts: its save, if the run saves, and what of it was saved before.
struct Resume {
    saved: Option<SavedMethod>,
    saving: Option<Saving>,
    /// `--stop-after`'s epochs left to this invocation.
    epochs_left: Option<usize>,
}

/// What a method's training gave: the method trained (none where it stopped before its end)
/// and its epochs complete, in all and in this invocation.
struct Outcome {
    trained: Option<Trained>,
    epochs_done: usize,
    epochs_trained: usize,
}

impl Options {
    /// Refuses settings that would not train.
    pub fn check(&self) -> anyhow::Result<()> {
        match self.model {
            Model::Densenet => ensure!(
                self.densenet.depth >= 10 && (self.densenet.depth - 4).is_multiple_of(6),
                "--depth {}: DenseNet-BC's depth is 6n + 4 with n ≥ 1 (10, 16, 22, 40, 100, …)",
                self.densenet.depth
            ),
            Model::Gpt => {
                ensure!(
                    self.text.is_some(),
                    "--model gpt learns a text: --text FILE (any file; e.g. \
                     /usr/share/common-licenses/GPL-3)"
                );
                ensure!(
                    (0.0..1.0).contains(&self.dropout),
                    "--dropout {}: a probability from 0 to below 1",
                    self.dropout
                );
                ensure!(
                    self.d_model.is_multiple_of(self.heads),
                    "--d-model {} is not a multiple of --heads {}",
                    self.d_model,
                    self.heads
                );
            }
        }
        ensure!(!self.checkpoint.is_empty(), "--checkpoint: name a method");
        ensure!(
            self.checkpoint.contains(&Method::Regions)
                || !(self.memory_report || self.memory_budget.is_some()),
            "--memory-report and --memory-budget are about regions: add regions to --checkpoint \
             (e.g. --checkpoint regions)"
        );
        Ok(())
    }

    /// What the run trains, for its memory timeline's title: the model, its shape and batch.
    pub fn title(&self) -> String {
        let model = match self.model {
            Model::Densenet => self.densenet.describe(),
            Model::Gpt => format!(
                "GPT, {} blocks of width {}, context {}",
                self.blocks, self.d_model, self.context
            ),
        };
        format!("{model}, batch {}", self.batch_size)
    }

    /// Trains each method of `--checkpoint` in turn, on `meter`'s memory.
    pub fn train_all(&self, meter: &Meter) -> anyhow::Result<Vec<Trained>> {
        let mut trained = Vec::new();
        self.train_into(meter, &StopRequest::new(), &mut trained, &mut |_| Ok(()))?;
        Ok(trained)
    }

    /// Trains each method of `--checkpoint` in turn, on `meter`'s memory, each pushed on
    /// `trained` as it finishes, then given to `finished` (the rows so far: `--json` writes
    /// them): where one fails, those before it are there. A step or validation batch that fails
    /// to allocate on the device stops the run with app-kit's
    /// [`RanOutOfMemory`] under the error's context (its
    /// [`exit_status`](app_kit::out_of_memory::exit_status) is 3); `stop` stops it at a step
    /// boundary with [`Interrupted`], as `--stop-after` does. With `--save`, every epoch is
    /// saved; with `--resume`, the saved run goes on.
    pub fn train_into(
        &self,
        meter: &Meter,
        stop: &StopRequest,
        trained: &mut Vec<Trained>,
        finished: &mut dyn FnMut(&[Trained]) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        self.check()?;
        let data = match self.model {
            Model::Gpt => {
                let text = self.text.as_deref().expect("check: --model gpt has --text");
                let (train, valid) = Text::read(text, self.context)?;
                Data::Text { train, valid }
            }
            Model::Densenet => Data::Images(image_data::load(
                self.data,
                self.data_dir.as_deref(),
                self.seed,
            )?),
        };
        // Only DenseNet-BC has batch norm.
        if self.devices.count() > 1
            && self
                .checkpoint
                .iter()
                .any(|method| method.cut() != Cut::None)
            && self.model == Model::Densenet
        {
            eprintln!(
                "note: on several devices, batch norm's running statistics inside regions can \
                 differ in their last bits from run to run (the weights do not): Burn 0.22's \
                 RunningState averages the workers' pending updates whenever a copy is made, and \
                 a region's recompute needs one (docs/burn-0.22-train.md)"
            );
        }
        self.check_outputs(&data)?;
        let (_claimed, saving) = self.claim_save()?;
        let artifacts = match &self.artifact_dir {
            Some(dir) => Artifacts::Kept(dir.clone()),
            None => Artifacts::Temporary(tempfile::tempdir().context("a temporary folder")?),
        };
        // A second SIGINT ends the process at once: the temporary folder goes first.
        let _removed = match &artifacts {
            Artifacts::Temporary(dir) => Some(stop.removes_on_exit(dir.path())),
            Artifacts::Kept(_) => None,
        };
        let mut epochs_left = self.stop_after;
        for (index, &method) in self.checkpoint.iter().enumerate() {
            let saved = saving.as_ref().and_then(|s| s.saved(method.name()));
            if let Some(saved) = saved.clone().filter(|saved| saved.row.is_some())
                && let Some(saving) = &saving
            {
                trained.push(self.restored(method, &data, saved, &saving.root(), meter)?);
                finished(trained)?;
                continue;
            }
            let done = saved.as_ref().map_or(0, |saved| saved.epochs_done);
            let stopped_after = || (format!("--stop-after {}", self.stop_after.unwrap_or(0)), 0);
            let interrupted = |(reason, status): (String, u8), epochs_done| Interrupted {
                method: method.name().to_string(),
                reason,
                epochs_done,
                epochs: self.epochs,
                resume: Some(self.resume_hint()),
                status,
            };
            if let Some(reason) = stop.reason() {
                return Err(interrupted(reason, None).into());
            }
            if epochs_left == Some(0) {
                return Err(interrupted(stopped_after(), (done > 0).then_some(done)).into());
            }
            if !std::io::stderr().is_terminal() {
                eprintln!(
                    "--checkpoint {} ({} of {}): {}",
                    method.name(),
                    index + 1,
                    self.checkpoint.len(),
                    match done {
                        0 => format!("training {} epoch(s)", self.epochs),
                        done => format!("resuming after epoch {done} of {}", self.epochs),
                    }
                );
            }
            let dir = artifacts.path().join(method.name());
            let run = Resume {
                saved,
                saving: saving.clone(),
                epochs_left,
            };
            let outcome = self.train(method, &data, dir, meter, stop, run)?;
            if let Some(left) = &mut epochs_left {
                *left -= outcome.epochs_trained;
            }
            match outcome.trained {
                Some(done) => {
                    trained.push(done);
                    finished(trained)?;
                }
                None => {
                    let reason = stop.reason().unwrap_or_else(stopped_after);
                    return Err(interrupted(reason, Some(outcome.epochs_done)).into());
                }
            }
        }
        Ok(())
    }

    /// With `--save`, the directory claimed (refused, exit status 2, where it cannot be) and
    /// the run saved there: the one read back with `--resume`, else a new one.
    fn claim_save(&self) -> anyhow::Result<(Option<SaveDir>, Option<Saving>)> {
        let Some(root) = &self.save else {
            return Ok((None, None));
        };
        let refused = |error: anyhow::Error| anyhow::Error::new(Refused(format!("{error:#}")));
        let claimed = SaveDir::claim(root, self.resume).map_err(refused)?;
        let settings = self.settings();
        let run = match self.resume {
            true => save::read(root, &settings).map_err(refused)?,
            false => SavedRun {
                format: save::FORMAT,
                settings,
                methods: Vec::new(),
            },
        };
        let saving = Saving::new(&claimed, run);
        Ok((Some(claimed), Some(saving)))
    }

    /// What a stopped run says to go on.
    fn resume_hint(&self) -> String {
        match &self.save {
            Some(dir) => format!(
                "the last complete epoch is saved: go on with the same flags and --resume (--save \
                 {})",
                dir.display()
            ),
            None => "--save DIR keeps a run's epochs to --resume it".to_string(),
        }
    }

    /// The settings a resumed run must share with the saved one.
    fn settings(&self) -> Settings {
        Settings {
            model: format!("{:?}", self.model).to_lowercase(),
            data: format!("{:?}", self.data).to_lowercase(),
            text: self.text.clone(),
            checkpoint: self
                .checkpoint
                .iter()
                .map(|m| m.name().to_string())
                .collect(),
            batch_size: self.batch_size,
            devices: format!("{:?}", self.devices.all()),
            epochs: self.epochs,
            lr: self.sgd.lr,
            momentum: self.sgd.momentum,
            weight_decay: self.sgd.weight_decay,
            depth: self.densenet.depth,
            growth: self.densenet.growth,
            blocks: self.blocks,
            d_model: self.d_model,
            heads: self.heads,
            context: self.context,
            dropout: self.dropout,
            seed: self.seed,
            limit: self.limit,
            valid_limit: self.valid_limit,
            memory_budget: self.memory_budget,
        }
    }

    /// A method a saved run finished, read back: its row, what its steps measured, and its
    /// weights from its last epoch's model (checked against its checksum).
    fn restored(
        &self,
        method: Method,
        data: &Data,
        saved: SavedMethod,
        root: &std::path::Path,
        meter: &Meter,
    ) -> anyhow::Result<Trained> {
        let records = saved
            .records(root)
            .context("a finished method has a saved epoch")?;
        let bytes = records.read(save::RECORD_FILES[0])?;
        let record = ModuleRecord::from_bytes(Bytes::from_bytes_vec(bytes))
            .map_err(|e| anyhow::anyhow!("{}'s saved model: {e:?}", method.name()))?;
        let device = autodiff_on(Base::Plain, self.devices.first().clone());
        let model = Classifier::new(
            self.network(data, &device),
            method.cut(),
            Probe::new(meter.clone()),
        )
        .load_record(record);
        Ok(Trained {
            row: saved.row.context("a finished method has a row")?,
            parameters: parameters(model.model()),
            run_reserved_bytes: saved.probed.run_reserved,
            plan_changes: None,
            step_peaks: saved.probed.step_peaks,
            timeline: saved.probed.timeline,
        })
    }

    /// Trains `method` from the run's seed through burn-train's `Learner` (its artifacts in
    /// `artifact_dir`), the planner's plan first where it asks for one; from its last saved
    /// epoch where `run` resumes it, for at most `--stop-after`'s epochs left.
    fn train(
        &self,
        method: Method,
        data: &Data,
        artifact_dir: PathBuf,
        meter: &Meter,
        stop: &StopRequest,
        run: Resume,
    ) -> anyhow::Result<Outcome> {
        // On a device, the pages the method before left in the pools go back first: the bytes
        // reserved are then this method's (a cubecl pool keeps every page it allocated).
        meter.release();
        let batch = self.batch_size;
        let (steps, valid_items) = self.steps(data)?;
        let (train, valid) = data.loaders(batch, steps * batch, valid_items, self.seed);
        let done = run.saved.as_ref().map_or(0, |saved| saved.epochs_done);
        let train = match done {
            0 => train,
            done => save::resumed_loader(train, done),
        };
        let planned = match run.saved.as_ref().map(|saved| saved.plan.clone()) {
            // A resumed method runs the plan it was begun with.
            Some(plan) => plan,
            None => self.planned(method, data, meter)?,
        };
        let base = planned
            .as_ref()
            .map_or(method.base(), |planned| planned.base);
        let device = autodiff_on(base, self.devices.first().clone());
        let probe = Probe::new(meter.clone())
            .per_epoch(steps, valid_items.div_ceil(batch))
            .reseeding(self.seed)
            .with_timeline(self.timeline.step());
        let probe = match &run.saved {
            Some(saved) => probe.resumed(saved.probed.clone(), done),
            None => probe,
        };
        let mut model = Classifier::new(self.network(data, &device), method.cut(), probe.clone());
        let plan_peaks = planned.as_ref().map(|planned| planned.peaks);
        if let Some(planned) = &planned {
            model = model.with_plan(planned.plan.clone());
        }
        // On one device the run plans each step against the budget (`budget`): the planner's check
        // saw none of the pages burn-train's other threads keep.
        let guard = match (self.memory_budget, &planned, self.devices.count()) {
            (Some(budget), Some(planned), 1) if meter.is_device() => planned
                .profile
                .clone()
                .map(|profile| Guard::new(budget, profile)),
            _ => None,
        };
        if let Some(guard) = &guard {
            model = model.with_guard(guard.clone());
        }
        let end = match run.epochs_left {
            Some(left) => (done + left).min(self.epochs),
            None => self.epochs,
        };
        let mut training = SupervisedTraining::new(&artifact_dir, train, valid)
            .num_epochs(end)
            .metrics((AccuracyMetric::new(), LossMetric::new()))
            .with_application_logger(None)
            .with_interrupter(stop.interrupter())
            .summary();
        if let Some(saving) = &run.saving {
            saving.begin(method.name(), planned.clone());
            let ([model, optim, scheduler], strategy) = saving.checkpointers(probe.clone());
            training = training
                .with_custom_checkpointers(model, optim, scheduler)
                .with_checkpointing_strategy(strategy);
            if done > 0 {
                training = training.checkpoint(done);
            }
        }
        if base == Base::Balanced {
            training = training.gradient_checkpointing();
        }
        if self.devices.count() > 1 {
            training = training.with_training_strategy(TrainingStrategy::Default(
                ExecutionStrategy::MultiDevice(
                    self.devices.all().to_vec(),
                    MultiDeviceOptim::OptimMainDevice,
                ),
            ));
        }
        let schedule = self.schedule(steps / self.devices.count())?;
        let learner = Learner::new(model, self.optimizer(), schedule);
        // A step that fails to allocate unwinds (`Probe`): on several devices burn-train's
        // workers catch it and stop the training, on one it reaches here.
        // On a device, what its pools reserved over the whole training (the host reserves none).
        let whole_run = meter.is_device().then(|| meter.start());
        let launched = catch_unwind(AssertUnwindSafe(|| training.launch(learner)));
        let run_reserved = whole_run.and_then(|measure| measure.finish().reserved);
        let refusal = probe.take_refusal().or_else(|| {
            let (guard, reserved) = (guard.as_ref()?, run_reserved?);
            guard.check_run(reserved).err()
        });
        if let Some(message) = refusal {
            return Err(anyhow::Error::new(Refused(message)));
        }
        if let Some(stopped) = probe.take_failure() {
            return Err(anyhow::Error::new(stopped).context(format!(
                "training with --checkpoint {} stopped",
                method.name()
            )));
        }
        let result = launched.unwrap_or_else(|payload| resume_unwind(payload));
        if let Some(error) = result.error {
            bail!(
                "training with --checkpoint {} failed: {error:?}",
                method.name()
            );
        }
        if let Some(saving) = &run.saving {
            saving.take_error()?;
        }
        let mut probed = probe.probed();
        probed.run_reserved = run_reserved;
        // Epochs complete: those saved where the run saves (burn-train skips the save of an
        // epoch a stop came in), else those validated, counted from the run's start.
        let epochs_done = match &run.saving {
            Some(saving) => saving.saved(method.name()).map_or(0, |m| m.epochs_done),
            None => (probed.valid.len() / valid_items.div_ceil(batch).max(1)).min(end),
        };
        let outcome = |trained| Outcome {
            trained,
            epochs_done,
            epochs_trained: epochs_done - done,
        };
        if result.interrupted.is_some() || epochs_done < self.epochs {
            return Ok(outcome(None));
        }
        let row = self.row(
            self.label(method, plan_peaks.is_some(), base),
            plan_peaks,
            &probed,
            valid_items,
        );
        if let Some(saving) = &run.saving {
            saving.finish(&row, probed.run_reserved)?;
        }
        Ok(outcome(Some(Trained {
            row,
            parameters: parameters(result.model.model()),
            timeline: probed.timeline.clone(),
            run_reserved_bytes: probed.run_reserved,
            plan_changes: guard.map(|guard| guard.changes()),
            step_peaks: probed.step_peaks,
        })))
    }

    /// The plan `method` trains under and its base, if the planner plans it
    /// ([`Options::plan_for`]); a step of the planner's that fails to allocate stops the run as
    /// a training step does (no budget to suggest: the planner is what failed).
    fn planned(
        &self,
        method: Method,
        data: &Data,
        meter: &Meter,
    ) -> anyhow::Result<Option<SavedPlan>> {
        let base_bytes = meter.in_use();
        OutOfMemory::catch(meter.clone(), || self.plan_for(method, data, meter)).map_err(
            |failure| {
                let stopped = RanOutOfMemory {
                    failure,
                    during: PLANNING.to_string(),
                    base_bytes,
                };
                anyhow::Error::new(stopped).context(format!("--checkpoint {}", method.name()))
            },
        )?
    }

    /// Refuses ([`Refused`]: exit status 2), before the first step, what the run could not
    /// finish: an output it cannot write (`--json`, `--memory-timeline`, `--artifact-dir`), a
    /// `--timeline-overlay` it cannot read or of another model, a `--timeline-step` past the
    /// run's training steps.
    fn check_outputs(&self, data: &Data) -> anyhow::Result<()> {
        let refused = |message: String| anyhow::Error::new(Refused(message));
        if let Some(path) = &self.json {
            writable_file("--json", path).map_err(refused)?;
        }
        self.timeline.check(&self.title()).map_err(refused)?;
        if let Some(step) = self.timeline.step() {
            let (steps, _) = self.steps(data)?;
            let total = steps * self.epochs;
            if step > total {
                return Err(refused(format!(
                    "--timeline-step {step}: the run has {total} training steps ({} epoch(s) of \
                     {steps}): a smaller --timeline-step, or a larger --limit",
                    self.epochs
                )));
            }
        }
        if let Some(dir) = &self.artifact_dir {
            writable_dir("--artifact-dir", dir).map_err(refused)?;
        }
        Ok(())
    }

    /// Training steps (whole batches only, the same number on every device: each step has the
    /// same shape, at most `--limit`) and validation items (at most `--valid-limit` batches).
    fn steps(&self, data: &Data) -> anyhow::Result<(usize, usize)> {
        let batch = self.batch_size;
        let train_items = match self.limit {
            Some(limit) => (limit * batch).min(data.train_len()),
            None => data.train_len(),
        };
        let devices = self.devices.count();
        let steps = train_items / batch / devices * devices;
        if steps == 0 {
            bail!(
                "--batch-size {batch} on {devices} device(s): more than the {} training {}",
                data.train_len(),
                data.items()
            );
        }
        let valid_items = match self.valid_limit {
            Some(limit) => (limit * batch).min(data.valid_len()),
            None => data.valid_len(),
        };
        Ok((steps, valid_items))
    }

    /// The network `data` trains, on `device`: every method (and the planner's copies) starts
    /// from the same weights.
    fn network(&self, data: &Data, device: &Device) -> Network {
        device.seed(derive(self.seed, Purpose::Init, 0));
        initialised(match data {
            Data::Images(splits) => Network::DenseNet(DenseNet::new(
                self.densenet.depth,
                self.densenet.growth,
                splits.shape[0],
                splits.classes,
                device,
            )),
            Data::Text { .. } => Network::Gpt(Gpt::new(
                VOCAB,
                self.d_model,
                self.blocks,
                self.heads,
                self.context,
                self.dropout,
                device,
            )),
        })
    }

    /// The plan `method` trains under, if any, with the base it runs on. The planner plans the
    /// layer cut's regions (`regions`), and with a budget chooses what they sit on: the method's
    /// Balanced or plain autodiff, whichever its plan is faster on. The other methods run as
    /// they are, on their own base.
    fn plan_for(
        &self,
        method: Method,
        data: &Data,
        meter: &Meter,
    ) -> anyhow::Result<Option<SavedPlan>> {
        if method != Method::Regions {
            return Ok(None);
        }
        // A copy of its own per base (batch norm's running statistics included): the profiled
        // steps leave the trained model as it was.
        let inner = self.devices.first();
        let copy = |base: Base| {
            let device = autodiff_on(base, inner.clone());
            let network = self.network(data, &device);
            let copy = Classifier::new(network, Cut::Regions, Probe::new(meter.clone()));
            (copy, data.first(self.batch_size, &device))
        };
        self.plan(method.base(), copy, meter)
    }

    /// The reference's SGD: Nesterov momentum without dampening, weight decay.
    fn optimizer(&self) -> ModuleOptimizer {
        SgdConfig::new()
            .with_momentum((self.sgd.momentum > 0.0).then(|| {
                MomentumConfig::new()
                    .with_momentum(self.sgd.momentum)
                    .with_dampening(0.0)
                    .with_nesterov(true)
            }))
            .with_weight_decay(
                (self.sgd.weight_decay > 0.0)
                    .then(|| WeightDecayConfig::new(self.sgd.weight_decay as f32)),
            )
            .init()
    }

    /// The method as the table names it: a planned run says its budget and base.
    fn label(&self, method: Method, planned: bool, base: Base) -> String {
        match (planned, self.memory_budget) {
            (true, Some(bytes)) => format!(
                "regions, planned for {}{}",
                size(bytes),
                match base {
                    Base::Balanced => "",
                    Base::Plain => " (on plain autodiff)",
                }
            ),
            _ => method.name().to_string(),
        }
    }

    /// The table's row of a method whose steps `probed` measured: the median step and its
    /// peak (the first step, which also meets every shape for the first time, left out when
    /// there are more), the last validation's accuracy; a planned method's plan peaks.
    fn row(
        &self,
        method: String,
        plan_peaks: Option<PlanPeaks>,
        probed: &Probed,
        valid_items: usize,
    ) -> MethodRow {
        let batch = self.batch_size;
        // The last validation's batches: burn-train validates after every epoch.
        let valid_batches = valid_items.div_ceil(batch);
        let last = &probed.valid[probed.valid.len().saturating_sub(valid_batches)..];
        let (right, seen) = last
            .iter()
            .fold((0, 0), |(r, s), &(right, seen)| (r + right, s + seen));
        let skip = usize::from(probed.step_times.len() > 1);
        let mut times: Vec<f64> = probed.step_times[skip..]
            .iter()
            .map(|t| t.as_secs_f64())
            .collect();
        times.sort_by(f64::total_cmp);
        let peak = probed.step_peaks[skip..].iter().copied().max().unwrap_or(0);
        let reserved = probed.step_reserved.iter().skip(skip).copied().max();
        MethodRow {
            method,
            devices: self.devices.count(),
            batch,
            peak_step_bytes: peak as usize,
            reserved_bytes: reserved.map(|bytes| bytes as usize),
            plan_peaks,
            median_step_seconds: times.get(times.len() / 2).copied().unwrap_or(0.0),
            valid_accuracy: right as f64 / seen.max(1) as f64,
        }
    }

    /// With `--memory-report` or `--memory-budget`: the step of a copy of the model
    /// (`copy(base)`: the copy and its batch on that base's device) profiled region by region
    /// (the report printed), and the plan that fits the budget, checked on a step, with the base
    /// it runs on. The report profiles the method's base; a budget profiles both and plans on the
    /// base whose plan is predicted faster ([`Candidates::fit`]).
    fn plan(
        &self,
        method_base: Base,
        copy: impl Fn(Base) -> (Classifier, Batch),
        meter: &Meter,
    ) -> anyhow::Result<Option<SavedPlan>> {
        if !self.memory_report && self.memory_budget.is_none() {
            return Ok(None);
        }
        let bases: Vec<Base> = match self.memory_budget {
            Some(_) => Base::ALL.to_vec(),
            None => vec![method_base],
        };
        let mut candidates = Candidates::new();
        for base in bases {
            let (copy, batch) = copy(base);
            let mut step = move || drop(copy.classify(batch.clone()).loss.backward());
            let profile = Profile::measure(meter.clone(), &Treatment::ALL, &mut step)
                .context("profiling a step")?
                .on(base);
            if self.memory_report {
                println!("on {base}: {profile}");
            }
            candidates.push(profile, step);
        }
        let Some(budget) = self.memory_budget else {
            return Ok(None);
        };
        let context = format!("--memory-budget {}", size(budget));
        let (chosen, fitted) = candidates.fit(meter.clone(), budget).map_err(|error| {
            // A budget no plan meets is refused as the settings are (exit status 2), as the
            // run's own guard refuses one (`budget::Guard`); a step that failed is an error.
            match error {
                FitError::Budget(_) => anyhow::Error::new(Refused(format!("{context}: {error}"))),
                other => anyhow::Error::new(other).context(context),
            }
        })?;
        println!(
            "{} (checked: a step's peak {:.1} MiB)",
            fitted.plan,
            mib(fitted.measured_peak_bytes as usize)
        );
        let peaks = PlanPeaks {
            predicted_bytes: fitted.plan.predicted_peak_bytes,
            checked_bytes: fitted.measured_peak_bytes,
        };
        Ok(Some(SavedPlan {
            base: chosen.profile.base,
            plan: fitted.plan,
            peaks,
            profile: Some(fitted.profile),
        }))
    }

    /// The reference's schedule as burn-train's scheduler: one constant rate per stretch of
    /// epochs, `steps` optimizer updates an epoch.
    fn schedule(&self, steps: usize) -> anyhow::Result<ModuleLrScheduler> {
        let epochs = self.epochs;
        let (mut rates, mut milestones) = (Vec::new(), Vec::new());
        let mut current = None;
        for epoch in 0..epochs {
            let lr = schedule::learning_rate(self.sgd.lr, epoch, epochs);
            if current != Some(lr) {
                if epoch > 0 {
                    milestones.push(epoch * steps);
                }
                rates.push(LrSchedulerConfig::Constant(lr));
                current = Some(lr);
            }
        }
        SequentialLrSchedulerConfig::new(rates, milestones)
            .init()
            .map_err(|e| anyhow::anyhow!("the learning-rate schedule: {e}"))
    }
}

/// burn-train's artifact folder: the user's, or a temporary one removed at the end.
enum Artifacts {
    Kept(PathBuf),
    Temporary(tempfile::TempDir),
}

impl Artifacts {
    fn path(&self) -> PathBuf {
        match self {
            Artifacts::Kept(dir) => dir.clone(),
            Artifacts::Temporary(dir) => dir.path().to_path_buf(),
        }
    }
}

/// What the network learns from: images with their classes, or a text's windows.
enum Data {
    Images(Splits),
    Text { train: Text, valid: Text },
}

impl Data {
    /// What one item is called in messages.
    fn items(&self) -> &'static str {
        match self {
            Data::Images(_) => "images",
            Data::Text { .. } => "text windows",
        }
    }

    fn train_len(&self) -> usize {
        match self {
            Data::Images(splits) => splits.train.len(),
            Data::Text { train, .. } => train.len(),
        }
    }

    fn valid_len(&self) -> usize {
        match self {
            Data::Images(splits) => splits.valid.len(),
            Data::Text { valid, .. } => valid.len(),
        }
    }

    /// The training loader over the first `train` items, shuffled from `seed`, and the
    /// validation loader over the first `valid`, in order.
    fn loaders(
        &self,
        batch: usize,
        train: usize,
        valid: usize,
        seed: u64,
    ) -> (Arc<dyn DataLoader<Batch>>, Arc<dyn DataLoader<Batch>>) {
        let shuffle = derive(seed, Purpose::Shuffle, 0);
        match self {
            Data::Images(splits) => {
                let batcher = ImageBatcher::new(splits.shape, &splits.normalisation);
                let dataset = |images: &Arc<dyn Images>, len| {
                    PartialDataset::new(ImageDataset(images.clone()), 0, len)
                };
                (
                    DataLoaderBuilder::new(batcher.clone())
                        .batch_size(batch)
                        .shuffle(shuffle)
                        .build(dataset(&splits.train, train)),
                    DataLoaderBuilder::new(batcher)
                        .batch_size(batch)
                        .build(dataset(&splits.valid, valid)),
                )
            }
            Data::Text {
                train: train_text,
                valid: valid_text,
            } => (
                DataLoaderBuilder::new(TokenBatcher)
                    .batch_size(batch)
                    .shuffle(shuffle)
                    .build(PartialDataset::new(train_text.clone(), 0, train)),
                DataLoaderBuilder::new(TokenBatcher)
                    .batch_size(batch)
                    .build(PartialDataset::new(valid_text.clone(), 0, valid)),
            ),
        }
    }

    /// The first `batch` training items, on `device`: the planner's step.
    fn first(&self, batch: usize, device: &Device) -> Batch {
        match self {
            Data::Images(splits) => {
                let batcher = ImageBatcher::new(splits.shape, &splits.normalisation);
                let items = (0..batch)
                    .map(|index| splits.train.get(index).expect("batch ≤ training images"))
                    .collect();
                batcher.batch(items, device)
            }
            Data::Text { train, .. } => {
                let windows = (0..batch)
                    .map(|index| train.get(index).expect("batch ≤ training windows"))
                    .collect();
                TokenBatcher.batch(windows, device)
            }
        }
    }
}
