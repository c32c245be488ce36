//! A scan's backward: one region node for every step of a recurrent loop, whose backward walks
//! the steps last first, each from the carry it started from (stored, or advanced again from a
//! stored one as the [`ScanPlan`] says), with one nested backward per step seeded with the
//! gradients of the step's output and of the carry it gave.
//!
//! The node's tensors are the initial carry's, the stacked sequence's, then the cell's parameters;
//! its outputs the stacked outputs', then the last carry's. A parameter's gradient is the sum of
//! its steps' terms, added last step first (`acc + term`, as plain autodiff registers them).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::ops::FloatTensorOps;
use burn::backend::tensor::FloatTensor;
use burn::backend::{
    Autodiff, AutodiffBackend, Backend, DispatchKindConversion, DispatchTensor, TensorMetadata,
};
use burn_checkpoint_core::memory::recording;
use burn_checkpoint_core::{ScanAction, ScanPlan};

use crate::body::{from_dispatch, to_dispatch};
use crate::offload::Stored;

use super::objective::nested_backward;

/// A scan's step as its backward runs it, on dispatch tensors: step `t` on its carry's tensors,
/// then its input's, then the cell's parameters; the step's output tensors out, then its
/// carry's. Runs as a recompute and seeds the step's draws itself.
#[derive(Clone)]
pub(crate) struct StepBody(
    pub(crate) Arc<dyn Fn(usize, Vec<DispatchTensor>) -> Vec<DispatchTensor> + Send + Sync>,
);

/// A typed cut of stacked tensors: a sequence's tensors and a step index in, that step's
/// tensors out.
#[derive(Clone)]
pub(crate) struct Slicer(
    pub(crate) Arc<dyn Fn(Vec<DispatchTensor>, usize) -> Vec<DispatchTensor> + Send + Sync>,
);

/// The steps' tensors stacked into the sequence's (the inputs' gradients).
#[derive(Clone)]
pub(crate) struct Stacker(
    pub(crate) Arc<dyn Fn(Vec<Vec<DispatchTensor>>) -> Vec<DispatchTensor> + Send + Sync>,
);

/// What a scan's forward gives its node, on dispatch tensors.
#[derive(Clone)]
pub(crate) struct ScanSpec {
    pub(crate) plan: ScanPlan,
    /// The carries the forward stored, by the step they start.
    pub(crate) stored: Vec<(usize, Vec<DispatchTensor>)>,
    /// Whether those carries wait in host memory until backward restores them.
    pub(crate) offload: bool,
    pub(crate) carry_len: usize,
    pub(crate) input_len: usize,
    pub(crate) output_len: usize,
    pub(crate) step: StepBody,
    /// A step of the stacked inputs.
    pub(crate) inputs: Slicer,
    /// A step of the stacked outputs (their gradients).
    pub(crate) outputs: Slicer,
    /// The inputs' gradients, step by step, stacked.
    pub(crate) stack_inputs: Stacker,
}

impl fmt::Debug for ScanSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ScanSpec({} steps)", self.plan.steps())
    }
}

/// A scan's node state besides the region's: the spec, its stored carries as the backend's
/// tensors, on the device or in host memory (taken by the backward, which drops each once used).
pub(super) struct ScanState<B: Backend> {
    pub(super) spec: ScanSpec,
    pub(super) stored: Mutex<HashMap<usize, Vec<Stored<B>>>>,
}

impl<B: Backend> ScanState<B> {
    /// The node's scan state: the stored carries' inner tensors (copied to host memory, their
    /// device buffers given up, when the scan offloads).
    pub(super) fn new<C: CheckpointStrategy>(mut spec: ScanSpec) -> Arc<Self>
    where
        DispatchTensor: DispatchKindConversion<Autodiff<B, C>>,
    {
        let offload = spec.offload;
        let keep = |tensor| {
            let tensor = inner::<B, C>(tensor);
            if offload {
                Stored::to_host(tensor)
            } else {
                Stored::Device(tensor)
            }
        };
        let stored = std::mem::take(&mut spec.stored)
            .into_iter()
            .map(|(t, carry)| (t, carry.into_iter().map(keep).collect()))
            .collect();
        Arc::new(ScanState {
            spec,
            stored: Mutex::new(stored),
        })
    }
}

/// A dispatch tensor of `Autodiff<B, C>` as the backend's tensor (untracked: its value).
fn inner<B: Backend, C: CheckpointStrategy>(tensor: DispatchTensor) -> FloatTensor<B>
where
    DispatchTensor: DispatchKindConversion<Autodiff<B, C>>,
{
    from_dispatch::<Autodiff<B, C>>(tensor).into_primitive()
}

/// The backend's tensor as an untracked dispatch tensor of `Autodiff<B, C>`.
fn outer<B: Backend, C: CheckpointStrategy>(tensor: FloatTensor<B>) -> DispatchTensor
where
    DispatchTensor: DispatchKindConversion<Autodiff<B, C>>,
{
    to_dispatch::<Autodiff<B, C>>(Autodiff::<B, C>::from_inner(tensor))
}

