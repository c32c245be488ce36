//! The embedding module op: a row gather of the weights.

use core::fmt;

use burn_backend::Backend;

use crate::recompute::{RegionOp, build};
use crate::types::{IntPrimitive, Primitive, Tracked};

/// The embedding module op: rows of `weights` picked by `indices`. Its backward reads the weights
/// (for their shape), as Burn's does.
#[derive(Clone)]
struct Embedding<I: Backend> {
    indices: IntPrimitive<I>,
}

impl<I: Backend> fmt::Debug for Embedding<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Embedding")
    }
}

impl<I: Backend> RegionOp<I, 1> for Embedding<I> {
    fn name(&self) -> &'static str {
        "embedding"
    }

    fn forward(&self, [weights]: [Primitive<I>; 1]) -> Primitive<I> {
        I::embedding(weights, self.indices.clone())
    }

    fn saved(&self, _: [bool; 1]) -> [bool; 1] {
        [true]
    }

    fn backward(
        self,
        [weights]: [Option<Primitive<I>>; 1],
        grad: Primitive<I>,
        _: [bool; 1],
    ) -> [Option<Primitive<I>>; 1] {
        [Some(I::embedding_backward(
            weights.unwrap(),
            grad,
            self.indices,
        ))]
    }
}

/// `embedding` in a region.
pub(crate) fn embedding<I: Backend>(weights: Tracked<I>, indices: IntPrimitive<I>) -> Tracked<I> {
    build::<I, _, _>(Embedding::<I> { indices }, [weights])
}
