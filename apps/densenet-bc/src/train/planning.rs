//! Before the first step: the memory report (`--memory-report`), the budget plan
//! (`--memory-budget`, `--plan`) and the largest batch that fits (`--fit-batch`), all measured on
//! a scratch copy of the model and optimizer, so that the run itself is unchanged by them.
//!
//! A step with every region kept is the largest there is: that is why a budget is asked for, and
//! why such a step is only ever run at a fraction of the batch. The budget paths profile two
//! smaller batches (a quarter and a half of the batch), extrapolate each figure linearly in the
//! batch size, plan from that, and check the plan on a real step of the full batch (planning
//! again below the overshoot if it peaks over the budget).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use app_kit::out_of_memory::budget_size;
use burn::tensor::TensorData;
use burn_checkpoint::memory::Meter;
use burn_checkpoint::planner::{Base, Fitted, Plan, Profile, Treatment};
use burn_checkpoint_core::memory::mib;

use super::options::TrainOptions;
use super::progress::Console;
use super::report::Planning;
use super::runner::{ScratchRunner, StepRunner};
use crate::data::HostBatch;
use app_kit::save::write_atomic;

/// Whether any planning flag is given.
pub fn wanted(options: &TrainOptions) -> bool {
    options.memory_report.is_some()
        || options.memory_budget.is_some()
        || options.fit_batch.is_some()
        || options.plan.is_some()
}

/// Runs what the planning flags ask for and sets the runner's plan; `shape` is the images'
/// `[channels, height, width]`.
pub fn prepare(
    options: &TrainOptions,
    runner: &mut dyn StepRunner,
    meter: Meter,
    shape: [usize; 3],
    console: &mut Console,
) -> anyhow::Result<Planning> {
    if !options.method().tape().regions() {
        bail!(
            "--memory-report, --memory-budget, --fit-batch and --plan choose how the dense layers' \
             regions run: give --checkpoint layer (or another method with regions: layer-save, \
             bottleneck, block, …), not {}",
            options.method().name()
        );
    }
    let mut scratch = Scratch {
        meter,
        // The trainer's regions sit on its methods' base (Burn's Balanced: `Tape`), and the
        // runner is built on it: the plan says so. Choosing the base too is the library's
        // (`Candidates`), which the budget benchmarks exercise.
        base: options.method().tape().base(),
        treatments: options.method().treatments(),
        runner: runner.scratch()?,
        shape,
        steps: 0,
    };
    let mut planning = Planning {
        batch_size: options.batch_size,
        budget_bytes: options.memory_budget.or(options.fit_batch),
        plan: None,
        checked_peak_bytes: None,
        profiled_steps: 0,
        solve_seconds: 0.0,
        profile: None,
    };
    if let Some(path) = &options.plan {
        planning.plan = Some(load_plan(path)?);
    }
    if options.memory_report.is_some() {
        let profile = scratch.profile(options.batch_size)?;
        console.line(&format!(
            "memory report: a step of batch {} profiled under each treatment (on a copy of the \
             model)\n{profile}",
            options.batch_size
        ))?;
        planning.profile = Some(profile);
    }
    if let Some(budget) = options.fit_batch {
        let (batch, fitted) = scratch.largest_batch(budget)?;
        planning.batch_size = batch;
        record(&mut planning, fitted);
    }
    if let Some(budget) = options.memory_budget {
        let batch = planning.batch_size;
        let profile = match planning.profile.clone() {
            Some(profile) => profile,
            None => scratch.extrapolated(batch)?,
        };
        let fitted = scratch.fit(&profile, batch, budget).with_context(|| {
            format!(
                "cannot fit a step of batch {batch} in --memory-budget {:.1} MiB",
                mib(budget as usize)
            )
        })?;
        record(&mut planning, fitted);
    }
    planning.profiled_steps += scratch.steps;
    if let Some(plan) = &planning.plan {
        if let Some(peak) = planning.checked_peak_bytes {
            console.line(&format!(
                "memory plan for batch {}: {plan}; checked: a step peaked at {:.1} MiB ({} profiled \
                 steps on a copy of the model, {:.3} s solving)",
                planning.batch_size,
                mib(peak as usize),
                planning.profiled_steps,
                planning.solve_seconds
            ))?;
        } else {
            console.line(&format!("memory plan from --plan: {plan}"))?;
        }
        runner.set_plan(plan.clone())?;
        if let Some(path) = &options.save_plan {
            let json = serde_json::to_vec_pretty(plan).context("cannot serialise the plan")?;
            write_atomic(path, &json)?;
        }
    }
    if let Some(path) = report_path(options) {
        let json = serde_json::to_vec_pretty(&planning).context("cannot serialise the report")?;
        write_atomic(path, &json)?;
    }
    Ok(planning)
}

