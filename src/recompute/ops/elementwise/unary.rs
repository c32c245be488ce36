//! Unary elementwise ops (and ops of one tensor with a scalar). Each backward is burn-autodiff
//! 0.21's own formula, op for op, so that gradients stay bitwise equal to plain `Autodiff`.

use burn_backend::{Backend, Scalar, Shape, TensorMetadata};

use crate::recompute::{RegionOp, build};
use crate::types::{Primitive, Tracked};

/// Declares a unary region op and its builder.
///
/// `reads_input` says whether the backward reads the op's input; `backward` maps the input (the
/// first closure argument, `Some` when read) and the output gradient to the input gradient.
macro_rules! unary_op {
    ($(#[$doc:meta])* $builder:ident, $op:ident, $name:literal,
     forward: |$fx:ident| $forward:expr,
     reads_input: $reads:expr,
     backward: |$input:pat_param, $grad:ident| $backward:expr) => {
        #[derive(Debug, Clone)]
        struct $op;

        impl<I: Backend> RegionOp<I, 1> for $op {
            fn name(&self) -> &'static str {
                $name
            }

            fn forward(&self, [$fx]: [Primitive<I>; 1]) -> Primitive<I> {
                $forward
            }

            fn saved(&self, _: [bool; 1]) -> [bool; 1] {
                [$reads]
            }

            fn backward(
                self,
                [input]: [Option<Primitive<I>>; 1],
                $grad: Primitive<I>,
                _: [bool; 1],
            ) -> [Option<Primitive<I>>; 1] {
                let $input = input;
                [Some($backward)]
            }
        }

        $(#[$doc])*
        pub(crate) fn $builder<I: Backend>(tensor: Tracked<I>) -> Tracked<I> {
            build::<I, _, 1>($op, [tensor])
        }
    };
}

unary_op!(
    /// `-x` in a region.
    neg, Neg, "neg",
    forward: |x| I::float_neg(x),
    reads_input: false,
    backward: |_, grad| I::float_neg(grad)
);

unary_op!(
    /// `1 / x` in a region.
    recip, Recip, "recip",
    forward: |x| I::float_recip(x),
    reads_input: true,
    backward: |x, grad| {
        let tmp = I::float_powi_scalar(x.unwrap(), (-2).into());
        I::float_mul(grad, I::float_neg(tmp))
    }
);

unary_op!(
    /// `exp(x)` in a region.
    exp, Exp, "exp",
    forward: |x| I::float_exp(x),
    reads_input: true,
    backward: |x, grad| I::float_mul(grad, I::float_exp(x.unwrap()))
);

unary_op!(
    /// `ln(x)` in a region.
    log, Log, "log",
    forward: |x| I::float_log(x),
    reads_input: true,
    backward: |x, grad| I::float_mul(grad, I::float_recip(x.unwrap()))
);

unary_op!(
    /// `ln(1 + x)` in a region.
    log1p, Log1p, "log1p",
    forward: |x| I::float_log1p(x),
    reads_input: true,
    backward: |x, grad| {
        let value = I::float_recip(I::float_add_scalar(x.unwrap(), 1f32.into()));
        I::float_mul(grad, value)
    }
);

unary_op!(
    /// `√x` in a region.
    sqrt, Sqrt, "sqrt",
    forward: |x| I::float_sqrt(x),
    reads_input: true,
    backward: |x, grad| {
        let value =
            I::float_div_scalar(I::float_powf_scalar(x.unwrap(), (-0.5).into()), 2f32.into());
        I::float_mul(grad, value)
    }
);

unary_op!(
    /// `|x|` in a region.
    abs, Abs, "abs",
    forward: |x| I::float_abs(x),
    reads_input: true,
    backward: |x, grad| I::float_mul(grad, I::float_sign(x.unwrap()))
);

unary_op!(
    /// `cos(x)` in a region.
    cos, Cos, "cos",
    forward: |x| I::float_cos(x),
    reads_input: true,
    backward: |x, grad| I::float_mul(grad, I::float_neg(I::float_sin(x.unwrap())))
);

unary_op!(
    /// `sin(x)` in a region.
    sin, Sin, "sin",
    forward: |x| I::float_sin(x),
    reads_input: true,
    backward: |x, grad| I::float_mul(grad, I::float_cos(x.unwrap()))
);

unary_op!(
    /// `tan(x)` in a region.
    tan, Tan, "tan",
    forward: |x| I::float_tan(x),
    reads_input: true,
    backward: |x, grad| {
        let tan_sq = I::float_powi_scalar(I::float_tan(x.unwrap()), 2.into());
        I::float_mul(grad, I::float_add_scalar(tan_sq, 1f32.into()))
    }
);

unary_op!(
    /// `cosh(x)` in a region.
    cosh, Cosh, "cosh",
    forward: |x| I::float_cosh(x),
    reads_input: true,
    backward: |x, grad| I::float_mul(grad, I::float_sinh(x.unwrap()))
);

unary_op!(
    /// `sinh(x)` in a region.
    sinh, Sinh, "sinh",
    forward: |x| I::float_sinh(x),
    reads_input: true,
    backward: |x, grad| I::float_mul(grad, I::float_cosh(x.unwrap()))
);

unary_op!(
    /// `tanh(x)` in a region.
    tanh, Tanh, "tanh",
    forward: |x| I::float_tanh(x),
    reads_input: true,
    backward: |x, grad| {
        let tanh = I::float_tanh(x.unwrap());
        let value = I::float_add_scalar(
            I::float_neg(I::float_powi_scalar(tanh, 2.into())),
            1f32.into(),
        );
        I::float_mul(grad, value)
    }
);

unary_op!(
    /// `acos(x)` in a region.
    acos, Acos, "acos",
    forward: |x| I::float_acos(x),
    reads_input: true,
    backward: |x, grad| {
        let x_sq = I::float_powi_scalar(x.unwrap(), 2.into());
        let denom = I::float_sqrt(I::float_add_scalar(I::float_neg(x_sq), 1f32.into()));
        I::float_mul(grad, I::float_neg(I::float_recip(denom)))
    }
);

unary_op!(
    /// `acosh(x)` in a region.
    acosh, Acosh, "acosh",
    forward: |x| I::float_acosh(x),
    reads_input: true,
    backward: |x, grad| {
        let x_sq = I::float_powi_scalar(x.unwrap(), 2.into());
        let value = I::float_recip(I::float_sqrt(I::float_sub_scalar(x_sq, 1f32.into())));
        I::float_mul(grad, value)
    }
);

unary_op!(
    /// `asin(x)` in a region.
    asin, Asin, "asin",
    forward: |x| I::float_asin(x),
    reads_input: true,
    backward: |x, grad| {
        let x_sq = I::float_powi_scalar(x.unwrap(), 2.into());
        let denom = I::float_sqrt(I::float_add_scalar(I::float_neg(x_sq), 1f32.into()));
        I::float_mul(grad, I::float_recip(denom))
    }
);

unary_op!(
    /// `asinh(x)` in a region.
    asinh, Asinh, "asinh",
    forward: |x| I::float_asinh(x),
    reads_input: true,
    backward: |x, grad| {
        let x_sq = I::float_powi_scalar(x.unwrap(), 2.into());
        let value = I::float_recip(I::float_sqrt(I::float_add_scalar(x_sq, 1f32.into())));
        I::float_mul(grad, value)
    }
);

unary_op!(
    /// `atan(x)` in a region.
    atan, Atan, "atan",
    forward: |x| I::float_atan(x),
    reads_input: true,
    backward: |x, grad| {
        let x_sq = I::float_powi_scalar(x.unwrap(), 2.into());
        I::float_mul(grad, I::float_recip(I::float_add_scalar(x_sq, 1f32.into())))
    }
);

unary_op!(
    /// `atanh(x)` in a region.
    atanh, Atanh, "atanh",
    forward: |x| I::float_atanh(x),
    reads_input: true,
    backward: |x, grad| {
        let x_sq = I::float_powi_scalar(x.unwrap(), 2.into());
        let value = I::float_recip(I::float_add_scalar(I::float_neg(x_sq), 1f32.into()));
        I::float_mul(grad, value)
    }
);

unary_op!(
    /// `erf(x)` in a region.
    erf, Erf, "erf",
    forward: |x| I::float_erf(x),
    reads_input: true,
    backward: |x, grad| {
        let exponent = I::float_neg(I::float_powi_scalar(x.unwrap(), 2.into()));
        let numerator = I::float_mul_scalar(I::float_exp(exponent), 2.0.into());
        let value = I::float_div_scalar(numerator, core::f64::consts::PI.sqrt().into());
        I::float_mul(grad, value)
    }
);

unary_op!(
    /// `sign(x)` in a region (gradient zero, as Burn computes it).
    sign, Sign, "sign",
    forward: |x| I::float_sign(x),
    reads_input: false,
    backward: |_, grad| I::float_mul_scalar(grad, 0f32.into())
);

/// Rounding ops: their gradient is zero, made as Burn makes it (zeros of the input's shape).
#[derive(Debug, Clone)]
struct Rounding<I: Backend> {
    name: &'static str,
    forward: fn(Primitive<I>) -> Primitive<I>,
    shape: Shape,
    device: I::Device,
}

impl<I: Backend> RegionOp<I, 1> for Rounding<I> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
        (self.forward)(x)
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
        [Some(I::float_zeros(
            self.shape,
            &self.device,
            grad.dtype().into(),
        ))]
    }
}

