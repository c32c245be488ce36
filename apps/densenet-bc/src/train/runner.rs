//! The seam between the epoch loop and the devices: a [`StepRunner`] owns the model and the
//! optimizer state and runs training steps, evaluations and saves on its device(s). The loop
//! never sees a backend type.
//!
//! [`SingleDevice`] runs on one device; [`Parallel`](super::parallel::Parallel) on several,
//! through `burn_checkpoint_parallel::DataParallel`.

use std::path::Path;

use anyhow::{Context, bail};
use burn::module::{AutodiffModule, Module};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::{GradientsParams, Optimizer};
use burn::prelude::ElementConversion;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Int, Tensor};
use burn_checkpoint::memory::Meter;
use burn_checkpoint::planner::Plan;

use super::save::save_state;
use crate::DenseNet;
use crate::data::HostBatch;
use app_kit::save::Checksums;

/// What one training step reports.
#[derive(Debug, Clone, Copy)]
pub struct StepOutput {
    /// The batch's mean loss.
    pub loss: f32,
    /// Images of the batch the model (before the step) classified right, when the runner sees
    /// the logits (a data-parallel step returns only the loss).
    pub correct: Option<usize>,
    /// The step's peak memory above its start, in bytes (see [`Meter`]).
    pub peak_bytes: usize,
    /// On a device, the most bytes its memory manager held during the step.
    pub reserved_bytes: Option<usize>,
}

/// What evaluating one batch reports.
#[derive(Debug, Clone, Copy, Default)]
pub struct EvalOutput {
    /// The sum of the images' losses.
    pub loss_sum: f64,
    /// Images classified right.
    pub correct: usize,
}

/// Runs training steps and evaluations on its device(s) and saves its state.
pub trait StepRunner {
    /// The devices it trains on.
    fn device_count(&self) -> usize;

    /// Seeds the backend's random generator on every device (dropout masks).
    fn seed(&mut self, seed: u64);

    /// One SGD step on `batch` at learning rate `lr`, finished on the device when it returns.
    fn train_step(&mut self, batch: &HostBatch, lr: f64) -> anyhow::Result<StepOutput>;

    /// The loss and the correct predictions on `batch`, in inference mode (BatchNorm's running
    /// statistics, no gradient tracking).
    fn evaluate(&mut self, batch: &HostBatch) -> anyhow::Result<EvalOutput>;

    /// Writes the model ([`MODEL_FILE`](super::save::MODEL_FILE)) and the optimizer state
    /// ([`OPTIMIZER_FILE`](super::save::OPTIMIZER_FILE)) into `dir`, each file atomically, and
    /// returns their checksums.
    fn save(&mut self, dir: &Path) -> anyhow::Result<Checksums>;

    /// A copy of the model and optimizer state that takes training steps of its own, for
    /// profiling: the run's own state is untouched.
    fn scratch(&self) -> anyhow::Result<Box<dyn ScratchRunner>> {
        bail!("profiling and budget plans run on one device; give --devices one device")
    }

    /// Runs every later training step under `plan` (see `burn_checkpoint::planner::Plan`).
    fn set_plan(&mut self, _plan: Plan) -> anyhow::Result<()> {
        bail!("budget plans run on one device; give --devices one device")
    }
}

/// A scratch copy of a runner's model and optimizer ([`StepRunner::scratch`]).
pub trait ScratchRunner {
    /// One SGD step on `batch`, finished on the device when it returns.
    fn step(&mut self, batch: &HostBatch) -> anyhow::Result<()>;
}

/// Training on one device.
pub struct SingleDevice<B: AutodiffBackend, O> {
    model: Option<DenseNet<B>>,
    optimizer: O,
    device: B::Device,
    meter: Meter,
    /// How each step's regions run, when a budget plan was chosen.
    plan: Option<Plan>,
}

/// One SGD step of `model` on `images` and `labels`: the loss (in the graph) and the right
/// answers, and the model after the step.
fn sgd_step<B, O>(
    model: DenseNet<B>,
    optimizer: &mut O,
    images: Tensor<B, 4>,
    labels: Tensor<B, 1, Int>,
    lr: f64,
) -> (DenseNet<B>, Tensor<B, 1>, usize)
where
    B: AutodiffBackend,
    O: Optimizer<DenseNet<B>, B>,
{
    let (loss, correct) = train_loss(&model, images, labels);
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    (optimizer.step(lr, model, grads), loss, correct)
}

/// A copy of a [`SingleDevice`]'s model and optimizer.
struct Scratch<B: AutodiffBackend, O> {
    model: Option<DenseNet<B>>,
    optimizer: O,
    device: B::Device,
    /// The model when the copy was made. A clone of a Burn module shares its BatchNorm running
    /// statistics with the original (one `Arc` per state): the copy's steps update the run's
    /// statistics too, so they are written back from here when the copy is dropped.
    original: Option<<DenseNet<B> as Module<B>>::Record>,
}

impl<B: AutodiffBackend, O> Drop for Scratch<B, O> {
    fn drop(&mut self) {
        if let (Some(model), Some(original)) = (self.model.take(), self.original.take()) {
            // A running state keeps the last update per thread until it syncs: sync (taking a
            // record does), so that nothing of the copy's is merged later; then loading writes
            // each state's original value into the state the run's model shares.
            drop(model.clone().into_record());
            drop(model.load_record(original));
        }
    }
}

