//! One epoch of the training run: its training steps (each watched for a failed allocation,
//! the invocation's first one recorded), then the validation pass; and the figures the steps
//! leave for the report.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::transform::{PartialDataset, ShuffledDataset};
use burn::tensor::backend::Backend;

use super::options::TrainOptions;
use super::progress;
use super::report::EpochReport;
use super::runner::StepRunner;
use crate::data::{Augmented, HostBatch, ImageBatcher, ImageDataset, Images, Splits};
use crate::seeds::{Purpose, derive};
use app_kit::out_of_memory::RanOutOfMemory;
use burn_checkpoint::memory::{MemoryMeter, Meter, OutOfMemory, StepReport, Timeline};

/// Padding of CIFAR's random crops.
const CROP_PADDING: usize = 4;

/// The learning rate of `epoch` (from 0): app-kit's, the schedule both trainers follow.
pub use app_kit::schedule::learning_rate;

/// The figures of this invocation's steps.
#[derive(Default)]
pub(super) struct StepLog {
    pub(super) times: Vec<Duration>,
    pub(super) peaks: Vec<usize>,
    /// On a device, the most bytes reserved in any step.
    pub(super) reserved: Option<usize>,
    /// The timeline of `--timeline-step`, once it ran.
    pub(super) timeline: Option<Timeline>,
}

impl StepLog {
    /// The first step is left out when there are others: it warms up and allocates the
    /// optimizer state.
    fn steady<T: Copy>(values: &[T]) -> &[T] {
        if values.len() > 1 {
            &values[1..]
        } else {
            values
        }
    }

    pub(super) fn median_seconds(&self) -> f64 {
        let mut times = Self::steady(&self.times).to_vec();
        times.sort();
        times
            .get(times.len() / 2)
            .map_or(0.0, Duration::as_secs_f64)
    }

    pub(super) fn peak_bytes(&self) -> usize {
        Self::steady(&self.peaks).iter().copied().max().unwrap_or(0)
    }
}

/// What every epoch of a run reads: the data, how it is batched, the validation loader, the
/// options and the number of steps.
pub(super) struct EpochPlan<'a, I: Backend> {
    pub(super) splits: &'a Splits,
    pub(super) batcher: &'a ImageBatcher,
    pub(super) valid: &'a dyn DataLoader<I, HostBatch>,
    pub(super) options: &'a TrainOptions,
    pub(super) steps: usize,
    /// The device's meter, which the out-of-memory watch reads at a failure.
    pub(super) meter: &'a Meter,
}

impl<I: Backend> EpochPlan<'_, I> {
    /// One epoch: training steps, then the validation pass.
    pub(super) fn train(
        &self,
        runner: &mut dyn StepRunner,
        epoch: usize,
        log: &mut StepLog,
    ) -> anyhow::Result<EpochReport> {
        let Self {
            splits,
            batcher,
            valid,
            options,
            steps,
            meter,
        } = *self;
        let epoch_start = Instant::now();
        runner.seed(derive(options.seed, Purpose::Backend, epoch));
        let lr = learning_rate(options.sgd.lr, epoch, options.epochs);
        let loader = train_loader::<I>(splits, batcher, options, epoch, steps);
        let bar = progress::epoch_bar(epoch, options.epochs, steps);
        let (mut loss_sum, mut images, mut done) = (0.0f64, 0usize, 0usize);
        // Stays `Some` while every step reports its correct predictions.
        let mut correct = Some(0usize);
        let mut train_time = Duration::ZERO;
        for batch in loader.iter() {
            let start = Instant::now();
            let during = format!("epoch {}, training step {}", epoch + 1, done + 1);
            // The invocation's first step is recorded: a failure there (the usual one: a batch
            // too large) says what each region held. The others are only watched, and so is a
            // data-parallel step: its regions run on the workers' threads, which the recording
            // (this thread's) does not see.
            // With --memory-timeline, the first step and --timeline-step are drawn (a failure
            // in either carries the timeline up to it).
            let number = log.times.len() + 1;
            let one_device = runner.device_count() == 1;
            let drawn = options
                .timeline
                .step()
                .filter(|&n| one_device && (number == 1 || number == n));
            let mut timeline = None;
            let record = match (drawn, one_device && number == 1) {
                (Some(_), _) => Record::Timeline(&mut timeline),
                (None, true) => Record::Report,
                (None, false) => Record::Watch,
            };
            let step = watched(meter, record, during, || runner.train_step(&batch, lr))
                .inspect_err(|_| bar.abandon())?;
            if drawn == Some(number) {
                log.timeline = timeline;
            }
            let time = start.elapsed();
            if !step.loss.is_finite() {
                bar.abandon();
                bail!(
                    "the loss is {} at epoch {}, step {}: training diverged (try a lower --lr)",
                    step.loss,
                    epoch + 1,
                    done + 1
                );
            }
            log.times.push(time);
            log.peaks.push(step.peak_bytes);
            log.reserved = log.reserved.max(step.reserved_bytes);
            train_time += time;
            done += 1;
            loss_sum += step.loss as f64;
            correct = correct.zip(step.correct).map(|(sum, c)| sum + c);
            images += batch.len();
            bar.set_message(progress::step_message(
                loss_sum / done as f64,
                correct.map(|c| c as f64 / images as f64),
                images as f64 / train_time.as_secs_f64(),
            ));
            bar.inc(1);
        }
        bar.finish_and_clear();
        let (valid_loss, valid_correct, valid_images) =
            validate(runner, valid, options.batch_size, meter, epoch)?;
        Ok(EpochReport {
            epoch: epoch + 1,
            lr,
            steps: done,
            train_loss: loss_sum / done.max(1) as f64,
            train_accuracy: correct.map(|c| c as f64 / images.max(1) as f64),
            valid_loss: valid_loss / valid_images.max(1) as f64,
            valid_accuracy: valid_correct as f64 / valid_images.max(1) as f64,
            valid_images,
            images_per_second: images as f64 / train_time.as_secs_f64().max(f64::MIN_POSITIVE),
            seconds: epoch_start.elapsed().as_secs_f64(),
        })
    }
}

