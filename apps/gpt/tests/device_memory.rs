//! Device memory on a cubecl runtime (Burn's wgpu: Mesa's lavapipe in CI, the memory manager,
//! autotune and fusion code that CUDA runs too): a small GPT's training step with a region per
//! block against plain autodiff, **one process each** (pools keep what earlier steps reserved),
//! read with the library's device meter, without and with fusion and under two pool layouts.
//!
//! What it checks: regions hold and peak less than plain by the device's own count, and reserve
//! less; the meter reads the same under fused (lazy) execution as without (it runs the fusion queue
//! before reading); the figures a report's planner budgets on a device (reserved bytes) are there;
//! and on a device the planner profiles offload and plans with it where it holds least (a deeper,
//! narrower model, whose regions' inputs set the peak). A `harness = false` test: its `main` is the
//! parent, and runs itself again for each child.

use std::cell::RefCell;

use bench_kit::child;
use bench_kit::device::{StepFigures, measure_steps};
use bench_kit::gpt::GptShape;
use bench_kit::sweep::{self, Measured, Sweep};
use bench_kit::wgpu::{Pools, Unfused, set_pools};
use burn::backend::Autodiff;
use burn::backend::wgpu::WgpuDevice;
use burn::module::AutodiffModule;
use burn::optim::AdamWConfig;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Distribution, Int, Tensor};
use burn_checkpoint::Checkpointed;
use burn_checkpoint::memory::{Measure, MemoryMeter, Meter};
use burn_checkpoint::planner::Treatment;
use burn_checkpoint::planner::{Base, Profile};
use burn_checkpoint_core::memory::mib;
use gpt::{Cut, Gpt, GptConfig};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Task {
    /// A method's steps.
    Steps {
        fused: bool,
        exclusive: bool,
        block: bool,
    },
    /// The planner on a device, one child (one profile): the budget sweep with the device's
    /// meter (two budgets, one round) and, on the profile it planned from, a budget of reserved
    /// bytes fitted and a budget only offload meets planned.
    Planner,
}

/// What the planner's child found: the profile's reserved peaks (every region kept, every
/// region recomputed), the budget and the fitted plan's measured reserved peak; then offload on
/// a device: the profile's in-use peaks (what the planner plans with) with every region
/// recomputed and every region offloaded, and the treatments of the plan for a budget between
/// the two.
#[derive(Debug, Serialize, Deserialize)]
struct Fit {
    kept: u64,
    recomputed: u64,
    budget: u64,
    measured: u64,
    recomputed_in_use: u64,
    offloaded_in_use: u64,
    offload_budget: u64,
    offload_plan: Vec<Treatment>,
    /// The profile as the planner prints it (what each treatment holds and costs).
    profile: String,
}

/// The steps' model: small and quick, the regions' savings plain to see.
const STEPS: GptShape = GptShape {
    blocks: 2,
    d_model: 128,
    heads: 4,
    seq: 64,
    batch: 8,
    vocab: 128,
};

/// The planner's model: many narrow blocks over many tokens, so that what the blocks' regions
/// hold between forward and backward (their inputs: 512 KiB each) sets the peak, not the
/// parameters' gradients backward accumulates (196 KiB a block). Six blocks: twelve (until
/// CI's time was cut) planned the same way at twice the time, 20-45 s a step on lavapipe.
const FIT: GptShape = GptShape {
    blocks: 6,
    d_model: 64,
    heads: 4,
    seq: 64,
    batch: 32,
    vocab: 128,
};

/// The model and tokens of a child.
fn model<B: AutodiffBackend>(cut: Cut, shape: GptShape) -> (Gpt<B>, Tensor<B, 2, Int>) {
    let device = B::Device::default();
    B::seed(&device, 1);
    let vocab = shape.vocab;
    let model = GptConfig::new(vocab, shape.d_model, shape.blocks, shape.heads, shape.seq)
        .with_cut(cut)
        .init::<B>(&device);
    let tokens = Tensor::<B, 2, Int>::random(
        [shape.batch, shape.seq + 1],
        Distribution::Uniform(0.0, vocab as f64),
        &device,
    );
    (model, tokens)
}

