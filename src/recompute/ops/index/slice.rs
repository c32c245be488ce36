//! Slices: `slice` and `slice_assign`. Burn marks `slice_assign` memory-bound but turns it
//! compute-bound when an operand is untracked: writing a tracked tensor into a constant
//! (`Tensor::pad`, a CTC loss's alpha table filled with -inf) stores the result. This version
//! keeps the untracked operand in the recompute instead.

use burn_backend::{Backend, Shape, Slice, TensorMetadata};

use crate::recompute::{RegionOp, build};
use crate::types::{Primitive, Tracked};

/// `x.slice(slices)`: the gradient is scattered into zeros of the input's shape.
#[derive(Debug, Clone)]
struct SliceOp<I: Backend> {
    slices: Vec<Slice>,
    shape: Shape,
    device: I::Device,
}

impl<I: Backend> RegionOp<I, 1> for SliceOp<I> {
    fn name(&self) -> &'static str {
        "slice"
    }

    fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
        I::float_slice(x, &self.slices)
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
        [Some(I::float_slice_assign(zeros, &self.slices, grad))]
    }
}

/// `x.slice(slices)` in a region.
pub(crate) fn slice<I: Backend>(tensor: Tracked<I>, slices: &[Slice]) -> Tracked<I> {
    let op = SliceOp::<I> {
        slices: slices.to_vec(),
        shape: tensor.primitive.shape(),
        device: I::float_device(&tensor.primitive),
    };
    build::<I, _, 1>(op, [tensor])
}

/// `slice_assign(tensor, slices, value)`: operands `[tensor, value]`.
#[derive(Debug, Clone)]
struct SliceAssign {
    slices: Vec<Slice>,
    value: Shape,
}

impl<I: Backend> RegionOp<I, 2> for SliceAssign {
    fn name(&self) -> &'static str {
        "slice_assign"
    }

    fn forward(&self, [tensor, value]: [Primitive<I>; 2]) -> Primitive<I> {
        I::float_slice_assign(tensor, &self.slices, value)
    }

    fn saved(&self, _: [bool; 2]) -> [bool; 2] {
        [false, false]
    }

    // The same arithmetic as burn-autodiff's, in the same order, so gradients are bitwise equal.
    fn backward(
        self,
        _: [Option<Primitive<I>>; 2],
        grad: Primitive<I>,
        [tensor, value]: [bool; 2],
    ) -> [Option<Primitive<I>>; 2] {
        let for_value = value.then(|| grad.clone());
        let tensor_grad = tensor.then(|| {
            let device = I::float_device(&grad);
            let zeros = I::float_zeros(self.value, &device, grad.dtype().into());
            I::float_slice_assign(grad, &self.slices, zeros)
        });
        let value_grad = for_value.map(|grad| I::float_slice(grad, &self.slices));
        [tensor_grad, value_grad]
    }
}

/// `slice_assign` in a region.
pub(crate) fn slice_assign<I: Backend>(
    tensor: Tracked<I>,
    slices: &[Slice],
    value: Tracked<I>,
) -> Tracked<I> {
    let op = SliceAssign {
        slices: slices.to_vec(),
        value: value.primitive.shape(),
    };
    build::<I, _, _>(op, [tensor, value])
}