fn rounding<I: Backend>(
    name: &'static str,
    forward: fn(Primitive<I>) -> Primitive<I>,
    tensor: Tracked<I>,
) -> Tracked<I> {
    let op = Rounding {
        name,
        forward,
        shape: tensor.primitive.shape(),
        device: I::float_device(&tensor.primitive),
    };
    build::<I, _, 1>(op, [tensor])
}

/// `round(x)` in a region.
pub(crate) fn round<I: Backend>(tensor: Tracked<I>) -> Tracked<I> {
    rounding("round", I::float_round, tensor)
}

/// `floor(x)` in a region.
pub(crate) fn floor<I: Backend>(tensor: Tracked<I>) -> Tracked<I> {
    rounding("floor", I::float_floor, tensor)
}

/// `ceil(x)` in a region.
pub(crate) fn ceil<I: Backend>(tensor: Tracked<I>) -> Tracked<I> {
    rounding("ceil", I::float_ceil, tensor)
}

/// `trunc(x)` in a region.
pub(crate) fn trunc<I: Backend>(tensor: Tracked<I>) -> Tracked<I> {
    rounding("trunc", I::float_trunc, tensor)
}

/// An op of a tensor and a scalar.
#[derive(Debug, Clone)]
struct WithScalar {
    kind: ScalarOp,
    scalar: Scalar,
}

