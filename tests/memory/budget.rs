//! The memory report and the budget planner on a residual MLP of named regions: plans fit their
//! budgets (measured), peaks shrink with the budget, plans and profiles round-trip through JSON,
//! a budget below the floor is refused with what holds it, and gradients are those of plain
//! autodiff under every plan.
//!
//! Runs alone (`common::alone`): the allocator counts every thread of the process.

use crate::common;

use burn::tensor::activation::relu;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use burn_checkpoint::Region;
use burn_checkpoint::memory::{Meter, StepReport};
use burn_checkpoint::planner::{Plan, PlanError, Profile, Treatment};
use burn_checkpoint_core::memory::mib;
use common::{Ckpt, Plain, assert_values_bitwise, data, values};

const BLOCKS: usize = 8;
const WIDTH: usize = 128;
const BATCH: usize = 1024;

struct Model<B: AutodiffBackend> {
    weights: Vec<(Tensor<B, 2>, Tensor<B, 2>)>,
    x: Tensor<B, 2>,
    r: Tensor<B, 2>,
}

fn model<B: AutodiffBackend>() -> Model<B> {
    let device = Default::default();
    let scale = (2.0f32 / WIDTH as f32).sqrt();
    let weight = |seed| {
        let w = data([WIDTH, WIDTH], seed);
        let w: Vec<f32> = w
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|v| v * scale)
            .collect();
        Tensor::<B, 2>::from_data(TensorData::new(w, [WIDTH, WIDTH]), &device).require_grad()
    };
    Model {
        weights: (0..BLOCKS as u64)
            .map(|i| (weight(10 + 2 * i), weight(11 + 2 * i)))
            .collect(),
        x: Tensor::from_data(data([BATCH, WIDTH], 1), &device),
        r: Tensor::from_data(data([BATCH, WIDTH], 2), &device),
    }
}

/// Blocks alternate between two names, "wide" and "narrow" (the same shape: two names to plan).
fn forward<B: AutodiffBackend>(model: &Model<B>) -> Tensor<B, 1> {
    let mut h = model.x.clone();
    for (i, (w1, w2)) in model.weights.iter().enumerate() {
        let name = if i % 2 == 0 { "wide" } else { "narrow" };
        h = Region::named(name).run(|| {
            let inner = relu(relu(h.clone().matmul(w1.clone())) * 0.5 + 0.25);
            relu(inner.matmul(w2.clone())) + h.clone()
        });
    }
    (h * model.r.clone()).sum()
}

/// One step's weight gradients.
fn gradients<B: AutodiffBackend>(model: &Model<B>) -> Vec<Vec<f32>> {
    let grads = forward(model).backward();
    model
        .weights
        .iter()
        .flat_map(|(w1, w2)| [w1, w2])
        .map(|w| values(w.grad(&grads).unwrap()))
        .collect()
}

fn profile(model: &Model<Ckpt>) -> Profile {
    // Warm-up: thread pools and caches allocate once.
    gradients(model);
    Profile::measure(Meter::Host, &Treatment::ALL, || {
        gradients(model);
    })
    .unwrap()
}

#[test]
fn plans_fit_their_budgets_and_peaks_shrink_with_them() {
    let _alone = common::alone();
    let model = model::<Ckpt>();
    let profile = profile(&model);
    println!("{profile}");
    let (floor, roof) = (profile.smallest_peak(), profile.largest_peak());
    assert!(
        floor * 2 < roof,
        "recomputing halves this MLP's peak at least: {floor} vs {roof}"
    );
    let kept = profile.step(Treatment::Keep);
    assert_eq!(kept.regions.len(), BLOCKS);
    assert_eq!(kept.regions[3].id(), "narrow#1");
    let recomputed = profile.step(Treatment::RecomputeAll);
    for (k, r) in kept.regions.iter().zip(&recomputed.regions) {
        assert!(k.held_bytes > 2 * r.held_bytes, "{k:?} vs {r:?}");
        assert_eq!(k.recomputed_ops, 0);
        assert!(r.recomputed_ops > 0 && r.recomputed_bytes > 0);
    }

    // At the peak with everything kept keeping every region fits, so the plan is predicted no
    // slower than that: every region kept, or a treatment whose profiled step was measured faster
    // than keeping (steps of a third of a second on a loaded machine: CI once measured
    // recompute-all's step 18 ms faster than keep's, and the plan, rightly, took it; a timing,
    // not a rule to assert). burn22's budget test says the same.
    let all_kept = profile.plan(roof).unwrap();
    assert!(
        all_kept.predicted_recompute_seconds <= 1e-9,
        "a plan slower than keeping every region, where that fits: {all_kept}"
    );

    // Eight budgets from the peak with everything kept down to just above the floor.
    let mut last_peak = u64::MAX;
    let mut last_time = f64::NEG_INFINITY;
    for k in 0..8u64 {
        let budget = roof - (roof - floor) * k / 8;
        let plan = profile.plan(budget).unwrap();
        assert!(plan.predicted_peak_bytes <= budget);
        assert!(
            plan.predicted_recompute_seconds >= last_time,
            "a smaller budget never costs less time: {} s after {last_time} s; {plan}",
            plan.predicted_recompute_seconds
        );
        last_time = plan.predicted_recompute_seconds;
        let ((), report) = StepReport::measure(Meter::Host, || {
            plan.run(|| {
                gradients(&model);
            })
        });
        println!(
            "budget {:7.2} MiB: predicted {:7.2}, measured {:7.2} MiB at {}; {plan}",
            mib(budget as usize),
            mib(plan.predicted_peak_bytes as usize),
            mib(report.peak_bytes as usize),
            report.peak_at
        );
        assert!(
            report.peak_bytes as f64 <= budget as f64 * 1.03,
            "measured {} over budget {budget}",
            report.peak_bytes
        );
        assert!(
            report.peak_bytes as f64 <= last_peak as f64 * 1.01,
            "the peak rose as the budget fell: {} after {last_peak}",
            report.peak_bytes
        );
        last_peak = last_peak.min(report.peak_bytes);
    }
}