/// What would fit after a step ran out of device memory with `room` bytes for a step
/// ([`RanOutOfMemory::room_bytes`](app_kit::out_of_memory::RanOutOfMemory::room_bytes)): that
/// room as the `--memory-budget` to run with, where the method has regions to plan; or, in words,
/// why it cannot say. Not the plan itself: the planner profiles steps, and a device that has just
/// failed an allocation is not to be trusted with more (cubecl's device thread was seen spinning
/// after one, docs/trainer.md); a run started with the flag profiles, plans and checks its plan
/// on a real step. A data-parallel run (`devices` above 1) takes no plan: it is told what it can
/// change instead, and how to see the plan on one device.
pub fn suggest(options: &TrainOptions, room: Option<u64>, devices: usize) -> String {
    let Some(room) = room else {
        return "not predicted: the meter gave no reserved bytes at the failure".to_string();
    };
    let method = options.method();
    let step = if devices > 1 {
        "the first device's step"
    } else {
        "the step"
    };
    let had = format!(
        "{step} had {:.1} MiB (what the device had reserved when it refused, less what the run \
         holds between steps)",
        mib(room as usize)
    );
    if devices > 1 {
        // `StepRunner::set_plan` refuses a data-parallel runner: no flag of the planner applies.
        let regions = if method.tape().regions() {
            String::new()
        } else {
            ", or run with --checkpoint layer (a region per dense layer)".to_string()
        };
        return format!(
            "{had}; budget plans run on one device, so a data-parallel run cannot take \
             --memory-budget: lower --batch-size (each of the {devices} devices takes {} of the {} \
             images){regions}, or plan on one device first (--devices with one device and \
             --memory-budget {} show the plan)",
            options.batch_size / devices,
            options.batch_size,
            budget_size(room)
        );
    }
    if !method.tape().regions() {
        return format!(
            "{had}; --checkpoint {} has no regions to plan: run with --checkpoint layer {} (the \
             planner then chooses how each dense layer's region runs to fit it), or a smaller \
             --batch-size",
            method.name(),
            budget_flag(room)
        );
    }
    format!(
        "{had}; run with {} and the planner chooses how each dense layer's region runs to fit \
         it (it says so if no plan can: then lower --batch-size, or let --fit-batch {} find the \
         largest batch that fits)",
        budget_flag(room),
        budget_size(room)
    )
}

/// The `--memory-budget` flag for `bytes`.
fn budget_flag(bytes: u64) -> String {
    format!("--memory-budget {}", budget_size(bytes))
}

fn record(planning: &mut Planning, fitted: Fitted) {
    planning.profiled_steps += fitted.steps;
    planning.solve_seconds += fitted.solve_seconds;
    planning.checked_peak_bytes = Some(fitted.measured_peak_bytes);
    planning.plan = Some(fitted.plan);
    if planning.profile.is_none() {
        planning.profile = Some(fitted.profile);
    }
}

/// A plan saved by `--save-plan`.
fn load_plan(path: &Path) -> anyhow::Result<Plan> {
    let bytes =
        std::fs::read(path).with_context(|| format!("cannot read --plan {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| {
        format!(
            "{} is not a plan (a JSON file written by --save-plan)",
            path.display()
        )
    })
}

/// The scratch copy of the model, with what its profiled steps need.
struct Scratch {
    meter: Meter,
    /// What the runner's regions sit on.
    base: Base,
    /// What the profile measures the regions under
    /// ([`Method::treatments`](crate::Method::treatments)).
    treatments: Vec<Treatment>,
    runner: Box<dyn ScratchRunner>,
    /// The images' `[channels, height, width]`.
    shape: [usize; 3],
    /// Profiled steps run so far.
    steps: usize,
}

/// A profiled step's error, as the library's error types carry it (they want a
/// `std::error::Error`, which `anyhow::Error` is not).
#[derive(Debug)]
struct StepFailed(anyhow::Error);

impl std::fmt::Display for StepFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

impl std::error::Error for StepFailed {}

