//! `slice_assign`. Burn marks it memory-bound but turns it compute-bound when an operand is
//! untracked: writing a tracked tensor into a constant (`Tensor::pad`, a CTC loss's alpha table
//! filled with -inf) stores the result. This version keeps the untracked operand in the
//! recompute instead.

use burn_backend::{Backend, Shape, Slice, TensorMetadata};

use super::{RegionOp, build};
use crate::types::{Primitive, Tracked};

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
