//! Checkpoint policies: what each one recomputes, that the innermost region's policy wins, what a
//! predicate is told, and that gradients stay bitwise equal to plain `Autodiff` under each.

use crate::common;

use std::sync::{Arc, Mutex};

use burn::tensor::activation::relu;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{DType, Tensor};
use burn_checkpoint::counters::Counters;
use burn_checkpoint::{Decision, OpKind, Policy, Region, checkpoint, coverage};
use common::{Ckpt, Plain, assert_values_bitwise, data, values};

const BATCH: usize = 5;
const WIDTH: usize = 7;

/// `layers` times `relu(h·W + b)`.
fn layers<B: AutodiffBackend>(mut h: Tensor<B, 2>, ws: &[Tensor<B, 2>]) -> Tensor<B, 2> {
    for w in ws {
        h = relu(h.matmul(w.clone()) + 0.1);
    }
    h
}

/// Recompute counts of region ops, by op.
type Recomputed = std::collections::BTreeMap<&'static str, u64>;

/// One step over three layers run by `forward`; returns the loss and the gradients of the input
/// and of every weight, and how often each region op was recomputed.
fn step<B: AutodiffBackend>(
    forward: impl FnOnce(Tensor<B, 2>, &[Tensor<B, 2>]) -> Tensor<B, 2>,
) -> (Vec<Vec<f32>>, Recomputed) {
    let device = Default::default();
    let x = Tensor::<B, 2>::from_data(data([BATCH, WIDTH], 1), &device).require_grad();
    let ws: Vec<Tensor<B, 2>> = (0..3)
        .map(|i| Tensor::from_data(data([WIDTH, WIDTH], 10 + i), &device).require_grad())
        .collect();
    Counters::reset();
    let h = forward(x.clone(), &ws);
    let loss = (h * Tensor::from_data(data([BATCH, WIDTH], 2), &device)).sum();
    let grads = loss.backward();
    let mut all = vec![values(loss), values(x.grad(&grads).unwrap())];
    all.extend(ws.iter().map(|w| values(w.grad(&grads).unwrap())));
    (all, Counters::now().recomputes)
}

fn plain() -> Vec<Vec<f32>> {
    step::<Plain>(layers).0
}

fn assert_same(plain: &[Vec<f32>], ckpt: &[Vec<f32>]) {
    assert_eq!(plain.len(), ckpt.len());
    for (i, (a, b)) in plain.iter().zip(ckpt).enumerate() {
        assert_values_bitwise(&format!("value {i}"), a, b);
    }
}

#[test]
fn recompute_all_recomputes_the_matmuls() {
    let (grads, recomputed) = step::<Ckpt>(|x, ws| Region::new().run(|| layers(x, ws)));
    assert_same(&plain(), &grads);
    assert_eq!(recomputed.get("matmul"), Some(&3), "{recomputed:?}");
}

#[test]
fn save_compute_bound_keeps_the_matmuls() {
    let (grads, recomputed) = step::<Ckpt>(|x, ws| {
        Region::new()
            .policy(Policy::SaveComputeBound)
            .run(|| layers(x, ws))
    });
    assert_same(&plain(), &grads);
    assert_eq!(recomputed.get("matmul"), None, "{recomputed:?}");
    assert!(Counters::now().fallbacks.is_empty());
}

#[test]
fn a_predicate_sees_each_op_and_its_output() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let policy = {
        let seen = seen.clone();
        Policy::custom(move |op| {
            seen.lock()
                .unwrap()
                .push((op.name(), op.kind(), op.shape().to_vec(), op.dtype()));
            // Keep what `SaveComputeBound` recomputes, and the other way round.
            match op.kind() {
                OpKind::Matmul => Decision::Recompute,
                _ => Decision::Save,
            }
        })
    };
    let (grads, recomputed) =
        step::<Ckpt>(|x, ws| Region::new().policy(policy).run(|| layers(x, ws)));
    assert_same(&plain(), &grads);
    // Nothing reads a matmul output but `+ 0.1`, whose backward does not: the matmuls are not
    // kept, and not recomputed either.
    assert_eq!(recomputed.get("matmul"), None, "{recomputed:?}");

    let seen = seen.lock().unwrap();
    let names: Vec<_> = seen.iter().map(|(name, ..)| *name).collect();
    assert_eq!(
        names,
        ["float_matmul", "float_add_scalar", "relu"].repeat(3),
        "ops asked about"
    );
    for (name, kind, dims, dtype) in seen.iter() {
        assert_eq!(dims, &[BATCH, WIDTH], "{name}");
        assert_eq!(*dtype, DType::F32, "{name}");
        let expected = if *name == "float_matmul" {
            OpKind::Matmul
        } else {
            OpKind::Elementwise
        };
        assert_eq!(*kind, expected, "{name}");
    }
}

#[test]
fn the_innermost_policy_wins() {
    // The outer region keeps matmuls; the inner one, around the middle layer, recomputes all.
    let (grads, recomputed) = step::<Ckpt>(|x, ws| {
        Region::new().policy(Policy::SaveComputeBound).run(|| {
            let h = layers(x, &ws[..1]);
            let h = checkpoint(|| layers(h, &ws[1..2]));
            layers(h, &ws[2..])
        })
    });
    assert_same(&plain(), &grads);
    assert_eq!(recomputed.get("matmul"), Some(&1), "{recomputed:?}");
}