#[test]
fn a_budget_below_the_floor_says_what_holds_the_floor() {
    let _alone = common::alone();
    let model = model::<Ckpt>();
    let profile = profile(&model);
    let floor = profile.smallest_peak();
    let error = profile.plan(floor / 2).unwrap_err();
    let PlanError::BelowFloor {
        budget,
        floor: said,
        ..
    } = &error
    else {
        panic!("{error}")
    };
    assert_eq!((*budget, *said), (floor / 2, floor));
    let message = error.to_string();
    assert!(message.contains("cannot be met"), "{message}");
    assert!(message.contains("smallest peak"), "{message}");
    assert!(message.contains("boundaries"), "{message}");

    // `fit` checks on a real step, and says the same below the floor.
    let fitted = profile.fit(Meter::Host, floor / 2, || drop(gradients(&model)));
    assert!(fitted.is_err());
}

#[test]
fn fit_checks_its_plan_on_a_real_step() {
    let _alone = common::alone();
    let model = model::<Ckpt>();
    let profile = profile(&model);
    let budget = (profile.smallest_peak() + profile.largest_peak()) / 2;
    let fitted = profile
        .fit(Meter::Host, budget, || drop(gradients(&model)))
        .unwrap();
    assert!(fitted.measured_peak_bytes <= budget);
    assert!(fitted.steps >= 1, "a plan checked on a step at least");
    assert_eq!(fitted.profile.steps.len(), 3, "a step per treatment");
    let counts = fitted.plan.counts();
    let treated: usize = counts.values().flat_map(|c| c.values()).sum();
    assert_eq!(treated, BLOCKS, "every instance has a treatment");
}

#[test]
fn plans_and_profiles_round_trip_through_json() {
    let _alone = common::alone();
    let model = model::<Ckpt>();
    let profile = profile(&model);
    let json = serde_json::to_string_pretty(&profile).unwrap();
    let back: Profile = serde_json::from_str(&json).unwrap();
    assert_eq!(back, profile);
    let plan = profile.plan(profile.largest_peak() * 3 / 4).unwrap();
    let back: Plan = serde_json::from_str(&serde_json::to_string(&plan).unwrap()).unwrap();
    assert_eq!(back, plan);
    let json = serde_json::to_string(&plan).unwrap();
    assert!(
        Treatment::ALL
            .iter()
            .any(|t| json.contains(&format!("\"{}\"", t.name()))),
        "treatments are named as in reports: {json}"
    );
}

#[test]
fn gradients_are_plain_autodiffs_under_every_plan() {
    let _alone = common::alone();
    let expected = gradients(&model::<Plain>());
    let model = model::<Ckpt>();
    let mixed = (0..BLOCKS as u64).fold(Plan::new(), |plan, i| {
        let treatment = Treatment::ALL[(i % 4) as usize];
        plan.with(if i % 2 == 0 { "wide" } else { "narrow" }, i / 2, treatment)
    });
    let every = |t: Treatment| {
        (0..BLOCKS as u64 / 2).fold(Plan::new(), |plan, i| {
            plan.with("wide", i, t).with("narrow", i, t)
        })
    };
    for (what, plan) in [
        ("no plan", Plan::new()),
        ("mixed", mixed),
        ("all kept", every(Treatment::Keep)),
        ("all save-compute-bound", every(Treatment::SaveComputeBound)),
        ("all recompute-all", every(Treatment::RecomputeAll)),
        ("all offload", every(Treatment::Offload)),
    ] {
        // Twice: the indices start again each step.
        for step in 0..2 {
            let got = plan.run(|| gradients(&model));
            for (i, (a, b)) in expected.iter().zip(&got).enumerate() {
                assert_values_bitwise(&format!("{what}, step {step}, weight {i}"), a, b);
            }
        }
    }
}
