//! Region boundaries: which tensors regions made, and the stored version a tensor gets when it is
//! used outside the region that made it.
//!
//! A tensor made by a region op is recorded with the root region it was made under. When an op
//! takes it while that root is no longer open (outside any region, or inside another one), it is
//! a region *output*: it is stored ([`materialize`]: a compute-bound identity node, no copy)
//! before the op uses it, so that backward recomputes one region at a time from stored
//! boundaries. Every later use outside gets the same stored node.

use std::any::Any;
use std::cell::RefCell;
use std::sync::{Arc, Weak};

use burn_autodiff::NodeId;
use burn_autodiff::checkpoint::base::Checkpointer;
use burn_autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn_autodiff::grads::Gradients;
use burn_autodiff::ops::{Backward, Ops};
use burn_backend::{Backend, TensorMetadata};

use super::state::{OpContext, OpRegion};
use crate::node_map::{Liveness, NodeMap};
use crate::offload;
use crate::op::Op;
use crate::policy::{Decision, OpInfo};
use crate::types::Tracked;

/// A tensor made by a region op.
struct Produced {
    /// Says whether any tensor or graph step still refers to the node.
    node: Weak<NodeId>,
    /// The root region it was made under.
    root: u64,
    /// How to give a use its stored version's node (a [`RestoreStored`]): made when first used
    /// outside its root region and shared by every later use. One stored node per region output:
    /// its gradient collects the consumers' contributions in the same order as plain autodiff
    /// does; no buffer and no strong reference to the node's count are kept here.
    stored: Option<Box<dyn Any>>,
}

impl Liveness for Produced {
    fn alive(&self) -> bool {
        self.node.alive()
    }
}

thread_local! {
    /// Tensors made by region ops on this thread, by node id.
    static PRODUCED: RefCell<NodeMap<Produced>> = RefCell::new(NodeMap::default());
}

/// Whether a tensor made by a region op may still be used on this thread (so that an op's
/// operands must be checked).
pub(super) fn watching() -> bool {
    PRODUCED.with(|produced| !produced.borrow().is_empty())
}

/// How many region outputs this thread still remembers (for tests).
#[doc(hidden)]
pub fn remembered_outputs() -> usize {
    PRODUCED.with(|produced| produced.borrow().len())
}

/// Forgets region outputs that no tensor or graph refers to any more (after a backward pass).
pub(crate) fn forget_dropped_outputs() {
    PRODUCED.with(|produced| produced.borrow_mut().prune());
}

impl OpContext {
    /// The operand to use for `tensor`: `tensor` itself, or its stored version (same data, no
    /// copy) if it is the output of a region that is closed now.
    pub(crate) fn boundary<I: Backend>(&self, tensor: Tracked<I>) -> Tracked<I> {
        if !self.watch {
            return tensor;
        }
        let id = tensor.node.id.value;
        // The tensor back, as its stored version if it has one, or why not.
        let found = PRODUCED.with(|produced| {
            let produced = produced.borrow();
            let Some(produced) = produced.get(id) else {
                return Boundary::Not(tensor);
            };
            if Some(produced.root) == self.root {
                return Boundary::Not(tensor);
            }
            let restore = produced.stored.as_ref();
            match restore.and_then(|r| r.downcast_ref::<RestoreStored<I>>()) {
                Some(restore) => match restore(tensor) {
                    Ok(stored) => Boundary::Stored(stored),
                    Err(tensor) => Boundary::First(tensor),
                },
                None => Boundary::First(tensor),
            }
        });
        match found {
            Boundary::Not(tensor) | Boundary::Stored(tensor) => tensor,
            Boundary::First(tensor) => {
                let stored = materialize::<I>(tensor);
                // Only the node, and its reference count weakly: a strong count here would keep
                // an abandoned graph (a step that panicked before backward) in use for Burn,
                // which frees a graph only once no tensor of it is referenced.
                let (node, rc) = (stored.node.clone(), Arc::downgrade(&stored.rc));
                let restore: RestoreStored<I> = Box::new(move |mut tensor| match rc.upgrade() {
                    Some(rc) => {
                        tensor.node = node.clone();
                        tensor.rc = rc;
                        Ok(tensor)
                    }
                    None => Err(tensor),
                });
                PRODUCED.with(|produced| {
                    if let Some(produced) = produced.borrow_mut().get_mut(id) {
                        produced.stored = Some(Box::new(restore));
                    }
                });
                stored
            }
        }
    }
}

/// What `OpContext::boundary` found for an operand.
enum Boundary<I: Backend> {
    /// Not a closed region's output: used as it is.
    Not(Tracked<I>),
    /// A closed region's output, as its stored version.
    Stored(Tracked<I>),
    /// A closed region's output used outside for the first time (or whose stored node Burn has
    /// freed since): to be stored now.
    First(Tracked<I>),
}

/// Gives an operand (a region output's data) its stored version's node, while Burn still has it.
type RestoreStored<I> = Box<dyn Fn(Tracked<I>) -> Result<Tracked<I>, Tracked<I>>>;

impl OpRegion<'_> {
    /// Returns the output `tensor` of the op `op`, recorded as made in this region, or stored if
    /// the region's policy keeps it.
    pub(crate) fn record<I: Backend>(&self, op: &'static Op, tensor: Tracked<I>) -> Tracked<I> {
        if let Some(policy) = self.policy.filter(|_| tensor.is_tracked()) {
            let shape = tensor.primitive.shape();
            let info = OpInfo::new(op, &shape, tensor.primitive.dtype());
            match policy.decide(&info) {
                // A stored node, like any compute-bound op's output: no boundary needed later.
                Decision::Save => return materialize::<I>(tensor),
                Decision::Offload => {
                    let stored = materialize::<I>(tensor);
                    offload::mark(stored.node.id.value, &stored.rc);
                    return stored;
                }
                Decision::Recompute => {}
            }
        }
        if tensor.is_tracked() {
            let produced = Produced {
                node: Arc::downgrade(&tensor.rc),
                root: self.root,
                stored: None,
            };
            PRODUCED.with(|map| map.borrow_mut().insert(tensor.node.id.value, produced));
        }
        tensor
    }
}

/// Identity node that is compute-bound: what it outputs is stored, not recomputed. Put between a
/// region's output and a consumer outside the region, so that backward recomputes one region at
/// a time from stored boundaries, and after an output a policy keeps. Shares the primitive: no
/// copy.
fn materialize<I: Backend>(tensor: Tracked<I>) -> Tracked<I> {
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