/// The loader of `epoch`'s training batches: the images (cropped and flipped for CIFAR),
/// shuffled, both by seeds derived from the run's seed and the epoch, cut to whole batches.
fn train_loader<I: Backend>(
    splits: &Splits,
    batcher: &ImageBatcher,
    options: &TrainOptions,
    epoch: usize,
    steps: usize,
) -> Arc<dyn DataLoader<I, HostBatch>> {
    let images: Arc<dyn Images> = if splits.augment {
        let seed = derive(options.seed, Purpose::Augment, epoch);
        Arc::new(Augmented::new(
            splits.train.clone(),
            splits.shape,
            CROP_PADDING,
            seed,
        ))
    } else {
        splits.train.clone()
    };
    let images = ImageDataset(images);
    let shuffled = ShuffledDataset::new(images, derive(options.seed, Purpose::Shuffle, epoch));
    let part = PartialDataset::new(shuffled, 0, steps * options.batch_size);
    DataLoaderBuilder::new(batcher.clone())
        .batch_size(options.batch_size)
        .num_workers(options.workers)
        .build(part)
}

/// The validation pass: summed loss, correct predictions, images.
fn validate<I: Backend>(
    runner: &mut dyn StepRunner,
    valid: &dyn DataLoader<I, HostBatch>,
    batch_size: usize,
    meter: &Meter,
    epoch: usize,
) -> anyhow::Result<(f64, usize, usize)> {
    let bar = progress::valid_bar(valid.num_items().div_ceil(batch_size));
    let (mut loss, mut correct, mut images) = (0.0, 0, 0);
    for (index, batch) in valid.iter().enumerate() {
        let during = format!("epoch {}, validation batch {}", epoch + 1, index + 1);
        let out = watched(meter, Record::Watch, during, || runner.evaluate(&batch))
            .inspect_err(|_| bar.abandon())?;
        loss += out.loss_sum;
        correct += out.correct;
        images += batch.len();
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok((loss, correct, images))
}

/// How [`watched`] runs its step.
pub(super) enum Record<'a> {
    /// Watched for a failed allocation only.
    Watch,
    /// Recorded region by region (a failure says what each region held).
    Report,
    /// Recorded with its timeline, put in the slot (a failure carries it).
    Timeline(&'a mut Option<Timeline>),
}

/// Runs `f` (a step or a validation batch) watching for a failed allocation, recorded as
/// `record` says; a failure becomes a [`RanOutOfMemory`] error naming `during`.
pub(super) fn watched<T>(
    meter: &Meter,
    record: Record,
    during: String,
    f: impl FnOnce() -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let base_bytes = meter.in_use();
    let outcome = match record {
        Record::Watch => OutOfMemory::catch(meter.clone(), f),
        Record::Report => StepReport::try_measure(meter.clone(), f).map(|(result, _)| result),
        Record::Timeline(slot) => Timeline::try_measure(meter.clone(), f).map(|(result, drawn)| {
            *slot = Some(drawn);
            result
        }),
    };
    outcome.map_err(|failure| {
        anyhow::Error::new(RanOutOfMemory {
            failure,
            during,
            base_bytes,
        })
    })?
}
