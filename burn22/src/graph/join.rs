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
        for (parent, slot) in ops.parents.into_iter().zip(slots) {
            if let Some(parent) = parent {
                let owed = owes_a_gradient(parent.order, parent.distributed_params.is_some());
                let to = Parent {
                    id: parent.id,
                    owed,
                };
                hand_down::<B>(grads, to, slot, &stash, &metas, &device, dtype);
            }
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

/// Whether a parent must get a gradient registered even when the body gave it none: a tensor
/// computed by another node (its step consumes its gradient unconditionally), or a parameter
/// under Burn's data parallelism (its all-reduce waits for it). A plain leaf need not: it has no
/// gradient, as in plain autodiff.
pub(super) fn owes_a_gradient(order: usize, distributed: bool) -> bool {
    order != 0 || distributed
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

/// The most parents one join has: a region over more tensors chains joins of this many.
const JOIN_WIDTH: usize = 32;

/// Joins the region's tensors into one node (or, over more than [`JOIN_WIDTH`] tensors, a chain
/// of joins); returns the last join (or the only tensor) and which of the two it is.
///
/// One node over all of them, as the op of plain autodiff that reads them all (a `cat`): Burn runs
/// a backward depth by depth, a node one deeper than its deepest parent, and within one depth in
/// the order of its graph walk. A chain of two-parent joins put the first joins at the depth of
/// other consumers of their tensors, which then got their gradient's terms in another order than
/// in plain autodiff, and a sum differing in its last bits (DenseNet-BC, where each layer's output
/// goes to every later layer of its block).
pub(super) fn join_all<B: Backend, C: CheckpointStrategy>(
    tensors: Vec<FloatTensor<Autodiff<B, C>>>,
    stash: &Arc<Stash<B>>,
    metas: &Arc<Vec<TensorMeta>>,
) -> (FloatTensor<Autodiff<B, C>>, Slot) {
    let mut tensors = tensors.into_iter().enumerate();
    let (_, first) = tensors.next().expect("at least one tensor");
    let mut acc = first;
    let mut acc_slot = Slot::Tensor(0);
    loop {
        let group: Vec<_> = tensors.by_ref().take(JOIN_WIDTH - 1).collect();
        if group.is_empty() {
            return (acc, acc_slot);
        }
        let (device, dtype) = (acc.primitive().device(), acc.primitive().dtype());
        let slots: Vec<Slot> = std::iter::once(acc_slot)
            .chain(group.iter().map(|(index, _)| Slot::Tensor(*index)))
            .collect();
        let nodes: Vec<NodeGuard> = std::iter::once(acc.node())
            .chain(group.iter().map(|(_, tensor)| tensor.node()))
            .collect();
        let out = placeholder::<B>(&device, dtype);
        acc = join::<B, C>(
            nodes,
            slots,
            (stash.clone(), metas.clone(), device, dtype),
            out,
        );
        acc_slot = Slot::Join;
    }
}

/// What every join of a region shares: where the gradients are, what the tensors are, and where
/// they live.
type JoinShared<B> = (
    Arc<Stash<B>>,
    Arc<Vec<TensorMeta>>,
    <B as burn::backend::BackendTypes>::Device,
    DType,
);

/// One join node over `nodes` (2 to [`JOIN_WIDTH`]): Burn's ops take their parents as an array
/// of a size known when compiling, so each size is its own instance.
fn join<B: Backend, C: CheckpointStrategy>(
    nodes: Vec<NodeGuard>,
    slots: Vec<Slot>,
    (stash, metas, device, dtype): JoinShared<B>,
    out: FloatTensor<B>,
) -> FloatTensor<Autodiff<B, C>> {
    fn sized<B: Backend, C: CheckpointStrategy, const N: usize>(
        nodes: Vec<NodeGuard>,
        slots: Vec<Slot>,
        (stash, metas, device, dtype): JoinShared<B>,
        out: FloatTensor<B>,
    ) -> FloatTensor<Autodiff<B, C>> {
        let nodes: [NodeGuard; N] = nodes.try_into().unwrap_or_else(|_| unreachable!());
        let slots: [Slot; N] = slots.try_into().unwrap_or_else(|_| unreachable!());
        match Join.prepare::<C>(nodes).compute_bound().stateful() {
            OpsKind::Tracked(prep) => prep.finish((stash, slots, metas, device, dtype), out),
            OpsKind::UnTracked(prep) => prep.finish(out),
        }
    }
    macro_rules! by_size {
        ($($n:literal)*) => {
            match nodes.len() {
                $($n => sized::<B, C, $n>(nodes, slots, (stash, metas, device, dtype), out),)*
                n => unreachable!("a join over {n} nodes (2 to {JOIN_WIDTH})"),
            }
        };
    }
    by_size!(2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32)
}