#[test]
fn recompute_all_but_keeps_the_regions_it_names() {
    // Three layers, the first two in nested regions; the block keeps `middle` by name.
    let block = |policy: Policy| {
        move |x, ws: &[Tensor<Ckpt, 2>]| {
            Region::named("block").policy(policy).run(|| {
                let h = Region::named("first").run(|| layers(x, &ws[..1]));
                let h = Region::named("middle").run(|| layers(h, &ws[1..2]));
                layers(h, &ws[2..])
            })
        }
    };
    let plain = plain();
    for (patterns, matmuls) in [
        (vec!["middle"], 2),
        (vec!["mid*"], 2),
        (vec!["*"], 1),
        (vec!["first", "middle"], 1),
        (vec!["none"], 3),
    ] {
        let (grads, recomputed) = step::<Ckpt>(block(Policy::recompute_all_but(patterns.clone())));
        assert_same(&plain, &grads);
        assert_eq!(
            recomputed.get("matmul"),
            Some(&matmuls),
            "{patterns:?}: {recomputed:?}"
        );
    }
}

#[test]
fn a_plan_recomputing_a_region_keeps_what_its_code_names() {
    use burn_checkpoint::planner::{Plan, Treatment};
    let (grads, recomputed) = step::<Ckpt>(|x, ws| {
        Plan::new()
            .with("block", 0, Treatment::RecomputeAll)
            .run(|| {
                Region::named("block")
                    .policy(Policy::recompute_all_but(["middle"]))
                    .run(|| {
                        let h = layers(x, &ws[..1]);
                        let h = Region::named("middle").run(|| layers(h, &ws[1..2]));
                        layers(h, &ws[2..])
                    })
            })
    });
    assert_same(&plain(), &grads);
    assert_eq!(recomputed.get("matmul"), Some(&2), "{recomputed:?}");
}

#[test]
fn a_plan_leaving_a_region_as_written_runs_its_policy() {
    use burn_checkpoint::planner::{Plan, Treatment};
    // Written to keep its matmuls: as written, none is recomputed, as with no plan; a plan
    // recomputing all of it recomputes all three.
    let under = |treatment: Option<Treatment>| {
        step::<Ckpt>(|x, ws| {
            let plan = match treatment {
                Some(treatment) => Plan::new().with("block", 0, treatment),
                None => Plan::new(),
            };
            plan.run(|| {
                Region::named("block")
                    .policy(Policy::SaveComputeBound)
                    .run(|| layers(x, ws))
            })
        })
    };
    for (treatment, matmuls) in [
        (None, None),
        (Some(Treatment::AsWritten), None),
        (Some(Treatment::RecomputeAll), Some(&3)),
    ] {
        let (grads, recomputed) = under(treatment);
        assert_same(&plain(), &grads);
        assert_eq!(
            recomputed.get("matmul"),
            matmuls,
            "{treatment:?}: {recomputed:?}"
        );
    }
}

#[test]
fn a_region_kept_by_name_keeps_its_own_nested_regions_policies() {
    // `middle` is kept at depth two; the region inside it recomputes as its code says.
    let (grads, recomputed) = step::<Ckpt>(|x, ws| {
        Region::named("block")
            .policy(Policy::recompute_all_but(["middle"]))
            .run(|| {
                let h = Region::named("outer").run(|| {
                    Region::named("middle").run(|| {
                        let h = layers(x, &ws[..1]);
                        checkpoint(|| layers(h, &ws[1..2]))
                    })
                });
                layers(h, &ws[2..])
            })
    });
    assert_same(&plain(), &grads);
    assert_eq!(recomputed.get("matmul"), Some(&2), "{recomputed:?}");
}

#[burn_checkpoint::checkpoint(policy = Policy::SaveComputeBound)]
fn saving_layers<B: AutodiffBackend>(x: Tensor<B, 2>, ws: &[Tensor<B, 2>]) -> Tensor<B, 2> {
    layers(x, ws)
}

#[burn_checkpoint::checkpoint]
fn recomputing_layers<B: AutodiffBackend>(x: Tensor<B, 2>, ws: &[Tensor<B, 2>]) -> Tensor<B, 2> {
    layers(x, ws)
}

#[test]
fn the_attribute_takes_a_policy() {
    let (grads, recomputed) = step::<Ckpt>(saving_layers);
    assert_same(&plain(), &grads);
    assert_eq!(recomputed.get("matmul"), None, "{recomputed:?}");

    let (grads, recomputed) = step::<Ckpt>(recomputing_layers);
    assert_same(&plain(), &grads);
    assert_eq!(recomputed.get("matmul"), Some(&3), "{recomputed:?}");
}

#[test]
fn a_policy_outside_checkpointed_changes_nothing() {
    let (grads, recomputed) = step::<Plain>(|x, ws| {
        Region::new()
            .policy(Policy::SaveComputeBound)
            .run(|| layers(x, ws))
    });
    assert_same(&plain(), &grads);
    assert!(recomputed.is_empty());
}

#[test]
fn every_recomputed_op_has_a_kind() {
    use burn_checkpoint::coverage::Routing;
    // Ops that belong to no family, on purpose.
    let other = [
        "float_cross",
        "float_sort",
        "float_sort_with_indices",
        "float_to_device",
        "interpolate",
        "ctc_loss",
    ];
    for op in coverage::ops() {
        if op.routing() == Routing::Region {
            let kind = op.kind();
            assert_eq!(
                kind == OpKind::Other,
                other.contains(&op.name()),
                "`{}` is {kind:?}",
                op.name()
            );
        }
    }
}
