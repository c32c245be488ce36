//! A small model with a region per block, trained by burn-train's `Learner` and
//! `SupervisedTraining` as Burn users train, its losses recorded: the tests train it with and
//! without regions, under each of burn-train's strategies that take regions, and compare bit for
//! bit.
//!
//! ```
//! use burn::tensor::Device;
//! use burn_checkpoint_22_train::mlp::{Mlp, Run};
//!
//! let device = Device::flex().autodiff();
//! let model = Mlp::new(&device, true);
//! let run = Run::default().train(model);
//! assert_eq!(run.train_losses.len(), 2 * 8); // 2 epochs of 8 batches
//! ```

use std::sync::{Arc, Mutex};

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::InMemDataset;
use burn::module::Module;
use burn::nn::loss::{MseLoss, Reduction};
use burn::nn::{Linear, LinearConfig};
use burn::optim::SgdConfig;
use burn::tensor::activation::relu;
use burn::tensor::distributed::{DistributedConfig, ReduceOperation};
use burn::tensor::{Device, Tensor, TensorData};
use burn::train::logger::InMemoryMetricLogger;
use burn::train::metric::LossMetric;
use burn::train::{
    ExecutionStrategy, InferenceStep, Learner, MultiDeviceOptim, RegressionOutput,
    SupervisedTraining, TrainOutput, TrainStep, TrainingStrategy,
};
use burn_checkpoint_22::checkpoint;

use crate::parameters;

const INPUT: usize = 16;
const HIDDEN: usize = 64;
const OUTPUT: usize = 4;
const ITEMS: usize = 256;
const BATCH: usize = 32;

/// The losses of the run in progress, in the order the steps ran (burn-train's steps take `&self`).
static TRAIN_LOSSES: Mutex<Vec<f32>> = Mutex::new(Vec::new());
static VALID_LOSSES: Mutex<Vec<f32>> = Mutex::new(Vec::new());
/// One run at a time: the losses are the process's.
static ONE_RUN: Mutex<()> = Mutex::new(());

/// A residual block: `x + down(relu(up(x)))`.
#[derive(Module, Debug)]
pub struct Block {
    up: Linear,
    down: Linear,
}

impl Block {
    /// `x + down(relu(up(shared(x))))`, `shared` left out where absent.
    fn forward(&self, x: Tensor<2>, shared: Option<&Linear>) -> Tensor<2> {
        let inner = shared.map_or_else(|| x.clone(), |shared| shared.forward(x.clone()));
        x + self.down.forward(relu(self.up.forward(inner)))
    }
}

/// Four residual blocks and a linear head; with `regions`, each block is a checkpoint region.
/// With a shared layer ([`Mlp::with_shared_layer`]), the first two blocks apply it to their input
/// and the head's input goes through it too: one parameter used by two regions and outside them.
#[derive(Module, Debug)]
pub struct Mlp {
    blocks: Vec<Block>,
    shared: Option<Linear>,
    head: Linear,
    regions: bool,
}

impl Mlp {
    /// Parameters drawn from `device`'s generator (seed it for the same ones), all drawn now:
    /// a clone of a lazily initialised parameter would draw its own.
    pub fn new(device: &Device, regions: bool) -> Self {
        let linear = |from, to| LinearConfig::new(from, to).init(device);
        let model = Mlp {
            blocks: (0..4)
                .map(|_| Block {
                    up: linear(INPUT, HIDDEN),
                    down: linear(HIDDEN, INPUT),
                })
                .collect(),
            shared: None,
            head: linear(INPUT, OUTPUT),
            regions,
        };
        parameters(&model);
        model
    }

