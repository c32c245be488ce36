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
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::tensor::FloatTensor;
use burn::backend::{
    Autodiff, AutodiffBackend, Backend, DispatchKindConversion, DispatchTensor, TensorMetadata,
};
use burn_checkpoint_core::{ScanAction, ScanPlan};

use burn::tensor::Shape;

use crate::convert::{from_dispatch, to_dispatch};
use crate::offload::Stored;
use crate::recompute::Recompute;

use super::objective::{bytes_of, leaf, nested_backward, recomputing_in};

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
    /// A step as backward runs it again: its carry's tensors, then its input's, then the
    /// cell's parameters in; the step's output tensors out, then its carry's.
    pub(crate) step: Recompute,
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

/// A scan's backward: the gradient of each of its node's tensors (initial carry, stacked
/// inputs, parameters) for the given output gradients (stacked outputs, last carry), walking the
/// plan's actions, one method each (`None` where a tensor wants none or gets none).
pub(super) struct ScanBackward<'a, B: Backend, C> {
    spec: &'a ScanSpec,
    /// The scan's slot in the memory report being recorded, if any.
    slot: Option<usize>,
    /// Which of the node's tensors want a gradient.
    wanted: &'a [bool],
    /// The stacked sequence, as untracked dispatch tensors (each step's input cut from it).
    sequence: Vec<DispatchTensor>,
    params: Vec<FloatTensor<B>>,
    /// The carries stored, by the step they start (the initial one at 0).
    stored: HashMap<usize, Vec<Stored<B>>>,
    /// The carry the walk is at.
    current: Vec<FloatTensor<B>>,
    /// The stacked outputs' gradients (zeros where the loss does not reach an output), and
    /// whether it reaches each.
    stacked_grads: Vec<DispatchTensor>,
    reached: Vec<bool>,
    /// The gradient of the carry the step to differentiate next gave.
    carry_grads: Vec<Option<FloatTensor<B>>>,
    /// Each step's inputs' gradients, once differentiated.
    input_grads: Vec<Option<Vec<FloatTensor<B>>>>,
    /// Each parameter's gradient: its steps' terms summed, last step first.
    param_grads: Vec<Option<FloatTensor<B>>>,
    strategy: PhantomData<fn() -> C>,
}

