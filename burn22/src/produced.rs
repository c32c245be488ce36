//! Which autodiff nodes are outputs of this thread's regions (their pick or region nodes). A leaf.
//!
//! Burn requires a node to register a gradient for every parent it lists. A region whose body
//! leaves one of its tracked inputs without a gradient must therefore hand that input something:
//! zeros of its shape when Burn's own op made it, but a one-element stand-in when another region
//! made it, which that region's node recognises as "no gradient" (so that an output nobody used
//! takes no part in its recompute, as in plain autodiff). This registry tells the two apart.
//!
//! An entry lives as long as the token its node's state holds: once Burn frees the node (after
//! its backward, or with an abandoned graph), the entry is dead and is pruned.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

use burn::backend::autodiff::NodeId;

thread_local! {
    static PRODUCED: RefCell<Produced> = RefCell::new(Produced {
        nodes: HashMap::new(),
        prune_at: MIN_PRUNE,
    });
}

/// Entries before the first pruning.
const MIN_PRUNE: usize = 1024;

struct Produced {
    nodes: HashMap<u64, Weak<()>>,
    /// Prune dead entries when there are this many.
    prune_at: usize,
}

/// Marks `node` as a region's output while `token` (held by the node's state) lives.
pub(crate) fn mark(node: NodeId, token: &Arc<()>) {
    PRODUCED.with(|produced| {
        let mut produced = produced.borrow_mut();
        if produced.nodes.len() >= produced.prune_at {
            produced.nodes.retain(|_, token| token.strong_count() > 0);
            produced.prune_at = (2 * produced.nodes.len()).max(MIN_PRUNE);
        }
        produced.nodes.insert(node.value, Arc::downgrade(token));
    });
}

/// Whether `node` is a live output of a region made on this thread.
pub(crate) fn is_region_output(node: NodeId) -> bool {
    PRODUCED.with(|produced| {
        produced
            .borrow()
            .nodes
            .get(&node.value)
            .is_some_and(|token| token.strong_count() > 0)
    })
}
