//! The cross product of 3-vectors along a dimension.

use burn_backend::Backend;

use crate::recompute::{RegionOp, build};
use crate::types::{Primitive, Tracked};

#[derive(Debug, Clone)]
struct Cross {
    dim: usize,
}

impl<I: Backend> RegionOp<I, 2> for Cross {
    fn name(&self) -> &'static str {
        "cross"
    }

    fn forward(&self, [lhs, rhs]: [Primitive<I>; 2]) -> Primitive<I> {
        I::float_cross(lhs, rhs, self.dim)
    }

    /// Each operand's gradient needs the other operand.
    fn saved(&self, [lhs, rhs]: [bool; 2]) -> [bool; 2] {
        [rhs, lhs]
    }

    fn backward(
        self,
        [lhs_value, rhs_value]: [Option<Primitive<I>>; 2],
        grad: Primitive<I>,
        [lhs, rhs]: [bool; 2],
    ) -> [Option<Primitive<I>>; 2] {
        let for_rhs = rhs.then(|| grad.clone());
        [
            lhs.then(|| I::float_cross(rhs_value.unwrap(), grad, self.dim)),
            for_rhs.map(|grad| I::float_cross(grad, lhs_value.unwrap(), self.dim)),
        ]
    }
}

/// `cross` in a region.
pub(crate) fn cross<I: Backend>(lhs: Tracked<I>, rhs: Tracked<I>, dim: usize) -> Tracked<I> {
    build::<I, _, _>(Cross { dim }, [lhs, rhs])
}
