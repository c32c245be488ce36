//! The budget sweep the applications' `budget` benchmarks share: the planner's plans for a range
//! of budgets against hand-made cuts, every method measured in the same rounds. This file: the
//! options, the points and their measuring ([`run`]); `report.rs` the table and its checks,
//! `plot.rs` the figure.

mod plot;
mod report;

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use burn_checkpoint_core::Treatment;
use burn_checkpoint_core::engine::DeviceMemory;
use burn_checkpoint_core::memory::{MemoryMeter, Meter, OffloadedBytes, StepReport, mib};
use burn_checkpoint_core::planner::{Base, Candidates, Plan, Profile, Step};
use cpu_time::ProcessTime;
use serde::{Deserialize, Serialize};

/// The command-line options every budget sweep has, flattened into each benchmark's own.
#[derive(clap::Args)]
pub struct Options {
    /// Budgets in the sweep (0: the hand cuts only).
    #[arg(long, default_value_t = 10)]
    budgets: usize,
    /// Measured rounds (one step of every method each).
    #[arg(long, default_value_t = 5)]
    steps: usize,
    /// Where the table, JSON and plots go (extensions added; default: the benchmark's name, as
    /// in `densenet-budget`).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write the table and figure again from a sweep's JSON, measuring nothing.
    #[arg(long, value_name = "JSON")]
    replot: Option<PathBuf>,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

impl Options {
    /// Where the sweep's files go: `--out`, else `default`.
    pub fn out(&self, default: &str) -> PathBuf {
        self.out.clone().unwrap_or_else(|| default.into())
    }

    /// With `--replot`: writes that sweep's table and figure to `out` again, and says so (true).
    pub fn replotted(&self, out: &Path) -> bool {
        let Some(json) = &self.replot else {
            return false;
        };
        Sweep::read(json).write(out);
        true
    }

    /// Runs the sweep ([`run`]) with `measured`'s meter and treatments, prints its table and
    /// writes its files to `out`.
    pub fn run<D: DeviceMemory>(
        &self,
        measured: Measured<'_, D>,
        out: &Path,
        title: &str,
        planned: Vec<Planned<'_>>,
        hands: Vec<Hand<'_>>,
    ) {
        let sweep = run(measured, title, self.budgets, self.steps, planned, hands);
        print!("{}", sweep.markdown());
        sweep.write(out);
    }
}

/// A training step of one method (forward, backward, optimizer step), finished when it returns.
pub type StepFn<'a> = Box<dyn FnMut() + 'a>;

/// A model the planner plans (regions wherever they may go) with its steps on one [`Base`]:
/// the sweep profiles each one given and plans each budget on the one whose plan is predicted
/// fastest ([`Candidates::fit`]): the same regions on each base, or other placements.
pub struct Planned<'a> {
    /// What the model is, where the sweep gives several placements (empty: the regions the
    /// benchmark describes).
    pub name: String,
    /// What the step's regions sit on.
    pub base: Base,
    /// Its step.
    pub step: StepFn<'a>,
}

impl<'a> Planned<'a> {
    /// The planner's model on `base`, whose steps `trainer.step()` takes.
    pub fn of<T: Trainer>(base: Base, trainer: &'a std::cell::RefCell<T>) -> Self {
        Planned {
            name: String::new(),
            base,
            step: Box::new(move || trainer.borrow_mut().step()),
        }
    }

    /// What the point of a plan on this model says it was planned on: the base, and the
    /// model's name where it has one.
    fn on(&self) -> String {
        match self.name.as_str() {
            "" => self.base.name().to_string(),
            name => format!("{}, {name}", self.base.name()),
        }
    }
}

/// A hand-made cut: its name and its step.
pub struct Hand<'a> {
    /// What the cut is.
    pub name: String,
    /// Its step.
    pub step: StepFn<'a>,
}

