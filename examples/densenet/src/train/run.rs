//! The training run: data, model and runner set up, then per epoch the training steps, a
//! validation pass, the epoch's line and (with `--save`) the saved state; at the end, the report.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::Dataset;
use burn::data::dataset::transform::{PartialDataset, ShuffledDataset};
use burn::tensor::backend::Backend;

use super::backend;
use super::meter::Meter;
use super::options::{DeviceSpec, TrainOptions, parse_devices};
use super::progress;
use super::report::{EpochReport, Report};
use super::runner::StepRunner;
use super::save::{self, RunSettings, STATE_FILE, SavedState};
use crate::DenseNetConfig;
use crate::data::{self, Augmented, HostBatch, ImageBatcher, ImageItem, Splits};
use crate::seeds::{Purpose, derive};

/// Padding of CIFAR's random crops.
const CROP_PADDING: usize = 4;

/// Trains as `options` say and returns the report (also printing each epoch's line).
pub fn run(options: &TrainOptions) -> anyhow::Result<Report> {
    let started = Instant::now();
    let devices = parse_devices(&options.devices).map_err(anyhow::Error::msg)?;
    if options.depth < 10 || !(options.depth - 4).is_multiple_of(6) {
        bail!(
            "--depth {} is not a DenseNet-BC depth: it must be 6n + 4 with n ≥ 1 (10, 16, 22, 40, 100, …)",
            options.depth
        );
    }
    match devices[0] {
        DeviceSpec::Cpu => on_cpu(options, devices.len(), started),
        DeviceSpec::Cuda(_) => on_cuda(options, &devices, started),
    }
}

#[cfg(feature = "flex")]
fn on_cpu(options: &TrainOptions, count: usize, started: Instant) -> anyhow::Result<Report> {
    let devices = vec![burn::backend::flex::FlexDevice; count];
    run_on::<burn::backend::Flex>(options, &devices, Meter::Host, started)
}

#[cfg(not(feature = "flex"))]
fn on_cpu(_: &TrainOptions, _: usize, _: Instant) -> anyhow::Result<Report> {
    bail!("this build has no CPU backend: build with the `flex` feature (on by default)")
}

#[cfg(feature = "cuda")]
fn on_cuda(
    options: &TrainOptions,
    devices: &[DeviceSpec],
    started: Instant,
) -> anyhow::Result<Report> {
    use burn::backend::cuda::CudaDevice;
    let devices: Vec<CudaDevice> = devices
        .iter()
        .map(|d| match d {
            DeviceSpec::Cuda(index) => CudaDevice::new(*index),
            DeviceSpec::Cpu => unreachable!("parse_devices refuses mixed lists"),
        })
        .collect();
    let meter = Meter::Cuda(devices[0].clone());
    run_on::<burn::backend::Cuda>(options, &devices, meter, started)
}

#[cfg(not(feature = "cuda"))]
fn on_cuda(_: &TrainOptions, _: &[DeviceSpec], _: Instant) -> anyhow::Result<Report> {
    bail!("this build has no CUDA backend: build with `--features cuda`")
}

/// The learning rate of `epoch` (from 0): the reference's schedule, `lr` divided by 10 at 50%
/// and again at 75% of the epochs.
pub fn learning_rate(lr: f64, epoch: usize, epochs: usize) -> f64 {
    let progress = epoch as f64 / epochs as f64;
    if progress < 0.5 {
        lr
    } else if progress < 0.75 {
        lr / 10.0
    } else {
        lr / 100.0
    }
}