/// A leaf of `tensor`, wanting a gradient if `wanted`.
fn leaf<B: Backend, C: CheckpointStrategy>(
    tensor: FloatTensor<B>,
    wanted: bool,
) -> FloatTensor<Autodiff<B, C>> {
    let leaf = Autodiff::<B, C>::from_inner(tensor);
    if wanted {
        Autodiff::<B, C>::float_set_require_grad(leaf, true)
    } else {
        leaf
    }
}

/// The scan's backward: the gradient of each of its node's tensors (initial carry, stacked
/// inputs, parameters) for the given output gradients (stacked outputs, last carry), `None`
/// where a tensor wants none or gets none.
pub(super) fn differentiate<B: Backend, C: CheckpointStrategy>(
    tensors: Vec<FloatTensor<B>>,
    wanted: &[bool],
    output_shapes: &[burn::tensor::Shape],
    scan: &ScanState<B>,
    slot: Option<usize>,
    output_grads: Vec<Option<FloatTensor<B>>>,
) -> Vec<Option<FloatTensor<B>>>
where
    DispatchTensor: DispatchKindConversion<Autodiff<B, C>>,
{
    type Ad<B, C> = Autodiff<B, C>;
    let spec = &scan.spec;
    let (carry_len, input_len, output_len) = (spec.carry_len, spec.input_len, spec.output_len);
    let mut tensors = tensors;
    let params = tensors.split_off(carry_len + input_len);
    let sequence = tensors.split_off(carry_len);
    let initial = tensors;
    let param_wanted = &wanted[carry_len + input_len..];
    let inputs_wanted = wanted[carry_len..carry_len + input_len].iter().any(|&w| w);
    let first = initial
        .first()
        .or(sequence.first())
        .expect("a scan has a tensor in its carry or its sequence");
    let (device, dtype) = (first.device(), first.dtype());

    // The stacked outputs' gradients (zeros where the loss does not reach one: such an output
    // gets no gradient in any step), and which outputs have one.
    let mut output_grads = output_grads;
    let mut carry_grads: Vec<Option<FloatTensor<B>>> = output_grads.split_off(output_len);
    let reached: Vec<bool> = output_grads.iter().map(Option::is_some).collect();
    let stacked_grads: Vec<DispatchTensor> = output_grads
        .into_iter()
        .zip(output_shapes)
        .map(|(grad, shape)| {
            outer::<B, C>(
                grad.unwrap_or_else(|| B::float_zeros(shape.clone(), &device, dtype.into())),
            )
        })
        .collect();
    let sequence: Vec<DispatchTensor> = sequence.into_iter().map(outer::<B, C>).collect();

    let mut stored = std::mem::take(&mut *scan.stored.lock().unwrap_or_else(|e| e.into_inner()));
    stored.insert(0, initial.into_iter().map(Stored::Device).collect());
    let steps = spec.plan.steps();
    let mut current: Vec<FloatTensor<B>> = Vec::new();
    let mut input_grads: Vec<Option<Vec<FloatTensor<B>>>> = (0..steps).map(|_| None).collect();
    let mut param_grads: Vec<Option<FloatTensor<B>>> = params.iter().map(|_| None).collect();
    for action in spec.plan.backward() {
        match *action {
            ScanAction::Restore(t) => {
                current = stored
                    .get(&t)
                    .expect("a scan's plan restores a carry it stored")
                    .iter()
                    .map(Stored::load)
                    .collect();
            }
            ScanAction::Store(t) => {
                stored.insert(t, current.iter().cloned().map(Stored::Device).collect());
            }
            ScanAction::Drop(t) => {
                stored.remove(&t);
            }
            ScanAction::Advance(t) => {
                let mut step_inputs: Vec<DispatchTensor> =
                    current.drain(..).map(outer::<B, C>).collect();
                step_inputs.extend((spec.inputs.0)(sequence.clone(), t));
                step_inputs.extend(params.iter().cloned().map(outer::<B, C>));
                let outputs = run_step(spec, slot, t, step_inputs);
                current = outputs
                    .into_iter()
                    .skip(output_len)
                    .map(inner::<B, C>)
                    .collect();
            }
            ScanAction::Differentiate(t) => {
                let carry_leaves: Vec<FloatTensor<Ad<B, C>>> = current
                    .drain(..)
                    .enumerate()
                    .map(|(index, c)| leaf::<B, C>(c, t > 0 || wanted[index]))
                    .collect();
                let input_leaves: Vec<FloatTensor<Ad<B, C>>> = (spec.inputs.0)(sequence.clone(), t)
                    .into_iter()
                    .map(|x| leaf::<B, C>(inner::<B, C>(x), inputs_wanted))
                    .collect();
                let param_leaves: Vec<FloatTensor<Ad<B, C>>> = params
                    .iter()
                    .zip(param_wanted)
                    .map(|(p, &w)| leaf::<B, C>(p.clone(), w))
                    .collect();
                let step_inputs = carry_leaves
                    .iter()
                    .chain(&input_leaves)
                    .chain(&param_leaves)
                    .cloned()
                    .map(to_dispatch::<Ad<B, C>>)
                    .collect();
                let outputs = run_step(spec, slot, t, step_inputs);
                // The step's slices of the outputs' gradients; none to cut where the loss
                // reached no output (a sequential's segments give none).
                let output_step_grads: Vec<Option<FloatTensor<B>>> = if reached.contains(&true) {
                    (spec.outputs.0)(stacked_grads.clone(), t)
                        .into_iter()
                        .zip(&reached)
                        .map(|(grad, &reached)| reached.then(|| inner::<B, C>(grad)))
                        .collect()
                } else {
                    reached.iter().map(|_| None).collect()
                };
                let step_grads = output_step_grads.into_iter().chain(carry_grads.drain(..));
                let Some(nested) = nested_backward::<B, C>(outputs, step_grads) else {
                    carry_grads = carry_leaves.iter().map(|_| None).collect();
                    continue;
                };
                carry_grads = carry_leaves
                    .iter()
                    .map(|leaf| Ad::<B, C>::grad(leaf, &nested))
                    .collect();
                if inputs_wanted {
                    input_grads[t] = Some(
                        input_leaves
                            .iter()
                            .map(|leaf| {
                                Ad::<B, C>::grad(leaf, &nested).unwrap_or_else(|| {
                                    let value = leaf.primitive();
                                    B::float_zeros(value.shape(), &device, value.dtype().into())
                                })
                            })
                            .collect(),
                    );
                }
                for (sum, leaf) in param_grads.iter_mut().zip(&param_leaves) {
                    if let Some(term) = Ad::<B, C>::grad(leaf, &nested) {
                        *sum = Some(match sum.take() {
                            None => term,
                            Some(sum) => B::float_add(sum, term),
                        });
                    }
                }
            }
        }
    }

    let mut grads: Vec<Option<FloatTensor<B>>> = carry_grads
        .into_iter()
        .zip(wanted)
        .map(|(grad, &wanted)| grad.filter(|_| wanted))
        .collect();
    grads.extend(stacked_input_grads::<B, C>(
        spec,
        &sequence,
        input_grads,
        inputs_wanted,
    ));
    grads.extend(
        param_grads
            .into_iter()
            .zip(param_wanted)
            .map(|(grad, &wanted)| grad.filter(|_| wanted)),
    );
    grads
}

