//! The conformance matrix: every way into a region against every hazard a user brings, each cell
//! compared with the same program without regions (plain autodiff). A cell is bit for bit; within
//! a documented bound (a scan's parameter gradients, summed over its steps in another order); the
//! documented exception (a body that draws random numbers: its region's own seed, its masks
//! replayed in backward, the same run twice and under a plan keeping it); or refused with a
//! message — never a wrong gradient or another panic. Each cell also checks from the memory
//! report that the way took effect: how many times each region's code ran again in backward.
//!
//! The table it measures is docs/conformance.md's (written there outside CI, compared in CI).
//! Each cell runs on a thread of its own: a region name's first instance is checked on each
//! thread, and region indices count per thread.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use app_kit::conformance::{self, Hazard, Outcome, Way, table};
use burn::module::{Module, ModuleVisitor, Param};
use burn::nn::{BatchNorm, BatchNormConfig, Dropout, DropoutConfig, Linear, LinearConfig};
use burn::tensor::{Device, Distribution, Gradients, Tensor, TensorData};
use burn_checkpoint_22::memory::{Meter, StepReport};
use burn_checkpoint_22::planner::{Plan, Treatment};
use burn_checkpoint_22::{
    Policy, Region, RegionId, ScanAction, ScanPlan, Schedule, Segments, checkpoint, checkpoint_fn,
};
use burn_checkpoint_core::memory::panic_message;

use crate::common;

use Hazard::*;
use Way::*;

/// Rows, features, layers (each chain way's regions), scan steps.
const N: usize = 256;
const W: usize = 32;
const K: usize = 6;
const T: usize = 5;

/// Whether a way's code runs once (nothing recomputed): a plan keeps it, or it keeps its
/// compute-bound outputs.
fn runs_once(way: Way) -> bool {
    way.kept_by_plan() || way == SaveComputeBound
}

/// The plan a way runs under, if any.
fn plan_of(way: Way) -> Option<Plan> {
    let every = |name: &str, treatment| {
        (0..K as u64).fold(Plan::new(), |plan, index| plan.with(name, index, treatment))
    };
    Some(match way {
        PlanKeep => every("layer", Treatment::Keep),
        PlanRecompute => every("layer", Treatment::RecomputeAll),
        PlanOffload => every("layer", Treatment::Offload),
        PlanKeepSequential => Plan::new().with("stack", 0, Treatment::Keep),
        PlanKeepScan => Plan::new().with("scan", 0, Treatment::Keep),
        PlanSchedule => Plan::new().with("scan", 0, Treatment::Scan(Schedule::Snapshots(1))),
        _ => return None,
    })
}

/// The hazards' switches the body reads (a body's captured state): the cells run one at a
/// time, under `common::alone()`.
static NOISE: AtomicBool = AtomicBool::new(false);
static MUTATES: AtomicBool = AtomicBool::new(false);
/// Forward runs of the body, counted where it is not recomputing (the side effect).
static FORWARDS: AtomicUsize = AtomicUsize::new(0);
/// Every run of the body (the state a body mutates).
static CALLS: AtomicUsize = AtomicUsize::new(0);

/// A layer: `z = down(tanh(up(h)))` (four times wider inside), then (dropout inside) a dropout
/// probe `dropout(h) + z · 0`, or `tanh(z) + h`; noise, a batch norm, the mutated capture as the
/// hazards say.
#[derive(Module, Debug)]
struct Cell {
    up: Linear,
    down: Linear,
    dropout: Option<Dropout>,
    norm: Option<BatchNorm>,
}

/// What crosses a region: the activation, and a second output with the two-outputs hazard.
type State = (Tensor<2>, Option<Tensor<2>>);

impl Cell {
    fn body(&self, (h, g): State) -> State {
        let z = self.down.forward(self.up.forward(h.clone()).tanh());
        let (z, g) = tail(self.dropout.as_ref(), (h, z, g));
        (self.normed(z), g)
    }

    fn normed(&self, z: Tensor<2>) -> Tensor<2> {
        match &self.norm {
            Some(norm) => norm.forward(z.reshape([N, W, 1])).reshape([N, W]),
            None => z,
        }
    }

