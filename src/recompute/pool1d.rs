//! 1-D pooling: average, adaptive average and max (with and without indices).

use burn_backend::Backend;

use super::{RegionOp, build, build_with};
use crate::backend::{IntPrimitive, Primitive, Tracked};

/// Every pooling backward reads the input.
const SAVED: [bool; 1] = [true];

#[derive(Debug, Clone)]
struct AvgPool1d {
    kernel_size: usize,
    stride: usize,
    padding: usize,
    count_include_pad: bool,
    ceil_mode: bool,
}

impl<I: Backend> RegionOp<I, 1> for AvgPool1d {
    fn name(&self) -> &'static str {
        "avg_pool1d"
    }

    fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
        I::avg_pool1d(
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
        [Some(I::avg_pool1d_backward(
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

/// `avg_pool1d` in a region.
pub(crate) fn avg_pool1d<I: Backend>(
    x: Tracked<I>,
    kernel_size: usize,
    stride: usize,
    padding: usize,
    count_include_pad: bool,
    ceil_mode: bool,
) -> Tracked<I> {
    let op = AvgPool1d {
        kernel_size,
        stride,
        padding,
        count_include_pad,
        ceil_mode,
    };
    build::<I, _, _>(op, [x])
}

#[derive(Debug, Clone)]
struct AdaptiveAvgPool1d {
    output_size: usize,
}

impl<I: Backend> RegionOp<I, 1> for AdaptiveAvgPool1d {
    fn name(&self) -> &'static str {
        "adaptive_avg_pool1d"
    }

    fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
        I::adaptive_avg_pool1d(x, self.output_size)
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
        [Some(I::adaptive_avg_pool1d_backward(x.unwrap(), grad))]
    }
}

/// `adaptive_avg_pool1d` in a region.
pub(crate) fn adaptive_avg_pool1d<I: Backend>(x: Tracked<I>, output_size: usize) -> Tracked<I> {
    build::<I, _, _>(AdaptiveAvgPool1d { output_size }, [x])
}

/// Max pooling. Burn holds the argmax indices from forward to backward; here the backward
/// recomputes them from the input.
#[derive(Debug, Clone)]
struct MaxPool1d {
    kernel_size: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
    ceil_mode: bool,
}

impl MaxPool1d {
    /// Burn's tracked max pool: the output comes from the pool that also yields the indices.
    fn with_indices<I: Backend>(&self, x: Primitive<I>) -> (Primitive<I>, IntPrimitive<I>) {
        let out = I::max_pool1d_with_indices(
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

impl<I: Backend> RegionOp<I, 1> for MaxPool1d {
    fn name(&self) -> &'static str {
        "max_pool1d"
    }

    fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
        self.with_indices::<I>(x).0
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
        let grad = I::max_pool1d_with_indices_backward(
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

fn max_pool1d_op(
    kernel_size: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
    ceil_mode: bool,
) -> MaxPool1d {
    MaxPool1d {
        kernel_size,
        stride,
        padding,
        dilation,
        ceil_mode,
    }
}

/// `max_pool1d` in a region.
pub(crate) fn max_pool1d<I: Backend>(
    x: Tracked<I>,
    kernel_size: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
    ceil_mode: bool,
) -> Tracked<I> {
    let op = max_pool1d_op(kernel_size, stride, padding, dilation, ceil_mode);
    build::<I, _, _>(op, [x])
}

/// `max_pool1d_with_indices` in a region: the indices go to the caller, not into the graph.
pub(crate) fn max_pool1d_with_indices<I: Backend>(
    x: Tracked<I>,
    kernel_size: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
    ceil_mode: bool,
) -> (Tracked<I>, IntPrimitive<I>) {
    let op = max_pool1d_op(kernel_size, stride, padding, dilation, ceil_mode);
    build_with::<I, _, _, _>(op, [x], |op, [x]| op.with_indices::<I>(x))
}
