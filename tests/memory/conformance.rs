//! The conformance matrix for Burn 0.21: every way into a region against every hazard a user
//! brings, the same program run on plain `Autodiff<NdArray>` (where a region is nothing) and on
//! `Checkpointed<Autodiff<NdArray>>`. The decorator replays recorded ops and never runs user code
//! again, so every cell must be bit for bit; each also checks from the memory report that the way
//! took effect (ops replayed in backward, or none where a plan keeps the region) and what its
//! regions held. The crate for Burn 0.22 runs the same matrix (`burn22/tests/memory/
//! conformance.rs`); both tables are docs/conformance.md's.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use app_kit::conformance::{self, Hazard, Outcome, Way, table};
use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::nn::{BatchNorm, BatchNormConfig, Dropout, DropoutConfig, Linear, LinearConfig};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Distribution, Tensor, TensorData};
use burn_checkpoint::memory::{Meter, StepReport};
use burn_checkpoint::planner::{Plan, Treatment};
use burn_checkpoint::{Policy, Region, RegionId, Schedule, Segments, checkpoint};
use burn_checkpoint_core::memory::panic_message;

use crate::common::{self, Ckpt, Plain};

use Hazard::*;
use Way::*;

/// Rows, features, layers (each chain way's regions), scan steps.
const N: usize = 128;
const W: usize = 32;
const K: usize = 6;
const T: usize = 5;

/// The top-level regions a way opens: their name and how many.
fn regions_of(way: Way) -> (&'static str, usize) {
    match way {
        SequentialCount | PlanKeepSequential => ("stack", 2),
        SequentialSqrt => ("stack", 1),
        // A region a step; one snapshot, two regions; two carries' bytes, three.
        ScanEveryStep | PlanKeepScan => ("scan", T),
        ScanSnapshots | PlanSchedule => ("scan", 2),
        ScanBudget => ("scan", 3),
        KeptByName | Nested => ("pair", K / 2),
        _ => ("layer", K),
    }
}