    #[burn_checkpoint_22::checkpoint(name = "layer")]
    fn region(&self, state: (Tensor<2>, Option<Tensor<2>>)) -> (Tensor<2>, Option<Tensor<2>>) {
        self.body(state)
    }

    #[burn_checkpoint_22::checkpoint(name = "layer", seeded)]
    fn seeded_region(
        &self,
        state: (Tensor<2>, Option<Tensor<2>>),
    ) -> (Tensor<2>, Option<Tensor<2>>) {
        self.body(state)
    }
}

impl burn_checkpoint_22::Layer<State> for Cell {
    fn forward(&self, state: State) -> State {
        self.body(state)
    }
}

/// The layer's part without parameters (what `checkpoint_fn` takes).
fn tail(dropout: Option<&Dropout>, (h, z, g): (Tensor<2>, Tensor<2>, Option<Tensor<2>>)) -> State {
    if !Region::is_recomputing() {
        FORWARDS.fetch_add(1, Ordering::Relaxed);
    }
    let calls = CALLS.fetch_add(1, Ordering::Relaxed);
    let z = match dropout {
        Some(dropout) => dropout.forward(h) + z * 0.0,
        None => z.tanh() + h,
    };
    let z = match NOISE.load(Ordering::Relaxed) {
        true => z.clone() * z.random_like(Distribution::Uniform(0.5, 1.5)),
        false => z,
    };
    let z = match MUTATES.load(Ordering::Relaxed) {
        true => z + calls as f64,
        false => z,
    };
    let g = g.map(|g| g + z.clone() * 0.5);
    (z, g)
}

#[derive(Module, Debug)]
struct Net {
    before: Option<Dropout>,
    cells: Vec<Cell>,
    after: Option<Dropout>,
}

impl Net {
    fn new(hazard: Hazard, device: &Device) -> Self {
        let cell = || Cell {
            up: LinearConfig::new(W, 4 * W).init(device),
            down: LinearConfig::new(4 * W, W).init(device),
            dropout: (hazard == DropoutInside).then(|| DropoutConfig::new(0.3).init()),
            norm: (hazard == BatchNorm).then(|| BatchNormConfig::new(W).init(device)),
        };
        let net = Net {
            before: (hazard == DropoutBefore).then(|| DropoutConfig::new(0.2).init()),
            cells: (0..K).map(|_| cell()).collect(),
            after: (hazard == DropoutAfter).then(|| DropoutConfig::new(0.25).init()),
        };
        // A model as users build it draws its parameters at their first use: the draws a
        // region's seed must not move (the body's randomness builds on it too).
        if hazard.lazy() {
            net
        } else {
            common::initialised(net)
        }
    }
}

/// The region of a chain way's layers.
fn layer_region(way: Way, hazard: Hazard) -> Region {
    let region = Region::named("layer");
    let region = if hazard == Seeded {
        region.seeded()
    } else {
        region
    };
    match way {
        Offloaded => region.offloaded(),
        SaveComputeBound | PlanRecompute => region.policy(Policy::SaveComputeBound),
        _ => region,
    }
}

