//! Families of ops.

use serde::{Deserialize, Serialize};

/// Families of ops: what a policy decides by, and how the memory report groups what is made
/// outside regions. Serialised by variant name (`"Matmul"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum OpKind {
    /// Matrix products: `float_matmul`, `linear`.
    Matmul,
    /// Convolutions of every dimension, their transposes, deformable convolution.
    Conv,
    /// Pooling of every kind.
    Pool,
    /// Reductions over all or one dimension: sum, mean, max, min (with or without indices).
    Reduce,
    /// Cumulative ops: cumsum, cumprod, cummin, cummax.
    Cumulative,
    /// Indexing: gather, scatter, select, slice and their assigns, masks, embedding.
    Index,
    /// Concatenation (`float_cat`).
    Concat,
    /// Reshapes and moves of the same values: reshape, permute, swap dims, flip, expand, repeat,
    /// unfold.
    Layout,
    /// Elementwise arithmetic and functions, activations, casts.
    Elementwise,
    /// Anything else: sort, cross product, interpolation, losses, device transfer, and every op
    /// that builds no graph node.
    Other,
}
