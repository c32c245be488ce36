//! The trainer for Burn 0.22 users: DenseNet-BC on real images through burn-train's `Learner`
//! and `SupervisedTraining`, once per checkpoint method asked for, every method from the same
//! seed, and the table of memory, time per step and accuracy at the end.

use std::path::PathBuf;

use anyhow::{Context, bail, ensure};
use bench_kit_core::schedule::learning_rate;
use bench_kit_core::table::MethodRow;
use burn::data::dataloader::DataLoaderBuilder;
use burn::data::dataset::transform::PartialDataset;
use burn::lr_scheduler::LrSchedulerConfig;
use burn::lr_scheduler::module_lr_scheduler::ModuleLrScheduler;
use burn::lr_scheduler::sequential::SequentialLrSchedulerConfig;
use burn::optim::SgdConfig;
use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::tensor::Device;
use burn::train::metric::{AccuracyMetric, LossMetric};
use burn::train::{Learner, SupervisedTraining};
use burn_checkpoint_22::memory::Meter;
use burn_checkpoint_22_models::densenet::DenseNet;
use burn_checkpoint_22_models::initialised;
use clap::{Parser, ValueEnum};
use image_data::seeds::{Purpose, derive};
use image_data::{DataSource, Images, Splits};

use crate::classifier::{Classifier, Probe};
use crate::images::{ImageBatcher, ImageDataset};
use crate::parameters;

/// Trains DenseNet-BC on Burn 0.22 through burn-train's Learner, with Burn's own checkpointing
/// and with checkpoint regions, and prints a table of peak step memory, time per step and
/// accuracy per method. The defaults are the 0.21 trainer's (the reference "memory-efficient
/// DenseNet" demo: DenseNet-BC-100, growth 12, batch 64, SGD lr 0.1, Nesterov momentum 0.9,
/// weight decay 1e-4, the rate divided by 10 at 50% and 75% of the epochs).
#[derive(Parser, Debug, Clone)]
#[command(name = "train22", version, args_override_self = true)]
pub struct Options {
    /// The data set. fashion-mnist: Debian's dataset-fashion-mnist package (or --data-dir);
    /// cifar10: the binary version in --data-dir; synthetic: random CIFAR-shaped images.
    #[arg(long, value_enum, default_value = "fashion-mnist")]
    pub data: DataSource,

    /// Where the data set's files are (Fashion-MNIST: default /usr/share/datasets/fashion-mnist;
    /// CIFAR-10: required).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,

    /// The methods to train, comma-separated, each from the same seed. none: plain autodiff;
    /// balanced: Burn's gradient checkpointing (the Learner's `gradient_checkpointing()`);
    /// regions: a region per dense layer, on top of balanced.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "regions")]
    pub checkpoint: Vec<Method>,

    /// Images per training step and per validation batch.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_size: u64,

    /// Epochs to train.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub epochs: u64,

    /// Initial learning rate, above 0 (divided by 10 at 50% and at 75% of the epochs).
    #[arg(long, default_value_t = 0.1)]
    pub lr: f64,

    /// SGD momentum (Nesterov), from 0 (off) to below 1.
    #[arg(long, default_value_t = 0.9)]
    pub momentum: f64,

    /// L2 weight decay, 0 (off) or more.
    #[arg(long, default_value_t = 1e-4)]
    pub weight_decay: f64,

    /// DenseNet-BC depth, 6n + 4 (10, 16, 22, 40, 100, …): three dense blocks of n layers.
    #[arg(long, default_value_t = 100)]
    pub depth: usize,

    /// Channels each dense layer adds (k).
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u64).range(1..))]
    pub growth: u64,

    /// Seed of the initial weights and the shuffling.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Training batches per epoch (the first ones of the training split), for quick runs.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: Option<u64>,

    /// Validation batches per evaluation (the first ones of the test split); default: all.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub valid_limit: Option<u64>,

    /// Where burn-train writes its logs, metrics and checkpoints (one folder per method);
    /// default: a temporary folder, removed at the end.
    #[arg(long)]
    pub artifact_dir: Option<PathBuf>,

    /// Write the table's rows to FILE as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// What a training step keeps between forward and backward.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Method {
    /// Plain autodiff: every activation backward needs is held.
    None,
    /// Burn's gradient checkpointing (Balanced): cheap, memory-bound ops are recomputed.
    Balanced,
    /// A region per dense layer on top of Balanced: the dense layers' activations are
    /// recomputed in backward.
    Regions,
}

impl Method {
    /// The name on the command line and in the table.
    pub fn name(self) -> &'static str {
        match self {
            Method::None => "none",
            Method::Balanced => "balanced",
            Method::Regions => "regions",
        }
    }

    fn burn_checkpointing(self) -> bool {
        self != Method::None
    }

    fn regions(self) -> bool {
        self == Method::Regions
    }
}

/// What one method's training gave.
#[derive(Debug, Clone)]
pub struct Trained {
    /// The table's row.
    pub row: MethodRow,
    /// The trained parameters, in visiting order.
    pub parameters: Vec<Vec<f32>>,
    /// Each training step's peak memory, in bytes.
    pub step_peaks: Vec<u64>,
}