/// The way's program over `state` (`xs`, a scan's sequence), with regions or as plain code.
fn program(
    way: Way,
    hazard: Hazard,
    net: &Net,
    state: State,
    xs: Tensor<3>,
    regions: bool,
) -> State {
    let seeded = |region: Region| {
        if hazard == Seeded {
            region.seeded()
        } else {
            region
        }
    };
    if way.is_scan() {
        let step = |cell: &Cell, (h, g): State, x: Tensor<2>| {
            let state = cell.body((h + x, g));
            (state.0.clone(), state)
        };
        let (ys, (_, g)) = if regions {
            let schedule = match way {
                ScanSnapshots => Schedule::Snapshots(1),
                ScanBudget => Schedule::Budget(2 * carry_bytes(hazard)),
                _ => Schedule::EveryStep,
            };
            seeded(Region::named("scan").schedule(schedule)).scan(&net.cells[0], state, xs, 1, step)
        } else {
            let (mut state, mut ys) = (state, Vec::new());
            for t in 0..T {
                let (y, next) = step(
                    &net.cells[0],
                    state,
                    xs.clone().narrow(1, t, 1).squeeze_dim(1),
                );
                ys.push(y);
                state = next;
            }
            (Tensor::stack::<3>(ys, 1), state)
        };
        return (ys.reshape([N * T, W]), g);
    }
    if !regions {
        return net.cells.iter().fold(state, |state, cell| cell.body(state));
    }
    if way.is_sequential() {
        let segments = match way {
            SequentialSqrt => Segments::Sqrt,
            _ => Segments::Count(3),
        };
        return seeded(Region::named("stack")).sequential(&net.cells, segments, state);
    }
    if matches!(way, KeptByName | Nested) {
        let outer = match way {
            KeptByName => Region::named("pair").policy(Policy::recompute_all_but(["kept"])),
            _ => Region::named("pair"),
        };
        let (first, second) = (
            seeded(Region::named("kept")),
            seeded(Region::named("inner")),
        );
        return net.cells.chunks(2).fold(state, |state, pair| {
            let (first, second) = (first.clone(), second.clone());
            outer.run(&pair.to_vec(), state, move |pair: &Vec<Cell>, state| {
                let state = first.run(&pair[0], state, |cell, state| cell.body(state));
                second.run(&pair[1], state, |cell, state| cell.body(state))
            })
        });
    }
    net.cells.iter().fold(state, |(h, g), cell| match way {
        Attribute if hazard == Seeded => cell.seeded_region((h, g)),
        Attribute => cell.region((h, g)),
        Checkpoint => checkpoint(cell, (h, g), |cell, state| cell.body(state)),
        CheckpointFn => {
            let z = cell.down.forward(cell.up.forward(h.clone()).tanh());
            let dropout = cell.dropout.clone();
            let (z, g) = checkpoint_fn((h, z, g), move |inputs| tail(dropout.as_ref(), inputs));
            (cell.normed(z), g)
        }
        _ => layer_region(way, hazard).run(cell, (h, g), |cell, state| cell.body(state)),
    })
}

/// The bytes of a scan's carry.
fn carry_bytes(hazard: Hazard) -> u64 {
    let tensors = if hazard == TwoOutputs { 2 } else { 1 };
    (tensors * N * W * 4) as u64
}

/// What a run of a cell gave: every loss, the last step's output (before the dropout after it)
/// and gradients (the input's, the scans' sequence's, then every parameter's), the running
/// statistics and weights at the end, the body's forward runs.
#[derive(Clone, Debug, PartialEq)]
struct Outputs {
    losses: Vec<TensorData>,
    y: TensorData,
    grads: Vec<Option<TensorData>>,
    statistics: Vec<TensorData>,
    weights: Vec<TensorData>,
    forwards: usize,
}

impl Outputs {
    /// Every number the run gave, tensor by tensor.
    fn numbers(&self) -> Vec<Vec<f32>> {
        let tensors = (self.losses.iter().chain([&self.y]))
            .chain(self.grads.iter().flatten())
            .chain(&self.statistics)
            .chain(&self.weights);
        tensors
            .map(|t| t.try_to_vec::<f32>().expect("f32 values"))
            .collect()
    }
}

/// A run, with the memory report of its last step where regions ran.
struct Ran {
    outputs: Outputs,
    report: StepReport,
}

/// Positive weights of the loss, one per element of a `[rows, W]` output: every output element
/// reaches the loss, so a dropped element is the only way to a zero gradient.
fn loss_weights(rows: usize, device: &Device) -> Tensor<2> {
    let values: Vec<f32> = (0..rows * W)
        .map(|i| 0.5 + (i * 37 % 11) as f32 / 11.0)
        .collect();
    Tensor::from_data(TensorData::new(values, [rows, W]), device)
}

