//! The trainer's networks as burn-train trains them: DenseNet-BC classifying images and the GPT
//! predicting each next byte of a text, one `TrainStep` and `InferenceStep` for both, each dense
//! layer or block a region when asked, and a [`Probe`] that records each training step's peak
//! memory and time and the validation's right answers, for the trainer's table, and watches every
//! step and validation batch for a failed allocation (app-kit's [`RanOutOfMemory`]).

use std::panic::resume_unwind;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use app_kit::out_of_memory::RanOutOfMemory;
use image_data::seeds::{Purpose, derive};
use serde::{Deserialize, Serialize};

use burn::data::dataloader::batcher::Batcher;
use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::tensor::{Device, Int, Tensor};
use burn::train::{ClassificationOutput, InferenceStep, TrainOutput, TrainStep};
use burn_checkpoint_22::memory::{MemoryMeter, Meter, OutOfMemory, StepReport, Timeline};
use burn_checkpoint_22::planner::Plan;
use burn_checkpoint_22_models::Cut;
use burn_checkpoint_22_models::densenet::DenseNet;
use burn_checkpoint_22_models::gpt::Gpt;
use image_data::ImageItem;

use crate::budget::Guard;
use crate::images::{ImageBatch, ImageBatcher};
use crate::text::{TokenBatch, TokenBatcher};

/// The network trained: each answers its own kind of [`Batch`].
// One network a run, built once: the size of the larger variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Module, Debug)]
pub enum Network {
    /// DenseNet-BC on images; its dense layers are the regions.
    DenseNet(DenseNet),
    /// The GPT on text, a byte a token; its blocks are the regions.
    Gpt(Gpt),
}

/// A batch of what the network learns from.
#[derive(Clone, Debug)]
pub enum Batch {
    /// Images and their classes, for DenseNet-BC.
    Images(ImageBatch),
    /// Tokens and the tokens after them, for the GPT.
    Tokens(TokenBatch),
}

impl Batch {
    /// The device its tensors are on.
    pub fn device(&self) -> Device {
        match self {
            Batch::Images(batch) => batch.images.device(),
            Batch::Tokens(batch) => batch.inputs.device(),
        }
    }
}

impl Batcher<ImageItem, Batch> for ImageBatcher {
    fn batch(&self, items: Vec<ImageItem>, device: &Device) -> Batch {
        Batch::Images(Batcher::<_, ImageBatch>::batch(self, items, device))
    }
}

impl Batcher<Vec<u8>, Batch> for TokenBatcher {
    fn batch(&self, windows: Vec<Vec<u8>>, device: &Device) -> Batch {
        Batch::Tokens(Batcher::<_, TokenBatch>::batch(self, windows, device))
    }
}

/// What a run's steps measured (saved with a run's epochs: a resumed method's row counts its
/// earlier epochs' steps too).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Probed {
    /// Each training step's peak memory above its start (forward, loss, backward), in bytes.
    pub step_peaks: Vec<u64>,
    /// On a device, each training step's peak of the bytes its memory manager reserved
    /// (absolute: what the device's pools held, the model's pages included).
    pub step_reserved: Vec<u64>,
    /// Each training step's time (forward, loss, backward; the optimizer's update is burn-train's).
    pub step_times: Vec<Duration>,
    /// Each validation batch's predictions right (images classified, next bytes predicted), and
    /// its predictions, in order.
    pub valid: Vec<(usize, usize)>,
    /// The timeline of the training step [`Probe::with_timeline`] asked for, once it ran.
    pub timeline: Option<Timeline>,
    /// On a device, the most bytes its memory manager reserved over the method's training
    /// (its steps, updates and validation; absolute), sampled every 100 µs; a resumed method's
    /// since it resumed.
    #[serde(default)]
    pub run_reserved: Option<u64>,
}

