//! Convolutions: conv1d/2d/3d and their transposes, with or without bias.

use burn_backend::Backend;
use burn_backend::ops::{ConvOptions, ConvTransposeOptions};

use crate::recompute::{RegionOp, build};
use crate::types::{Primitive, Tracked};

/// Which operands a convolution's backward reads: every gradient reads `x`; those of `x` and the
/// weight read the weight; the bias gradient reads the bias.
fn conv_saved(needs_grad: &[bool]) -> [bool; 3] {
    let bias = needs_grad.get(2).copied().unwrap_or(false);
    [true, needs_grad[0] || needs_grad[1], bias]
}

/// The inner backend's input-gradient call: transposed convolutions do not read `x`.
macro_rules! x_grad {
    (reads_x, $f:ident, $x:expr, $weight:expr, $grad:expr, $options:expr) => {
        I::$f($x, $weight, $grad, $options)
    };
    (ignores_x, $f:ident, $x:expr, $weight:expr, $grad:expr, $options:expr) => {
        I::$f($weight, $grad, $options)
    };
}

/// One convolution family: the op struct (holding the options), its entry point, and the inner
/// backend's forward and backward functions.
macro_rules! convolution {
    ($op:ident, $entry:ident, $options:ty, $forward:ident, $x_grad:ident $x_reads:ident, $w_grad:ident, $b_grad:ident) => {
        #[derive(Debug, Clone)]
        struct $op($options);

        impl $op {
            fn x_weight_grads<I: Backend>(
                &self,
                x: &Primitive<I>,
                weight: &Primitive<I>,
                grad: &Primitive<I>,
                needs_grad: &[bool],
            ) -> [Option<Primitive<I>>; 2] {
                [
                    needs_grad[0].then(|| {
                        x_grad!(
                            $x_reads,
                            $x_grad,
                            x.clone(),
                            weight.clone(),
                            grad.clone(),
                            self.0.clone()
                        )
                    }),
                    needs_grad[1].then(|| {
                        I::$w_grad(x.clone(), weight.clone(), grad.clone(), self.0.clone())
                    }),
                ]
            }
        }

        impl<I: Backend> RegionOp<I, 3> for $op {
            fn name(&self) -> &'static str {
                stringify!($entry)
            }

            fn forward(&self, [x, weight, bias]: [Primitive<I>; 3]) -> Primitive<I> {
                I::$forward(x, weight, Some(bias), self.0.clone())
            }

            fn saved(&self, needs_grad: [bool; 3]) -> [bool; 3] {
                conv_saved(&needs_grad)
            }

            fn backward(
                self,
                [x, weight, bias]: [Option<Primitive<I>>; 3],
                grad: Primitive<I>,
                needs_grad: [bool; 3],
            ) -> [Option<Primitive<I>>; 3] {
                let x = x.unwrap();
                let [x_grad, weight_grad] = match &weight {
                    Some(weight) => self.x_weight_grads::<I>(&x, weight, &grad, &needs_grad),
                    None => [None, None],
                };
                let bias_grad = needs_grad[2].then(|| I::$b_grad(x, bias.unwrap(), grad));
                [x_grad, weight_grad, bias_grad]
            }
        }

        impl<I: Backend> RegionOp<I, 2> for $op {
            fn name(&self) -> &'static str {
                stringify!($entry)
            }

            fn forward(&self, [x, weight]: [Primitive<I>; 2]) -> Primitive<I> {
                I::$forward(x, weight, None, self.0.clone())
            }

            fn saved(&self, needs_grad: [bool; 2]) -> [bool; 2] {
                let [x, weight, _] = conv_saved(&needs_grad);
                [x, weight]
            }

            fn backward(
                self,
                [x, weight]: [Option<Primitive<I>>; 2],
                grad: Primitive<I>,
                needs_grad: [bool; 2],
            ) -> [Option<Primitive<I>>; 2] {
                self.x_weight_grads::<I>(&x.unwrap(), &weight.unwrap(), &grad, &needs_grad)
            }
        }

        #[doc = concat!("`", stringify!($entry), "` in a region.")]
        pub(crate) fn $entry<I: Backend>(
            x: Tracked<I>,
            weight: Tracked<I>,
            bias: Option<Tracked<I>>,
            options: $options,
        ) -> Tracked<I> {
            match bias {
                Some(bias) => build::<I, _, _>($op(options), [x, weight, bias]),
                None => build::<I, _, _>($op(options), [x, weight]),
            }
        }
    };
}

convolution!(
    Conv1d,
    conv1d,
    ConvOptions<1>,
    conv1d,
    conv1d_x_backward reads_x,
    conv1d_weight_backward,
    conv1d_bias_backward
);
convolution!(
    Conv2d,
    conv2d,
    ConvOptions<2>,
    conv2d,
    conv2d_x_backward reads_x,
    conv2d_weight_backward,
    conv2d_bias_backward
);
convolution!(
    ConvTranspose2d,
    conv_transpose2d,
    ConvTransposeOptions<2>,
    conv_transpose2d,
    conv_transpose2d_x_backward ignores_x,
    conv_transpose2d_weight_backward,
    conv_transpose2d_bias_backward
);
convolution!(
    Conv3d,
    conv3d,
    ConvOptions<3>,
    conv3d,
    conv3d_x_backward reads_x,
    conv3d_weight_backward,
    conv3d_bias_backward
);
convolution!(
    ConvTranspose1d,
    conv_transpose1d,
    ConvTransposeOptions<1>,
    conv_transpose1d,
    conv_transpose1d_x_backward ignores_x,
    conv_transpose1d_weight_backward,
    conv_transpose1d_bias_backward
);
convolution!(
    ConvTranspose3d,
    conv_transpose3d,
    ConvTransposeOptions<3>,
    conv_transpose3d,
    conv_transpose3d_x_backward ignores_x,
    conv_transpose3d_weight_backward,
    conv_transpose3d_bias_backward
);
