//! The joins: the nodes whose parents are a region's tensors, handing each its gradient from
//! the region's stash (see the folder's documentation), and what they share with the region's
//! other nodes: the stash, the tensors' metadata, the placeholder gradient.

use std::fmt;
use std::sync::{Arc, Mutex};

use burn::backend::autodiff::NodeId;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, NodeGuard, Ops, OpsKind};
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, TensorMetadata};
use burn::tensor::{DType, Shape};

/// What a join must know of one of the region's tensors to give it a stand-in gradient.
#[derive(Debug, Clone)]
pub(super) struct TensorMeta {
    pub(super) shape: Shape,
    pub(super) dtype: DType,
    /// Whether another region's node made it (a pick, or a region node with one output).
    pub(super) region_output: bool,
}

impl TensorMeta {
    /// What a parent that must get a gradient gets when the body gave it none: a one-element
    /// stand-in that its region node reads as "no gradient", or zeros of its shape for Burn's
    /// own nodes.
    fn no_gradient<B: Backend>(&self, device: &B::Device) -> FloatTensor<B> {
        let shape = if self.region_output {
            Shape::new_raw(vec![1; self.shape.num_dims()].into())
        } else {
            self.shape.clone()
        };
        B::float_zeros(shape, device, self.dtype.into())
    }
}

/// Gradients handed from one graph node to others during one backward pass.
pub(super) struct Stash<B: Backend>(Mutex<Vec<Option<FloatTensor<B>>>>);

impl<B: Backend> Stash<B> {
    pub(super) fn new(len: usize) -> Arc<Self> {
        Arc::new(Self(Mutex::new((0..len).map(|_| None).collect())))
    }

    pub(super) fn put(&self, index: usize, grad: FloatTensor<B>) {
        self.0.lock().unwrap_or_else(|e| e.into_inner())[index] = Some(grad);
    }

    pub(super) fn take(&self, index: usize) -> Option<FloatTensor<B>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())[index].take()
    }
}

impl<B: Backend> fmt::Debug for Stash<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Stash")
    }
}

/// What a join's parent is: one of the region's tensors, or the previous join.
#[derive(Debug, Clone, Copy)]
pub(super) enum Slot {
    Tensor(usize),
    Join,
}

#[derive(Debug)]
struct Join;

/// A join's backward state: where the gradients are, which tensor (or join) each parent is, and
/// what the tensors are.
type JoinState<B, const N: usize> = (
    Arc<Stash<B>>,
    [Slot; N],
    Arc<Vec<TensorMeta>>,
    <B as burn::backend::BackendTypes>::Device,
    DType,
);

impl<B: Backend, const N: usize> Backward<B, N> for Join {
    type State = JoinState<B, N>;

    fn backward(self, ops: Ops<Self::State, N>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (stash, slots, metas, device, dtype) = ops.state;
        // A join's own gradient is a placeholder: the region put the real ones in the stash.
        let _ = grads.consume::<B>(&ops.node);
        let parents = ops
            .parents
            .map(|p| p.map(|p| Parent::new(p.id, p.order, p.distributed_params.is_some())));
        hand_down_each::<B>(grads, parents, &slots, &stash, &metas, &device, dtype);
    }
}

impl<B: Backend, C: CheckpointStrategy> AnyParents<B, C> for Join {
    type State = JoinShared<B>;

    fn finish<const N: usize>(
        self,
        nodes: [NodeGuard; N],
        slots: [Slot; N],
        (stash, metas, device, dtype): JoinShared<B>,
        out: FloatTensor<B>,
    ) -> FloatTensor<Autodiff<B, C>> {
        match self.prepare::<C>(nodes).compute_bound().stateful() {
            OpsKind::Tracked(prep) => prep.finish((stash, slots, metas, device, dtype), out),
            OpsKind::UnTracked(prep) => prep.finish(out),
        }
    }
}

/// Gives each of a node's parents (the region's tensors or a join, as `slots` says; `None` for
/// an untracked one) its gradient, in the parents' order.
pub(super) fn hand_down_each<B: Backend>(
    grads: &mut Gradients,
    parents: impl IntoIterator<Item = Option<Parent>>,
    slots: &[Slot],
    stash: &Stash<B>,
    metas: &[TensorMeta],
    device: &B::Device,
    dtype: DType,
) {
    for (parent, &slot) in parents.into_iter().zip(slots) {
        if let Some(parent) = parent {
            hand_down::<B>(grads, parent, slot, stash, metas, device, dtype);
        }
    }
}

/// A parent of one of the region's nodes, as backward sees it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Parent {
    pub(super) id: NodeId,
    /// Whether Burn needs a gradient registered for it whatever the body gave.
    pub(super) owed: bool,
}

impl Parent {
    /// The parent `id` at depth `order`, a parameter under Burn's data parallelism or not.
    ///
    /// It must get a gradient registered even when the body gave it none where it is a tensor
    /// computed by another node (its step consumes its gradient unconditionally), or a parameter
    /// under Burn's data parallelism (its all-reduce waits for it). A plain leaf need not: it has
    /// no gradient, as in plain autodiff.
    pub(super) fn new(id: NodeId, order: usize, distributed: bool) -> Self {
        Self {
            id,
            owed: order != 0 || distributed,
        }
    }
}

/// Gives the parent in `slot` its gradient: a region tensor's from the stash (or, if the region
/// gave it none and Burn needs one, a stand-in), a join's a placeholder.
pub(super) fn hand_down<B: Backend>(
    grads: &mut Gradients,
    parent: Parent,
    slot: Slot,
    stash: &Stash<B>,
    metas: &[TensorMeta],
    device: &B::Device,
    dtype: DType,
) {
    let grad = match slot {
        Slot::Tensor(index) => stash
            .take(index)
            .or_else(|| parent.owed.then(|| metas[index].no_gradient::<B>(device))),
        Slot::Join => Some(placeholder::<B>(device, dtype)),
    };
    if let Some(grad) = grad {
        grads.register::<B>(parent.id, grad);
    }
}