/// Training steps per epoch: whole batches only (every step has the same shape), at most
/// `--limit`.
fn steps_per_epoch(options: &TrainOptions, images: usize) -> anyhow::Result<usize> {
    let steps = images / options.batch_size;
    if steps == 0 {
        bail!(
            "the training split has {images} images, fewer than one batch of {}",
            options.batch_size
        );
    }
    Ok(options.limit.map_or(steps, |limit| limit.min(steps)))
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
    let images: Arc<dyn Dataset<ImageItem>> = if splits.augment {
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
    let shuffled = ShuffledDataset::new(images, derive(options.seed, Purpose::Shuffle, epoch));
    let part = PartialDataset::new(shuffled, 0, steps * options.batch_size);
    DataLoaderBuilder::new(batcher.clone())
        .batch_size(options.batch_size)
        .num_workers(options.workers)
        .build(part)
}

/// The loader of the validation batches: all of the test split, or with `--valid-limit` a
/// fixed random subset of it.
fn valid_loader<I: Backend>(
    splits: &Splits,
    batcher: &ImageBatcher,
    options: &TrainOptions,
) -> Arc<dyn DataLoader<I, HostBatch>> {
    let builder = || {
        DataLoaderBuilder::new(batcher.clone())
            .batch_size(options.batch_size)
            .num_workers(options.workers)
    };
    match options.valid_limit {
        None => builder().build(splits.valid.clone()),
        Some(batches) => {
            let images = (batches * options.batch_size).min(splits.valid.len());
            let seed = derive(options.seed, Purpose::Validation, 0);
            let shuffled = ShuffledDataset::new(splits.valid.clone(), seed);
            builder().build(PartialDataset::new(shuffled, 0, images))
        }
    }
}

/// The settings a resumed run must share with the saved one.
fn settings(options: &TrainOptions) -> RunSettings {
    RunSettings {
        data: options.data.name().to_string(),
        depth: options.depth,
        growth_rate: options.growth_rate,
        batch_size: options.batch_size,
        epochs: options.epochs,
        lr: options.lr,
        momentum: options.momentum,
        weight_decay: options.weight_decay,
        seed: options.seed,
        limit: options.limit,
        valid_limit: options.valid_limit,
    }
}

/// With `--resume`, the saved state and its weights' directory; without, a check that `--save`
/// would not overwrite a saved run.
fn saved_run(options: &TrainOptions) -> anyhow::Result<Option<(SavedState, std::path::PathBuf)>> {
    let Some(root) = &options.save else {
        return Ok(None);
    };
    if !options.resume {
        if root.join(STATE_FILE).exists() {
            bail!(
                "{} holds a saved run: pass --resume to continue it, or choose another --save directory",
                root.display()
            );
        }
        return Ok(None);
    }
    let (state, weights) = save::load_state(root)?;
    let differences = settings(options).differences(&state.settings);
    if !differences.is_empty() {
        bail!(
            "--resume needs the saved run's settings ({}), but these differ:\n  {}",
            root.join(STATE_FILE).display(),
            differences.join("\n  ")
        );
    }
    Ok(Some((state, weights)))
}

/// The figures of this invocation's steps.
#[derive(Default)]
struct StepLog {
    times: Vec<Duration>,
    peaks: Vec<usize>,
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

    fn median_seconds(&self) -> f64 {
        let mut times = Self::steady(&self.times).to_vec();
        times.sort();
        times
            .get(times.len() / 2)
            .map_or(0.0, Duration::as_secs_f64)
    }

    fn peak_bytes(&self) -> usize {
        Self::steady(&self.peaks).iter().copied().max().unwrap_or(0)
    }
}

fn run_on<I: Backend>(
    options: &TrainOptions,
    devices: &[I::Device],
    meter: Meter,
    started: Instant,
) -> anyhow::Result<Report> {
    let splits = data::load(options.data, options.data_dir.as_deref(), options.seed)?;
    let saved = saved_run(options)?;
    let mode = options.checkpoint_mode();
    let (cut, policy) = mode.cut();
    let config = DenseNetConfig::new(options.depth)
        .with_growth_rate(options.growth_rate)
        .with_input_channels(splits.shape[0])
        .with_classes(splits.classes)
        .with_cut(cut)
        .with_policy(policy);
    let built = backend::runner::<I>(
        mode,
        &config,
        devices,
        options,
        meter.clone(),
        saved.as_ref().map(|(_, weights)| weights.as_path()),
    )?;
    let mut runner = built.runner;
    let batcher = ImageBatcher::new(splits.shape, &splits.normalisation);
    let valid = valid_loader::<I>(&splits, &batcher, options);
    let steps = steps_per_epoch(options, splits.train.len())?;
    let mut history = saved.map(|(state, _)| state.history).unwrap_or_default();
    let first = history.len();
    let last = options
        .stop_after
        .map_or(options.epochs, |n| (first + n).min(options.epochs));
    let [c, h, w] = splits.shape;
    println!(
        "DenseNet-BC-{} (growth {}, {} parameters) on {} ({c}×{h}×{w}, {} training and {} validation images), {} on {}, batch {}, {steps} steps per epoch",
        options.depth,
        options.growth_rate,
        built.parameters,
        options.data.name(),
        splits.train.len(),
        valid.num_items(),
        mode.method(),
        built.backend,
        options.batch_size
    );
    if first > 0 {
        println!("resuming after epoch {first} of {}", options.epochs);
    }
    let mut log = StepLog::default();
    for epoch in first..last {
        let report = train_epoch::<I>(
            runner.as_mut(),
            &splits,
            &batcher,
            valid.as_ref(),
            options,
            epoch,
            steps,
            &mut log,
        )?;
        println!("{}", progress::epoch_line(options.epochs, &report));
        history.push(report);
        if let Some(root) = &options.save {
            let state = SavedState {
                format: save::FORMAT,
                epochs_done: epoch + 1,
                weights: save::epoch_dir_name(epoch + 1),
                settings: settings(options),
                history: history.clone(),
            };
            save::save_epoch(root, &state, |dir| runner.save(dir)).with_context(|| {
                format!("cannot save epoch {} in {}", epoch + 1, root.display())
            })?;
        }
    }
    Ok(Report {
        method: mode.method().to_string(),
        checkpoint: mode.name().to_string(),
        backend: built.backend,
        devices: parse_devices(&options.devices)
            .map_err(anyhow::Error::msg)?
            .iter()
            .map(ToString::to_string)
            .collect(),
        device_count: runner.device_count(),
        batch_size: options.batch_size,
        data: options.data.name().to_string(),
        depth: options.depth,
        growth_rate: options.growth_rate,
        parameters: built.parameters,
        peak_step_bytes: log.peak_bytes(),
        memory_meter: meter.describe().to_string(),
        median_step_seconds: log.median_seconds(),
        steps_measured: log.times.len(),
        valid_accuracy: history.last().map_or(0.0, |e| e.valid_accuracy),
        epochs: history,
        wall_seconds: started.elapsed().as_secs_f64(),
    })
}

/// One epoch: training steps, then the validation pass.
#[allow(clippy::too_many_arguments)]
fn train_epoch<I: Backend>(
    runner: &mut dyn StepRunner,
    splits: &Splits,
    batcher: &ImageBatcher,
    valid: &dyn DataLoader<I, HostBatch>,
    options: &TrainOptions,
    epoch: usize,
    steps: usize,
    log: &mut StepLog,
) -> anyhow::Result<EpochReport> {
    let epoch_start = Instant::now();
    runner.seed(derive(options.seed, Purpose::Backend, epoch));
    let lr = learning_rate(options.lr, epoch, options.epochs);
    let loader = train_loader::<I>(splits, batcher, options, epoch, steps);
    let bar = progress::epoch_bar(epoch, options.epochs, steps);
    let (mut loss_sum, mut images, mut done) = (0.0f64, 0usize, 0usize);
    // Stays `Some` while every step reports its correct predictions.
    let mut correct = Some(0usize);
    let mut train_time = Duration::ZERO;
    for batch in loader.iter() {
        let start = Instant::now();
        let step = runner.train_step(&batch, lr)?;
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
    let (valid_loss, valid_correct, valid_images) = validate(runner, valid, options.batch_size)?;
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

/// The validation pass: summed loss, correct predictions, images.
fn validate<I: Backend>(
    runner: &mut dyn StepRunner,
    valid: &dyn DataLoader<I, HostBatch>,
    batch_size: usize,
) -> anyhow::Result<(f64, usize, usize)> {
    let bar = progress::valid_bar(valid.num_items().div_ceil(batch_size));
    let (mut loss, mut correct, mut images) = (0.0, 0, 0);
    for batch in valid.iter() {
        let out = runner.evaluate(&batch)?;
        loss += out.loss_sum;
        correct += out.correct;
        images += batch.len();
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok((loss, correct, images))
}

/// Checks that `path`'s parent exists before a long run writes a report there.
pub fn check_report_path(path: &Path) -> anyhow::Result<()> {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() && !parent.is_dir() => bail!(
            "--report {}: the directory {} does not exist",
            path.display(),
            parent.display()
        ),
        _ => Ok(()),
    }
}
