//! Region versions of ops Burn always stores: each is built as a memory-bound node of Burn's own
//! autodiff graph, with a [`RetroForward`] that recomputes its output when a backward step asks
//! for it.
//!
//! An op is a small struct implementing [`RegionOp`]: its forward and backward on the inner
//! backend, and which inputs the backward reads. [`build`] does all the graph plumbing, the same
//! way for every op:
//! - the node is `memory_bound` with a [`Retro`] that holds how to get each operand back: the id
//!   of a tracked operand (recomputed or stored by the checkpointer), or the primitive itself of an
//!   untracked one (a constant, a dropout mask: a cheap handle clone, no copy);
//! - only tracked operands are handed to `.parents()`, since Burn's `BalancedCheckpointing` turns
//!   an op with an untracked parent compute-bound;
//! - the backward state is the ids of the inputs the backward reads, retrieved through the
//!   [`Checkpointer`], so nothing computed inside the region is held from forward to backward.

mod cast;
mod check;
mod conv;
mod cross;
mod cumulative;
mod deform_conv;
mod elementwise;
mod indexing;
mod interpolate;
mod matmul;
mod pool;
mod reduce;
mod select;
mod slice;
mod sort;
mod transfer;
mod unfold;

pub(crate) use cast::cast;
pub use check::verify_recomputes;
pub(crate) use conv::{
    conv_transpose1d, conv_transpose2d, conv_transpose3d, conv1d, conv2d, conv3d,
};
pub(crate) use cross::cross;
pub(crate) use cumulative::{cummax, cummin, cumprod, cumsum};
pub(crate) use deform_conv::deform_conv2d;
pub(crate) use elementwise::{add, div, mul, sub};
pub(crate) use indexing::{embedding, gather_nd, scatter_add, scatter_nd};
pub(crate) use interpolate::interpolate;
pub(crate) use matmul::{linear, matmul};
pub(crate) use pool::{
    adaptive_avg_pool1d, adaptive_avg_pool2d, avg_pool1d, avg_pool2d, max_pool1d,
    max_pool1d_with_indices, max_pool2d, max_pool2d_with_indices,
};
pub(crate) use reduce::{
    max_dim, max_dim_with_indices, mean, mean_dim, min_dim, min_dim_with_indices, sum, sum_dim,
};
pub(crate) use select::{cat, gather, mask_fill, mask_where};
pub(crate) use slice::slice_assign;
pub(crate) use sort::{sort, sort_with_indices};
pub(crate) use transfer::to_device;
pub(crate) use unfold::unfold;

use core::fmt;

use burn_autodiff::NodeId;
use burn_autodiff::checkpoint::base::Checkpointer;
use burn_autodiff::checkpoint::retro_forward::RetroForward;
use burn_autodiff::checkpoint::state::BackwardStates;
use burn_autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn_autodiff::grads::Gradients;
use burn_autodiff::ops::{Backward, Ops, OpsKind};
use burn_backend::Backend;
use burn_backend::backend::AutodiffBackend;

use crate::backend::{Plain, Primitive, Tracked};

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

/// Builds `op` over `inputs` as a recomputed node.
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
    let forward_op = op.clone();
    let expected = check::Expected::new_if_verifying();
    let retro = Retro::<I, Op, N> {
        op: op.clone(),
        operands: inputs.each_ref().map(Operand::<I>::of),
        expected: expected.clone(),
    };
    let nodes = inputs.each_ref().map(|t| t.node.clone());
    let prep = RegionBackward(op)
        .prepare::<BalancedCheckpointing>(nodes)
        .memory_bound()
        .retro_forward(retro)
        .parents(inputs.iter().filter(|t| t.is_tracked()))
        .stateful();
    let OpsKind::Tracked(mut prep) = prep else {
        unreachable!("an op with a tracked operand is tracked")
    };
    let mut state = [None; N];
    for (i, input) in inputs.iter().enumerate() {
        if saved[i] {
            state[i] = Some(prep.checkpoint(input));
        }
    }
    // Keep the operands' nodes referenced until this node is registered: burn-autodiff frees a
    // graph none of whose nodes is referenced, from any thread's backward, and an operand may
    // still be alone in its graph until `finish` links it to this node.
    let referenced = inputs.each_ref().map(|t| t.rc.clone());
    // Move the primitives in last: an input nothing else holds may then be reused in place.
    let (output, extra) = forward(&forward_op, inputs.map(|t| t.primitive));
    if let Some(expected) = expected {
        expected.set::<I>(&output);
    }
    let output = prep.finish(state, output);
    drop(referenced);
    (output, extra)
}

