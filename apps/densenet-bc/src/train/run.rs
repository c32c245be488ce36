//! The training run: data, model and runner set up, then per epoch the training steps, a
//! validation pass, the epoch's line and (with `--save`) the saved state; at the end, the report.

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::transform::{PartialDataset, ShuffledDataset};
use burn::tensor::backend::Backend;

use super::backend::{self, Built, OnDevices};
use super::epoch::{EpochPlan, Record, StepLog, watched};
use super::options::{TrainOptions, parse_devices};
use super::outputs::ReportFile;
use super::planning;
use super::progress::{self, Console};
use super::report::{EpochReport, Planning, Report};
use super::runner::StepRunner;
use super::save::{self, RunSettings, SavedState};
use crate::DenseNetConfig;
use crate::data::{self, HostBatch, ImageBatcher, ImageDataset, Images, Splits};
use crate::seeds::{Purpose, derive};
use app_kit::out_of_memory::RanOutOfMemory;
use app_kit::save::{STATE_FILE, SaveDir, SavedFiles};
use app_kit::timeline::Run;
use burn_checkpoint::memory::{Meter, Timeline};
use burn_checkpoint_core::memory::size;

/// Trains as `options` say, printing each epoch's line and at the end the table to `out`, and
/// returns the report (also written to `--report`).
///
/// Before the first step, every output is claimed: the save directory (refused if it holds
/// anything but a save of this trainer, locked against a second run) and the report file (its
/// directory writable). After each epoch the state is saved before its line is printed, and the
/// report is written before the table: a closed or full standard output stops the run with an
/// error, but loses nothing. A step that runs out of device memory stops the run the same way
/// (a [`RanOutOfMemory`] error), after printing what the step held and what would fit.
pub fn run(options: &TrainOptions, out: &mut dyn Write) -> anyhow::Result<Report> {
    let started = Instant::now();
    let devices = parse_devices(&options.devices).map_err(anyhow::Error::msg)?;
    if options.densenet.depth < 10 || !(options.densenet.depth - 4).is_multiple_of(6) {
        bail!(
            "--depth {} is not a DenseNet-BC depth: it must be 6n + 4 with n ≥ 1 (10, 16, 22, 40, 100, …)",
            options.densenet.depth
        );
    }
    check_size(options, devices.len())?;
    let save = options
        .save
        .as_deref()
        .map(|root| SaveDir::claim(root, options.resume))
        .transpose()?;
    let report = options
        .report
        .as_deref()
        .map(|path| ReportFile::claim(path, save.as_ref()))
        .transpose()?;
    let outputs = Outputs {
        save,
        report,
        console: Console::new(out),
        started,
    };
    let device_names = devices.iter().map(ToString::to_string).collect();
    let run_on = RunOn {
        options,
        device_names,
        outputs,
    };
    backend::on_devices(&devices, run_on)
}

/// The training run, once the devices' backend is known.
struct RunOn<'a, 'o> {
    options: &'a TrainOptions,
    /// The devices as `--devices` named them, for the report.
    device_names: Vec<String>,
    outputs: Outputs<'o>,
}

impl OnDevices for RunOn<'_, '_> {
    type Output = Report;

    fn on<I: Backend>(self, devices: Vec<I::Device>, meter: Meter) -> anyhow::Result<Report> {
        let RunOn {
            options,
            device_names,
            mut outputs,
        } = self;
        let mut prepared = prepare::<I>(options, &devices, &meter, &mut outputs)?;
        let trained = train_epochs(&mut prepared, &meter, &mut outputs)?;
        let report = report_of(prepared, &trained, device_names, &meter, &outputs);
        finish(report, outputs, trained.stopped)
    }
}

/// What a run writes to, claimed before it starts.
struct Outputs<'a> {
    save: Option<SaveDir>,
    report: Option<ReportFile>,
    console: Console<'a>,
    started: Instant,
}

/// Refuses settings whose network cannot fit in this machine's memory (its weights, gradients
/// and momentum, on every device), before anything is allocated: a failed allocation aborts
/// the process instead of returning an error.
fn check_size(options: &TrainOptions, devices: usize) -> anyhow::Result<()> {
    // The largest input the data sets have (3 channels) and their 10 classes.
    let elements = DenseNetConfig::new(options.densenet.depth)
        .with_growth_rate(options.densenet.growth)
        .tensor_elements();
    let bytes = elements * 4.0 * 3.0 * devices as f64;
    let Some(memory) = physical_memory() else {
        return Ok(());
    };
    if bytes > memory as f64 {
        let parameters = if elements.is_finite() {
            format!("{elements:.3e} parameters")
        } else {
            "more than 10^18 parameters".to_string()
        };
        bail!(
            "--depth {} --growth-rate {}: the network has {parameters}; its weights, gradients and \
             momentum alone need {} on {devices} device(s), more than this machine's {} of memory",
            options.densenet.depth,
            options.densenet.growth,
            bytes_said(bytes),
            bytes_said(memory as f64)
        );
    }
    Ok(())
}

