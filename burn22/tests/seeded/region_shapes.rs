//! Random region shapes against plain autodiff: how many inputs (1-4: leaves, constants, computed
//! from a leaf or from a trainable parameter outside the region, one possibly passed twice), what
//! the body does with each (mixes it in, adds it to its last output only, or ignores it), an
//! optional input (absent, present and used, present and ignored), trainable and frozen
//! parameters (0-3, some the body skips), outputs (1-3, some the loss does not reach, one possibly
//! used twice), nesting depth (0-2), dropout before, after or inside the regions, 1-D or 2-D. The
//! next shape nobody tried is tried here.
//!
//! Every tensor gets what plain autodiff gives it: a gradient where plain has one (bit for bit
//! where a single path leaves each region, else within 4e-6: contributions of several used
//! outputs add in another order), none where plain has none — with the one exception Burn's rule
//! forces (every parent a node lists must get a gradient): a leaf behind a computed input that the
//! region leaves without a gradient gets zeros where plain autodiff gives none. Dropout inside a
//! region draws from the seed the region draws, so the plain reference draws that seed too (the
//! documented exception of `same_run.rs`); before and after regions the plain program is the plain
//! program. Never a panic. The test prints its tally.

use crate::common;

use std::cell::RefCell;

use burn::module::{Module, Param};
use burn::nn::{Dropout, DropoutConfig};
use burn::tensor::{Device, Gradients, Tensor, TensorData};
use burn_checkpoint_22::{checkpoint, region_seed};
use common::{assert_close, device};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// How an input of the region is made.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Input {
    /// A leaf that requires a gradient.
    Leaf,
    /// A tensor that requires none.
    Constant,
    /// Computed from a leaf that requires a gradient (`leaf * 1.5 - 0.25`).
    Derived,
    /// Computed from a trainable parameter outside the region (`outside * 0.5 + 0.1`).
    FromParameter,
    /// The region's first input again (the same tensor at two places).
    FirstAgain,
}

impl Input {
    /// Whether the region is given a tensor computed by another node, not the leaf itself (the
    /// leaf then gets zeros where the region leaves the input without a gradient): a derived
    /// input, or any input a dropout went over first.
    fn computed(self, dropping: Dropping) -> bool {
        matches!(self, Input::Derived | Input::FromParameter) || dropping == Dropping::Before
    }
}

/// What the body does with an input.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Role {
    /// Mixed into every output.
    Mixed,
    /// Added to the last output only (which the loss may not use).
    LastOutput,
    /// Not used at all.
    Ignored,
}

/// How the loss uses an output of the region.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Use {
    Unused,
    Once,
    Twice,
}

/// Where a dropout goes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Dropping {
    None,
    /// On every input, before the region.
    Before,
    /// On every output, after the region.
    After,
    /// Inside the body (every nested region's too): its module holds the dropout.
    Inside,
}

#[derive(Debug, Clone)]
struct Case {
    rank: usize,
    /// `[n, width]` (2-D) or `[width]` (1-D).
    n: usize,
    width: usize,
    inputs: Vec<(Input, Role)>,
    /// The optional input: absent, or present and used (`true`) or ignored.
    optional: Option<bool>,
    /// Each parameter: trainable, and used by the body.
    params: Vec<(bool, bool)>,
    outputs: Vec<Use>,
    depth: usize,
    dropping: Dropping,
    seed: u64,
}

impl Case {
    /// Whether every gradient must be bitwise: one path out of every region, and no tensor
    /// passed twice (the gradients of its places inside the region add up in the joins' order,
    /// plain autodiff's in another).
    fn bitwise(&self) -> bool {
        // A nested region gives two outputs, both used.
        self.depth == 0
            && self.outputs.iter().filter(|u| **u != Use::Unused).count() <= 1
            && !self.inputs.iter().any(|(i, _)| *i == Input::FirstAgain)
    }
}