impl Scratch {
    /// A batch of `batch` black images labelled 0: a step's memory and time do not depend on
    /// the values.
    fn batch(&self, batch: usize) -> HostBatch {
        let [c, h, w] = self.shape;
        HostBatch {
            images: TensorData::zeros::<f32, _>([batch, c, h, w]),
            labels: TensorData::zeros::<i64, _>([batch]),
        }
    }

    fn profile(&mut self, batch: usize) -> anyhow::Result<Profile> {
        let batch = self.batch(batch);
        // A first step warms up thread pools and caches, which allocate once.
        self.runner.step(&batch)?;
        let runner = &mut self.runner;
        let mut profile = Profile::try_measure(self.meter.clone(), &self.treatments, || {
            runner.step(&batch).map_err(StepFailed)
        })?
        .on(self.base);
        // The solver compares the profiled steps' times: medians of interleaved samples, not one
        // sample each.
        let mut retimed = 0;
        profile.retime(|| {
            retimed += 1;
            runner.step(&batch).map_err(StepFailed)
        })?;
        // The warm-up and one step per treatment profiled, then timed again.
        self.steps += 1 + profile.treatments().len() + retimed;
        Ok(profile)
    }

    fn fit(&mut self, profile: &Profile, batch: usize, budget: u64) -> anyhow::Result<Fitted> {
        let batch = self.batch(batch);
        let runner = &mut self.runner;
        Ok(profile.fit(self.meter.clone(), budget, || {
            runner.step(&batch).map_err(StepFailed)
        })?)
    }

    /// The profile of `batch`, extrapolated from profiles of a quarter and a half of it
    /// (measured directly below 8 images).
    fn extrapolated(&mut self, batch: usize) -> anyhow::Result<Profile> {
        if batch < 8 {
            return self.profile(batch);
        }
        let (small, large) = (batch / 4, batch / 2);
        let at_small = self.profile(small)?;
        let at_large = self.profile(large)?;
        Ok(at_small.extrapolate(small, &at_large, large, batch))
    }

    /// The largest batch whose step fits `budget` under some plan: profiles of 4 and 8 images
    /// give a first estimate, profiles of a quarter and a half of it a second, checked on a real
    /// step (a tenth smaller each time the check fails, four times at most).
    fn largest_batch(&mut self, budget: u64) -> anyhow::Result<(usize, Fitted)> {
        let estimate = |small: &Profile, a: usize, large: &Profile, b: usize| {
            // The floor grows with the batch: the largest batch whose floor is within budget.
            let fits = |to: usize| small.extrapolate(a, large, b, to).smallest_peak() <= budget;
            let (mut low, mut high) = (0usize, 1usize);
            while fits(high) && high < 1 << 20 {
                (low, high) = (high, high * 2);
            }
            while high - low > 1 {
                let middle = (low + high) / 2;
                if fits(middle) {
                    low = middle
                } else {
                    high = middle
                }
            }
            low
        };
        let (a, b) = (4, 8);
        let mut measured = (self.profile(a)?, a, self.profile(b)?, b);
        let mut batch = estimate(&measured.0, a, &measured.2, b);
        if batch == 0 {
            let why = measured
                .0
                .extrapolate(a, &measured.2, b, 1)
                .plan(budget)
                .err()
                .map_or_else(String::new, |e| format!(": {e}"));
            bail!(
                "--fit-batch {:.1} MiB: not even a batch of 1 fits{why}",
                mib(budget as usize)
            );
        }
        if batch / 2 > b {
            let (a, b) = (batch / 4, batch / 2);
            measured = (self.profile(a)?, a, self.profile(b)?, b);
            batch = estimate(&measured.0, a, &measured.2, b).max(1);
        }
        let mut last = None;
        for _ in 0..4 {
            let (small, a, large, b) = &measured;
            let profile = small.extrapolate(*a, large, *b, batch);
            match self.fit(&profile, batch, budget) {
                Ok(fitted) => return Ok((batch, fitted)),
                Err(error) => last = Some(error),
            }
            if batch == 1 {
                break;
            }
            batch = (batch * 9 / 10).min(batch - 1).max(1);
        }
        Err(last
            .expect("a failed check")
            .context(format!(
                "--fit-batch {:.1} MiB: no batch fit after four checked steps (the last tried:                  {batch})",
                mib(budget as usize)
            )))
    }
}

/// Where `--memory-report FILE` writes, if given a file.
pub fn report_path(options: &TrainOptions) -> Option<&PathBuf> {
    options.memory_report.as_ref().and_then(Option::as_ref)
}
