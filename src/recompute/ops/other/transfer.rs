//! Moving a tensor between devices. Modules call `to_device` on their parameters in every forward
//! (BatchNorm does): a no-op on the same device, but a compute-bound node in Burn.

use burn_backend::Backend;

use crate::recompute::{RegionOp, build};
use crate::types::{Primitive, Tracked};

#[derive(Debug, Clone)]
struct ToDevice<I: Backend> {
    from: I::Device,
    to: I::Device,
}

impl<I: Backend> RegionOp<I, 1> for ToDevice<I> {
    fn name(&self) -> &'static str {
        "to_device"
    }

    fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
        I::float_to_device(x, &self.to)
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
        [Some(I::float_to_device(grad, &self.from))]
    }
}

/// `to_device` in a region.
pub(crate) fn to_device<I: Backend>(tensor: Tracked<I>, device: &I::Device) -> Tracked<I> {
    let op = ToDevice::<I> {
        from: I::float_device(&tensor.primitive),
        to: device.clone(),
    };
    build::<I, _, _>(op, [tensor])
}
