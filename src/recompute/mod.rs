//! Region versions of Burn's float ops: every op that builds a graph node inside a region runs
//! as one of these, so that nothing it computes is held from forward to backward.
//!
//! The machinery, once for every op, as a chain: the recompute check (`check.rs`), what a region
//! op is ([`RegionOp`], `region_op.rs`), recipes and their operands, the recompute walk
//! (`recipe.rs`), the backward step (`step.rs`), and [`build()`] (`build.rs`: an op as a node of
//! Burn's graph). Then the op families in `ops/`, one folder or file per
//! [`OpKind`](crate::OpKind), as burn-cubecl's `kernel/` has them: each op a small struct
//! implementing [`RegionOp`] (its forward and backward on the inner backend, and which inputs the
//! backward reads).

// The machinery, bottom-up: each file imports only those above it (a comment between each
// pair, or rustfmt would sort them by name).
mod check;
// What a region op is.
mod region_op;
// Recipes, their operands, the recompute walk.
mod recipe;
// The backward step.
mod step;
// An op as a node of Burn's graph.
mod build;
// The op families, over the machinery.
mod ops;

pub(crate) use build::{build, build_with};
pub(crate) use check::{verify_recomputes, verifying};
pub(crate) use region_op::{RegionOp, scatter_grad, unbroadcast};

pub(crate) use ops::*;