/// The planner's checks on the profile of the per-block step (`step`, warmed up and profiled
/// just before, as the sweep does).
fn fit(profile: &Profile, meter: &Meter, step: impl FnMut()) -> Fit {
    let reserved = |treatment: Treatment| {
        let step = profile.steps.iter().find(|s| s.treatment == treatment);
        step.and_then(|s| s.report.reserved_peak_bytes)
            .expect("a device's report has its reserved peak")
    };
    let (kept, recomputed) = (reserved(Treatment::Keep), reserved(Treatment::RecomputeAll));
    let budget = (kept + recomputed) / 2;
    // The planner plans in bytes in use (the fit checks reserved ones).
    let recomputed_in_use = profile.step(Treatment::RecomputeAll).peak_bytes;
    let offloaded_in_use = profile.step(Treatment::Offload).peak_bytes;
    let offload_budget = (recomputed_in_use + offloaded_in_use) / 2;
    let offload_plan = profile
        .plan(offload_budget)
        .map(|plan| {
            let counts = plan.counts();
            counts
                .values()
                .flat_map(|c| c.keys().copied())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let fitted = profile
        .fit(meter.clone(), budget, step)
        .expect("a budget between the two fits");
    Fit {
        kept,
        recomputed,
        budget,
        measured: fitted.measured_peak_bytes,
        recomputed_in_use,
        offloaded_in_use,
        offload_budget,
        offload_plan,
        profile: profile.to_string(),
    }
}

/// A model and its optimizer stepping on one batch, for the sweep.
struct Trainer<B: AutodiffBackend, O> {
    model: Option<Gpt<B>>,
    optimizer: O,
    tokens: Tensor<B, 2, Int>,
}

impl<B: AutodiffBackend, O: burn::optim::Optimizer<Gpt<B>, B>> sweep::Trainer for Trainer<B, O> {
    fn step(&mut self) {
        let model = self.model.take().expect("a model");
        let (model, _) = model.train_step(&mut self.optimizer, self.tokens.clone(), 1e-3, || {});
        self.model = Some(model);
    }
}

/// The planner on wgpu, measured with the device's meter: the budget sweep on the planner's
/// model (the steps' two-block model leaves no budget to plan) against plain and per-block cuts,
/// two budgets, one round; and [`fit`]'s checks on the profile the sweep planned from, right
/// after it was measured.
fn planner() -> (Sweep, Fit) {
    type B = Checkpointed<Autodiff<Unfused>>;
    let meter = Meter::device(WgpuDevice::default()).expect("cubecl counts wgpu bytes");
    let trainer = |cut| {
        let (model, tokens) = model::<B>(cut, FIT);
        RefCell::new(Trainer {
            model: Some(model),
            optimizer: AdamWConfig::new().init(),
            tokens,
        })
    };
    let planned = trainer(Cut::Block);
    let hands = [
        ("no region", trainer(Cut::None)),
        ("per block", trainer(Cut::Block)),
    ];
    let mut fitted = None;
    let swept = sweep::run_checking(
        Measured {
            meter: meter.clone(),
            treatments: &Treatment::ALL,
        },
        "a GPT on wgpu",
        2,
        1,
        // One base: the device test checks the planner's fit on wgpu, not the base's choice.
        vec![sweep::Planned::of(Base::Plain, &planned)],
        hands
            .iter()
            .map(|(name, trainer)| sweep::Hand::of(name, trainer))
            .collect(),
        |profile, step| fitted = Some(fit(profile, &meter, step)),
    );
    (swept, fitted.expect("the sweep profiled: it has budgets"))
}

fn measure<B: AutodiffBackend>(cut: Cut, meter: &Meter) -> StepFigures
where
    Gpt<B>: AutodiffModule<B>,
{
    let (model, tokens) = model::<B>(cut, STEPS);
    let mut model = Some(model);
    let mut optimizer = AdamWConfig::new().init();
    let mut step = |measure: &Measure| {
        let mut held = 0;
        let (next, _) =
            model
                .take()
                .expect("a model")
                .train_step(&mut optimizer, tokens.clone(), 1e-3, || {
                    held = measure.now()
                });
        model = Some(next);
        held
    };
    // The first step allocates the optimizer's state and tunes the kernels; then the pages it
    // left wholly free go back to the device. A cubecl pool keeps every page: without this the
    // reserved peaks compared below would hold whatever autotune's candidates reserved, which
    // on a fresh autotune cache (every CI run: it lives in the clone) varies from run to run by
    // more than the methods differ (fused plain 22.8-33.1 MiB over two runs).
    measure_steps(meter, 1, 0, &mut step);
    meter.release();
    measure_steps(meter, 0, 2, step)
}

fn child_figures(fused: bool, exclusive: bool, block: bool) -> StepFigures {
    let device = WgpuDevice::default();
    if exclusive {
        set_pools(Pools::Exclusive, &device);
    }
    let meter = Meter::device(device).expect("cubecl counts wgpu bytes");
    let cut = if block { Cut::Block } else { Cut::None };
    match (fused, block) {
        (false, false) => measure::<Autodiff<Unfused>>(cut, &meter),
        (false, true) => measure::<Checkpointed<Autodiff<Unfused>>>(cut, &meter),
        (true, false) => measure::<Autodiff<burn::backend::Wgpu>>(cut, &meter),
        (true, true) => measure::<Checkpointed<Autodiff<burn::backend::Wgpu>>>(cut, &meter),
    }
}

fn in_child<T: serde::de::DeserializeOwned>(task: Task) -> T {
    let json = serde_json::to_string(&task).expect("a task serialises");
    child::run(&json, &[]).unwrap_or_else(|error| panic!("{error}"))
}

fn run(fused: bool, exclusive: bool, block: bool) -> StepFigures {
    let f: StepFigures = in_child(Task::Steps {
        fused,
        exclusive,
        block,
    });
    println!(
        "| {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
        if fused { "fused" } else { "unfused" },
        if exclusive { "exclusive" } else { "default" },
        if block { "per block" } else { "plain" },
        mib(f.base as usize),
        mib(f.held as usize),
        mib(f.in_use_peak as usize),
        mib(f.reserved_peak as usize),
        f.reserved_peak as f64 / f.live_peak() as f64,
    );
    f
}

fn main() {
    if let Some(task) = child::task() {
        match serde_json::from_str(&task).expect("a child's task") {
            Task::Steps {
                fused,
                exclusive,
                block,
            } => child::report(&child_figures(fused, exclusive, block)),
            Task::Planner => child::report(&planner()),
        }
        return;
    }
    let Some(_wgpu) = bench_kit::wgpu::claim() else {
        return;
    };
    println!(
        "| backend | pools | method | in use at start MiB | held MiB | in-use peak MiB | reserved peak MiB | reserved ÷ live |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut held = Vec::new();
    for fused in [false, true] {
        for exclusive in [false, true] {
            let plain = run(fused, exclusive, false);
            let block = run(fused, exclusive, true);
            let what = format!("fused {fused}, exclusive pools {exclusive}");
            assert!(
                block.held * 4 < plain.held,
                "{what}: per-block regions hold {} bytes between forward and backward, plain {}",
                block.held,
                plain.held
            );
            // The in-use peak is sampled (every 100 µs: a lower bound that moves from run to run,
            // 13.1-15.6 MiB for plain here), so only its order is checked.
            assert!(
                block.in_use_peak < plain.in_use_peak,
                "{what}: per-block peak {} bytes in use, plain {}",
                block.in_use_peak,
                plain.in_use_peak
            );
            assert!(
                block.reserved_peak < plain.reserved_peak,
                "{what}: per-block regions reserved {} bytes, plain {}",
                block.reserved_peak,
                plain.reserved_peak
            );
            for figures in [&plain, &block] {
                assert!(
                    figures.reserved_peak >= figures.live_peak(),
                    "{what}: reserved {} < live {}: the meter misreads",
                    figures.reserved_peak,
                    figures.live_peak()
                );
            }
            if !exclusive {
                held.push((fused, plain.held, block.held));
            }
        }
    }
    // Fusion may keep a little more or less (its kernels' outputs are not the unfused ops'); a
    // meter that read before the fusion queue ran would see next to nothing.
    let [(_, plain, block), (_, plain_fused, block_fused)] = held[..] else {
        unreachable!()
    };
    for (what, unfused, fused) in [
        ("plain", plain, plain_fused),
        ("per block", block, block_fused),
    ] {
        assert!(
            fused * 2 > unfused && fused < unfused * 3 / 2,
            "{what}: held under fusion {fused} bytes, without {unfused}: the meter misreads a \
             fused step"
        );
    }

    // The planner budgets what a device reserves: a budget between the profile's reserved peaks
    // with every region kept and every region recomputed is fitted, measured in reserved bytes.
    let (swept, fit): (Sweep, Fit) = in_child(Task::Planner);
    println!(
        "planner on wgpu: reserved {:.2} MiB kept, {:.2} MiB recomputed; budget {:.2} MiB, \
         the fitted plan reserved {:.2} MiB",
        mib(fit.kept as usize),
        mib(fit.recomputed as usize),
        mib(fit.budget as usize),
        mib(fit.measured as usize)
    );
    assert!(fit.recomputed < fit.kept, "{fit:?}");
    assert!(fit.measured <= fit.budget, "{fit:?}");

    // On a device, the profile tries offload too (its copies and uploads timed like the other
    // treatments' recomputes); with the blocks' inputs in host memory the step holds less than
    // with every block recomputed, and a budget between the two is met by offloading.
    println!("{}", fit.profile);
    println!(
        "planner on wgpu: in use {:.2} MiB recomputed, {:.2} MiB offloaded; a budget of {:.2} \
         MiB is planned with {:?}",
        mib(fit.recomputed_in_use as usize),
        mib(fit.offloaded_in_use as usize),
        mib(fit.offload_budget as usize),
        fit.offload_plan
    );
    assert!(fit.offloaded_in_use < fit.recomputed_in_use, "{fit:?}");
    assert!(fit.offload_plan.contains(&Treatment::Offload), "{fit:?}");

    // The sweep measures with the meter it is given: this test installs no counting allocator,
    // so a host reading would be 0 everywhere; on the device every point is the bytes reserved,
    // the cut per block below plain, and a plan within 5% of its budget.
    print!("{}", swept.markdown());
    let point = |method: &str| {
        let found = swept.points.iter().find(|p| p.method == method);
        found.unwrap_or_else(|| panic!("no point {method} in {:?}", swept.points))
    };
    assert!(
        swept.points.iter().all(|p| p.peak_bytes > 0),
        "{:?}",
        swept.points
    );
    assert!(point("per block").peak_bytes < point("no region").peak_bytes);
    let plans: Vec<_> = swept
        .points
        .iter()
        .filter(|p| p.kind == "planner")
        .collect();
    assert!(
        !plans.is_empty(),
        "no budget was fitted: {:?}",
        swept.points
    );
    for plan in plans {
        let budget = plan.budget_bytes.expect("a plan's point has its budget");
        assert!(plan.peak_bytes <= budget + budget / 20, "{plan:?}");
    }
}