    /// [`Mlp::new`]'s model with a shared layer (`INPUT` to `INPUT`, drawn after the blocks and
    /// before the head) in the first two blocks, inside their regions, and before the head,
    /// outside them: its gradient gathers three terms, two from regions' backwards.
    ///
    /// ```
    /// use burn::tensor::Device;
    /// use burn_checkpoint_22_train::mlp::{Mlp, Run};
    ///
    /// let device = Device::flex().autodiff();
    /// let run = Run::default().train(Mlp::with_shared_layer(&device, true));
    /// assert!(run.parameters.iter().any(|(name, _)| name.contains("shared")));
    /// ```
    pub fn with_shared_layer(device: &Device, regions: bool) -> Self {
        let linear = |from, to| LinearConfig::new(from, to).init(device);
        let blocks = (0..4)
            .map(|_| Block {
                up: linear(INPUT, HIDDEN),
                down: linear(HIDDEN, INPUT),
            })
            .collect();
        let shared = Some(linear(INPUT, INPUT));
        let model = Mlp {
            blocks,
            shared,
            head: linear(INPUT, OUTPUT),
            regions,
        };
        parameters(&model);
        model
    }

    /// The same parameters, with or without regions.
    pub fn with_regions(self, regions: bool) -> Self {
        Mlp { regions, ..self }
    }

    fn forward(&self, mut x: Tensor<2>) -> Tensor<2> {
        for (i, block) in self.blocks.iter().enumerate() {
            let shared = self.shared.as_ref().filter(|_| i < 2);
            x = match (self.regions, shared) {
                (false, _) => block.forward(x, shared),
                (true, None) => checkpoint(block, x, |block, x| block.forward(x, None)),
                // A layer the block shares with others goes in the region's module beside it: a
                // parameter the body captured instead would get no gradient (refused).
                (true, Some(shared)) => {
                    checkpoint(&(block.clone(), shared.clone()), x, |(block, shared), x| {
                        block.forward(x, Some(shared))
                    })
                }
            };
        }
        let x = match &self.shared {
            Some(shared) => shared.forward(x),
            None => x,
        };
        self.head.forward(x)
    }

    fn regression(&self, batch: Rows) -> RegressionOutput {
        let output = self.forward(batch.x);
        let loss = MseLoss::new().forward(output.clone(), batch.y.clone(), Reduction::Mean);
        RegressionOutput::new(loss, output, batch.y)
    }
}

impl TrainStep for Mlp {
    type Input = Rows;
    type Output = RegressionOutput;

    fn step(&self, batch: Rows) -> TrainOutput<RegressionOutput> {
        let output = self.regression(batch);
        record(&TRAIN_LOSSES, &output.loss);
        TrainOutput::new(self, output.loss.backward(), output)
    }
}

impl InferenceStep for Mlp {
    type Input = Rows;
    type Output = RegressionOutput;

    fn step(&self, batch: Rows) -> RegressionOutput {
        let output = self.regression(batch);
        record(&VALID_LOSSES, &output.loss);
        output
    }
}

fn record(losses: &Mutex<Vec<f32>>, loss: &Tensor<1>) {
    let value = loss.clone().into_scalar::<f32>();
    losses.lock().unwrap_or_else(|e| e.into_inner()).push(value);
}

/// A batch of rows and their targets.
#[derive(Clone, Debug)]
pub struct Rows {
    x: Tensor<2>,
    y: Tensor<2>,
}

struct RowBatcher;

impl Batcher<(Vec<f32>, Vec<f32>), Rows> for RowBatcher {
    fn batch(&self, items: Vec<(Vec<f32>, Vec<f32>)>, device: &Device) -> Rows {
        let n = items.len();
        let x = items.iter().flat_map(|i| i.0.clone()).collect::<Vec<_>>();
        let y = items.iter().flat_map(|i| i.1.clone()).collect::<Vec<_>>();
        Rows {
            x: Tensor::from_data(TensorData::new(x, [n, INPUT]), device),
            y: Tensor::from_data(TensorData::new(y, [n, OUTPUT]), device),
        }
    }
}

/// Deterministic rows (no generator): `offset` tells the training split from the validation one.
fn rows(offset: usize) -> Arc<dyn DataLoader<Rows>> {
    let items = (0..ITEMS)
        .map(|i| {
            let t = (i + offset) as f32;
            (
                (0..INPUT).map(|j| (t * 0.37 + j as f32).sin()).collect(),
                (0..OUTPUT).map(|j| (t * 0.11 - j as f32).cos()).collect(),
            )
        })
        .collect();
    DataLoaderBuilder::new(RowBatcher)
        .batch_size(BATCH)
        .build(InMemDataset::new(items))
}