impl Options {
    /// Refuses settings that would not train.
    pub fn check(&self) -> anyhow::Result<()> {
        ensure!(
            self.lr.is_finite() && self.lr > 0.0,
            "--lr {}: the learning rate must be a number above 0",
            self.lr
        );
        ensure!(
            (0.0..1.0).contains(&self.momentum),
            "--momentum {}: from 0 (off) to below 1 (at 1 the velocity never decays)",
            self.momentum
        );
        ensure!(
            self.weight_decay.is_finite() && self.weight_decay >= 0.0,
            "--weight-decay {}: 0 (off) or more",
            self.weight_decay
        );
        ensure!(
            self.depth >= 10 && (self.depth - 4).is_multiple_of(6),
            "--depth {}: DenseNet-BC's depth is 6n + 4 with n ≥ 1 (10, 16, 22, 40, 100, …)",
            self.depth
        );
        ensure!(!self.checkpoint.is_empty(), "--checkpoint: name a method");
        Ok(())
    }

    /// Trains each method of `--checkpoint` in turn, on `meter`'s memory.
    pub fn train_all(&self, meter: &Meter) -> anyhow::Result<Vec<Trained>> {
        self.check()?;
        let splits = image_data::load(self.data, self.data_dir.as_deref(), self.seed)?;
        let artifacts = match &self.artifact_dir {
            Some(dir) => Artifacts::Kept(dir.clone()),
            None => Artifacts::Temporary(tempfile::tempdir().context("a temporary folder")?),
        };
        self.checkpoint
            .iter()
            .map(|&method| {
                let dir = artifacts.path().join(method.name());
                self.train(method, &splits, dir, meter)
            })
            .collect()
    }

    fn train(
        &self,
        method: Method,
        splits: &Splits,
        artifact_dir: PathBuf,
        meter: &Meter,
    ) -> anyhow::Result<Trained> {
        let batch = self.batch_size as usize;
        let train_images = match self.limit {
            Some(limit) => (limit as usize * batch).min(splits.train.len()),
            None => splits.train.len(),
        };
        let steps = train_images / batch;
        if steps == 0 {
            bail!(
                "--batch-size {batch}: more than the {} training images",
                splits.train.len()
            );
        }
        let valid_images = match self.valid_limit {
            Some(limit) => (limit as usize * batch).min(splits.valid.len()),
            None => splits.valid.len(),
        };
        let batcher = ImageBatcher::new(splits.shape, &splits.normalisation);
        let train = DataLoaderBuilder::new(batcher.clone())
            .batch_size(batch)
            .shuffle(derive(self.seed, Purpose::Shuffle, 0))
            .build(PartialDataset::new(
                ImageDataset(splits.train.clone()),
                0,
                steps * batch,
            ));
        let valid = DataLoaderBuilder::new(batcher)
            .batch_size(batch)
            .build(PartialDataset::new(
                ImageDataset(splits.valid.clone()),
                0,
                valid_images,
            ));

        let mut device = Device::flex().autodiff();
        if method.burn_checkpointing() {
            device = device.gradient_checkpointing();
        }
        device.seed(derive(self.seed, Purpose::Init, 0));
        let network = initialised(DenseNet::new(
            self.depth,
            self.growth as usize,
            splits.shape[0],
            splits.classes,
            &device,
        ));
        let probe = Probe::new(meter.clone());
        let model = Classifier::new(network, method.regions(), probe.clone());

        let optimizer = SgdConfig::new()
            .with_momentum((self.momentum > 0.0).then(|| {
                MomentumConfig::new()
                    .with_momentum(self.momentum)
                    .with_dampening(0.0)
                    .with_nesterov(true)
            }))
            .with_weight_decay(
                (self.weight_decay > 0.0).then(|| WeightDecayConfig::new(self.weight_decay as f32)),
            )
            .init();
        let epochs = self.epochs as usize;
        let mut training = SupervisedTraining::new(&artifact_dir, train, valid)
            .num_epochs(epochs)
            .metrics((AccuracyMetric::new(), LossMetric::new()))
            .with_application_logger(None)
            .summary();
        if method.burn_checkpointing() {
            training = training.gradient_checkpointing();
        }
        let result = training.launch(Learner::new(model, optimizer, self.schedule(steps)?));
        if let Some(error) = result.error {
            bail!(
                "training with --checkpoint {} failed: {error:?}",
                method.name()
            );
        }

        let probed = probe.probed();
        // The last validation's batches: burn-train validates after every epoch.
        let valid_batches = valid_images.div_ceil(batch);
        let last = &probed.valid[probed.valid.len().saturating_sub(valid_batches)..];
        let (right, seen) = last
            .iter()
            .fold((0, 0), |(r, s), &(right, seen)| (r + right, s + seen));
        // The first step (which also meets every shape for the first time) is left out when
        // there are more.
        let skip = usize::from(probed.step_times.len() > 1);
        let mut times: Vec<f64> = probed.step_times[skip..]
            .iter()
            .map(|t| t.as_secs_f64())
            .collect();
        times.sort_by(f64::total_cmp);
        let peak = probed.step_peaks[skip..].iter().copied().max().unwrap_or(0);
        Ok(Trained {
            row: MethodRow {
                method: method.name().to_string(),
                devices: 1,
                batch,
                peak_step_bytes: peak as usize,
                reserved_bytes: None,
                median_step_seconds: times.get(times.len() / 2).copied().unwrap_or(0.0),
                valid_accuracy: right as f64 / seen.max(1) as f64,
            },
            parameters: parameters(result.model.model()),
            step_peaks: probed.step_peaks,
        })
    }

    /// The reference's schedule as burn-train's scheduler: one constant rate per stretch of
    /// epochs, `steps` optimizer steps an epoch.
    fn schedule(&self, steps: usize) -> anyhow::Result<ModuleLrScheduler> {
        let epochs = self.epochs as usize;
        let (mut rates, mut milestones) = (Vec::new(), Vec::new());
        let mut current = None;
        for epoch in 0..epochs {
            let lr = learning_rate(self.lr, epoch, epochs);
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