/// The plan a way runs under, if any.
fn plan_of(way: Way) -> Option<Plan> {
    let treatment = match way {
        PlanKeep | PlanKeepSequential | PlanKeepScan => Treatment::Keep,
        PlanRecompute => Treatment::RecomputeAll,
        PlanOffload => Treatment::Offload,
        PlanSchedule => Treatment::Scan(Schedule::Snapshots(1)),
        _ => return None,
    };
    let (name, count) = regions_of(way);
    Some((0..count as u64).fold(Plan::new(), |plan, index| plan.with(name, index, treatment)))
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
struct Cell<B: Backend> {
    up: Linear<B>,
    down: Linear<B>,
    dropout: Option<Dropout>,
    norm: Option<BatchNorm<B>>,
}

/// What crosses a region: the activation, and a second output with the two-outputs hazard.
type State<B> = (Tensor<B, 2>, Option<Tensor<B, 2>>);

impl<B: Backend> Cell<B> {
    fn body(&self, (h, g): State<B>) -> State<B> {
        if !Region::is_recomputing() {
            FORWARDS.fetch_add(1, Ordering::Relaxed);
        }
        let calls = CALLS.fetch_add(1, Ordering::Relaxed);
        let z = self.down.forward(self.up.forward(h.clone()).tanh());
        let z = match &self.dropout {
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
        let z = match &self.norm {
            Some(norm) => norm.forward(z.reshape([N, W, 1])).reshape([N, W]),
            None => z,
        };
        let g = g.map(|g| g + z.clone() * 0.5);
        (z, g)
    }

    #[burn_checkpoint::checkpoint(name = "layer")]
    fn region(&self, state: State<B>) -> State<B> {
        self.body(state)
    }
}

impl<B: Backend> burn_checkpoint::Layer<State<B>> for Cell<B> {
    fn forward(&self, state: State<B>) -> State<B> {
        self.body(state)
    }
}

#[derive(Module, Debug)]
struct Net<B: Backend> {
    before: Option<Dropout>,
    cells: Vec<Cell<B>>,
    after: Option<Dropout>,
}

impl<B: Backend> Net<B> {
    fn new(hazard: Hazard, device: &B::Device) -> Self {
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
            // Every parameter drawn now: `into_record` reads each.
            let record = net.clone().into_record();
            net.load_record(record)
        }
    }
}

/// The region of a chain way's layers.
fn layer_region(way: Way) -> Region {
    let region = Region::named("layer");
    match way {
        Offloaded => region.offloaded(),
        SaveComputeBound | PlanRecompute => region.policy(Policy::SaveComputeBound),
        _ => region,
    }
}

/// The bytes of a scan's carry.
fn carry_bytes(hazard: Hazard) -> u64 {
    let tensors = if hazard == TwoOutputs { 2 } else { 1 };
    (tensors * N * W * 4) as u64
}

/// The way's program over `state` (`xs`, a scan's sequence). On plain autodiff its regions are
/// nothing: the plain program.
fn program<B: AutodiffBackend>(
    way: Way,
    hazard: Hazard,
    net: &Net<B>,
    state: State<B>,
    xs: Tensor<B, 3>,
) -> State<B> {
    let body = |cell: &Cell<B>, state| cell.body(state);
    match way {
        _ if way.is_scan() => {
            let schedule = match way {
                ScanSnapshots | PlanSchedule => Schedule::Snapshots(1),
                ScanBudget => Schedule::Budget(2 * carry_bytes(hazard)),
                _ => Schedule::EveryStep,
            };
            let step = |cell: &Cell<B>, (h, g): State<B>, x: Tensor<B, 2>| {
                let state = cell.body((h + x, g));
                (state.0.clone(), state)
            };
            let (ys, (_, g)) =
                Region::named("scan")
                    .schedule(schedule)
                    .scan(&net.cells[0], state, xs, 1, step);
            (ys.reshape([N * T, W]), g)
        }
        SequentialCount | PlanKeepSequential => {
            Region::named("stack").sequential(&net.cells, Segments::Count(3), state)
        }
        SequentialSqrt => Region::named("stack").sequential(&net.cells, Segments::Sqrt, state),
        KeptByName | Nested => {
            let outer = match way {
                KeptByName => Region::named("pair").policy(Policy::recompute_all_but(["kept"])),
                _ => Region::named("pair"),
            };
            net.cells.chunks(2).fold(state, |state, pair| {
                outer.run(|| {
                    let state = Region::named("kept").run(|| body(&pair[0], state));
                    Region::named("inner").run(|| body(&pair[1], state))
                })
            })
        }
        Attribute => net
            .cells
            .iter()
            .fold(state, |state, cell| cell.region(state)),
        Checkpoint => {
            (net.cells.iter()).fold(state, |state, cell| checkpoint(|| body(cell, state)))
        }
        _ => {
            let region = layer_region(way);
            (net.cells.iter()).fold(state, |state, cell| region.run(|| body(cell, state)))
        }
    }
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

/// Positive weights of the loss, one per element of a `[rows, W]` output.
fn loss_weights<B: Backend>(rows: usize, device: &B::Device) -> Tensor<B, 2> {
    let values: Vec<f32> = (0..rows * W)
        .map(|i| 0.5 + (i * 37 % 11) as f32 / 11.0)
        .collect();
    Tensor::from_data(TensorData::new(values, [rows, W]), device)
}

impl Outputs {
    /// Every number the run gave, tensor by tensor.
    fn numbers(&self) -> Vec<Vec<f32>> {
        let tensors = (self.losses.iter().chain([&self.y]))
            .chain(self.grads.iter().flatten())
            .chain(&self.statistics)
            .chain(&self.weights);
        tensors
            .map(|t| t.to_vec::<f32>().expect("f32 values"))
            .collect()
    }
}

/// One run of `way`'s program on backend `B` under `plan`, on a thread of its own: the net and
/// inputs built from fixed seeds, one training step (three, with SGD, for the three-steps
/// hazard). The memory report is the last step's. `Err`: the panic's message.
fn run<B: AutodiffBackend>(
    way: Way,
    hazard: Hazard,
    plan: Option<Plan>,
) -> Result<(Outputs, StepReport), String> {
    NOISE.store(hazard == Seeded, Ordering::Relaxed);
    MUTATES.store(hazard == MutatesCapture, Ordering::Relaxed);
    FORWARDS.store(0, Ordering::Relaxed);
    CALLS.store(0, Ordering::Relaxed);
    let thread = std::thread::spawn(move || {
        let device: B::Device = Default::default();
        B::seed(&device, 7);
        let mut net = Net::<B>::new(hazard, &device);
        B::seed(&device, 5);
        let uniform = Distribution::Uniform(0.5, 1.5);
        let x = Tensor::<B, 2>::random([N, W], uniform, &device);
        let xs = Tensor::<B, 3>::random([N, T, W], uniform, &device);
        let (x, xs) = match hazard {
            InputWithoutGradient => (x, xs),
            _ => (x.require_grad(), xs.require_grad()),
        };
        B::seed(&device, 11);
        let steps = if hazard == ThreeSteps { 3 } else { 1 };
        let (mut losses, mut last) = (Vec::new(), None);
        for _ in 0..steps {
            let step = || training_step(way, hazard, &net, &x, &xs);
            let ((loss, y, grads), report) = StepReport::measure(Meter::Host, || {
                RegionId::restart_indices();
                match &plan {
                    Some(plan) => plan.run(step),
                    None => step(),
                }
            });
            let mut all = vec![
                x.grad(&grads).map(|g| g.into_data()),
                xs.grad(&grads).map(|g| g.into_data()),
            ];
            all.extend(param_grads(&net, &grads));
            net = sgd(net, &grads, 0.1);
            losses.push(loss);
            last = Some((y, all, report));
        }
        let (y, grads, report) = last.expect("a step");
        let outputs = Outputs {
            losses,
            y,
            grads,
            statistics: statistics(&net),
            weights: weights(&net),
            forwards: FORWARDS.load(Ordering::Relaxed),
        };
        (outputs, report)
    });
    thread.join().map_err(|payload| panic_message(&*payload))
}

/// One step: the program, the loss, backward.
fn training_step<B: AutodiffBackend>(
    way: Way,
    hazard: Hazard,
    net: &Net<B>,
    x: &Tensor<B, 2>,
    xs: &Tensor<B, 3>,
) -> (TensorData, TensorData, B::Gradients) {
    let x = match &net.before {
        Some(dropout) => dropout.forward(x.clone()),
        None => x.clone(),
    };
    let g = (hazard == TwoOutputs).then(|| x.clone() * 0.25);
    let (y, g) = program(way, hazard, net, (x, g), xs.clone());
    let weights = loss_weights::<B>(y.dims()[0], &y.device());
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

/// Every float parameter's gradient, in visit order.
fn param_grads<B: AutodiffBackend, M: Module<B>>(
    module: &M,
    grads: &B::Gradients,
) -> Vec<Option<TensorData>> {
    struct Grads<'a, B: AutodiffBackend>(&'a B::Gradients, Vec<Option<TensorData>>);

    impl<B: AutodiffBackend> ModuleVisitor<B> for Grads<'_, B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            self.1.push(param.val().grad(self.0).map(|g| g.into_data()));
        }
    }

    let mut visitor = Grads::<B>(grads, Vec::new());
    module.visit(&mut visitor);
    visitor.1
}

