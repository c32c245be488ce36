//! Pooling, 1-D and 2-D: average, adaptive average and max (with and without indices). Both
//! dimensions come from one template; only the size type and the inner backend's functions
//! differ.

use burn_backend::Backend;

use crate::recompute::{RegionOp, build, build_with};
use crate::types::{IntPrimitive, Primitive, Tracked};

/// Every pooling backward reads the input.
const SAVED: [bool; 1] = [true];

/// The pooling ops of one dimension: `$size` is the type of a kernel size (`usize`,
/// `[usize; 2]`), the identifiers are the op structs and the inner backend's functions (the
/// region entry points carry the forward functions' names).
macro_rules! pooling {
    (
        size: $size:ty,
        avg: $Avg:ident, $avg:ident, $avg_backward:ident,
        adaptive: $Adaptive:ident, $adaptive:ident, $adaptive_backward:ident,
        max: $Max:ident, $max:ident, $max_with_indices:ident, $max_backward:ident $(,)?
    ) => {
        #[derive(Debug, Clone)]
        struct $Avg {
            kernel_size: $size,
            stride: $size,
            padding: $size,
            count_include_pad: bool,
            ceil_mode: bool,
        }

        impl<I: Backend> RegionOp<I, 1> for $Avg {
            fn name(&self) -> &'static str {
                stringify!($avg)
            }

            fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
                I::$avg(
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
                [Some(I::$avg_backward(
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

        #[doc = concat!("`", stringify!($avg), "` in a region.")]
        pub(crate) fn $avg<I: Backend>(
            x: Tracked<I>,
            kernel_size: $size,
            stride: $size,
            padding: $size,
            count_include_pad: bool,
            ceil_mode: bool,
        ) -> Tracked<I> {
            let op = $Avg {
                kernel_size,
                stride,
                padding,
                count_include_pad,
                ceil_mode,
            };
            build::<I, _, _>(op, [x])
        }

        #[derive(Debug, Clone)]
        struct $Adaptive {
            output_size: $size,
        }

        impl<I: Backend> RegionOp<I, 1> for $Adaptive {
            fn name(&self) -> &'static str {
                stringify!($adaptive)
            }

            fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
                I::$adaptive(x, self.output_size)
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
                [Some(I::$adaptive_backward(x.unwrap(), grad))]
            }
        }

        #[doc = concat!("`", stringify!($adaptive), "` in a region.")]
        pub(crate) fn $adaptive<I: Backend>(x: Tracked<I>, output_size: $size) -> Tracked<I> {
            build::<I, _, _>($Adaptive { output_size }, [x])
        }

        /// Max pooling. Burn holds the argmax indices from forward to backward; here the
        /// backward recomputes them from the input.
        #[derive(Debug, Clone)]
        struct $Max {
            kernel_size: $size,
            stride: $size,
            padding: $size,
            dilation: $size,
            ceil_mode: bool,
        }

        impl $Max {
            fn with_indices<I: Backend>(&self, x: Primitive<I>) -> (Primitive<I>, IntPrimitive<I>) {
                let out = I::$max_with_indices(
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

        impl<I: Backend> RegionOp<I, 1> for $Max {
            fn name(&self) -> &'static str {
                stringify!($max)
            }

            fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
                I::$max(
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
                let grad = I::$max_backward(
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

        #[doc = concat!("`", stringify!($max), "` in a region.")]
        pub(crate) fn $max<I: Backend>(
            x: Tracked<I>,
            kernel_size: $size,
            stride: $size,
            padding: $size,
            dilation: $size,
            ceil_mode: bool,
        ) -> Tracked<I> {
            let op = $Max {
                kernel_size,
                stride,
                padding,
                dilation,
                ceil_mode,
            };
            build::<I, _, _>(op, [x])
        }

        #[doc = concat!("`", stringify!($max_with_indices), "` in a region.")]
        ///
        /// The indices go to the caller, not into the graph.
        pub(crate) fn $max_with_indices<I: Backend>(
            x: Tracked<I>,
            kernel_size: $size,
            stride: $size,
            padding: $size,
            dilation: $size,
            ceil_mode: bool,
        ) -> (Tracked<I>, IntPrimitive<I>) {
            let op = $Max {
                kernel_size,
                stride,
                padding,
                dilation,
                ceil_mode,
            };
            build_with::<I, _, _, _>(op, [x], |op, [x]| op.with_indices::<I>(x))
        }
    };
}

pooling!(
    size: usize,
    avg: AvgPool1d, avg_pool1d, avg_pool1d_backward,
    adaptive: AdaptiveAvgPool1d, adaptive_avg_pool1d, adaptive_avg_pool1d_backward,
    max: MaxPool1d, max_pool1d, max_pool1d_with_indices, max_pool1d_with_indices_backward,
);

pooling!(
    size: [usize; 2],
    avg: AvgPool2d, avg_pool2d, avg_pool2d_backward,
    adaptive: AdaptiveAvgPool2d, adaptive_avg_pool2d, adaptive_avg_pool2d_backward,
    max: MaxPool2d, max_pool2d, max_pool2d_with_indices, max_pool2d_with_indices_backward,
);
