//! 2-D pooling: average, adaptive average and max (with and without indices).

use burn_backend::Backend;

use super::{RegionOp, build, build_with};
use crate::backend::{IntPrimitive, Primitive, Tracked};

/// Every pooling backward reads the input.
const SAVED: [bool; 1] = [true];

#[derive(Debug, Clone)]
struct AvgPool2d {
    kernel_size: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    count_include_pad: bool,
    ceil_mode: bool,
}

impl<I: Backend> RegionOp<I, 1> for AvgPool2d {
    fn name(&self) -> &'static str {
        "avg_pool2d"
    }

    fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
        I::avg_pool2d(
            x,
            self.kernel_size,
            self.stride,
            self.padding,
            self.count_include_pad,
            self.ceil_mode,
        )
    }

    fn saved(&self, _: [bool; 1]) -> [bool; 1] {
        SAVED
    }

    fn backward(
        self,
        [x]: [Option<Primitive<I>>; 1],
        grad: Primitive<I>,
        _: [bool; 1],
    ) -> [Option<Primitive<I>>; 1] {
        [Some(I::avg_pool2d_backward(
            x.unwrap(),
            grad,
            self.kernel_size,
            self.stride,
            self.padding,
            self.count_include_pad,
            self.ceil_mode,
        ))]
    }
}

/// `avg_pool2d` in a region.
pub(crate) fn avg_pool2d<I: Backend>(
    x: Tracked<I>,
    kernel_size: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    count_include_pad: bool,
    ceil_mode: bool,
) -> Tracked<I> {
    let op = AvgPool2d {
        kernel_size,
        stride,
        padding,
        count_include_pad,
        ceil_mode,
    };
    build::<I, _, _>(op, [x])
}

#[derive(Debug, Clone)]
struct AdaptiveAvgPool2d {
    output_size: [usize; 2],
}

impl<I: Backend> RegionOp<I, 1> for AdaptiveAvgPool2d {
    fn name(&self) -> &'static str {
        "adaptive_avg_pool2d"
    }

    fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
        I::adaptive_avg_pool2d(x, self.output_size)
    }

    fn saved(&self, _: [bool; 1]) -> [bool; 1] {
        SAVED
    }

    fn backward(
        self,
        [x]: [Option<Primitive<I>>; 1],
        grad: Primitive<I>,
        _: [bool; 1],
    ) -> [Option<Primitive<I>>; 1] {
        [Some(I::adaptive_avg_pool2d_backward(x.unwrap(), grad))]
    }
}

/// `adaptive_avg_pool2d` in a region.
pub(crate) fn adaptive_avg_pool2d<I: Backend>(
    x: Tracked<I>,
    output_size: [usize; 2],
) -> Tracked<I> {
    build::<I, _, _>(AdaptiveAvgPool2d { output_size }, [x])
}

/// Max pooling. Burn holds the argmax indices from forward to backward; here the backward
/// recomputes them from the input.
#[derive(Debug, Clone)]
struct MaxPool2d {
    kernel_size: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    ceil_mode: bool,
}

impl MaxPool2d {
    fn with_indices<I: Backend>(&self, x: Primitive<I>) -> (Primitive<I>, IntPrimitive<I>) {
        let out = I::max_pool2d_with_indices(
            x,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            self.ceil_mode,
        );
        (out.output, out.indices)
    }
}

impl<I: Backend> RegionOp<I, 1> for MaxPool2d {
    fn name(&self) -> &'static str {
        "max_pool2d"
    }

    fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
        I::max_pool2d(
            x,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            self.ceil_mode,
        )
    }

    fn saved(&self, _: [bool; 1]) -> [bool; 1] {
        SAVED
    }

    fn backward(
        self,
        [x]: [Option<Primitive<I>>; 1],
        grad: Primitive<I>,
        _: [bool; 1],
    ) -> [Option<Primitive<I>>; 1] {
        let x = x.unwrap();
        let (_, indices) = self.with_indices::<I>(x.clone());
        let grad = I::max_pool2d_with_indices_backward(
            x,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            self.ceil_mode,
            grad,
            indices,
        );
        [Some(grad.x_grad)]
    }
}

/// `max_pool2d` in a region.
pub(crate) fn max_pool2d<I: Backend>(
    x: Tracked<I>,
    kernel_size: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    ceil_mode: bool,
) -> Tracked<I> {
    let op = MaxPool2d {
        kernel_size,
        stride,
        padding,
        dilation,
        ceil_mode,
    };
    build::<I, _, _>(op, [x])
}

/// `max_pool2d_with_indices` in a region: the indices go to the caller, not into the graph.
pub(crate) fn max_pool2d_with_indices<I: Backend>(
    x: Tracked<I>,
    kernel_size: [usize; 2],
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
    ceil_mode: bool,
) -> (Tracked<I>, IntPrimitive<I>) {
    let op = MaxPool2d {
        kernel_size,
        stride,
        padding,
        dilation,
        ceil_mode,
    };
    build_with::<I, _, _, _>(op, [x], |op, [x]| op.with_indices::<I>(x))
}