/// One run of `way`'s program (with regions or not) under `plan`, on a thread of its own: the
/// net and inputs built from fixed seeds, one training step (three, with SGD, for the three-steps
/// hazard). `Err`: the panic's message.
fn run(way: Way, hazard: Hazard, regions: bool, plan: Option<Plan>) -> Result<Ran, String> {
    NOISE.store(hazard == Seeded, Ordering::Relaxed);
    MUTATES.store(hazard == MutatesCapture, Ordering::Relaxed);
    FORWARDS.store(0, Ordering::Relaxed);
    CALLS.store(0, Ordering::Relaxed);
    let thread = std::thread::Builder::new()
        .name(CELL_THREAD.into())
        .spawn(move || {
            let device = Device::flex().autodiff();
            warm_up(&device);
            device.seed(7);
            let mut net = Net::new(hazard, &device);
            device.seed(5);
            let x = Tensor::<2>::random([N, W], Distribution::Uniform(0.5, 1.5), &device);
            let x = if hazard == InputWithoutGradient {
                x
            } else {
                x.require_grad()
            };
            let xs = Tensor::<3>::random([N, T, W], Distribution::Uniform(0.5, 1.5), &device);
            let xs = if hazard == InputWithoutGradient {
                xs
            } else {
                xs.require_grad()
            };
            device.seed(11);
            let steps = if hazard == ThreeSteps { 3 } else { 1 };
            let (mut losses, mut last) = (Vec::new(), None);
            for _ in 0..steps {
                let step = || training_step(way, hazard, &net, &x, &xs, regions);
                let ((loss, y, grads), report) = StepReport::measure(Meter::Host, || {
                    RegionId::restart_indices();
                    match &plan {
                        Some(plan) => plan.run(step),
                        None => step(),
                    }
                });
                let mut all = vec![common::grad_of(&x, &grads), common::grad_of(&xs, &grads)];
                all.extend(common::param_grads(&net, &grads));
                net = common::sgd(net, &grads, 0.1);
                losses.push(loss);
                last = Some((y, all, report));
            }
            let (y, grads, report) = last.expect("a step");
            Ran {
                outputs: Outputs {
                    losses,
                    y,
                    grads,
                    statistics: statistics(&net),
                    weights: weights(&net),
                    forwards: FORWARDS.load(Ordering::Relaxed),
                },
                report,
            }
        });
    let thread = thread.expect("a thread for the cell");
    thread.join().map_err(|payload| panic_message(&*payload))
}

/// The name of a cell's thread, whose panics (the refusals) the matrix reports itself.
const CELL_THREAD: &str = "conformance cell";

/// Runs `f` with the panics of this thread and cells' threads kept quiet (the matrix lists the
/// refusals and the wrong cells), every other panic reported as before.
fn quiet_cells<R>(f: impl FnOnce() -> R) -> R {
    let previous = std::sync::Arc::new(std::panic::take_hook());
    let report = previous.clone();
    let test = std::thread::current().id();
    std::panic::set_hook(Box::new(move |info| {
        let current = std::thread::current();
        if current.name() != Some(CELL_THREAD) && current.id() != test {
            report(info);
        }
    }));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    let _ = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| previous(info)));
    result.unwrap_or_else(|payload| std::panic::resume_unwind(payload))
}

/// A step of the same ops on a thread's first use, outside the measured steps and drawing
/// nothing: what a thread allocates once (the backend's buffers, the region state) is not any
/// region's.
fn warm_up(device: &Device) {
    let cell = common::initialised(LinearConfig::new(W, W).init(device));
    let x = Tensor::<2>::ones([N, W], device).require_grad();
    let y = Region::named("warm-up").run(&cell, x, |cell, x| cell.forward(x).tanh());
    let _ = y.sum().backward();
}

/// One step: the program, the loss, backward.
fn training_step(
    way: Way,
    hazard: Hazard,
    net: &Net,
    x: &Tensor<2>,
    xs: &Tensor<3>,
    regions: bool,
) -> (TensorData, TensorData, Gradients) {
    let x = match &net.before {
        Some(dropout) => dropout.forward(x.clone()),
        None => x.clone(),
    };
    let g = (hazard == TwoOutputs).then(|| x.clone() * 0.25);
    let (y, g) = program(way, hazard, net, (x, g), xs.clone(), regions);
    let weights = loss_weights(y.dims()[0], &y.device());
    let after = match &net.after {
        Some(dropout) => dropout.forward(y.clone()),
        None => y.clone(),
    };
    let mut loss = (after * weights).sum();
    if let Some(g) = g {
        loss = loss + g.sum();
    }
    if hazard == ParameterOutside {
        loss = loss + net.cells[0].up.forward(y.clone()).tanh().sum();
    }
    let grads = loss.backward();
    (loss.into_data(), y.into_data(), grads)
}

