//! Recipes and operands, how backward gets back what a region did not keep: one recursive
//! family ([`Recipe`] holds [`Operand`]s, an operand may hold a [`Ticket`] for another recipe),
//! in one file.
//!
//! # Why our own recompute walk
//!
//! Burn 0.21 can recompute a node during backward (a memory-bound node with a `RetroForward`),
//! but its checkpointer finds what to recompute by walking every *path* from the node to its
//! stored ancestors without remembering the nodes it has walked. Inside a region everything is
//! recomputed, so a region whose ops share inputs (residual connections, attention's q, k and v,
//! DenseNet's concatenations) makes that walk exponential in the region's length.
//!
//! So region ops do not hand their recompute to Burn. Each keeps, for each input it reads, an
//! [`Operand`]:
//! - [`Operand::Recomputed`]: the input was made by an op of the same region. Its [`Recipe`] (the
//!   op and how to get *its* operands: no tensor data) recomputes it, at most once per backward,
//!   memoised in the recipe;
//! - [`Operand::Held`]: the input is stored (a region input, a parameter, a region output
//!   stored at the boundary, an output a policy keeps), or untracked (a constant, a dropout
//!   mask): the op holds it as it is, as Burn's checkpointer would;
//! - [`Operand::Stored`]: the input is recomputed by Burn (a memory-bound node of its balanced
//!   checkpointing, outside regions): registered with Burn's checkpointer at forward, retrieved
//!   in backward;
//! - [`Operand::Offloaded`]: stored, in host memory (see `crate::offload`).
//!
//! A recomputed value lives in its recipe while someone may still ask for it: every holder of a
//! [`Ticket`] (a backward step that reads the value, or the recipe of an op made from it that is
//! not recomputed yet) asks at most once, and the value is dropped when the last ticket is used
//! or dropped. The walk is iterative and visits each recipe once: linear in the ops recomputed.

use core::fmt;
use std::cell::RefCell;
use std::sync::{Arc, Mutex, MutexGuard};

use burn_autodiff::NodeId;
use burn_autodiff::checkpoint::base::Checkpointer;
use burn_backend::{Backend, TensorMetadata};

use super::check;
use super::region_op::ErasedForward;
use crate::counters;
use crate::node_map::{ErasedWeak, NodeMap};
use crate::offload::{self, HostCopy};
use crate::types::{Primitive, Tracked};
use burn_checkpoint_core::engine::recording;

// ---------------------------------------------------------------------------------------------
// Operands

/// How a recompute or a backward step gets one operand of a region op back.
pub(super) enum Operand<I: Backend> {
    /// Made by an op of the same region: recomputed (once) by its recipe.
    Recomputed(Ticket<I>),
    /// Recomputed by Burn (a memory-bound node of its balanced checkpointing), registered with
    /// its checkpointer when the op was built.
    Stored(NodeId),
    /// Held as it is (a handle clone, no copy): an untracked operand (a constant, a dropout
    /// mask), or a stored one Burn would hold the same way (a compute-bound node: a region's
    /// boundary, an output a policy keeps, a parameter, an op outside regions).
    Held(Primitive<I>),
    /// Stored, in host memory: the region offloads (`Region::offloaded`).
    Offloaded(Arc<HostCopy<I>>),
}

impl<I: Backend> Operand<I> {
    /// How the op being built will get `tensor` back; `register` registers a stored operand
    /// with Burn's checkpointer (the op's `prep.checkpoint`).
    pub(super) fn of(
        tensor: &Tracked<I>,
        register: &mut impl FnMut(&Tracked<I>) -> NodeId,
    ) -> Self {
        if !tensor.is_tracked() {
            return Operand::Held(tensor.primitive.clone());
        }
        if let Some(recipe) = recipe_of::<I>(tensor.node.id) {
            return Operand::Recomputed(Ticket::new(recipe));
        }
        if let Some(copy) = offload::host_copy(tensor) {
            return Operand::Offloaded(copy);
        }
        // For a node it does not recompute, Burn's checkpointer would hold this same handle
        // until the last reader; but building its checkpointer costs, in Burn 0.21, a scan of
        // every registration per registration (quadratic in a step's region ops), so only what
        // Burn recomputes goes through it.
        if memory_bound(tensor) {
            Operand::Stored(register(tensor))
        } else {
            Operand::Held(tensor.primitive.clone())
        }
    }

    /// The operand's value. A recomputed operand must have been computed ([`compute`]).
    pub(super) fn get(self, checkpointer: &mut Checkpointer) -> Primitive<I> {
        match self {
            Operand::Recomputed(ticket) => ticket.take(checkpointer),
            Operand::Stored(id) => checkpointer.retrieve_node_output::<Primitive<I>>(id),
            Operand::Held(primitive) => primitive,
            Operand::Offloaded(copy) => copy.upload(),
        }
    }
}

