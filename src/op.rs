//! What the crate knows about each op of Burn's backend traits: its name, how the decorator runs
//! it inside a region ([`Routing`]) and its family for policies ([`OpKind`], from
//! burn-checkpoint-core). One [`Op`] per
//! method, written by `forward_ops!` from the signature line in `backend/` that carries both.
//! A leaf: it imports nothing of the crate.

pub use burn_checkpoint_core::OpKind;

/// How the decorator runs an op inside a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Routing {
    /// Recomputed: a region version built by this crate (Burn's own op with its backward
    /// formula, recomputed by this crate's walk).
    Region,
    /// Stored: Burn's op, output held until backward (a fallback, counted by
    /// [`Counters::fallbacks`](crate::counters::Counters::fallbacks)); [`Op::note`] says why.
    Stored,
    /// Run through the decorator as other ops, each routed on its own (Burn's decomposition of
    /// attention, for one).
    Decomposed,
    /// Builds no graph node: tensor creation, comparisons, int and bool ops, data access,
    /// backward ops.
    Plain,
}

/// One op of Burn's backend traits as the decorator lists it; see
/// [`coverage::ops`](crate::coverage::ops).
///
/// ```
/// use burn_checkpoint::OpKind;
/// use burn_checkpoint::coverage::{self, Routing};
///
/// let conv = coverage::op("conv2d").unwrap();
/// assert_eq!(conv.family(), "ModuleOps");
/// assert_eq!(conv.routing(), Routing::Region);
/// assert_eq!(conv.kind(), OpKind::Conv);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Op {
    family: &'static str,
    name: &'static str,
    routing: Routing,
    kind: OpKind,
    note: &'static str,
}

impl Op {
    /// Written by `forward_ops!` only.
    pub(crate) const fn new(
        family: &'static str,
        name: &'static str,
        routing: Routing,
        kind: OpKind,
        note: &'static str,
    ) -> Self {
        Op {
            family,
            name,
            routing,
            kind,
            note,
        }
    }

    /// The trait: `FloatTensorOps`, `ModuleOps`, ...
    pub fn family(&self) -> &'static str {
        self.family
    }

    /// The method, as Burn names it (`float_matmul`, `conv2d`, ...).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// How it runs inside a region.
    pub fn routing(&self) -> Routing {
        self.routing
    }

    /// Its family, for policies ([`OpKind::Other`] for ops that build no graph node).
    pub fn kind(&self) -> OpKind {
        self.kind
    }

    /// Why an op is [`Routing::Stored`], or what a method written out by hand does inside a
    /// region; empty for the others.
    pub fn note(&self) -> &'static str {
        self.note
    }
}