/// Every trainable parameter's value.
fn weights(module: &impl Module) -> Vec<TensorData> {
    struct Values(Vec<TensorData>);

    impl ModuleVisitor for Values {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if param.is_initialized() {
                self.0.push(param.val().into_data());
            }
        }
    }

    let mut values = Values(Vec::new());
    module.visit(&mut values);
    values.0
}

/// The batch norms' running statistics.
fn statistics(net: &Net) -> Vec<TensorData> {
    (net.cells.iter().filter_map(|cell| cell.norm.as_ref()))
        .flat_map(|norm| {
            [
                norm.running_mean.value_sync(),
                norm.running_var.value_sync(),
            ]
        })
        .map(|value| value.into_data())
        .collect()
}

/// The bound a gradient whose terms add in another order than plain autodiff's keeps to: a scan's
/// parameters (their steps' terms, docs/burn-0.22-scan.md, "What is exact"), a tensor with uses
/// both inside a region and around it at other depths (docs/burn-0.22.md, "What a region
/// guarantees").
const BOUND: f32 = 1e-6;

/// The largest difference between two runs' numbers (see
/// [`conformance::largest_difference`]); `None` where they differ otherwise (a gradient present
/// in one only, side effects).
fn largest_difference(plain: &Outputs, regions: &Outputs) -> Option<f32> {
    let same_presence =
        (plain.grads.iter().map(Option::is_some)).eq(regions.grads.iter().map(Option::is_some));
    if plain.forwards != regions.forwards || !same_presence {
        return None;
    }
    conformance::largest_difference(&plain.numbers(), &regions.numbers())
}

/// Which parts of two runs differ, for a failure's message.
fn differences(a: &Outputs, b: &Outputs) -> String {
    let mut parts = Vec::new();
    for (what, same) in [
        ("losses", a.losses == b.losses),
        ("output", a.y == b.y),
        ("statistics", a.statistics == b.statistics),
        ("weights", a.weights == b.weights),
        ("side effects", a.forwards == b.forwards),
    ] {
        if !same {
            parts.push(what.to_string());
        }
    }
    for (index, (a, b)) in a.grads.iter().zip(&b.grads).enumerate() {
        if a != b {
            parts.push(format!("gradient {index}"));
        }
    }
    format!("{} differ", parts.join(", "))
}

/// The masks replayed: the input's gradient (a scan's: its sequence's) is zero exactly where the
/// output is (every output element reaches the loss with a positive weight, every input is
/// positive: only a dropped element gives a zero).
fn masks_replayed(way: Way, outputs: &Outputs) -> bool {
    let input = if way.is_scan() { 1 } else { 0 };
    let Some(Some(grad)) = outputs.grads.get(input) else {
        return true;
    };
    let (y, grad) = (
        outputs.y.try_to_vec::<f32>().unwrap(),
        grad.try_to_vec::<f32>().unwrap(),
    );
    if y.len() != grad.len() {
        return true;
    }
    let dropped = y.iter().filter(|v| **v == 0.0).count();
    dropped > 0 && y.iter().zip(&grad).all(|(y, g)| (*y == 0.0) == (*g == 0.0))
}

/// How many times each top-level region's code ran again in backward, as the way says.
fn expected_reruns(way: Way, hazard: Hazard) -> Vec<u64> {
    let scan = |schedule| {
        let plan = ScanPlan::new(schedule, T, carry_bytes(hazard));
        let runs = plan.backward().iter().filter(|action| {
            matches!(
                action,
                ScanAction::Advance(_) | ScanAction::Differentiate(_)
            )
        });
        vec![runs.count() as u64]
    };
    match way {
        _ if runs_once(way) && way.is_scan() || way == PlanKeepSequential => vec![0],
        _ if runs_once(way) => vec![0; K],
        ScanEveryStep => scan(Schedule::EveryStep),
        ScanSnapshots | PlanSchedule => scan(Schedule::Snapshots(1)),
        ScanBudget => scan(Schedule::Budget(2 * carry_bytes(hazard))),
        // 3 segments of 6 layers: the first 2 steps of one scan; √6 rounds to 2 segments.
        SequentialCount => vec![2],
        SequentialSqrt => vec![1],
        KeptByName | Nested => vec![1; K / 2],
        _ => vec![1; K],
    }
}