impl<I: Backend> fmt::Debug for Operand<I> {
    // Hand-written: a derived Debug would print the held tensor.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::Recomputed(ticket) => write!(f, "Recomputed({})", ticket.recipe().name()),
            Operand::Stored(id) => write!(f, "Stored({id})"),
            Operand::Held(_) => f.write_str("Held"),
            Operand::Offloaded(copy) => write!(f, "Offloaded({} bytes)", copy.bytes()),
        }
    }
}

/// Whether Burn recomputes `tensor` when a backward step asks for it (a memory-bound node of its
/// balanced checkpointing). Burn 0.21 keeps the property's type private; its derived `Debug`
/// names the variant first, and the writer stops there (nothing else is formatted).
fn memory_bound<I: Backend>(tensor: &Tracked<I>) -> bool {
    const NAME: &[u8] = b"MemoryBound";
    struct Prefix {
        seen: [u8; NAME.len()],
        len: usize,
    }
    impl fmt::Write for Prefix {
        fn write_str(&mut self, text: &str) -> fmt::Result {
            let take = text.len().min(NAME.len() - self.len);
            self.seen[self.len..self.len + take].copy_from_slice(&text.as_bytes()[..take]);
            self.len += take;
            if self.len == NAME.len() {
                Err(fmt::Error)
            } else {
                Ok(())
            }
        }
    }
    let mut prefix = Prefix {
        seen: [0; NAME.len()],
        len: 0,
    };
    let _ = fmt::Write::write_fmt(&mut prefix, format_args!("{:?}", tensor.node.properties));
    prefix.seen[..prefix.len] == *NAME
}

// ---------------------------------------------------------------------------------------------
// Recipes

/// How to recompute one region op's output: the op, and how to get each of its operands.
/// Holds no tensor data but untracked operands; holds the recomputed value while tickets for it
/// are out.
pub(super) struct Recipe<I: Backend> {
    op: Box<dyn ErasedForward<I>>,
    expected: Option<check::Expected>,
    /// The profiled step's top-level region this op ran in, while a step is recorded.
    recorded_in: Option<usize>,
    slot: Mutex<Slot<I>>,
}

struct Slot<I: Backend> {
    /// Taken when the value is computed, or when the recipe is drained unused.
    operands: Option<Vec<Operand<I>>>,
    /// The recomputed output, while tickets for it are out.
    value: Option<Primitive<I>>,
    /// Tickets out: readers that may still ask for the value.
    tickets: usize,
    /// Whether the value was computed (a second computation would be a bookkeeping bug).
    computed: bool,
}

impl<I: Backend> Recipe<I> {
    pub(super) fn new(
        op: Box<dyn ErasedForward<I>>,
        operands: Vec<Operand<I>>,
        expected: Option<check::Expected>,
        recorded_in: Option<usize>,
    ) -> Arc<Self> {
        Arc::new(Recipe {
            op,
            expected,
            recorded_in,
            slot: Mutex::new(Slot {
                operands: Some(operands),
                value: None,
                tickets: 0,
                computed: false,
            }),
        })
    }

    pub(super) fn name(&self) -> &'static str {
        self.op.name()
    }

    fn slot(&self) -> MutexGuard<'_, Slot<I>> {
        // A panic during a recompute (a failed recompute check) leaves nothing half-written.
        self.slot
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Called by the op's own backward step, after every reader has run: a recipe nobody asked
    /// for still holds Burn's registrations of its stored operands; retrieving them lets Burn
    /// free what only this recipe would have read.
    pub(super) fn drain(&self, checkpointer: &mut Checkpointer) {
        let operands = self.slot().operands.take();
        for operand in operands.into_iter().flatten() {
            if let Operand::Stored(id) = operand {
                drop(checkpointer.retrieve_node_output::<Primitive<I>>(id));
            }
        }
    }
}