/// Identity node that is compute-bound: what it outputs is stored, not recomputed. The decorator
/// puts one between a region's output and a consumer outside the region, so that backward
/// recomputes one region at a time from stored boundaries. Shares the primitive: no copy.
pub(crate) fn materialize<I: Backend>(tensor: Tracked<I>) -> Tracked<I> {
    if !tensor.is_tracked() {
        return tensor;
    }
    Materialize
        .prepare::<BalancedCheckpointing>([tensor.node.clone()])
        .compute_bound()
        .stateless(tensor.primitive)
}

#[derive(Debug)]
struct Materialize;

impl<I: Backend> Backward<I, 1> for Materialize {
    type State = ();

    fn backward(self, ops: Ops<(), 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        burn_autodiff::ops::unary::<I, _>(ops.parents, ops.node, grads, |grad| grad);
    }
}

/// How a recompute gets an operand back.
enum Operand<I: Backend> {
    /// A tracked operand: the checkpointer recomputes or hands out its stored output.
    Node(NodeId),
    /// An untracked operand, held as it is (a handle clone).
    Const(Primitive<I>),
}

impl<I: Backend> Operand<I> {
    fn of(tensor: &Tracked<I>) -> Self {
        if tensor.is_tracked() {
            Operand::Node(tensor.node.id)
        } else {
            Operand::Const(tensor.primitive.clone())
        }
    }

    fn get(&self, states: &mut BackwardStates) -> Primitive<I> {
        match self {
            Operand::Node(id) => states.get_state::<Primitive<I>>(id),
            Operand::Const(primitive) => primitive.clone(),
        }
    }
}

impl<I: Backend> fmt::Debug for Operand<I> {
    // Hand-written: a derived Debug would print the held tensor.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::Node(id) => write!(f, "{id}"),
            Operand::Const(_) => f.write_str("Const"),
        }
    }
}

/// The recompute of a region op's output during backward.
struct Retro<I: Backend, Op, const N: usize> {
    op: Op,
    operands: [Operand<I>; N],
    /// The forward output's shape and dtype, when recomputes are verified.
    expected: Option<check::Expected>,
}

impl<I: Backend, Op: RegionOp<I, N>, const N: usize> fmt::Debug for Retro<I, Op, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Retro({}, {:?})", self.op.name(), self.operands)
    }
}

impl<I: Backend, Op: RegionOp<I, N>, const N: usize> RetroForward for Retro<I, Op, N> {
    fn forward(&self, states: &mut BackwardStates, out_node: NodeId) {
        crate::coverage::note_recompute(self.op.name());
        let inputs = self.operands.each_ref().map(|operand| operand.get(states));
        let output = self.op.forward(inputs);
        if let Some(expected) = &self.expected {
            expected.verify::<I>(self.op.name(), &output);
        }
        states.save(out_node, output);
    }
}

/// The backward step of a region op: reads its saved inputs through the checkpointer.
#[derive(Debug)]
struct RegionBackward<Op>(Op);

impl<I: Backend, Op: RegionOp<I, N>, const N: usize> Backward<I, N> for RegionBackward<Op> {
    type State = [Option<NodeId>; N];

    fn backward(
        self,
        ops: Ops<Self::State, N>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let grad = grads.consume::<I>(&ops.node);
        let inputs = ops
            .state
            .map(|id| id.map(|id| checkpointer.retrieve_node_output::<Primitive<I>>(id)));
        let needs_grad = ops.parents.each_ref().map(Option::is_some);
        let input_grads = self.0.backward(inputs, grad, needs_grad);
        for (parent, input_grad) in ops.parents.into_iter().zip(input_grads) {
            if let (Some(parent), Some(input_grad)) = (parent, input_grad) {
                grads.register::<I>(parent.id, input_grad);
            }
        }
    }
}

/// Gradient of a broadcast operand: summed over the dimensions it was broadcast along (Burn's
/// own rule, so that gradients stay bitwise equal).
pub(crate) fn unbroadcast<I: Backend>(
    grad: Primitive<I>,
    shape: &burn_backend::Shape,
) -> Primitive<I> {
    burn_autodiff::ops::broadcast_shape::<I>(grad, shape)
}
