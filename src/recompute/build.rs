//! How a region op becomes a node of Burn's autodiff graph: [`RegionOp`], the trait every op
//! family implements, and [`build`], the plumbing every op shares (see `walk.rs` for why the
//! recompute is ours and how it walks).
//!
//! A region op is a **compute-bound** node of Burn's graph (Burn never recomputes it, and never
//! walks through it) whose backward state says how to get each input it reads back
//! ([`Operand`]): recomputed from its recipe, retrieved from Burn's checkpointer, held as it is,
//! or uploaded from a host copy.

use core::fmt;
use std::sync::Arc;

use burn_autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn_autodiff::ops::{Backward, OpsKind};
use burn_backend::Backend;
use burn_backend::backend::AutodiffBackend;

use super::check;
use super::operand::Operand;
use super::step::{RegionBackward, StepState};
use super::walk::{self, Forward, Recipe};
use crate::types::{Plain, Primitive, Tracked};
use burn_checkpoint_core::memory::recording;

/// An op rebuilt to be recomputed on backward, written against the inner backend `I` only.
///
/// `N` is the number of float operands (Burn's `Backward` has a compile-time parent count).
/// Non-float operands (options, masks, indices) live in the struct itself.
pub(crate) trait RegionOp<I: Backend, const N: usize>:
    fmt::Debug + Clone + Send + Sync + 'static
{
    /// The op's name, for debug output and reports.
    fn name(&self) -> &'static str;

    /// The op's output from its float operands.
    fn forward(&self, inputs: [Primitive<I>; N]) -> Primitive<I>;

    /// Which operands the backward reads, given which operands need a gradient.
    fn saved(&self, needs_grad: [bool; N]) -> [bool; N];

    /// The gradient of each operand that needs one. `inputs[i]` is `Some` where `saved` said so.
    fn backward(
        self,
        inputs: [Option<Primitive<I>>; N],
        grad: Primitive<I>,
        needs_grad: [bool; N],
    ) -> [Option<Primitive<I>>; N];
}

/// Builds `op` over `inputs` as a node recomputed in backward.
pub(crate) fn build<I, Op, const N: usize>(op: Op, inputs: [Tracked<I>; N]) -> Tracked<I>
where
    I: Backend,
    Op: RegionOp<I, N>,
{
    build_with::<I, _, _, _>(op, inputs, |op, prims| (op.forward(prims), ())).0
}

/// Like [`build`], with a forward that also yields something besides the output (the indices of
/// a max pool, say). `forward` must compute the same output as [`RegionOp::forward`].
pub(crate) fn build_with<I, Op, X, const N: usize>(
    op: Op,
    inputs: [Tracked<I>; N],
    forward: impl FnOnce(&Op, [Primitive<I>; N]) -> (Primitive<I>, X),
) -> (Tracked<I>, X)
where
    I: Backend,
    Op: RegionOp<I, N>,
{
    let needs_grad = inputs.each_ref().map(|t| t.is_tracked());
    if !needs_grad.contains(&true) {
        let (output, extra) = forward(&op, inputs.map(|t| t.primitive));
        return (Plain::<I>::from_inner(output), extra);
    }
    let saved = op.saved(needs_grad);
    let expected = check::Expected::new_if_verifying();
    let nodes = inputs.each_ref().map(|t| t.node.clone());
    // Compute-bound: Burn never recomputes this node nor walks through it; a Burn op that reads
    // it (an op without a region version) stores it, as it stores any compute-bound output.
    let prep = RegionBackward(op.clone())
        .prepare::<BalancedCheckpointing>(nodes)
        .compute_bound()
        .stateful();
    let OpsKind::Tracked(mut prep) = prep else {
        unreachable!("an op with a tracked operand is tracked")
    };
    let mut register = |tensor: &Tracked<I>| prep.checkpoint(tensor);
    let mut read = [const { None }; N];
    for (i, input) in inputs.iter().enumerate() {
        if saved[i] {
            read[i] = Some(Operand::of(input, &mut register));
        }
    }
    let operands = inputs
        .iter()
        .map(|input| Operand::of(input, &mut register))
        .collect();
    let recipe = Recipe::new(
        Box::new(Forward::<Op, N>(op.clone())),
        operands,
        expected.clone(),
        recording::current_region(),
    );
    let state = StepState::new(read, Arc::clone(&recipe));
    // Keep the operands' nodes referenced until this node is registered: burn-autodiff frees a
    // graph none of whose nodes is referenced, from any thread's backward, and an operand may
    // still be alone in its graph until `finish` links it to this node.
    let referenced = inputs.each_ref().map(|t| t.rc.clone());
    // Move the primitives in last: an input nothing else holds may then be reused in place.
    let (output, extra) = forward(&op, inputs.map(|t| t.primitive));
    if let Some(expected) = expected {
        expected.set::<I>(&output);
    }
    let output = prep.finish(state, output);
    walk::remember(&output, &recipe);
    drop(referenced);
    (output, extra)
}

/// Gradient of a broadcast operand: summed over the dimensions it was broadcast along (Burn's
/// own rule, so that gradients stay bitwise equal).
pub(crate) fn unbroadcast<I: Backend>(
    grad: Primitive<I>,
    shape: &burn_backend::Shape,
) -> Primitive<I> {
    burn_autodiff::ops::broadcast_shape::<I>(grad, shape)
}