/// Computes `root`'s value and, first, every recipe it needs that has no value: an iterative
/// post-order walk that visits each recipe once.
pub(super) fn compute<I: Backend>(root: &Arc<Recipe<I>>, checkpointer: &mut Checkpointer) {
    let mut stack = vec![(Arc::clone(root), false)];
    while let Some((recipe, operands_ready)) = stack.pop() {
        let mut slot = recipe.slot();
        if slot.value.is_some() {
            continue;
        }
        if !operands_ready {
            counters::note_walk_step();
            let pending: Vec<_> = slot
                .operands
                .iter()
                .flatten()
                .filter_map(|operand| match operand {
                    Operand::Recomputed(ticket) => Some(Arc::clone(ticket.recipe())),
                    _ => None,
                })
                .collect();
            drop(slot);
            stack.push((recipe, true));
            stack.extend(pending.into_iter().map(|r| (r, false)));
            continue;
        }
        let Some(operands) = slot.operands.take() else {
            panic!(
                "burn-checkpoint: `{}` was asked for again after its last reader ran (a \
                 bookkeeping bug; please report it)",
                recipe.name()
            );
        };
        assert!(
            !slot.computed,
            "burn-checkpoint: `{}` would be recomputed twice in one backward (a bookkeeping bug)",
            recipe.name()
        );
        drop(slot);
        let inputs = operands
            .into_iter()
            .map(|operand| operand.get(checkpointer))
            .collect();
        counters::note_recompute(recipe.name());
        let output = match recipe.recorded_in {
            Some(region) => recording::recompute(
                region,
                || recipe.op.forward(inputs),
                |output| (output.shape().num_elements() * output.dtype().size()) as u64,
            ),
            None => recipe.op.forward(inputs),
        };
        if let Some(expected) = &recipe.expected {
            expected.verify::<I>(recipe.name(), &output);
        }
        let mut slot = recipe.slot();
        slot.computed = true;
        slot.value = Some(output);
    }
}

/// A claim on a recipe's value: one read, at most. Dropping it unused gives the claim up.
pub(super) struct Ticket<I: Backend>(Option<Arc<Recipe<I>>>);

impl<I: Backend> Ticket<I> {
    pub(super) fn new(recipe: Arc<Recipe<I>>) -> Self {
        recipe.slot().tickets += 1;
        Ticket(Some(recipe))
    }

    pub(super) fn recipe(&self) -> &Arc<Recipe<I>> {
        self.0
            .as_ref()
            .expect("a ticket holds its recipe until used")
    }

    /// The value, computed if needed; the last ticket takes it out of the recipe.
    pub(super) fn take(mut self, checkpointer: &mut Checkpointer) -> Primitive<I> {
        let recipe = self.0.take().expect("a ticket is used once");
        compute(&recipe, checkpointer);
        let mut slot = recipe.slot();
        slot.tickets -= 1;
        let value = if slot.tickets == 0 {
            slot.value.take()
        } else {
            slot.value.clone()
        };
        value.expect("computed above")
    }
}

impl<I: Backend> Drop for Ticket<I> {
    fn drop(&mut self) {
        if let Some(recipe) = self.0.take() {
            let mut slot = recipe.slot();
            slot.tickets -= 1;
            if slot.tickets == 0 {
                slot.value = None;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Which tensors have recipes

thread_local! {
    /// The recipe of each region op output made on this thread, by node id. Weak: the recipe
    /// lives as long as its node's backward step (or a reader) holds it.
    static RECIPES: RefCell<NodeMap<ErasedWeak>> = RefCell::new(NodeMap::default());
}

/// Remembers `recipe` as the recipe of `output`.
pub(super) fn remember<I: Backend>(output: &Tracked<I>, recipe: &Arc<Recipe<I>>) {
    RECIPES.with(|recipes| {
        recipes
            .borrow_mut()
            .insert_shared(output.node.id.value, recipe)
    });
}

/// The live recipe of the node `id`, if a region op on this thread made it.
pub(super) fn recipe_of<I: Backend>(id: NodeId) -> Option<Arc<Recipe<I>>> {
    RECIPES.with(|recipes| recipes.borrow().get_shared::<Recipe<I>>(id.value))
}

#[cfg(test)]
mod tests {
    use burn::backend::autodiff::checkpoint::strategy::BalancedCheckpointing;
    use burn::backend::{Autodiff, NdArray};
    use burn::tensor::{Tensor, TensorPrimitive};

    use super::memory_bound;
    use crate::types::Tracked;

    type Balanced = Autodiff<NdArray, BalancedCheckpointing>;

    fn tracked(tensor: Tensor<Balanced, 2>) -> Tracked<NdArray> {
        match tensor.into_primitive() {
            TensorPrimitive::Float(tensor) => tensor,
            TensorPrimitive::QFloat(_) => unreachable!("the test makes float tensors"),
        }
    }

    /// `memory_bound` reads a private Burn type through its `Debug` output: this pins what it
    /// sees on Burn 0.21, so that a Burn bump which changes the output fails here rather than
    /// silently holding what balanced checkpointing would recompute.
    #[test]
    fn memory_bound_tells_burns_recomputable_nodes_from_the_others() {
        let device = Default::default();
        let x =
            Tensor::<Balanced, 2>::from_floats([[0.5, -1.0], [2.0, 0.25]], &device).require_grad();
        assert!(
            memory_bound(&tracked(x.clone().exp())),
            "exp is memory-bound in Burn"
        );
        assert!(
            !memory_bound(&tracked(x.clone().matmul(x))),
            "matmul is compute-bound in Burn"
        );
    }
}