fn case() -> impl Strategy<Value = Case> {
    let input = prop_oneof![
        Just(Input::Leaf),
        Just(Input::Constant),
        Just(Input::Derived),
        Just(Input::FromParameter),
        Just(Input::FirstAgain),
    ];
    let role = prop_oneof![
        3 => Just(Role::Mixed),
        1 => Just(Role::LastOutput),
        1 => Just(Role::Ignored),
    ];
    let output = prop_oneof![Just(Use::Unused), Just(Use::Once), Just(Use::Twice)];
    let dropping = prop_oneof![
        2 => Just(Dropping::None),
        1 => Just(Dropping::Before),
        1 => Just(Dropping::After),
        1 => Just(Dropping::Inside),
    ];
    (
        (1usize..=2, 1usize..=4, 1usize..=5),
        prop::collection::vec((input, role), 1..=4),
        prop::option::of(any::<bool>()),
        prop::collection::vec((any::<bool>(), prop::bool::weighted(0.8)), 0..=3),
        prop::collection::vec(output, 1..=3),
        0usize..=2,
        dropping,
        any::<u64>(),
    )
        .prop_map(
            |(
                (rank, n, width),
                mut inputs,
                optional,
                params,
                mut outputs,
                depth,
                dropping,
                seed,
            )| {
                // The first input is the one nested regions take: mixed in, not a repeat.
                if inputs[0].0 == Input::FirstAgain {
                    inputs[0].0 = Input::Leaf;
                }
                inputs[0].1 = Role::Mixed;
                if outputs.iter().all(|u| *u == Use::Unused) {
                    outputs[0] = Use::Once;
                }
                Case {
                    rank,
                    n,
                    width,
                    inputs,
                    optional,
                    params,
                    outputs,
                    depth,
                    dropping,
                    seed,
                }
            },
        )
}

/// Element-wise scales, trainable or frozen, and the dropout of `Dropping::Inside`.
#[derive(Module, Debug)]
struct Scales {
    scales: Vec<Param<Tensor<1>>>,
    dropout: Option<Dropout>,
}