/// The cell `way` × `hazard`: its outcome, and the bytes its regions held after forward.
fn cell(way: Way, hazard: Hazard) -> (Outcome, i64) {
    let plain = run(way, hazard, false, None).expect("the plain program runs");
    let regions = match run(way, hazard, true, plan_of(way)) {
        Ok(regions) => regions,
        Err(message) => return (Outcome::Refused(message), 0),
    };
    let report = &regions.report;
    let reruns: Vec<u64> = report.regions.iter().map(|r| r.recomputed_ops).collect();
    assert_eq!(
        reruns,
        expected_reruns(way, hazard),
        "{way:?} × {hazard:?}: the runs again in backward, per region: {report}"
    );
    if matches!(way, Offloaded | PlanOffload) {
        assert!(
            report.regions.iter().all(|r| r.offloaded_bytes > 0),
            "{way:?} × {hazard:?}: offloaded nothing: {report}"
        );
    }
    check_held(way, hazard, report);
    let held = report.held_by_regions() as i64;
    if regions.outputs == plain.outputs.clone() {
        return (Outcome::Bitwise, held);
    }
    let difference = largest_difference(&plain.outputs, &regions.outputs);
    if !hazard.draws_inside() && difference.is_some_and(|d| d <= BOUND) {
        println!("{way:?} × {hazard:?}: within {:.1e}", difference.unwrap());
        return (Outcome::Within, held);
    }
    assert!(
        hazard.draws_inside(),
        "{way:?} × {hazard:?}: not the plain program's run (largest difference {difference:?})"
    );
    own_seed(way, hazard, &regions.outputs);
    (Outcome::OwnSeed, held)
}

/// The documented exception checked: the masks replayed, the same run twice, and under a plan
/// keeping every region the run with regions gave (or, for a way a plan keeps, the same way
/// unplanned).
fn own_seed(way: Way, hazard: Hazard, outputs: &Outputs) {
    if hazard == DropoutInside {
        assert!(
            masks_replayed(way, outputs),
            "{way:?} × {hazard:?}: backward used other masks than forward"
        );
    }
    let again = run(way, hazard, true, plan_of(way)).expect("ran once");
    assert!(
        again.outputs == *outputs,
        "{way:?} × {hazard:?}: not the same run twice"
    );
    let (other, plan) = match way {
        PlanKeep => (Run, None),
        PlanKeepScan => (ScanEveryStep, None),
        PlanKeepSequential => (SequentialCount, None),
        _ => {
            let ids = again
                .report
                .regions
                .iter()
                .map(|r| (r.name.clone(), r.index));
            let plan = ids.fold(Plan::new(), |plan, (name, index)| {
                plan.with(name, index, Treatment::Keep)
            });
            (way, Some(plan))
        }
    };
    let kept = run(other, hazard, true, plan).expect("kept by a plan");
    // A scan's parameters sum their steps' terms in another order than the loop a plan keeps.
    let within = way.is_scan()
        && largest_difference(&kept.outputs, outputs).is_some_and(|d| d <= BOUND)
        && kept.outputs.losses == outputs.losses
        && kept.outputs.grads[..2] == outputs.grads[..2];
    assert!(
        kept.outputs == *outputs || within,
        "{way:?} × {hazard:?}: another run under a plan ({other:?}): {}",
        differences(&kept.outputs, outputs)
    );
}

/// The refusals the crate documents: a body drawing random numbers the region cannot seed
/// (`checkpoint` and `checkpoint_fn` take no `seeded`, a closure's captured dropout), and a body
/// whose recompute reads state it changed, wherever its code runs again.
fn refusal_expected(way: Way, hazard: Hazard) -> bool {
    match hazard {
        Seeded => matches!(way, Checkpoint | CheckpointFn),
        DropoutInside => way == CheckpointFn,
        MutatesCapture => !runs_once(way),
        _ => false,
    }
}