fn sgd<B: AutodiffBackend, M: Module<B>>(module: M, grads: &B::Gradients, lr: f64) -> M {
    struct Step<'a, B: AutodiffBackend>(&'a B::Gradients, f64);

    impl<B: AutodiffBackend> ModuleMapper<B> for Step<'_, B> {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
            let Some(grad) = param.val().grad(self.0) else {
                return param;
            };
            let lr = self.1;
            param.map(|value| {
                (value - Tensor::from_inner(grad).mul_scalar(lr))
                    .detach()
                    .require_grad()
            })
        }
    }

    module.map(&mut Step::<B>(grads, lr))
}

/// Every initialised parameter's value.
fn weights<B: Backend, M: Module<B>>(module: &M) -> Vec<TensorData> {
    struct Values(Vec<TensorData>);

    impl<B: Backend> ModuleVisitor<B> for Values {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
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
fn statistics<B: Backend>(net: &Net<B>) -> Vec<TensorData> {
    (net.cells.iter().filter_map(|cell| cell.norm.as_ref()))
        .flat_map(|norm| [norm.running_mean.value(), norm.running_var.value()])
        .map(|value| value.into_data())
        .collect()
}

/// The cell `way` × `hazard`: plain autodiff's run against the decorator's, and the bytes the
/// regions held after forward.
fn cell(way: Way, hazard: Hazard) -> (Outcome, i64) {
    let (plain, _) = run::<Plain>(way, hazard, None).expect("the plain program runs");
    let (regions, report) = match run::<Ckpt>(way, hazard, plan_of(way)) {
        Ok(ran) => ran,
        Err(message) => return (Outcome::Refused(message), 0),
    };
    let (name, count) = regions_of(way);
    // `checkpoint` names its regions by their place in the source.
    let name = match way {
        Checkpoint => report.regions[0].name.clone(),
        _ => name.to_string(),
    };
    let ids: Vec<String> = report.regions.iter().map(|r| r.id()).collect();
    let expected: Vec<String> = (0..count).map(|index| format!("{name}#{index}")).collect();
    assert_eq!(ids, expected, "{way:?} × {hazard:?}: the regions: {report}");
    let kept = way.kept_by_plan();
    for region in &report.regions {
        assert_eq!(
            region.recomputed_ops == 0,
            kept,
            "{way:?} × {hazard:?}: {} replayed {} ops: {report}",
            region.id(),
            region.recomputed_ops
        );
    }
    // The first region reads the caller's input, which its owner holds anyway: only the others
    // have a stored operand to copy.
    if matches!(way, Offloaded | PlanOffload) {
        for region in &report.regions[1..] {
            assert!(
                region.offloaded_bytes > 0,
                "{way:?} × {hazard:?}: {region:?} {report}"
            );
        }
    }
    check_held(way, hazard, &report);
    let held = report.held_by_regions() as i64;
    if regions == plain {
        return (Outcome::Bitwise, held);
    }
    let same_presence =
        (plain.grads.iter().map(Option::is_some)).eq(regions.grads.iter().map(Option::is_some));
    let difference = conformance::largest_difference(&plain.numbers(), &regions.numbers())
        .filter(|_| same_presence && plain.forwards == regions.forwards);
    assert!(
        difference.is_some_and(|d| d <= BOUND),
        "{way:?} × {hazard:?}: not the plain program's run (largest difference {difference:?})"
    );
    println!("{way:?} × {hazard:?}: within {:.1e}", difference.unwrap());
    (Outcome::Within, held)
}

/// The bound a gradient whose terms add in another order than plain autodiff's keeps to.
const BOUND: f32 = 1e-6;

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
    let mut cells = Vec::new();
    let mut held: Vec<((Way, Hazard), i64)> = Vec::new();
    let mut wrong = Vec::new();
    for way in Way::ALL.into_iter().filter(|&way| way != CheckpointFn) {
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
                wrong.push(format!("{way:?} × {hazard:?}: refused: {message}"));
            }
            held.push(((way, hazard), bytes));
            outcomes.push(outcome);
        }
        cells.push((way, outcomes));
    }
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
    let page = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/conformance.md");
    app_kit::generated::keep(&page, "matrix for Burn 0.21", &table(&cells));
}