impl<'a, B: Backend, C: CheckpointStrategy> ScanBackward<'a, B, C>
where
    DispatchTensor: DispatchKindConversion<Autodiff<B, C>>,
{
    /// The walk over the scan's node tensors (`tensors`, loaded), for the given output
    /// gradients; `output_shapes` are the node's outputs'.
    pub(super) fn new(
        scan: &'a ScanState<B>,
        mut tensors: Vec<FloatTensor<B>>,
        wanted: &'a [bool],
        slot: Option<usize>,
        output_shapes: &[Shape],
        mut output_grads: Vec<Option<FloatTensor<B>>>,
    ) -> Self {
        let spec = &scan.spec;
        let params = tensors.split_off(spec.carry_len + spec.input_len);
        let sequence = tensors.split_off(spec.carry_len);
        let first = (tensors.first().or(sequence.first()))
            .unwrap_or_else(|| unreachable!("a scan has a tensor in its carry or sequence"));
        let (device, dtype) = (first.device(), first.dtype());
        let sequence: Vec<DispatchTensor> = sequence.into_iter().map(outer::<B, C>).collect();
        let carry_grads = output_grads.split_off(spec.output_len);
        let reached = output_grads.iter().map(Option::is_some).collect();
        let stacked_grads = output_grads
            .into_iter()
            .zip(output_shapes)
            .map(|(grad, shape)| {
                let zeros = || B::float_zeros(shape.clone(), &device, dtype.into());
                outer::<B, C>(grad.unwrap_or_else(zeros))
            })
            .collect();
        let mut stored =
            std::mem::take(&mut *scan.stored.lock().unwrap_or_else(|e| e.into_inner()));
        stored.insert(0, tensors.into_iter().map(Stored::Device).collect());
        let steps = spec.plan.steps();
        ScanBackward {
            spec,
            slot,
            wanted,
            sequence,
            param_grads: params.iter().map(|_| None).collect(),
            params,
            stored,
            current: Vec::new(),
            stacked_grads,
            reached,
            carry_grads,
            input_grads: (0..steps).map(|_| None).collect(),
            strategy: PhantomData,
        }
    }

    /// Walks the plan's backward, then gives each tensor its gradient.
    pub(super) fn run(mut self) -> Vec<Option<FloatTensor<B>>> {
        for action in self.spec.plan.backward() {
            match *action {
                ScanAction::Restore(t) => self.restore(t),
                ScanAction::Store(t) => self.store(t),
                ScanAction::Drop(t) => drop(self.stored.remove(&t)),
                ScanAction::Advance(t) => self.advance(t),
                ScanAction::Differentiate(t) => self.differentiate(t),
            }
        }
        self.gradients()
    }

    /// The walk at the carry stored before step `t`.
    fn restore(&mut self, t: usize) {
        let stored = (self.stored.get(&t)).expect("a scan's plan restores a carry it stored");
        self.current = stored.iter().map(Stored::load).collect();
    }

    /// The carry the walk is at stored, as the one before step `t`.
    fn store(&mut self, t: usize) {
        let carry = self.current.iter().cloned().map(Stored::Device).collect();
        self.stored.insert(t, carry);
    }

    /// Step `t` run again without autodiff: the walk at the carry it gives.
    fn advance(&mut self, t: usize) {
        let mut inputs: Vec<DispatchTensor> = self.current.drain(..).map(outer::<B, C>).collect();
        inputs.extend((self.spec.inputs.0)(self.sequence.clone(), t));
        inputs.extend(self.params.iter().cloned().map(outer::<B, C>));
        let outputs = self.run_step(t, inputs);
        let carry = outputs.into_iter().skip(self.spec.output_len);
        self.current = carry.map(inner::<B, C>).collect();
    }

    /// Step `t` run again on leaves of its carry, input and the parameters, and differentiated
    /// for its output's slice of the outputs' gradients and the gradient its carry got from step
    /// `t + 1` (or the node's last carry): its carry's gradient passed on to step `t - 1`, its
    /// input's kept, the parameters' added to their sums.
    fn differentiate(&mut self, t: usize) {
        let spec = self.spec;
        let (carry_len, input_len) = (spec.carry_len, spec.input_len);
        let inputs_wanted = self.inputs_wanted();
        let carry_leaves: Vec<FloatTensor<Autodiff<B, C>>> = (self.current.drain(..))
            .enumerate()
            .map(|(index, c)| leaf::<B, C>(c, t > 0 || self.wanted[index]))
            .collect();
        let input_leaves: Vec<FloatTensor<Autodiff<B, C>>> =
            (spec.inputs.0)(self.sequence.clone(), t)
                .into_iter()
                .map(|x| leaf::<B, C>(inner::<B, C>(x), inputs_wanted))
                .collect();
        let param_wanted = &self.wanted[carry_len + input_len..];
        let param_leaves: Vec<FloatTensor<Autodiff<B, C>>> = (self.params.iter())
            .zip(param_wanted)
            .map(|(p, &wanted)| leaf::<B, C>(p.clone(), wanted))
            .collect();
        let leaves = carry_leaves
            .iter()
            .chain(&input_leaves)
            .chain(&param_leaves);
        let outputs = self.run_step(
            t,
            leaves.cloned().map(to_dispatch::<Autodiff<B, C>>).collect(),
        );
        let step_grads = self
            .output_step_grads(t)
            .into_iter()
            .chain(self.carry_grads.drain(..));
        let Some(nested) = nested_backward::<B, C>(outputs, step_grads) else {
            self.carry_grads = carry_leaves.iter().map(|_| None).collect();
            return;
        };
        let grad = |leaf: &FloatTensor<Autodiff<B, C>>| Autodiff::<B, C>::grad(leaf, &nested);
        self.carry_grads = carry_leaves.iter().map(grad).collect();
        if inputs_wanted {
            let or_zeros = |leaf: &FloatTensor<Autodiff<B, C>>| {
                grad(leaf).unwrap_or_else(|| zeros_like::<B>(leaf.primitive()))
            };
            self.input_grads[t] = Some(input_leaves.iter().map(or_zeros).collect());
        }
        for (sum, leaf) in self.param_grads.iter_mut().zip(&param_leaves) {
            if let Some(term) = grad(leaf) {
                *sum = Some(match sum.take() {
                    None => term,
                    Some(sum) => B::float_add(sum, term),
                });
            }
        }
    }

    /// Step `t`'s slices of the outputs' gradients; none to cut where the loss reached no
    /// output (a sequential's segments give none).
    fn output_step_grads(&self, t: usize) -> Vec<Option<FloatTensor<B>>> {
        if !self.reached.contains(&true) {
            return self.reached.iter().map(|_| None).collect();
        }
        (self.spec.outputs.0)(self.stacked_grads.clone(), t)
            .into_iter()
            .zip(&self.reached)
            .map(|(grad, &reached)| reached.then(|| inner::<B, C>(grad)))
            .collect()
    }

    /// Whether the stacked sequence wants a gradient.
    fn inputs_wanted(&self) -> bool {
        let (carry_len, input_len) = (self.spec.carry_len, self.spec.input_len);
        self.wanted[carry_len..carry_len + input_len].contains(&true)
    }

    /// Step `t` run again in backward on `inputs`, timed for the memory report as a recompute of
    /// the scan's region while one is recorded, and checked.
    fn run_step(&self, t: usize, inputs: Vec<DispatchTensor>) -> Vec<DispatchTensor> {
        let run = || self.spec.step.in_backward(t, inputs);
        let outputs = recomputing_in(self.slot, run, |outputs: &Vec<DispatchTensor>| {
            bytes_of(outputs)
        });
        check_step(self.spec, t, &outputs);
        outputs
    }

    /// The node's tensors' gradients: the initial carry's (what step 0 passed on), the stacked
    /// sequence's, the parameters' sums.
    fn gradients(self) -> Vec<Option<FloatTensor<B>>> {
        let inputs_wanted = self.inputs_wanted();
        let ScanBackward {
            spec,
            wanted,
            sequence,
            carry_grads,
            input_grads,
            param_grads,
            ..
        } = self;
        let param_wanted = &wanted[spec.carry_len + spec.input_len..];
        let wanted_only =
            |(grad, &wanted): (Option<FloatTensor<B>>, &bool)| grad.filter(|_| wanted);
        let mut grads: Vec<_> = carry_grads
            .into_iter()
            .zip(wanted)
            .map(wanted_only)
            .collect();
        grads.extend(stacked_input_grads::<B, C>(
            spec,
            &sequence,
            input_grads,
            inputs_wanted,
        ));
        grads.extend(param_grads.into_iter().zip(param_wanted).map(wanted_only));
        grads
    }
}

/// Zeros of `tensor`'s shape, device and dtype.
fn zeros_like<B: Backend>(tensor: &FloatTensor<B>) -> FloatTensor<B> {
    B::float_zeros(tensor.shape(), &tensor.device(), tensor.dtype().into())
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
                .map(|x| outer::<B, C>(zeros_like::<B>(&inner::<B, C>(x))))
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