impl<'a> Hand<'a> {
    /// The cut `name` whose steps `trainer.step()` takes.
    pub fn of<T: Trainer>(name: &str, trainer: &'a std::cell::RefCell<T>) -> Self {
        Hand {
            name: name.to_string(),
            step: Box::new(move || trainer.borrow_mut().step()),
        }
    }
}

/// A model and its optimizer taking training steps on a fixed batch.
pub trait Trainer {
    /// One step: forward, backward, optimizer.
    fn step(&mut self);
}

/// A boxed trainer steps as the one inside: methods on different backend types side by side.
impl<T: Trainer + ?Sized> Trainer for Box<T> {
    fn step(&mut self) {
        (**self).step();
    }
}

/// One point of the sweep.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Point {
    /// The hand cut's name, or `planner` for a plan.
    pub method: String,
    /// `hand` (a hand-made cut), `planner` (a plan) or `recording` (the planner's model as
    /// written, with and without a memory report recording it: what recording costs).
    #[serde(default)]
    pub kind: String,
    /// The budget a plan was made for, in bytes.
    pub budget_bytes: Option<u64>,
    /// The peak the planner predicted, in bytes.
    pub predicted_peak_bytes: Option<u64>,
    /// The most bytes a measured step held above its start.
    pub peak_bytes: u64,
    /// The most bytes regions held in host memory at once (offloading regions); on the CPU they
    /// are part of `peak_bytes` too.
    #[serde(default)]
    pub offloaded_peak_bytes: u64,
    /// Median process CPU time of a step (the time the ratios compare: robust to other
    /// processes on a shared machine).
    pub cpu_s: f64,
    /// Median wall time of a step.
    pub wall_s: f64,
    /// What the plan does (counts of each treatment per region name).
    pub plan: Option<String>,
    /// What the plan's regions sat on (`plain`, `balanced`; plans of sweeps written before the
    /// planner chose a base: plain), and the planned model's name where the sweep had several.
    #[serde(default)]
    pub planned_on: Option<String>,
    /// Steps the planner ran to check the plan (beyond the profile's three).
    pub check_steps: Option<usize>,
    /// The fastest hand cut whose peak is within the budget.
    pub best_hand: Option<String>,
    /// This plan's CPU time over that cut's.
    pub time_vs_best_hand: Option<f64>,
}

/// A whole sweep.
#[derive(Serialize, Deserialize, Debug)]
pub struct Sweep {
    /// What was measured.
    pub title: String,
    /// Measured steps per point.
    pub steps: usize,
    /// The profile's steps (one per treatment its meter measures), in seconds (wall).
    pub profile_seconds: f64,
    /// How many steps the profile took (3 in sweeps written before this was recorded).
    #[serde(default = "three")]
    pub profile_steps: usize,
    /// The planner's solve time over the whole sweep, in seconds.
    pub solve_seconds: f64,
    /// Hand cuts, then plans from the largest budget to the smallest.
    pub points: Vec<Point>,
    /// The plans, in the points' order.
    pub plans: Vec<Plan>,
}

struct Samples {
    peak: u64,
    offloaded: u64,
    cpu: Vec<Duration>,
    wall: Vec<Duration>,
}

impl Samples {
    fn new() -> Self {
        Samples {
            peak: 0,
            offloaded: 0,
            cpu: Vec::new(),
            wall: Vec::new(),
        }
    }

    /// Measures one step with `meter`: on the host the bytes allocated above the start, on a
    /// device the bytes its memory manager reserved (what a plan's budget bounds there).
    fn step<D: DeviceMemory>(&mut self, meter: &Meter<D>, step: impl FnOnce()) {
        // On a device, the pages earlier steps left in the pools go back first: the bytes
        // reserved are then this step's, as in a profile's or a fit's report.
        meter.release();
        let offloaded = OffloadedBytes::now().in_use;
        OffloadedBytes::reset_peak();
        let measure = meter.start();
        let (wall, cpu) = (Instant::now(), ProcessTime::now());
        step();
        meter.settle();
        self.cpu.push(cpu.elapsed());
        self.wall.push(wall.elapsed());
        let peak = measure.finish();
        self.peak = self.peak.max(peak.reserved.unwrap_or(peak.in_use));
        self.offloaded = self
            .offloaded
            .max(OffloadedBytes::now().peak.saturating_sub(offloaded));
    }

