//! A recompute's nested backward ([`nested_backward`]): each output given the gradient backward
//! brought to the region, for a region node's recompute and a scan's steps alike; the leaves it
//! differentiates for ([`leaf`]), and the bytes a recompute gives ([`bytes_of`]).

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::ops::FloatTensorOps;
use burn::backend::tensor::FloatTensor;
use burn::backend::{
    Autodiff, AutodiffBackend, Backend, DispatchKindConversion, DispatchTensor, TensorMetadata,
};

use burn_checkpoint_core::engine::recording;

use crate::convert::from_dispatch;

use super::join::placeholder;

/// The node a recompute's nested backward starts from, one per output: its own gradient (a
/// one-element placeholder, as is its value) is dropped and the output gets `grad`, the gradient
/// backward brought to the region, as it is. The objective Σ⟨output, grad⟩ gives the same bits
/// for three more passes over every output (its product, its sum, their backward).
#[derive(Debug)]
struct OutputGradient;

impl<B: Backend> Backward<B, 1> for OutputGradient {
    type State = FloatTensor<B>;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let _ = grads.consume::<B>(&ops.node);
        if let [Some(parent)] = ops.parents {
            grads.register::<B>(parent.id, ops.state);
        }
    }
}

/// A one-element placeholder whose backward gives `output` the gradient `grad` (see
/// [`OutputGradient`]).
fn giving_gradient<B: Backend, C: CheckpointStrategy>(
    output: FloatTensor<Autodiff<B, C>>,
    grad: FloatTensor<B>,
) -> FloatTensor<Autodiff<B, C>> {
    let (device, dtype) = (output.primitive().device(), output.primitive().dtype());
    let value = placeholder::<B>(&device, dtype);
    match OutputGradient
        .prepare::<C>([output.node()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish(grad, value),
        OpsKind::UnTracked(prep) => prep.finish(value),
    }
}

/// The nested backward that gives each of `outputs` (the body's, run again on fresh leaves) its
/// gradient from `grads`, in order: one objective, the sum of an [`OutputGradient`] term per
/// output that has a gradient and depends on a tracked tensor. `None` when no output has one to
/// give (an output the loss does not reach takes no part, as in plain autodiff: a zero gradient
/// would not do, 0 × ∞ is NaN).
pub(super) fn nested_backward<B: Backend, C: CheckpointStrategy>(
    outputs: Vec<DispatchTensor>,
    grads: impl IntoIterator<Item = Option<FloatTensor<B>>>,
) -> Option<Gradients>
where
    DispatchTensor: DispatchKindConversion<Autodiff<B, C>>,
{
    type Ad<B, C> = Autodiff<B, C>;
    let mut objective: Option<FloatTensor<Ad<B, C>>> = None;
    for (output, grad) in outputs.into_iter().zip(grads) {
        let output = from_dispatch::<Ad<B, C>>(output);
        // An output that depends on no tracked tensor has no gradient to give.
        let Some(grad) = grad.filter(|_| output.is_tracked()) else {
            continue;
        };
        let term = giving_gradient::<B, C>(output, grad);
        objective = Some(match objective {
            None => term,
            Some(sum) => Ad::<B, C>::float_add(sum, term),
        });
    }
    objective.map(Ad::<B, C>::backward)
}

/// A leaf of `tensor`, wanting a gradient if `wanted`.
pub(super) fn leaf<B: Backend, C: CheckpointStrategy>(
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

/// The bytes of `tensors`' values (what the memory report counts a recompute as giving).
pub(super) fn bytes_of(tensors: &[DispatchTensor]) -> u64 {
    tensors
        .iter()
        .map(|t| (t.shape().num_elements() * t.dtype().size()) as u64)
        .sum()
}

/// `run`, a recompute of the region in `slot` of the memory report being recorded (none: no
/// report), timed there and counted as giving `bytes` of its result.
pub(super) fn recomputing_in<T>(
    slot: Option<usize>,
    run: impl FnOnce() -> T,
    bytes: impl FnOnce(&T) -> u64,
) -> T {
    match slot {
        Some(slot) => recording::recompute(slot, run, bytes),
        None => run(),
    }
}