impl<B, O> ScratchRunner for Scratch<B, O>
where
    B: AutodiffBackend,
    O: Optimizer<DenseNet<B>, B>,
{
    fn step(&mut self, batch: &HostBatch) -> anyhow::Result<()> {
        let images = Tensor::from_data(batch.images.clone(), &self.device);
        let labels = Tensor::from_data(batch.labels.clone(), &self.device);
        let model = self.model.take().expect("a model between steps");
        // A small rate: the copy only has to take real steps.
        let (model, _, _) = sgd_step(model, &mut self.optimizer, images, labels, 1e-3);
        self.model = Some(model);
        B::sync(&self.device).context("the device failed to finish a profiled step")
    }
}

impl<B, O> SingleDevice<B, O>
where
    B: AutodiffBackend,
    O: Optimizer<DenseNet<B>, B>,
{
    /// Trains `model` with `optimizer` on `device`, measuring step memory with `meter`.
    pub fn new(model: DenseNet<B>, optimizer: O, device: B::Device, meter: Meter) -> Self {
        SingleDevice {
            model: Some(model),
            optimizer,
            device,
            meter,
            plan: None,
        }
    }

    fn model(&self) -> &DenseNet<B> {
        self.model.as_ref().expect("a model between steps")
    }

    fn tensors(&self, batch: &HostBatch) -> (Tensor<B, 4>, Tensor<B, 1, Int>) {
        (
            Tensor::from_data(batch.images.clone(), &self.device),
            Tensor::from_data(batch.labels.clone(), &self.device),
        )
    }
}

/// Images whose largest logit is at their label's index.
fn correct<B: Backend>(logits: Tensor<B, 2>, labels: Tensor<B, 1, Int>) -> usize {
    let predicted = logits.argmax(1).squeeze_dim::<1>(1);
    predicted
        .equal(labels)
        .int()
        .sum()
        .into_scalar()
        .elem::<i64>() as usize
}

/// The training loss of a batch (mean cross-entropy, in the graph) and its right answers
/// (counted on the values, outside the graph): what every training step computes.
pub fn train_loss<B: AutodiffBackend>(
    model: &DenseNet<B>,
    images: Tensor<B, 4>,
    labels: Tensor<B, 1, Int>,
) -> (Tensor<B, 1>, usize) {
    let logits = model.forward(images);
    let loss = CrossEntropyLossConfig::new()
        .init(&logits.device())
        .forward(logits.clone(), labels.clone());
    (loss, correct(logits.inner(), labels.inner()))
}

/// A validation batch's summed loss and right answers.
pub fn evaluate_batch<B: Backend>(
    model: &DenseNet<B>,
    images: Tensor<B, 4>,
    labels: Tensor<B, 1, Int>,
) -> EvalOutput {
    let images_in_batch = labels.dims()[0] as f64;
    let logits = model.forward(images);
    let loss = CrossEntropyLossConfig::new()
        .init(&logits.device())
        .forward(logits.clone(), labels.clone())
        .into_scalar()
        .elem::<f64>();
    EvalOutput {
        loss_sum: loss * images_in_batch,
        correct: correct(logits, labels),
    }
}

impl<B, O> StepRunner for SingleDevice<B, O>
where
    B: AutodiffBackend,
    O: Optimizer<DenseNet<B>, B> + Clone + 'static,
{
    fn device_count(&self) -> usize {
        1
    }

    fn seed(&mut self, seed: u64) {
        B::seed(&self.device, seed);
    }

    fn train_step(&mut self, batch: &HostBatch, lr: f64) -> anyhow::Result<StepOutput> {
        let measure = self.meter.start();
        let (images, labels) = self.tensors(batch);
        let model = self.model.take().expect("a model between steps");
        let optimizer = &mut self.optimizer;
        let step = || sgd_step(model, optimizer, images, labels, lr);
        let (model, loss, correct) = match &self.plan {
            Some(plan) => plan.run(step),
            None => step(),
        };
        self.model = Some(model);
        let loss = loss.into_scalar().elem::<f32>();
        // Lazy backends: the step is finished inside the measurement.
        B::sync(&self.device).context("the device failed to finish the step")?;
        let peak = measure.finish();
        Ok(StepOutput {
            loss,
            correct: Some(correct),
            peak_bytes: peak.in_use as usize,
            reserved_bytes: peak.reserved.map(|r| r as usize),
        })
    }

    fn evaluate(&mut self, batch: &HostBatch) -> anyhow::Result<EvalOutput> {
        let model = self.model().valid();
        let device = self.device.clone();
        let images = Tensor::<B::InnerBackend, 4>::from_data(batch.images.clone(), &device);
        let labels = Tensor::<B::InnerBackend, 1, Int>::from_data(batch.labels.clone(), &device);
        Ok(evaluate_batch(&model, images, labels))
    }

    fn save(&mut self, dir: &Path) -> anyhow::Result<Checksums> {
        save_state(self.model().clone(), &self.optimizer, dir)
    }

    fn scratch(&self) -> anyhow::Result<Box<dyn ScratchRunner>> {
        Ok(Box::new(Scratch {
            model: Some(self.model().clone()),
            optimizer: self.optimizer.clone(),
            device: self.device.clone(),
            original: Some(self.model().clone().into_record()),
        }))
    }

    fn set_plan(&mut self, plan: Plan) -> anyhow::Result<()> {
        self.plan = Some(plan);
        Ok(())
    }
}
