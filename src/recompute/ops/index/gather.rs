//! Gathers: `gather` along a dimension and n-dimensional `gather_nd`. The indices are not
//! computed by the region's float ops, so each op holds them (a handle), as Burn does.

use core::fmt;

use burn_backend::tensor::IndexingUpdateOp;
use burn_backend::{Backend, Shape, TensorMetadata};

use crate::recompute::{RegionOp, build, scatter_grad};
use crate::types::{IntPrimitive, Primitive, Tracked};

/// `gather(dim, tensor, indices)`: the indices are not computed by the region's float ops, so the
/// op holds them (a handle), as Burn does.
#[derive(Clone)]
struct Gather<I: Backend> {
    dim: usize,
    indices: IntPrimitive<I>,
    shape: Shape,
}

// By hand, as every op holding a tensor: a derive would print the tensor's data.
impl<I: Backend> fmt::Debug for Gather<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gather(dim {}, {:?})", self.dim, self.shape)
    }
}

impl<I: Backend> RegionOp<I, 1> for Gather<I> {
    fn name(&self) -> &'static str {
        "gather"
    }

    fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
        I::float_gather(self.dim, x, self.indices.clone())
    }

    fn saved(&self, _: [bool; 1]) -> [bool; 1] {
        [false]
    }

    fn backward(
        self,
        _: [Option<Primitive<I>>; 1],
        grad: Primitive<I>,
        _: [bool; 1],
    ) -> [Option<Primitive<I>>; 1] {
        [Some(scatter_grad::<I>(
            self.dim,
            self.shape,
            self.indices,
            grad,
        ))]
    }
}

/// `gather` in a region.
pub(crate) fn gather<I: Backend>(
    dim: usize,
    tensor: Tracked<I>,
    indices: IntPrimitive<I>,
) -> Tracked<I> {
    let shape = tensor.primitive.shape();
    build::<I, _, _>(
        Gather::<I> {
            dim,
            indices,
            shape,
        },
        [tensor],
    )
}

/// `gather_nd(data, indices)`.
#[derive(Clone)]
struct GatherNd<I: Backend> {
    indices: IntPrimitive<I>,
    data: Shape,
}

impl<I: Backend> fmt::Debug for GatherNd<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GatherNd(data {:?})", self.data)
    }
}

impl<I: Backend> RegionOp<I, 1> for GatherNd<I> {
    fn name(&self) -> &'static str {
        "gather_nd"
    }

    fn forward(&self, [data]: [Primitive<I>; 1]) -> Primitive<I> {
        I::float_gather_nd(data, self.indices.clone())
    }

    fn saved(&self, _: [bool; 1]) -> [bool; 1] {
        [false]
    }

    fn backward(
        self,
        _: [Option<Primitive<I>>; 1],
        grad: Primitive<I>,
        _: [bool; 1],
    ) -> [Option<Primitive<I>>; 1] {
        let device = I::float_device(&grad);
        let zeros = I::float_zeros(self.data, &device, grad.dtype().into());
        [Some(I::float_scatter_nd(
            zeros,
            self.indices,
            grad,
            IndexingUpdateOp::Add,
        ))]
    }
}

/// `gather_nd` in a region.
pub(crate) fn gather_nd<I: Backend>(data: Tracked<I>, indices: IntPrimitive<I>) -> Tracked<I> {
    let op = GatherNd::<I> {
        indices,
        data: data.primitive.shape(),
    };
    build::<I, _, _>(op, [data])
}
