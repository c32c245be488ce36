//! `select` and `select_add` along a dimension, by int indices the op holds (a handle).

use burn_backend::{Backend, Shape, TensorMetadata};

use crate::recompute::{RegionOp, build};
use crate::types::{IntPrimitive, Primitive, Tracked};

/// `x.select(dim, indices)`: the gradient is added into zeros of the input's shape.
struct Select<I: Backend> {
    dim: usize,
    indices: IntPrimitive<I>,
    shape: Shape,
    device: I::Device,
}

// Hand-written: a derived Debug would print the indices.
impl<I: Backend> core::fmt::Debug for Select<I> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Select(dim {})", self.dim)
    }
}

impl<I: Backend> Clone for Select<I> {
    fn clone(&self) -> Self {
        Select {
            dim: self.dim,
            indices: self.indices.clone(),
            shape: self.shape.clone(),
            device: self.device.clone(),
        }
    }
}

impl<I: Backend> RegionOp<I, 1> for Select<I> {
    fn name(&self) -> &'static str {
        "select"
    }

    fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
        I::float_select(x, self.dim, self.indices.clone())
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
        let zeros = I::float_zeros(self.shape, &self.device, grad.dtype().into());
        [Some(I::float_select_add(
            zeros,
            self.dim,
            self.indices,
            grad,
        ))]
    }
}

/// `x.select(dim, indices)` in a region.
pub(crate) fn select<I: Backend>(
    tensor: Tracked<I>,
    dim: usize,
    indices: IntPrimitive<I>,
) -> Tracked<I> {
    let op = Select::<I> {
        dim,
        indices,
        shape: tensor.primitive.shape(),
        device: I::float_device(&tensor.primitive),
    };
    build::<I, _, 1>(op, [tensor])
}

/// `x.select_add(dim, indices, value)`.
struct SelectAdd<I: Backend> {
    dim: usize,
    indices: IntPrimitive<I>,
}

impl<I: Backend> core::fmt::Debug for SelectAdd<I> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "SelectAdd(dim {})", self.dim)
    }
}

impl<I: Backend> Clone for SelectAdd<I> {
    fn clone(&self) -> Self {
        SelectAdd {
            dim: self.dim,
            indices: self.indices.clone(),
        }
    }
}

impl<I: Backend> RegionOp<I, 2> for SelectAdd<I> {
    fn name(&self) -> &'static str {
        "select_add"
    }

    fn forward(&self, [x, value]: [Primitive<I>; 2]) -> Primitive<I> {
        I::float_select_add(x, self.dim, self.indices.clone(), value)
    }

    fn saved(&self, _: [bool; 2]) -> [bool; 2] {
        [false, false]
    }

    fn backward(
        self,
        _: [Option<Primitive<I>>; 2],
        grad: Primitive<I>,
        [x, value]: [bool; 2],
    ) -> [Option<Primitive<I>>; 2] {
        let for_value = value.then(|| grad.clone());
        [
            x.then_some(grad),
            for_value.map(|grad| I::float_select(grad, self.dim, self.indices)),
        ]
    }
}

/// `x.select_add(dim, indices, value)` in a region.
pub(crate) fn select_add<I: Backend>(
    tensor: Tracked<I>,
    dim: usize,
    indices: IntPrimitive<I>,
    value: Tracked<I>,
) -> Tracked<I> {
    build::<I, _, 2>(SelectAdd::<I> { dim, indices }, [tensor, value])
}