#[derive(Debug, Clone, Copy)]
enum ScalarOp {
    Add,
    Sub,
    Mul,
    Div,
    Remainder,
    Powf,
}

impl<I: Backend> RegionOp<I, 1> for WithScalar {
    fn name(&self) -> &'static str {
        match self.kind {
            ScalarOp::Add => "add_scalar",
            ScalarOp::Sub => "sub_scalar",
            ScalarOp::Mul => "mul_scalar",
            ScalarOp::Div => "div_scalar",
            ScalarOp::Remainder => "remainder_scalar",
            ScalarOp::Powf => "powf_scalar_impl",
        }
    }

    fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
        let s = self.scalar;
        match self.kind {
            ScalarOp::Add => I::float_add_scalar(x, s),
            ScalarOp::Sub => I::float_sub_scalar(x, s),
            ScalarOp::Mul => I::float_mul_scalar(x, s),
            ScalarOp::Div => I::float_div_scalar(x, s),
            ScalarOp::Remainder => I::float_remainder_scalar(x, s),
            // Burn's autodiff computes `powf_scalar_impl` with the inner `powf_scalar`.
            ScalarOp::Powf => I::float_powf_scalar(x, s),
        }
    }

    fn saved(&self, _: [bool; 1]) -> [bool; 1] {
        [matches!(self.kind, ScalarOp::Powf)]
    }

    fn backward(
        self,
        [x]: [Option<Primitive<I>>; 1],
        grad: Primitive<I>,
        _: [bool; 1],
    ) -> [Option<Primitive<I>>; 1] {
        let grad = match self.kind {
            ScalarOp::Add | ScalarOp::Sub | ScalarOp::Remainder => grad,
            ScalarOp::Mul => I::float_mul_scalar(grad, self.scalar),
            ScalarOp::Div => {
                let tmp = 1.0 / self.scalar.elem::<f32>();
                I::float_mul_scalar(grad, tmp.into())
            }
            ScalarOp::Powf => {
                let value: f64 = self.scalar.elem();
                let tmp = I::float_powf_scalar(x.unwrap(), (value - 1.).into());
                I::float_mul(grad, I::float_mul_scalar(tmp, value.into()))
            }
        };
        [Some(grad)]
    }
}

fn with_scalar<I: Backend>(kind: ScalarOp, tensor: Tracked<I>, scalar: Scalar) -> Tracked<I> {
    build::<I, _, 1>(WithScalar { kind, scalar }, [tensor])
}

/// `x + s` in a region.
pub(crate) fn add_scalar<I: Backend>(tensor: Tracked<I>, scalar: Scalar) -> Tracked<I> {
    with_scalar(ScalarOp::Add, tensor, scalar)
}

/// `x - s` in a region.
pub(crate) fn sub_scalar<I: Backend>(tensor: Tracked<I>, scalar: Scalar) -> Tracked<I> {
    with_scalar(ScalarOp::Sub, tensor, scalar)
}

/// `x * s` in a region.
pub(crate) fn mul_scalar<I: Backend>(tensor: Tracked<I>, scalar: Scalar) -> Tracked<I> {
    with_scalar(ScalarOp::Mul, tensor, scalar)
}

/// `x / s` in a region.
pub(crate) fn div_scalar<I: Backend>(tensor: Tracked<I>, scalar: Scalar) -> Tracked<I> {
    with_scalar(ScalarOp::Div, tensor, scalar)
}

/// `x % s` in a region.
pub(crate) fn remainder_scalar<I: Backend>(tensor: Tracked<I>, scalar: Scalar) -> Tracked<I> {
    with_scalar(ScalarOp::Remainder, tensor, scalar)
}

/// `x ^ s` in a region.
pub(crate) fn powf_scalar_impl<I: Backend>(tensor: Tracked<I>, scalar: Scalar) -> Tracked<I> {
    with_scalar(ScalarOp::Powf, tensor, scalar)
}