/// Values in [-1, 1) from a seed (a linear congruential generator: no dependence on the
/// device's generator, which the dropouts draw from).
fn values(count: usize, seed: u64) -> Vec<f32> {
    let mut state = seed | 1;
    (0..count)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn tensor<const D: usize>(shape: [usize; D], seed: u64, device: &Device) -> Tensor<D> {
    let count = shape.iter().product();
    Tensor::from_data(TensorData::new(values(count, seed), shape), device)
}

/// The region's inputs: the tensors (each with its role) and the optional one.
type Inputs<const D: usize> = (Vec<Tensor<D>>, Option<Tensor<D>>);

/// What the body is told of the case.
#[derive(Debug, Clone)]
struct Shape {
    roles: Vec<Role>,
    optional_used: bool,
    used_params: Vec<bool>,
    outputs: usize,
    depth: usize,
}

/// The region's body: mixes the inputs, scales by each used parameter, drops out (when its
/// module holds a dropout), runs a nested region `depth` levels deep, and gives `outputs`
/// tensors. `regions: false` is the plain reference.
fn body<const D: usize>(
    scales: &Scales,
    (xs, optional): Inputs<D>,
    shape: &Shape,
    regions: bool,
) -> Vec<Tensor<D>> {
    let with = |role: Role| {
        xs.iter()
            .zip(&shape.roles)
            .enumerate()
            .filter(move |(_, (_, r))| **r == role)
            .map(|(i, (x, _))| (i, x.clone()))
    };
    let mut h = with(Role::Mixed)
        .map(|(i, x)| x.mul_scalar(i as f32 + 1.0).sin())
        .reduce(|a, b| a + b)
        .expect("the first input is mixed in");
    for (scale, _) in scales
        .scales
        .iter()
        .zip(&shape.used_params)
        .filter(|(_, used)| **used)
    {
        h = (h * scale.val().unsqueeze::<D>()).tanh();
    }
    if let Some(optional) = optional.filter(|_| shape.optional_used) {
        h = h + optional.cos();
    }
    if let Some(dropout) = &scales.dropout {
        h = dropout.forward(h);
    }
    if shape.depth > 0 {
        // A nested region over one tensor at odd depths, two at even ones.
        let inner_inputs = if shape.depth % 2 == 1 {
            vec![h.clone()]
        } else {
            vec![h.clone(), xs[0].clone()]
        };
        let inner_shape = Shape {
            roles: vec![Role::Mixed; inner_inputs.len()],
            optional_used: false,
            used_params: shape.used_params.clone(),
            outputs: 2,
            depth: shape.depth - 1,
        };
        let inner = run(scales, (inner_inputs, None), inner_shape, regions);
        // tanh keeps values bounded however deep the nesting (no overflow to compare).
        h = (h + inner[0].clone() * inner[1].clone()).tanh();
    }
    let last = with(Role::Mixed).next_back().expect("a mixed input").1;
    let mut outputs: Vec<Tensor<D>> = (0..shape.outputs)
        .map(|j| match j {
            0 => h.clone(),
            1 => h.clone().exp() * last.clone(),
            _ => (h.clone() * xs[0].clone()).sin(),
        })
        .collect();
    let extra = with(Role::LastOutput)
        .map(|(_, x)| x.cos())
        .reduce(|a, b| a + b);
    if let (Some(extra), Some(last)) = (extra, outputs.last_mut()) {
        *last = last.clone() + extra;
    }
    outputs
}

/// The body as a region (or not: the plain program, which draws the seed a seeded region draws
/// when a dropout is inside).
fn run<const D: usize>(
    scales: &Scales,
    inputs: Inputs<D>,
    shape: Shape,
    regions: bool,
) -> Vec<Tensor<D>> {
    if regions {
        checkpoint(scales, inputs, move |scales, inputs| {
            body(scales, inputs, &shape, true)
        })
    } else {
        if scales.dropout.is_some() {
            let device = inputs.0[0].device();
            device.seed(region_seed(&device));
        }
        body(scales, inputs, &shape, false)
    }
}

/// What a case computes: the loss, and the gradients of every tensor that could have one
/// (leaves, then the parameters outside the region, then the region's parameters, in order),
/// each with whether a computed input stands between it and the region.
struct Outcome {
    loss: TensorData,
    grads: Vec<(Option<TensorData>, bool)>,
}

fn outcome<const D: usize>(case: &Case, shape: [usize; D], regions: bool) -> Outcome {
    let device = device();
    let seed = case.seed;
    device.seed(seed);
    let dropout = DropoutConfig::new(0.3).init();
    let scales = Scales {
        scales: case
            .params
            .iter()
            .enumerate()
            .map(|(i, &(trainable, _))| {
                let value = tensor([case.width], seed ^ (100 + i as u64), &device);
                Param::from_tensor(value).set_require_grad(trainable)
            })
            .collect(),
        dropout: (case.dropping == Dropping::Inside).then(|| dropout.clone()),
    };
    let before = |x: Tensor<D>| match case.dropping {
        Dropping::Before => dropout.forward(x),
        _ => x,
    };
    // Leaves, and whether each stands behind a computed input.
    let mut leaves: Vec<(Tensor<D>, bool)> = Vec::new();
    let mut outside: Vec<Tensor<1>> = Vec::new();
    let mut xs: Vec<Tensor<D>> = Vec::new();
    for (i, (input, _)) in case.inputs.iter().enumerate() {
        let value = tensor(shape, seed ^ i as u64, &device);
        let x = match input {
            Input::Leaf => {
                let leaf = value.require_grad();
                leaves.push((leaf.clone(), input.computed(case.dropping)));
                leaf
            }
            Input::Constant => value,
            Input::Derived => {
                let leaf = value.require_grad();
                leaves.push((leaf.clone(), input.computed(case.dropping)));
                leaf.mul_scalar(1.5).sub_scalar(0.25)
            }
            Input::FromParameter => {
                let parameter =
                    tensor([case.width], seed ^ (200 + i as u64), &device).require_grad();
                outside.push(parameter.clone());
                (value + parameter.unsqueeze::<D>())
                    .mul_scalar(0.5)
                    .add_scalar(0.1)
            }
            Input::FirstAgain => {
                xs.push(xs[0].clone());
                continue;
            }
        };
        xs.push(before(x));
    }
    let optional = case.optional.map(|_| {
        let leaf = tensor(shape, seed ^ 300, &device).require_grad();
        leaves.push((leaf.clone(), true));
        before(leaf.mul_scalar(2.0))
    });
    let body_shape = Shape {
        roles: case.inputs.iter().map(|(_, role)| *role).collect(),
        optional_used: case.optional == Some(true),
        used_params: case.params.iter().map(|&(_, used)| used).collect(),
        outputs: case.outputs.len(),
        depth: case.depth,
    };
    let outputs = run(&scales, (xs, optional), body_shape, regions);
    let loss = outputs
        .into_iter()
        .zip(&case.outputs)
        .filter_map(|(o, usage)| {
            let o = match case.dropping {
                Dropping::After => dropout.forward(o),
                _ => o,
            };
            match usage {
                Use::Unused => None,
                Use::Once => Some(o.sum()),
                Use::Twice => Some(o.clone().sum() + (o.clone() * o).sum()),
            }
        })
        .reduce(|a, b| a + b)
        .expect("one output is used");
    let grads = loss.is_tracked().then(|| loss.backward());
    let grad = |g: &Gradients, t: &Tensor<D>| t.grad(g).map(|g| g.into_data());
    let mut all = Vec::new();
    for (leaf, behind) in &leaves {
        all.push((grads.as_ref().and_then(|g| grad(g, leaf)), *behind));
    }
    for parameter in &outside {
        let g = grads
            .as_ref()
            .and_then(|g| parameter.grad(g).map(|g| g.into_data()));
        all.push((g, true));
    }
    for scale in &scales.scales {
        let g = grads
            .as_ref()
            .and_then(|g| scale.val().grad(g).map(|g| g.into_data()));
        all.push((g, false));
    }
    Outcome {
        loss: loss.into_data(),
        grads: all,
    }
}

/// The largest difference between two gradients, relative as in `assert_close`.
fn largest_difference(left: &Option<TensorData>, right: &Option<TensorData>) -> f32 {
    let (Some(left), Some(right)) = (left, right) else {
        return 0.0;
    };
    let left = left.try_to_vec::<f32>().expect("f32");
    let right = right.try_to_vec::<f32>().expect("f32");
    left.iter()
        .zip(&right)
        .filter(|(l, r)| l.to_bits() != r.to_bits())
        .map(|(l, r)| (l - r).abs() / l.abs().max(1.0))
        .fold(0.0, f32::max)
}

fn all_zero(data: &TensorData) -> bool {
    data.try_to_vec::<f32>()
        .expect("f32")
        .iter()
        .all(|v| *v == 0.0)
}

/// What a case found.
#[derive(Default)]
struct Found {
    /// The largest difference of a gradient (0 where all are bitwise equal).
    largest: f32,
    /// Gradients where plain autodiff has none and the region zeros (Burn's rule).
    zeros_for_none: usize,
    /// Gradients absent in both.
    none_in_both: usize,
}

/// Compares a case with regions against plain autodiff.
fn check(case: &Case) -> Found {
    let (plain, region) = match case.rank {
        1 => (
            outcome(case, [case.width], false),
            outcome(case, [case.width], true),
        ),
        _ => (
            outcome(case, [case.n, case.width], false),
            outcome(case, [case.n, case.width], true),
        ),
    };
    assert_eq!(plain.loss, region.loss, "the loss: {case:?}");
    let mut found = Found::default();
    for (index, ((p, behind), (r, _))) in plain.grads.into_iter().zip(region.grads).enumerate() {
        match (&p, &r) {
            (None, None) => found.none_in_both += 1,
            (None, Some(zeros)) => {
                assert!(
                    behind && all_zero(zeros),
                    "gradient {index}: none in plain autodiff, {zeros:?} with regions: {case:?}"
                );
                found.zeros_for_none += 1;
            }
            (Some(_), None) => panic!("gradient {index}: missing with regions: {case:?}"),
            (Some(_), Some(_)) => {
                found.largest = found.largest.max(largest_difference(&p, &r));
                if case.bitwise() {
                    assert_eq!(p, r, "gradient {index}, expected bitwise: {case:?}");
                } else {
                    assert_close(p, r, &format!("gradient {index} of {case:?}"));
                }
            }
        }
    }
    found
}

#[test]
fn random_region_shapes_give_what_plain_autodiff_gives() {
    let _generator = common::generator();
    // The same cases on every run (CI must not turn red by the draw); a new seed here tries
    // others.
    let cases = 768;
    let config = Config {
        cases,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]));
    #[derive(Default)]
    struct Tally {
        run: usize,
        bitwise: usize,
        required: usize,
        ignoring: usize,
        unused_only: usize,
        optional_ignored: usize,
        dropout: [usize; 3],
        none_in_both: usize,
        zeros_for_none: usize,
        largest: f32,
    }
    let tally = RefCell::new(Tally::default());
    runner
        .run(&case(), |case| {
            let found = check(&case);
            let mut t = tally.borrow_mut();
            t.run += 1;
            t.bitwise += usize::from(found.largest == 0.0);
            t.required += usize::from(case.bitwise());
            t.ignoring += usize::from(case.inputs.iter().any(|(_, r)| *r == Role::Ignored));
            t.unused_only += usize::from(
                case.inputs.iter().any(|(_, r)| *r == Role::LastOutput)
                    && case.outputs.last() == Some(&Use::Unused),
            );
            t.optional_ignored += usize::from(case.optional == Some(false));
            match case.dropping {
                Dropping::Before => t.dropout[0] += 1,
                Dropping::After => t.dropout[1] += 1,
                Dropping::Inside => t.dropout[2] += 1,
                Dropping::None => {}
            }
            t.none_in_both += found.none_in_both;
            t.zeros_for_none += found.zeros_for_none;
            t.largest = t.largest.max(found.largest);
            Ok(())
        })
        .unwrap();
    let t = tally.borrow();
    println!(
        "{} region shapes: {} bitwise ({} required to be), the rest within {:e} (relative); {} \
         with an ignored input, {} with an input reaching only an unused output, {} with an \
         optional input present and ignored; dropout before {}, after {}, inside {}; {} \
         gradients absent as in plain autodiff, {} zeros where plain autodiff has none (a leaf \
         behind a computed input the region left without a gradient)",
        t.run,
        t.bitwise,
        t.required,
        t.largest,
        t.ignoring,
        t.unused_only,
        t.optional_ignored,
        t.dropout[0],
        t.dropout[1],
        t.dropout[2],
        t.none_in_both,
        t.zeros_for_none
    );
}