/// How a run trains: SGD, 2 epochs, no shuffling, one loader thread.
#[derive(Debug, Clone)]
pub struct Run {
    /// Burn's own checkpointing (`SupervisedTraining::gradient_checkpointing`); the model must
    /// then be built on `device.autodiff().gradient_checkpointing()`.
    pub gradient_checkpointing: bool,
    /// burn-train's strategy.
    pub strategy: Strategy,
    /// The devices the two-device strategies train on, without autodiff (burn-train adds it);
    /// build the model on the first's `autodiff()`. [`Strategy::Single`] trains on the model's.
    pub devices: Vec<Device>,
}

impl Default for Run {
    fn default() -> Self {
        Run {
            gradient_checkpointing: false,
            strategy: Strategy::Single,
            devices: vec![Device::flex()],
        }
    }
}

/// Which of burn-train's execution strategies a run trains under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// One device.
    Single,
    /// burn-train's multi-device strategy (one thread a device, the gradients summed on the
    /// first after backward, no collective); the steps' losses then arrive in thread order.
    Multi,
    /// burn-train's data parallelism (`ExecutionStrategy::ddp`): one thread a device, each
    /// parameter's gradient all-reduced (mean) at its last use in backward. Needs a backend
    /// with collectives (CubeCL's, Remote), and Burn 0.23 for regions
    /// ([`burn_checkpoint_22::REGIONS_UNDER_DDP`]).
    Ddp,
}

/// What a run gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Trained {
    /// Each training step's loss, in order.
    pub train_losses: Vec<f32>,
    /// Each validation step's loss, in order (the model without autodiff: regions are their
    /// bodies there).
    pub valid_losses: Vec<f32>,
    /// The trained parameters, named, in visiting order.
    pub parameters: Vec<(String, Vec<f32>)>,
}

impl Trained {
    /// The same run, its losses sorted: under the two-device strategies the workers record them
    /// in the order their threads run, so only the sorted lists compare between runs.
    ///
    /// ```
    /// use burn_checkpoint_22_train::mlp::Trained;
    ///
    /// let run = Trained {
    ///     train_losses: vec![2.0, 1.0],
    ///     valid_losses: vec![],
    ///     parameters: vec![],
    /// };
    /// assert_eq!(run.sorted().train_losses, [1.0, 2.0]);
    /// ```
    pub fn sorted(mut self) -> Self {
        self.train_losses.sort_by(f32::total_cmp);
        self.valid_losses.sort_by(f32::total_cmp);
        self
    }
}

impl Run {
    /// Trains `model` through burn-train's `Learner` and `SupervisedTraining`.
    pub fn train(self, model: Mlp) -> Trained {
        let _one = ONE_RUN.lock().unwrap_or_else(|e| e.into_inner());
        TRAIN_LOSSES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        VALID_LOSSES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        // burn-train's artifact directory (checkpoints, logs): nothing is kept.
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut training = SupervisedTraining::new(dir.path(), rows(0), rows(ITEMS))
            .num_epochs(2)
            .metrics((LossMetric::new(),))
            .with_metric_logger(InMemoryMetricLogger::new())
            .with_application_logger(None);
        if self.gradient_checkpointing {
            training = training.gradient_checkpointing();
        }
        let devices = self.devices;
        match self.strategy {
            // burn-train's default: the model's device.
            Strategy::Single => {}
            Strategy::Multi => {
                training = training.with_training_strategy(TrainingStrategy::Default(
                    ExecutionStrategy::MultiDevice(devices, MultiDeviceOptim::OptimMainDevice),
                ));
            }
            Strategy::Ddp => {
                let mean = DistributedConfig {
                    all_reduce_op: ReduceOperation::Mean,
                };
                training = training.with_training_strategy(TrainingStrategy::Default(
                    ExecutionStrategy::ddp(devices, mean),
                ));
            }
        }
        let result = training.launch(Learner::new(model, SgdConfig::new().init(), 1e-2));
        assert!(result.error.is_none(), "{:?}", result.error);
        Trained {
            train_losses: TRAIN_LOSSES.lock().unwrap().clone(),
            valid_losses: VALID_LOSSES.lock().unwrap().clone(),
            parameters: parameters(&result.model),
        }
    }
}