/// Bytes counted as a float (a network's size can overflow `u64`) as core's `size` says them.
fn bytes_said(bytes: f64) -> String {
    if bytes < u64::MAX as f64 {
        size(bytes as u64)
    } else {
        "more bytes than can be counted".to_string()
    }
}

/// The machine's memory in bytes (Linux: `MemTotal` of /proc/meminfo), if known.
fn physical_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
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
        None => builder().build(ImageDataset(splits.valid.clone())),
        Some(batches) => {
            let images = (batches * options.batch_size).min(splits.valid.len());
            let seed = derive(options.seed, Purpose::Validation, 0);
            let shuffled = ShuffledDataset::new(ImageDataset(splits.valid.clone()), seed);
            builder().build(PartialDataset::new(shuffled, 0, images))
        }
    }
}

/// The settings a resumed run must share with the saved one.
fn settings(options: &TrainOptions) -> RunSettings {
    RunSettings {
        data: options.data.name().to_string(),
        depth: options.densenet.depth,
        growth_rate: options.densenet.growth,
        batch_size: options.batch_size,
        epochs: options.epochs,
        lr: options.sgd.lr,
        momentum: options.sgd.momentum,
        weight_decay: options.sgd.weight_decay,
        seed: options.seed,
        limit: options.limit,
        valid_limit: options.valid_limit,
    }
}

/// With `--resume`, the saved state and its weights, checked against this run's settings.
fn saved_run(
    options: &TrainOptions,
    save: Option<&SaveDir>,
) -> anyhow::Result<Option<(SavedState, SavedFiles)>> {
    let Some(save) = save.filter(|_| options.resume) else {
        return Ok(None);
    };
    let root = save.root();
    let (state, weights) = save::read_state(root)?;
    let differences = settings(options).differences(&state.settings);
    if !differences.is_empty() {
        bail!(
            "--resume needs the saved run's settings ({}), but these differ:\n  {}",
            root.join(STATE_FILE).display(),
            differences.join("\n  ")
        );
    }
    if state.epochs_done >= options.epochs {
        bail!(
            "nothing to resume: the run saved in {} is complete ({} of {} epochs, last validation \
             accuracy {:.2}%)",
            root.display(),
            state.epochs_done,
            options.epochs,
            100.0 * state.history.last().map_or(0.0, |e| e.valid_accuracy)
        );
    }
    Ok(Some((state, weights)))
}

/// A run set up: its data and network, the runner on its devices (with `--resume`, the saved
/// weights loaded), what the planner chose, the options with the batch size `--fit-batch` found.
struct Prepared<I: Backend> {
    options: TrainOptions,
    splits: Splits,
    batcher: ImageBatcher,
    valid: Arc<dyn DataLoader<I, HostBatch>>,
    /// Training steps per epoch.
    steps: usize,
    /// With `--resume`, the state saved.
    saved: Option<SavedState>,
    built: Built,
    planning: Option<Planning>,
}