    /// The point these samples make: peak and median times, nothing planned.
    fn point(&self, method: &str, kind: &str) -> Point {
        let (cpu_s, wall_s) = self.medians();
        Point {
            method: method.to_string(),
            kind: kind.to_string(),
            budget_bytes: None,
            predicted_peak_bytes: None,
            peak_bytes: self.peak,
            offloaded_peak_bytes: self.offloaded,
            cpu_s,
            wall_s,
            plan: None,
            planned_on: None,
            check_steps: None,
            best_hand: None,
            time_vs_best_hand: None,
        }
    }

    fn medians(&self) -> (f64, f64) {
        let median = |values: &[Duration]| {
            let mut sorted = values.to_vec();
            sorted.sort();
            sorted[sorted.len() / 2].as_secs_f64()
        };
        (median(&self.cpu), median(&self.wall))
    }
}

/// What a sweep measures with: the meter, and the treatments the Burn crate's regions can run
/// (`Treatment::ALL`).
pub struct Measured<'a, D> {
    /// Every profile, check and point is read with it.
    pub meter: Meter<D>,
    /// The treatments profiled.
    pub treatments: &'a [Treatment],
}

/// Profiles `planned` (the model with a region wherever one may go, on each base given) with
/// `measured`'s meter and treatments, plans and checks `budgets` budgets from the largest peak
/// with every region kept (+1%) down to the smallest reachable on any base (+2%), each on the
/// base whose plan is predicted fastest, then measures `steps` rounds in which every hand cut
/// and every plan runs one step, each with the same meter. No budgets: the hand cuts only. On
/// the host, peaks are the counting allocator's (the program's global allocator must be
/// `CountingAllocator`); on a device, the bytes its memory manager reserved.
pub fn run<D: DeviceMemory>(
    measured: Measured<'_, D>,
    title: &str,
    budgets: usize,
    steps: usize,
    planned: Vec<Planned<'_>>,
    hands: Vec<Hand<'_>>,
) -> Sweep {
    run_checking(measured, title, budgets, steps, planned, hands, |_, _| {})
}

/// [`run`], calling `check` on the first base's profile right after profiling (with budgets
/// only), before any budget is fitted, with that base's planned step to run: for a caller that
/// checks more of the planner on that profile, in the state it was measured in, without
/// profiling again.
pub fn run_checking<D: DeviceMemory>(
    Measured { meter, treatments }: Measured<'_, D>,
    title: &str,
    budgets: usize,
    steps: usize,
    planned: Vec<Planned<'_>>,
    mut hands: Vec<Hand<'_>>,
    check: impl FnOnce(&Profile, &mut StepFn<'_>),
) -> Sweep {
    assert!(
        !planned.is_empty(),
        "the planner's model on at least one base"
    );
    let mut models: Vec<Model<'_>> = planned
        .into_iter()
        .map(|planned| Model {
            planned,
            planner_runs: 0,
            fits: Vec::new(),
        })
        .collect();
    // Warm-up: thread pools and caches allocate once.
    for model in &mut models {
        (model.planned.step)();
    }
    for hand in &mut hands {
        (hand.step)();
    }
    // No budget: the hand cuts alone (and what recording costs).
    let planning = match budgets {
        0 => Planning::default(),
        _ => plan_budgets(&meter, treatments, budgets, &mut models, check),
    };
    let measured = measure_rounds(&meter, steps, &mut hands, &mut models);
    let (points, plans) = points(&hands, &measured, &models);
    Sweep {
        title: title.to_string(),
        steps,
        profile_seconds: planning.profile_seconds,
        profile_steps: planning.profile_steps,
        solve_seconds: planning.solve_seconds,
        points,
        plans,
    }
}

/// A planned model in the sweep: its step, the steps the planner ran on it, and the plans
/// fitted on it, each with its samples.
struct Model<'a> {
    planned: Planned<'a>,
    /// Steps the planner ran through [`Step`] (the retimed ones, the fits' checks).
    planner_runs: usize,
    fits: Vec<Fit>,
}

