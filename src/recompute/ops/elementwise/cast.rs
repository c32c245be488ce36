//! Casting between float dtypes: the gradient is cast back to the input's dtype.

use burn_backend::{Backend, FloatDType, TensorMetadata};

use crate::recompute::{RegionOp, build};
use crate::types::{Primitive, Tracked};

#[derive(Debug, Clone)]
struct Cast {
    from: FloatDType,
    to: FloatDType,
}

impl<I: Backend> RegionOp<I, 1> for Cast {
    fn name(&self) -> &'static str {
        "cast"
    }

    fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
        I::float_cast(x, self.to)
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
        [Some(I::float_cast(grad, self.from))]
    }
}

/// `cast` in a region.
pub(crate) fn cast<I: Backend>(tensor: Tracked<I>, dtype: FloatDType) -> Tracked<I> {
    let from = tensor.primitive.dtype().into();
    build::<I, _, _>(Cast { from, to: dtype }, [tensor])
}
