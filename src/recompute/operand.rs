//! How a recompute or a backward step gets one operand of a region op back.

use core::fmt;
use std::sync::Arc;

use burn_autodiff::NodeId;
use burn_autodiff::checkpoint::base::Checkpointer;
use burn_backend::Backend;

use super::walk::{self, Ticket};
use crate::offload::{self, HostCopy};
use crate::types::{Primitive, Tracked};

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
    /// Stored, in host memory: the region offloads (`Policy::offloaded`).
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
        if let Some(recipe) = walk::recipe_of::<I>(tensor.node.id) {
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

    /// The operand's value. A recomputed operand must have been computed ([`walk::compute`]).
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