/// A plan the sweep fitted on a model, and what its measured steps gave.
struct Fit {
    plan: Plan,
    /// Steps the fit ran to check it.
    check_steps: usize,
    samples: Samples,
}

/// The planner runs a candidate's step as the model's.
impl Step for &mut Model<'_> {
    type Error = Infallible;

    fn run(&mut self) -> Result<(), Infallible> {
        self.planner_runs += 1;
        (self.planned.step)();
        Ok(())
    }
}

/// What profiling and planning took.
#[derive(Default)]
struct Planning {
    profile_seconds: f64,
    profile_steps: usize,
    solve_seconds: f64,
}

/// Profiles every model (then `check` on the first), times their steps again and fits each of
/// `budgets` budgets on the model whose plan is predicted fastest, adding the plan to it.
fn plan_budgets<D: DeviceMemory>(
    meter: &Meter<D>,
    treatments: &[Treatment],
    budgets: usize,
    models: &mut [Model<'_>],
    check: impl FnOnce(&Profile, &mut StepFn<'_>),
) -> Planning {
    let mut planning = Planning::default();
    let started = Instant::now();
    let mut candidates = Candidates::new();
    for model in models.iter_mut() {
        let profile = Profile::measure(meter.clone(), treatments, &mut model.planned.step)
            .expect("the model has regions")
            .on(model.planned.base);
        planning.profile_steps += profile.treatments().len();
        eprintln!("on {}: {profile}", model.planned.on());
        candidates.push(profile, model);
    }
    // The solver compares the steps of each profile and the choice between the planned models
    // their steps across profiles: medians of interleaved samples, not one each.
    candidates.retime().expect("a step cannot fail here");
    planning.profile_steps += candidates
        .iter()
        .map(|c| c.step.planner_runs)
        .sum::<usize>();
    planning.profile_seconds = started.elapsed().as_secs_f64();
    let first = candidates.iter_mut().next().expect("a planned model");
    check(&first.profile, &mut first.step.planned.step);
    let floor = candidates.iter().map(|c| c.profile.smallest_peak()).min();
    let kept = candidates.iter().map(|c| c.profile.largest_peak()).max();
    let (Some(floor), Some(kept)) = (floor, kept) else {
        return planning;
    };
    // From 1% above the largest peak with everything kept (a step's peak moves by a few KiB
    // from one step to the next: at the profiled peak itself the check may measure just over it
    // and recompute a region to make up a few bytes) to 2% above the floor.
    let (low, roof) = (floor + floor / 50, kept + kept / 100);
    for k in 0..budgets as u64 {
        let budget = roof - (roof.saturating_sub(low)) * k / (budgets as u64 - 1).max(1);
        let started = Instant::now();
        let fitted = candidates.fit(meter.clone(), budget);
        planning.solve_seconds += started.elapsed().as_secs_f64();
        match fitted {
            Ok((chosen, fitted)) => {
                eprintln!(
                    "budget {:.1} MiB: checked at {:.1} MiB in {} step(s); {}",
                    mib(budget as usize),
                    mib(fitted.measured_peak_bytes as usize),
                    fitted.steps,
                    fitted.plan
                );
                // The fit's own solving, not its check steps.
                planning.solve_seconds += fitted.solve_seconds;
                chosen.step.fits.push(Fit {
                    plan: fitted.plan,
                    check_steps: fitted.steps,
                    samples: Samples::new(),
                });
            }
            Err(error) => eprintln!("budget {:.1} MiB: {error}", mib(budget as usize)),
        }
    }
    planning
}

/// What the rounds measured besides the plans (which keep their samples): each hand cut's, and
/// the planner's first model as written without and with a memory report recording it.
struct Rounds {
    hands: Vec<Samples>,
    as_written: Samples,
    recorded: Samples,
}

/// `steps` rounds, each running one step of every hand cut, of the first planned model as
/// written (without and with recording: what a memory report costs) and of every plan.
fn measure_rounds<D: DeviceMemory>(
    meter: &Meter<D>,
    steps: usize,
    hands: &mut [Hand<'_>],
    models: &mut [Model<'_>],
) -> Rounds {
    let mut measured = Rounds {
        hands: hands.iter().map(|_| Samples::new()).collect(),
        as_written: Samples::new(),
        recorded: Samples::new(),
    };
    for round in 0..steps {
        for (hand, samples) in hands.iter_mut().zip(&mut measured.hands) {
            samples.step(meter, &mut hand.step);
        }
        let first = &mut models[0].planned.step;
        measured.as_written.step(meter, &mut *first);
        measured.recorded.step(meter, || {
            StepReport::measure(meter.clone(), &mut *first);
        });
        for model in models.iter_mut() {
            let step = &mut model.planned.step;
            for fit in &mut model.fits {
                fit.samples.step(meter, || fit.plan.run(&mut *step));
            }
        }
        eprintln!("round {} of {steps} measured", round + 1);
    }
    measured
}

/// The sweep's points: the hand cuts, what recording costs, then the plans from the largest
/// budget to the smallest, each against the fastest hand cut within its budget; and the plans
/// in the same order.
fn points(hands: &[Hand<'_>], measured: &Rounds, models: &[Model<'_>]) -> (Vec<Point>, Vec<Plan>) {
    let mut points: Vec<Point> = hands
        .iter()
        .zip(&measured.hands)
        .map(|(hand, samples)| samples.point(&hand.name, "hand"))
        .collect();
    let hand_points = points.clone();
    points.push(
        measured
            .as_written
            .point("planner's model as written", "recording"),
    );
    points.push(
        measured
            .recorded
            .point("the same, recorded (memory report)", "recording"),
    );
    let mut fits: Vec<(&Model<'_>, &Fit)> = models
        .iter()
        .flat_map(|model| model.fits.iter().map(move |fit| (model, fit)))
        .collect();
    // Stable: plans for one budget stay in the order fitted.
    fits.sort_by_key(|(_, fit)| std::cmp::Reverse(fit.plan.budget_bytes));
    for &(model, fit) in &fits {
        let point = fit.samples.point("planner", "planner");
        let cpu_s = point.cpu_s;
        let best = hand_points
            .iter()
            .filter(|hand| hand.peak_bytes <= fit.plan.budget_bytes)
            .min_by(|a, b| a.cpu_s.total_cmp(&b.cpu_s));
        let counts: Vec<String> = fit
            .plan
            .counts()
            .values()
            .map(|counts| {
                let each: Vec<String> = counts.iter().map(|(t, n)| format!("{n} {t}")).collect();
                each.join(", ")
            })
            .collect();
        points.push(Point {
            budget_bytes: Some(fit.plan.budget_bytes),
            predicted_peak_bytes: Some(fit.plan.predicted_peak_bytes),
            plan: Some(counts.join("; ")),
            planned_on: Some(model.planned.on()),
            check_steps: Some(fit.check_steps),
            best_hand: best.map(|hand| hand.method.clone()),
            time_vs_best_hand: best.map(|hand| cpu_s / hand.cpu_s),
            ..point
        });
    }
    let plans = fits.iter().map(|(_, fit)| fit.plan.clone()).collect();
    (points, plans)
}

fn three() -> usize {
    3
}
