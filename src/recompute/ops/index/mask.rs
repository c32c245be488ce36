//! Masks: `mask_where` and `mask_fill`. The mask is not computed by the region's float ops, so
//! each op holds it (a handle), as Burn does.

use core::fmt;

use burn_backend::{Backend, Scalar, Shape, TensorMetadata};

use crate::recompute::{RegionOp, build, unbroadcast};
use crate::types::{BoolPrimitive, Primitive, Tracked};

/// `mask_where(tensor, mask, value)`: `value` where `mask`, else `tensor`.
#[derive(Clone)]
struct MaskWhere<I: Backend> {
    mask: BoolPrimitive<I>,
    tensor: Shape,
    value: Shape,
}

impl<I: Backend> fmt::Debug for MaskWhere<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MaskWhere({:?}, {:?})", self.tensor, self.value)
    }
}

impl<I: Backend> RegionOp<I, 2> for MaskWhere<I> {
    fn name(&self) -> &'static str {
        "mask_where"
    }

    fn forward(&self, [tensor, value]: [Primitive<I>; 2]) -> Primitive<I> {
        I::float_mask_where(tensor, self.mask.clone(), value)
    }

    fn saved(&self, _: [bool; 2]) -> [bool; 2] {
        [false, false]
    }

    fn backward(
        self,
        _: [Option<Primitive<I>>; 2],
        grad: Primitive<I>,
        [tensor, value]: [bool; 2],
    ) -> [Option<Primitive<I>>; 2] {
        let device = I::float_device(&grad);
        let dtype = grad.dtype().into();
        let for_value = value.then(|| grad.clone());
        let tensor_grad = tensor.then(|| {
            let zeros = I::float_zeros(self.tensor.clone(), &device, dtype);
            let grad = I::float_mask_where(grad, self.mask.clone(), zeros);
            unbroadcast::<I>(grad, &self.tensor)
        });
        let value_grad = for_value.map(|grad| {
            let zeros = I::float_zeros(self.value.clone(), &device, dtype);
            let grad = I::float_mask_where(zeros, self.mask, grad);
            unbroadcast::<I>(grad, &self.value)
        });
        [tensor_grad, value_grad]
    }
}

/// `mask_where` in a region.
pub(crate) fn mask_where<I: Backend>(
    tensor: Tracked<I>,
    mask: BoolPrimitive<I>,
    value: Tracked<I>,
) -> Tracked<I> {
    let op = MaskWhere::<I> {
        mask,
        tensor: tensor.primitive.shape(),
        value: value.primitive.shape(),
    };
    build::<I, _, _>(op, [tensor, value])
}

/// `mask_fill(tensor, mask, value)`: a scalar where `mask`.
#[derive(Clone)]
struct MaskFill<I: Backend> {
    mask: BoolPrimitive<I>,
    value: Scalar,
}

impl<I: Backend> fmt::Debug for MaskFill<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MaskFill({:?})", self.value)
    }
}

impl<I: Backend> RegionOp<I, 1> for MaskFill<I> {
    fn name(&self) -> &'static str {
        "mask_fill"
    }

    fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
        I::float_mask_fill(x, self.mask.clone(), self.value)
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
        [Some(I::float_mask_fill(grad, self.mask, 0f32.into()))]
    }
}

/// `mask_fill` in a region.
pub(crate) fn mask_fill<I: Backend>(
    tensor: Tracked<I>,
    mask: BoolPrimitive<I>,
    value: Scalar,
) -> Tracked<I> {
    build::<I, _, _>(MaskFill::<I> { mask, value }, [tensor])
}