/// Where a model's steps record what they measured, and the first allocation a step or
/// validation batch failed; clones share one record (burn-train clones the model it trains).
#[derive(Clone)]
pub struct Probe {
    meter: Meter,
    probed: Arc<Mutex<Probed>>,
    /// Training steps, then validation batches, begun (every device's), and how many an epoch
    /// has: where a failure happened.
    steps: Arc<AtomicUsize>,
    valid_batches: Arc<AtomicUsize>,
    per_epoch: (usize, usize),
    /// The training step (from 1) whose timeline is recorded, if any.
    timeline_step: Option<usize>,
    /// The run's seed: each epoch's first step reseeds its device's generator from it.
    seed: Option<u64>,
    failure: Arc<Mutex<Option<RanOutOfMemory>>>,
    /// Why a step refused to run (a budget that cannot hold: [`Guard`]).
    refusal: Arc<Mutex<Option<String>>>,
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
            steps: Arc::default(),
            valid_batches: Arc::default(),
            per_epoch: (0, 0),
            timeline_step: None,
            seed: None,
            failure: Arc::default(),
            refusal: Arc::default(),
        }
    }

    /// The same, recording the timeline of training step `step` (from 1; `None`: none) into
    /// [`Probed::timeline`]. The first step is then recorded with a timeline too, so that a
    /// failure there carries the timeline up to it.
    pub fn with_timeline(self, step: Option<usize>) -> Self {
        Probe {
            timeline_step: step,
            ..self
        }
    }

    /// The same, for a run of `steps` training steps and `valid_batches` validation batches an
    /// epoch (every device's): a failure then says its epoch.
    pub fn per_epoch(self, steps: usize, valid_batches: usize) -> Self {
        Probe {
            per_epoch: (steps, valid_batches),
            ..self
        }
    }

    /// The same, each epoch's first step reseeding its device's generator from `seed` (and
    /// the epoch): an epoch's random draws (dropout's masks) are then the same whether the run
    /// went through or was resumed at that epoch. Needs [`Probe::per_epoch`].
    pub fn reseeding(self, seed: u64) -> Self {
        Probe {
            seed: Some(seed),
            ..self
        }
    }

    /// The same, for a method resumed after `epochs` epochs that measured `probed`: its steps
    /// and validation batches count on from there.
    pub fn resumed(self, probed: Probed, epochs: usize) -> Self {
        *self.lock() = probed;
        self.steps
            .store(epochs * self.per_epoch.0, Ordering::Relaxed);
        self.valid_batches
            .store(epochs * self.per_epoch.1, Ordering::Relaxed);
        self
    }

    /// Before a training step on `device`: at an epoch's first step, the generator reseeded
    /// ([`Probe::reseeding`]).
    fn reseed(&self, device: &Device) {
        let (Some(seed), steps) = (self.seed, self.per_epoch.0) else {
            return;
        };
        let index = self.steps.load(Ordering::Relaxed);
        if steps > 0 && index.is_multiple_of(steps) {
            device.seed(derive(seed, Purpose::Backend, index / steps));
        }
    }

    /// What was recorded so far.
    pub fn probed(&self) -> Probed {
        self.lock().clone()
    }

    /// The first allocation a step or validation batch failed, taken: what stopped the run.
    pub fn take_failure(&self) -> Option<RanOutOfMemory> {
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// Why a step refused to run, taken: what stopped the run.
    pub fn take_refusal(&self) -> Option<String> {
        self.refusal
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// Stops the run with `message` as the reason: kept ([`Probe::take_refusal`]), then this
    /// thread unwinds as a failed allocation does ([`Probe::watched`]).
    fn refuse(&self, message: String) -> ! {
        self.refusal
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(message.clone());
        resume_unwind(Box::new(message))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Probed> {
        self.probed.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `work` (a training step, `training`, or a validation batch) watching for a failed
    /// allocation: the run's first step recorded region by region (a failure there says what
    /// each region held), with a timeline where one was asked for, and so is the timeline's
    /// step; the others under `OutOfMemory::catch` (which reads nothing while they run). A
    /// failure is kept ([`Probe::take_failure`]) and stops the run: this thread unwinds
    /// (burn-train's worker threads catch it and stop the training; on one device the trainer
    /// does), without the panic hook's message, since the failure's report is the trainer's to
    /// print.
    fn watched<R>(&self, training: bool, work: impl FnOnce() -> R) -> R {
        let (counter, per_epoch, what) = match training {
            true => (&self.steps, self.per_epoch.0, "training step"),
            false => (&self.valid_batches, self.per_epoch.1, "validation batch"),
        };
        let index = counter.fetch_add(1, Ordering::Relaxed);
        let base_bytes = self.meter.in_use();
        let drawn = training
            && self
                .timeline_step
                .is_some_and(|n| index == 0 || index + 1 == n);
        let outcome = if drawn {
            Timeline::try_measure(self.meter.clone(), work).map(|(result, timeline)| {
                if self.timeline_step == Some(index + 1) {
                    self.lock().timeline = Some(timeline);
                }
                result
            })
        } else if training && index == 0 {
            StepReport::try_measure(self.meter.clone(), work).map(|(result, _)| result)
        } else {
            OutOfMemory::catch(self.meter.clone(), work)
        };
        let failure = match outcome {
            Ok(result) => return result,
            Err(failure) => failure,
        };
        let during = match per_epoch {
            0 => format!("{what} {}", index + 1),
            n => format!("epoch {}, {what} {}", index / n + 1, index % n + 1),
        };
        let stopped = RanOutOfMemory {
            failure,
            during,
            base_bytes,
        };
        let message = stopped.to_string();
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(stopped);
        resume_unwind(Box::new(message))
    }
}

/// A network, where its regions go, the budget planner's plan its training steps run under, if
/// any, and the probe its steps record in.
#[derive(Module, Debug)]
pub struct Classifier {
    model: Network,
    #[module(skip)]
    cut: Cut,
    #[module(skip)]
    plan: Option<Plan>,
    #[module(skip)]
    guard: Option<Guard>,
    #[module(skip)]
    probe: Probe,
}

impl Classifier {
    /// `model` trained with its regions at `cut` (a dense layer, a GPT block each: the cuts
    /// whose unit is the model's), its steps recorded in `probe`.
    pub fn new(model: Network, cut: Cut, probe: Probe) -> Self {
        Classifier {
            model,
            cut,
            plan: None,
            guard: None,
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

    /// The same, each training step run under the plan `guard` chooses to keep the run within
    /// its budget on a device (which replaces a [`Classifier::with_plan`]'s).
    pub fn with_guard(self, guard: Guard) -> Self {
        Classifier {
            guard: Some(guard),
            ..self
        }
    }

    /// The network.
    pub fn model(&self) -> &Network {
        &self.model
    }

    /// The logits of `batch` (one row per prediction: per image, per next byte) and their
    /// cross-entropy loss.
    ///
    /// # Panics
    ///
    /// If `batch` is not the network's kind (the trainer pairs them).
    pub fn classify(&self, batch: Batch) -> ClassificationOutput {
        let cut = self.cut;
        let (logits, targets): (Tensor<2>, Tensor<1, Int>) = match (&self.model, batch) {
            (Network::DenseNet(model), Batch::Images(batch)) => {
                (model.forward(batch.images, cut), batch.labels)
            }
            (Network::Gpt(model), Batch::Tokens(batch)) => {
                let logits = model.logits(batch.inputs, cut);
                let [rows, seq, vocab] = logits.dims();
                (
                    logits.reshape([rows * seq, vocab]),
                    batch.targets.reshape([rows * seq]),
                )
            }
            (model, _) => panic!("{} given a batch of another kind", model.name()),
        };
        let loss = CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(logits.clone(), targets.clone());
        ClassificationOutput::new(loss, logits, targets)
    }
}

impl TrainStep for Classifier {
    type Input = Batch;
    type Output = ClassificationOutput;

    fn step(&self, batch: Batch) -> TrainOutput<ClassificationOutput> {
        self.probe.reseed(&batch.device());
        let meter = &self.probe.meter;
        let guarded = self.guard.as_ref().map(|guard| {
            guard
                .before_step(meter)
                .unwrap_or_else(|message| self.probe.refuse(message))
        });
        let plan = match &guarded {
            Some((plan, _)) => Some(plan),
            None => self.plan.as_ref(),
        };
        let measure = meter.start();
        let start = Instant::now();
        let forward_backward = || {
            let output = self.classify(batch);
            let grads = output.loss.backward();
            (output, grads)
        };
        let (output, grads) = self.probe.watched(true, || {
            let done = match plan {
                Some(plan) => plan.run(forward_backward),
                None => forward_backward(),
            };
            // On a device, the step's time is its work's, done: wait for it first (and an
            // allocation its queue fails, fails in the watch).
            self.probe.meter.settle();
            done
        });
        let time = start.elapsed();
        let peak = measure.finish();
        if let (Some(guard), Some((plan, start)), Some(reserved)) =
            (&self.guard, &guarded, peak.reserved)
            && let Err(message) = guard.after_step(plan, *start, reserved, meter)
        {
            self.probe.refuse(message);
        }
        let mut probed = self.probe.lock();
        probed.step_peaks.push(peak.in_use);
        probed.step_reserved.extend(peak.reserved);
        probed.step_times.push(time);
        drop(probed);
        TrainOutput::new(self, grads, output)
    }
}

impl InferenceStep for Classifier {
    type Input = Batch;
    type Output = ClassificationOutput;

    fn step(&self, batch: Batch) -> ClassificationOutput {
        let (output, right) = self.probe.watched(false, || {
            let output = self.classify(batch);
            let predicted = output.output.clone().argmax(1).flatten::<1>(0, 1);
            let right: Tensor<1, burn::tensor::Bool> = predicted.equal(output.targets.clone());
            let right = right.int().sum().into_scalar::<i64>() as usize;
            (output, right)
        });
        if let Some(guard) = &self.guard
            && let Err(message) = guard.after_validation_batch(&self.probe.meter)
        {
            self.probe.refuse(message);
        }
        let predictions = output.targets.dims()[0];
        self.probe.lock().valid.push((right, predictions));
        output
    }
}

impl Network {
    /// The network's name in messages.
    pub fn name(&self) -> &'static str {
        match self {
            Network::DenseNet(_) => "DenseNet-BC",
            Network::Gpt(_) => "the GPT",
        }
    }
}
