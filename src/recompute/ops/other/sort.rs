//! Sorting along a dimension. Burn holds the sort indices (an int tensor as large as the output)
//! from forward to backward; here the backward sorts the input again to get them. Sorting is
//! deterministic, so the indices, and the gradients, are the same.

use burn_backend::{Backend, IntDType, TensorMetadata, get_device_settings};

use crate::recompute::{RegionOp, build, build_with, scatter_grad};
use crate::types::{IntPrimitive, Primitive, Tracked};

#[derive(Debug, Clone)]
struct Sort {
    dim: usize,
    descending: bool,
    indices_dtype: IntDType,
}

impl Sort {
    /// Burn's tracked sort: the values come from the sort that also yields the indices.
    fn with_indices<I: Backend>(&self, x: Primitive<I>) -> (Primitive<I>, IntPrimitive<I>) {
        I::float_sort_with_indices(x, self.dim, self.descending, self.indices_dtype)
    }
}

impl<I: Backend> RegionOp<I, 1> for Sort {
    fn name(&self) -> &'static str {
        "sort"
    }

    fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
        self.with_indices::<I>(x).0
    }

    fn saved(&self, _: [bool; 1]) -> [bool; 1] {
        [true]
    }

    fn backward(
        self,
        [x]: [Option<Primitive<I>>; 1],
        grad: Primitive<I>,
        _: [bool; 1],
    ) -> [Option<Primitive<I>>; 1] {
        let x = x.unwrap();
        let shape = x.shape();
        let (_, indices) = self.with_indices::<I>(x);
        [Some(scatter_grad::<I>(self.dim, shape, indices, grad))]
    }
}

/// `sort` in a region.
pub(crate) fn sort<I: Backend>(tensor: Tracked<I>, dim: usize, descending: bool) -> Tracked<I> {
    let device = I::float_device(&tensor.primitive);
    let op = Sort {
        dim,
        descending,
        indices_dtype: get_device_settings::<I>(&device).int_dtype,
    };
    build::<I, _, _>(op, [tensor])
}

/// `sort_with_indices` in a region: the indices go to the caller, not into the graph.
pub(crate) fn sort_with_indices<I: Backend>(
    tensor: Tracked<I>,
    dim: usize,
    descending: bool,
    indices_dtype: IntDType,
) -> (Tracked<I>, IntPrimitive<I>) {
    let op = Sort {
        dim,
        descending,
        indices_dtype,
    };
    build_with::<I, _, _, _>(op, [tensor], |op, [x]| op.with_indices::<I>(x))
}