/// Loads the data, builds the runner (on the saved weights with `--resume`), plans where the
/// options ask for it, and prints the run's first lines.
fn prepare<I: Backend>(
    options: &TrainOptions,
    devices: &[I::Device],
    meter: &Meter,
    outputs: &mut Outputs,
) -> anyhow::Result<Prepared<I>> {
    let splits = data::load(options.data, options.data_dir.as_deref(), options.seed)?;
    let saved = saved_run(options, outputs.save.as_ref())?;
    let method = options.method();
    let config = DenseNetConfig::new(options.densenet.depth)
        .with_growth_rate(options.densenet.growth)
        .with_input_channels(splits.shape[0])
        .with_classes(splits.classes);
    let config = method.configure(config);
    let mut built = backend::runner::<I>(
        method.tape(),
        &config,
        devices,
        options,
        meter.clone(),
        saved.as_ref().map(|(_, weights)| weights),
    )?;
    let planning = planning::wanted(options)
        .then(|| {
            // The profiled steps run on the device too: one that fails to allocate stops the
            // run as a training step's failure does (without a suggestion: it is the planner's).
            let during = "a step the planner profiled (on a copy of the model)".to_string();
            watched(meter, Record::Watch, during, || {
                planning::prepare(
                    options,
                    built.runner.as_mut(),
                    meter.clone(),
                    splits.shape,
                    &mut outputs.console,
                )
            })
        })
        .transpose()?;
    // `--fit-batch` chooses the batch size.
    let mut options = options.clone();
    if let Some(planning) = &planning {
        options.batch_size = planning.batch_size;
    }
    let batcher = ImageBatcher::new(splits.shape, &splits.normalisation);
    let valid = valid_loader::<I>(&splits, &batcher, &options);
    let steps = steps_per_epoch(&options, splits.train.len())?;
    let saved = saved.map(|(state, _)| state);
    let [c, h, w] = splits.shape;
    outputs.console.line(&format!(
        "DenseNet-BC-{} (growth {}, {} parameters) on {} ({c}×{h}×{w}, {} training and {} validation images), {} on {}, batch {}, {steps} steps per epoch",
        options.densenet.depth,
        options.densenet.growth,
        built.parameters,
        options.data.name(),
        splits.train.len(),
        valid.num_items(),
        method.label(),
        built.backend,
        options.batch_size
    ))?;
    if let Some(state) = &saved
        && !state.history.is_empty()
    {
        outputs.console.line(&format!(
            "resuming after epoch {} of {}",
            state.history.len(),
            options.epochs
        ))?;
    }
    Ok(Prepared {
        options,
        splits,
        batcher,
        valid,
        steps,
        saved,
        built,
        planning,
    })
}

/// What the epochs gave: every epoch's figures (the resumed run's first), the steps' log, and
/// the error that stopped the run early, if one did.
struct Trained {
    history: Vec<EpochReport>,
    log: StepLog,
    stopped: Option<anyhow::Error>,
}

/// Runs the epochs left (from the saved run's next, up to `--stop-after` of them), saving each
/// with `--save` before its line is printed. A step out of memory prints what the step held and
/// what would fit, and stops the run; so does a failed write to standard output, after the epoch
/// is saved and before the report is lost.
fn train_epochs<I: Backend>(
    prepared: &mut Prepared<I>,
    meter: &Meter,
    outputs: &mut Outputs,
) -> anyhow::Result<Trained> {
    let Prepared {
        options,
        splits,
        batcher,
        valid,
        steps,
        saved,
        built,
        ..
    } = prepared;
    let options = &*options;
    let runner = built.runner.as_mut();
    let mut previous = saved.clone();
    let mut history = previous
        .as_ref()
        .map(|state| state.history.clone())
        .unwrap_or_default();
    let first = history.len();
    let last = options
        .stop_after
        .map_or(options.epochs, |n| (first + n).min(options.epochs));
    let mut log = StepLog::default();
    let plan = EpochPlan {
        splits,
        batcher,
        valid: valid.as_ref(),
        options,
        steps: *steps,
        meter,
    };
    let mut stopped = None;
    let mut failed_timeline = None;
    for epoch in first..last {
        let report = match plan.train(runner, epoch, &mut log) {
            Ok(report) => report,
            Err(error) => {
                let Some(failure) = error.downcast_ref::<RanOutOfMemory>() else {
                    return Err(error);
                };
                failed_timeline = failure
                    .failure
                    .timeline
                    .as_ref()
                    .map(|timeline| (failure.during.clone(), (**timeline).clone()));
                outputs.console.line(&failure.failure.to_string())?;
                let suggestion =
                    planning::suggest(options, failure.room_bytes(), runner.device_count());
                outputs
                    .console
                    .line(&format!("what would fit: {suggestion}"))?;
                stopped = Some(stopped_at(
                    error,
                    epoch,
                    outputs,
                    "a step ran out of memory",
                ));
                break;
            }
        };
        history.push(report.clone());
        if let Some(save) = &outputs.save {
            let saved = save_epoch(save, options, &history, previous.as_ref(), runner)?;
            previous = Some(saved);
        }
        if let Err(error) = outputs
            .console
            .line(&progress::epoch_line(options.epochs, &report))
        {
            stopped = Some(stopped_at(
                error,
                epoch + 1,
                outputs,
                "standard output failed",
            ));
            break;
        }
    }
    write_timeline(options, log.timeline.take(), failed_timeline, outputs)?;
    Ok(Trained {
        history,
        log,
        stopped,
    })
}