/// Step `t` run again in backward on `inputs`, timed for the memory report as a recompute of the
/// scan's region (`slot`) while one is recorded, and checked.
fn run_step(
    spec: &ScanSpec,
    slot: Option<usize>,
    t: usize,
    inputs: Vec<DispatchTensor>,
) -> Vec<DispatchTensor> {
    let run = || (spec.step.0)(t, inputs);
    let outputs = match slot {
        Some(slot) => recording::recompute(slot, run, |outputs: &Vec<DispatchTensor>| {
            outputs
                .iter()
                .map(|o| (o.shape().num_elements() * o.dtype().size()) as u64)
                .sum()
        }),
        None => run(),
    };
    check_step(spec, t, &outputs);
    outputs
}

/// A step run again in backward gives as many tensors as in forward: a cell whose path depends
/// on something besides its carry, input and module is stopped here with a message.
fn check_step(spec: &ScanSpec, t: usize, outputs: &[DispatchTensor]) {
    let expected = spec.output_len + spec.carry_len;
    assert_eq!(
        outputs.len(),
        expected,
        "a checkpoint scan's step {t}, run again in backward, gave {} tensors, its forward \
         {expected}: the cell must depend on its carry, its input and its module only",
        outputs.len()
    );
}

/// The stacked inputs' gradients from the steps' (zeros for a step the loss did not reach), each
/// `+ 0.0` when there are several steps: plain autodiff adds the steps' slices of zeros, which
/// turns a `-0.0` into `0.0`, and this gives the same bits.
fn stacked_input_grads<B: Backend, C: CheckpointStrategy>(
    spec: &ScanSpec,
    sequence: &[DispatchTensor],
    input_grads: Vec<Option<Vec<FloatTensor<B>>>>,
    wanted: bool,
) -> Vec<Option<FloatTensor<B>>>
where
    DispatchTensor: DispatchKindConversion<Autodiff<B, C>>,
{
    if !wanted || input_grads.iter().all(Option::is_none) {
        return sequence.iter().map(|_| None).collect();
    }
    let steps = input_grads.len();
    let per_step = input_grads
        .into_iter()
        .enumerate()
        .map(|(t, grads)| match grads {
            Some(grads) => grads.into_iter().map(outer::<B, C>).collect(),
            None => (spec.inputs.0)(sequence.to_vec(), t)
                .into_iter()
                .map(|x| {
                    let x = inner::<B, C>(x);
                    outer::<B, C>(B::float_zeros(x.shape(), &x.device(), x.dtype().into()))
                })
                .collect(),
        })
        .collect();
    (spec.stack_inputs.0)(per_step)
        .into_iter()
        .map(|grad| {
            let grad = inner::<B, C>(grad);
            Some(if steps > 1 {
                B::float_add_scalar(grad, 0.0.into())
            } else {
                grad
            })
        })
        .collect()
}
