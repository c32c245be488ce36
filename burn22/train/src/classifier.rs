//! DenseNet-BC as burn-train trains it: a `TrainStep` and an `InferenceStep` over image batches,
//! each dense layer a region when asked, and a [`Probe`] that records each training step's peak
//! memory and time and the validation's right answers, for the trainer's table.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::tensor::Tensor;
use burn::train::{ClassificationOutput, InferenceStep, TrainOutput, TrainStep};
use burn_checkpoint_22::memory::Meter;
use burn_checkpoint_22::planner::Plan;
use burn_checkpoint_22_models::Cut;
use burn_checkpoint_22_models::densenet::DenseNet;

use crate::images::ImageBatch;

/// What a run's steps measured.
#[derive(Debug, Clone, Default)]
pub struct Probed {
    /// Each training step's peak memory above its start (forward, loss, backward), in bytes.
    pub step_peaks: Vec<u64>,
    /// Each training step's time (forward, loss, backward; the optimizer's update is burn-train's).
    pub step_times: Vec<Duration>,
    /// Each validation batch's images classified right, and its images, in order.
    pub valid: Vec<(usize, usize)>,
}

/// Where a model's steps record what they measured; clones share one record (burn-train clones
/// the model it trains).
#[derive(Clone)]
pub struct Probe {
    meter: Meter,
    probed: Arc<Mutex<Probed>>,
}

// burn-train's summary prints the model: one word, not every step's figures.
impl std::fmt::Debug for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Probe")
    }
}

impl Probe {
    /// A probe reading memory with `meter`.
    pub fn new(meter: Meter) -> Self {
        Probe {
            meter,
            probed: Arc::default(),
        }
    }

    /// What was recorded so far.
    pub fn probed(&self) -> Probed {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Probed> {
        self.probed.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// DenseNet-BC, its dense layers regions when `regions`, the budget planner's plan its training
/// steps run under, if any, and the probe its steps record in.
#[derive(Module, Debug)]
pub struct Classifier {
    model: DenseNet,
    regions: bool,
    #[module(skip)]
    plan: Option<Plan>,
    #[module(skip)]
    probe: Probe,
}

impl Classifier {
    /// `model` trained with a region per dense layer when `regions`, its steps recorded in
    /// `probe`.
    pub fn new(model: DenseNet, regions: bool, probe: Probe) -> Self {
        Classifier {
            model,
            regions,
            plan: None,
            probe,
        }
    }

    /// The same, its training steps run under `plan` (which regions keep, recompute or offload).
    pub fn with_plan(self, plan: Plan) -> Self {
        Classifier {
            plan: Some(plan),
            ..self
        }
    }

    /// The network.
    pub fn model(&self) -> &DenseNet {
        &self.model
    }

    /// The logits of `batch` and their cross-entropy loss.
    pub fn classify(&self, batch: ImageBatch) -> ClassificationOutput {
        let cut = if self.regions { Cut::Each } else { Cut::None };
        let logits = self.model.forward(batch.images, cut);
        let loss = CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(logits.clone(), batch.labels.clone());
        ClassificationOutput::new(loss, logits, batch.labels)
    }
}

impl TrainStep for Classifier {
    type Input = ImageBatch;
    type Output = ClassificationOutput;

    fn step(&self, batch: ImageBatch) -> TrainOutput<ClassificationOutput> {
        let measure = self.probe.meter.start();
        let start = Instant::now();
        let forward_backward = || {
            let output = self.classify(batch);
            let grads = output.loss.backward();
            (output, grads)
        };
        let (output, grads) = match &self.plan {
            Some(plan) => plan.run(forward_backward),
            None => forward_backward(),
        };
        let time = start.elapsed();
        let peak = measure.finish();
        let mut probed = self.probe.lock();
        probed.step_peaks.push(peak.in_use);
        probed.step_times.push(time);
        drop(probed);
        TrainOutput::new(self, grads, output)
    }
}

impl InferenceStep for Classifier {
    type Input = ImageBatch;
    type Output = ClassificationOutput;

    fn step(&self, batch: ImageBatch) -> ClassificationOutput {
        let output = self.classify(batch);
        let predicted = output.output.clone().argmax(1).flatten::<1>(0, 1);
        let right: Tensor<1, burn::tensor::Bool> = predicted.equal(output.targets.clone());
        let right = right.int().sum().into_scalar::<i64>() as usize;
        let images = output.targets.dims()[0];
        self.probe.lock().valid.push((right, images));
        output
    }
}