/// Writes `--memory-timeline`, if asked for: the timeline of `--timeline-step` (`drawn`) and
/// that of a step that failed to allocate (`failed`: where it was, its timeline up to the
/// failure), after the runs of `--timeline-overlay`. A picture that cannot be drawn is said,
/// not fatal: the run's own outcome comes first.
fn write_timeline(
    options: &TrainOptions,
    drawn: Option<Timeline>,
    failed: Option<(String, Timeline)>,
    outputs: &mut Outputs,
) -> anyhow::Result<()> {
    let method = options.method().name();
    let runs = drawn
        .map(|timeline| Run {
            label: method.to_string(),
            timeline,
        })
        .into_iter()
        .chain(failed.map(|(during, timeline)| Run {
            label: format!("{method}: out of memory at {during}"),
            timeline,
        }))
        .collect();
    let title = format!(
        "{}, batch {}",
        options.densenet.describe(),
        options.batch_size
    );
    match options.timeline.write(&title, runs) {
        Ok(lines) => lines.iter().try_for_each(|line| outputs.console.line(line)),
        Err(error) => outputs
            .console
            .line(&format!("no memory timeline: {error}")),
    }
}

/// Saves the epoch `history` ends with in `save` (its weights, then the state naming them),
/// after `previous`, the state saved before it; returns what it saved.
fn save_epoch(
    save: &SaveDir,
    options: &TrainOptions,
    history: &[EpochReport],
    previous: Option<&SavedState>,
    runner: &mut dyn StepRunner,
) -> anyhow::Result<SavedState> {
    let epochs_done = history.len();
    let state = SavedState {
        format: save::FORMAT,
        epochs_done,
        weights: save::epoch_dir_name(epochs_done),
        files: Default::default(),
        settings: settings(options),
        history: history.to_vec(),
    };
    let root = save.root();
    save::save_epoch(root, state, previous, |dir| runner.save(dir))
        .with_context(|| format!("cannot save epoch {epochs_done} in {}", root.display()))
}

/// The run's report: its settings, the figures of its epochs and steps.
fn report_of<I: Backend>(
    prepared: Prepared<I>,
    trained: &Trained,
    device_names: Vec<String>,
    meter: &Meter,
    outputs: &Outputs,
) -> Report {
    let Prepared {
        options,
        built,
        planning,
        ..
    } = prepared;
    let Trained { history, log, .. } = trained;
    let method = options.method();
    Report {
        method: method.label().to_string(),
        checkpoint: method.name().to_string(),
        device_count: built.runner.device_count(),
        backend: built.backend,
        devices: device_names,
        batch_size: options.batch_size,
        data: options.data.name().to_string(),
        depth: options.densenet.depth,
        growth_rate: options.densenet.growth,
        parameters: built.parameters,
        peak_step_bytes: log.peak_bytes(),
        reserved_bytes: log.reserved,
        memory_meter: meter.describe_measure(),
        median_step_seconds: log.median_seconds(),
        steps_measured: log.times.len(),
        valid_accuracy: history.last().map_or(0.0, |e| e.valid_accuracy),
        epochs: history.clone(),
        wall_seconds: outputs.started.elapsed().as_secs_f64(),
        planning,
    }
}

/// The error of a run stopped by `error` (`why`, in words) after `epochs_done` epochs.
fn stopped_at(
    error: anyhow::Error,
    epochs_done: usize,
    outputs: &Outputs,
    why: &str,
) -> anyhow::Error {
    let kept = match (&outputs.save, &outputs.report) {
        (Some(_), _) if epochs_done == 0 => "no epoch had finished, nothing was saved".to_string(),
        (Some(save), _) => format!(
            "epoch {epochs_done} is saved in {} (continue with --resume)",
            save.root().display()
        ),
        (None, Some(report)) => format!("the report is written to {}", report.path().display()),
        (None, None) => "nothing was saved (no --save)".to_string(),
    };
    error.context(format!(
        "training stopped after epoch {epochs_done}: {why}; {kept}"
    ))
}

/// Writes the report file, then prints the table: what the run produced is on disk before
/// anything that can fail on output.
fn finish(
    report: Report,
    mut outputs: Outputs,
    stopped: Option<anyhow::Error>,
) -> anyhow::Result<Report> {
    let written = match outputs.report.take() {
        Some(file) => {
            let path = file.path().to_path_buf();
            file.write(&report.json()?)
                .with_context(|| format!("the report was not written to {}", path.display()))?;
            Some(path)
        }
        None => None,
    };
    if let Some(error) = stopped {
        return Err(error);
    }
    outputs.console.line(&report.summary())?;
    if let Some(path) = written {
        outputs
            .console
            .line(&format!("report written to {}", path.display()))?;
    }
    Ok(report)
}
