//! Which ops regions recompute (what they did on this thread is [`counters`](crate::counters)).
//!
//! Every op of Burn's backend traits that the decorator lists is an [`Op`] with a [`Routing`]
//! and an [`OpKind`](crate::OpKind), both written on its signature line in `src/backend/` (see
//! `docs/coverage.md`). Inside a region an op routed [`Routing::Stored`] runs as Burn's own op:
//! its gradients stay exact, but its output is held from forward to backward. Each such run is a
//! *fallback*, counted per thread ([`Counters::fallbacks`]) so that tests and users can see
//! what a model still stores; [`Counters`] also counts the recompute walk and what the thread
//! waited on.
//!
//! [`Counters`]: crate::counters::Counters
//! [`Counters::fallbacks`]: crate::counters::Counters::fallbacks

pub use crate::op::{Op, Routing};

/// Every op the decorator lists, with its routing and kind.
///
/// ```
/// use burn_checkpoint::coverage::{Routing, ops};
///
/// let stored: Vec<_> = ops().filter(|op| op.routing() == Routing::Stored).collect();
/// assert!(stored.is_empty(), "every op that builds a node has a region version");
/// ```
pub fn ops() -> impl Iterator<Item = &'static Op> {
    crate::backend::listed_ops()
}

/// The op Burn names `name` (`float_matmul`, `conv2d`, ...), if the decorator lists it.
///
/// ```
/// use burn_checkpoint::OpKind;
/// use burn_checkpoint::coverage::op;
///
/// assert_eq!(op("float_exp").unwrap().kind(), OpKind::Elementwise);
/// assert!(op("no_such_op").is_none());
/// ```
pub fn op(name: &str) -> Option<&'static Op> {
    ops().find(|op| op.name() == name)
}