/// A one-element tensor standing for a gradient that is never read.
pub(super) fn placeholder<B: Backend>(device: &B::Device, dtype: DType) -> FloatTensor<B> {
    B::float_zeros(Shape::new([1]), device, dtype.into())
}

/// The most parents one node of a region has: a region over more tensors has joins below its
/// node, each over up to this many.
pub(super) const JOIN_WIDTH: usize = 32;

/// The region node's parents: the region's tensors themselves where there are at most `width`
/// of them; else joins, each over up to [`JOIN_WIDTH`] consecutive tensors (and, over more than
/// `width` joins, joins of joins); each with which tensor (or join) it is.
///
/// A tensor gets its gradient from the node that is its parent, one depth below the deepest of
/// that node's parents, as from the op of plain autodiff that reads them all (a `cat`): Burn runs
/// a backward depth by depth, a node one deeper than its deepest parent, and within one depth in
/// the order of its graph walk. A chain of two-parent joins put the first joins at the depth of
/// other consumers of their tensors, which then got their gradient's terms in another order than
/// in plain autodiff, and a sum differing in its last bits (DenseNet-BC, where each layer's output
/// goes to every later layer of its block). Over more than `width` tensors, every tensor is a
/// join's parent, so that tensors of one depth get their gradients at one depth (a region node
/// with both tensors and a join as parents sits one deeper than them).
///
/// A region node that is its tensors' own child (rather than a join's) is one graph entry
/// instead of two: every nested backward's sweep of the graph is that much shorter.
pub(super) fn join_down<B: Backend, C: CheckpointStrategy>(
    tensors: Vec<FloatTensor<Autodiff<B, C>>>,
    width: usize,
    stash: &Arc<Stash<B>>,
    metas: &Arc<Vec<TensorMeta>>,
) -> Vec<(FloatTensor<Autodiff<B, C>>, Slot)> {
    assert!(
        (1..=JOIN_WIDTH).contains(&width),
        "1 to {JOIN_WIDTH} parents"
    );
    let mut parents: Vec<_> = tensors
        .into_iter()
        .enumerate()
        .map(|(index, tensor)| (tensor, Slot::Tensor(index)))
        .collect();
    while parents.len() > width {
        // As many joins as it takes, their sizes as even as they go.
        let joins = parents.len().div_ceil(JOIN_WIDTH);
        let mut rest = parents.into_iter();
        parents = (0..joins)
            .map(|k| {
                let size = rest.len().div_ceil(joins - k);
                let group: Vec<_> = rest.by_ref().take(size).collect();
                (join_over::<B, C>(group, stash, metas), Slot::Join)
            })
            .collect();
    }
    parents
}

/// One join over `group` (2 to [`JOIN_WIDTH`] tensors or joins).
fn join_over<B: Backend, C: CheckpointStrategy>(
    group: Vec<(FloatTensor<Autodiff<B, C>>, Slot)>,
    stash: &Arc<Stash<B>>,
    metas: &Arc<Vec<TensorMeta>>,
) -> FloatTensor<Autodiff<B, C>> {
    let (device, dtype) = (
        group[0].0.primitive().device(),
        group[0].0.primitive().dtype(),
    );
    let (nodes, slots): (Vec<NodeGuard>, Vec<Slot>) = group
        .iter()
        .map(|(tensor, slot)| (tensor.node(), *slot))
        .unzip();
    let out = placeholder::<B>(&device, dtype);
    finish_over::<B, C, _>(
        Join,
        nodes,
        slots,
        (stash.clone(), metas.clone(), device, dtype),
        out,
    )
}

/// What every join of a region shares: where the gradients are, what the tensors are, and where
/// they live.
type JoinShared<B> = (
    Arc<Stash<B>>,
    Arc<Vec<TensorMeta>>,
    <B as burn::backend::BackendTypes>::Device,
    DType,
);

/// A node of a region that takes any number of parents (1 to [`JOIN_WIDTH`]): Burn's ops take
/// their parents as an array of a size known when compiling, so each size is its own instance,
/// which [`finish_over`] picks.
pub(super) trait AnyParents<B: Backend, C: CheckpointStrategy> {
    /// The node's state besides its parents' slots.
    type State;

    /// The node over `nodes`, which are the tensors (or joins) `slots` says, giving `out`.
    fn finish<const N: usize>(
        self,
        nodes: [NodeGuard; N],
        slots: [Slot; N],
        state: Self::State,
        out: FloatTensor<B>,
    ) -> FloatTensor<Autodiff<B, C>>;
}

/// `op`'s node over `nodes` (1 to [`JOIN_WIDTH`]), built by its instance for that many.
pub(super) fn finish_over<B: Backend, C: CheckpointStrategy, O: AnyParents<B, C>>(
    op: O,
    nodes: Vec<NodeGuard>,
    slots: Vec<Slot>,
    state: O::State,
    out: FloatTensor<B>,
) -> FloatTensor<Autodiff<B, C>> {
    macro_rules! by_size {
        ($($n:literal)*) => {
            match nodes.len() {
                $($n => op.finish::<$n>(
                    nodes.try_into().unwrap_or_else(|_| unreachable!()),
                    slots.try_into().unwrap_or_else(|_| unreachable!()),
                    state,
                    out,
                ),)*
                n => unreachable!("a region node over {n} nodes (1 to {JOIN_WIDTH})"),
            }
        };
    }
    by_size!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32)
}