/// The bytes each region held after forward, as the way says: a region a plan keeps holds its
/// activations (the layer's hidden one alone is four boundaries wide); a recomputed region over
/// one layer its outputs, up to two more boundaries (an offloaded input's host copy, a dropout's
/// mask, what an offloaded batch norm stores), the layer's parameters where its body drew them
/// (lazy ones), and a little bookkeeping.
fn check_held(way: Way, hazard: Hazard, report: &StepReport) {
    let boundary = (N * W * 4) as i64;
    let outputs = if hazard == TwoOutputs { 2 } else { 1 };
    let parameters = if hazard.lazy() {
        (2 * 4 * W * W + 5 * W) as i64 * 4
    } else {
        0
    };
    let bound = (outputs + 2) * boundary + parameters + 32 * 1024;
    for region in &report.regions {
        let held = region.held_bytes;
        if way.kept_by_plan() {
            assert!(held >= 4 * boundary, "{way:?} × {hazard:?}: {report}");
        } else if matches!(
            way,
            Attribute | Run | Checkpoint | Offloaded | PlanRecompute | PlanOffload
        ) {
            assert!(
                held <= bound,
                "{way:?} × {hazard:?}: {held} > {bound}: {report}"
            );
        }
    }
}

#[test]
fn every_way_into_a_region_against_every_hazard() {
    let _alone = common::alone();
    let (cells, held, wrong) = quiet_cells(matrix);
    assert!(wrong.is_empty(), "wrong cells: {wrong:#?}");
    // What each region holds: a plan keeping a region holds its activations, a recomputed one
    // its inputs; snapshots fewer carries.
    let held_by = |way, hazard| {
        held.iter()
            .find(|(cell, _)| *cell == (way, hazard))
            .unwrap()
            .1
    };
    for hazard in [Nothing, Lazy, BatchNorm, TwoOutputs] {
        for (more, less) in [
            (PlanKeep, Run),
            (PlanKeepScan, ScanEveryStep),
            (ScanEveryStep, ScanSnapshots),
            (PlanKeepSequential, SequentialCount),
        ] {
            assert!(
                held_by(more, hazard) > held_by(less, hazard),
                "{hazard:?}: {more:?} held {} bytes, {less:?} {}",
                held_by(more, hazard),
                held_by(less, hazard)
            );
        }
    }
    let page = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/conformance.md");
    app_kit::generated::keep(&page, "matrix for Burn 0.22", &table(&cells));
}

/// Every cell, a way at a time: the outcomes, the bytes each cell's regions held, and what was
/// wrong.
#[allow(clippy::type_complexity)]
fn matrix() -> (
    Vec<(Way, Vec<Outcome>)>,
    Vec<((Way, Hazard), i64)>,
    Vec<String>,
) {
    let mut cells = Vec::new();
    let mut held: Vec<((Way, Hazard), i64)> = Vec::new();
    let mut wrong = Vec::new();
    for way in Way::ALL {
        let mut outcomes = Vec::new();
        for hazard in Hazard::ALL {
            // A wrong cell is listed with the others, not the end of the matrix.
            let checked = std::panic::catch_unwind(|| cell(way, hazard));
            let Ok((outcome, bytes)) = checked else {
                let message = panic_message(&*checked.unwrap_err());
                wrong.push(format!("{way:?} × {hazard:?}: {message}"));
                continue;
            };
            if let Outcome::Refused(message) = &outcome {
                println!("{way:?} × {hazard:?}: refused: {message}");
                if !refusal_expected(way, hazard) {
                    wrong.push(format!("{way:?} × {hazard:?}: refused: {message}"));
                }
            } else if refusal_expected(way, hazard) {
                wrong.push(format!("{way:?} × {hazard:?}: not refused ({outcome})"));
            }
            held.push(((way, hazard), bytes));
            outcomes.push(outcome);
        }
        cells.push((way, outcomes));
    }
    (cells, held, wrong)
}
