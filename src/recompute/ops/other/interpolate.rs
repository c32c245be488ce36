//! Interpolation (resizing) of 2-D images.

use burn_backend::Backend;
use burn_backend::ops::InterpolateOptions;

use crate::recompute::{RegionOp, build};
use crate::types::{Primitive, Tracked};

#[derive(Debug, Clone)]
struct Interpolate {
    output_size: [usize; 2],
    options: InterpolateOptions,
}

impl<I: Backend> RegionOp<I, 1> for Interpolate {
    fn name(&self) -> &'static str {
        "interpolate"
    }

    fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
        I::interpolate(x, self.output_size, self.options.clone())
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
        [Some(I::interpolate_backward(
            x.unwrap(),
            grad,
            self.output_size,
            self.options,
        ))]
    }
}

/// `interpolate` in a region.
pub(crate) fn interpolate<I: Backend>(
    x: Tracked<I>,
    output_size: [usize; 2],
    options: InterpolateOptions,
) -> Tracked<I> {
    build::<I, _, _>(
        Interpolate {
            output_size,
            options,
        },
        [x],
    )
}
