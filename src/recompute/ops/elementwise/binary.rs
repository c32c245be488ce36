//! Binary elementwise ops, with burn-autodiff 0.21's backward formulas. An untracked operand
//! (`h * dropout_mask`, `h + constant`) is kept in the recompute as it is.

use burn_backend::{Backend, Shape, TensorMetadata};

use crate::recompute::{RegionOp, build, unbroadcast};
use crate::types::{Primitive, Tracked};

/// The shapes of both operands, to reduce broadcast gradients.
#[derive(Debug, Clone)]
struct Shapes {
    lhs: Shape,
    rhs: Shape,
}

impl Shapes {
    fn of<I: Backend>(lhs: &Tracked<I>, rhs: &Tracked<I>) -> Self {
        Shapes {
            lhs: lhs.primitive.shape(),
            rhs: rhs.primitive.shape(),
        }
    }
}

/// `lhs + rhs` or `lhs - rhs`: one op, since their backwards differ only in the sign of the
/// right-hand gradient.
#[derive(Debug, Clone)]
struct AddOrSub {
    shapes: Shapes,
    subtract: bool,
}

impl<I: Backend> RegionOp<I, 2> for AddOrSub {
    fn name(&self) -> &'static str {
        if self.subtract { "sub" } else { "add" }
    }

    fn forward(&self, [lhs, rhs]: [Primitive<I>; 2]) -> Primitive<I> {
        if self.subtract {
            I::float_sub(lhs, rhs)
        } else {
            I::float_add(lhs, rhs)
        }
    }

    fn saved(&self, _: [bool; 2]) -> [bool; 2] {
        [false, false]
    }

    fn backward(
        self,
        _: [Option<Primitive<I>>; 2],
        grad: Primitive<I>,
        [lhs, rhs]: [bool; 2],
    ) -> [Option<Primitive<I>>; 2] {
        let mut for_rhs = rhs.then(|| grad.clone());
        if self.subtract {
            for_rhs = for_rhs.map(I::float_neg);
        }
        [
            lhs.then(|| unbroadcast::<I>(grad, &self.shapes.lhs)),
            for_rhs.map(|grad| unbroadcast::<I>(grad, &self.shapes.rhs)),
        ]
    }
}

#[derive(Debug, Clone)]
struct Mul(Shapes);

impl<I: Backend> RegionOp<I, 2> for Mul {
    fn name(&self) -> &'static str {
        "mul"
    }

    fn forward(&self, [lhs, rhs]: [Primitive<I>; 2]) -> Primitive<I> {
        I::float_mul(lhs, rhs)
    }

    /// Each operand's gradient needs the other operand.
    fn saved(&self, [lhs, rhs]: [bool; 2]) -> [bool; 2] {
        [rhs, lhs]
    }

    fn backward(
        self,
        [lhs_value, rhs_value]: [Option<Primitive<I>>; 2],
        grad: Primitive<I>,
        [lhs, rhs]: [bool; 2],
    ) -> [Option<Primitive<I>>; 2] {
        let for_rhs = rhs.then(|| grad.clone());
        [
            lhs.then(|| unbroadcast::<I>(I::float_mul(grad, rhs_value.unwrap()), &self.0.lhs)),
            for_rhs
                .map(|grad| unbroadcast::<I>(I::float_mul(grad, lhs_value.unwrap()), &self.0.rhs)),
        ]
    }
}

#[derive(Debug, Clone)]
struct Div(Shapes);

impl<I: Backend> RegionOp<I, 2> for Div {
    fn name(&self) -> &'static str {
        "div"
    }

    fn forward(&self, [lhs, rhs]: [Primitive<I>; 2]) -> Primitive<I> {
        I::float_div(lhs, rhs)
    }

    /// Both gradients need the divisor; the divisor's gradient also needs the dividend.
    fn saved(&self, [lhs, rhs]: [bool; 2]) -> [bool; 2] {
        [rhs, lhs || rhs]
    }

    fn backward(
        self,
        [lhs_value, rhs_value]: [Option<Primitive<I>>; 2],
        grad: Primitive<I>,
        [lhs, rhs]: [bool; 2],
    ) -> [Option<Primitive<I>>; 2] {
        let rhs_value = rhs_value.unwrap();
        let for_rhs = rhs.then(|| (grad.clone(), rhs_value.clone()));
        let lhs_grad = lhs.then(|| {
            let grad = I::float_mul(grad, I::float_recip(rhs_value));
            unbroadcast::<I>(grad, &self.0.lhs)
        });
        let rhs_grad = for_rhs.map(|(grad, rhs_value)| {
            let value = I::float_div(
                I::float_neg(lhs_value.unwrap()),
                I::float_powi_scalar(rhs_value, 2.into()),
            );
            unbroadcast::<I>(I::float_mul(grad, value), &self.0.rhs)
        });
        [lhs_grad, rhs_grad]
    }
}

/// `lhs + rhs` in a region.
pub(crate) fn add<I: Backend>(lhs: Tracked<I>, rhs: Tracked<I>) -> Tracked<I> {
    add_or_sub(lhs, rhs, false)
}

/// `lhs - rhs` in a region.
pub(crate) fn sub<I: Backend>(lhs: Tracked<I>, rhs: Tracked<I>) -> Tracked<I> {
    add_or_sub(lhs, rhs, true)
}

fn add_or_sub<I: Backend>(lhs: Tracked<I>, rhs: Tracked<I>, subtract: bool) -> Tracked<I> {
    let shapes = Shapes::of(&lhs, &rhs);
    build::<I, _, _>(AddOrSub { shapes, subtract }, [lhs, rhs])
}

/// `lhs * rhs` in a region.
pub(crate) fn mul<I: Backend>(lhs: Tracked<I>, rhs: Tracked<I>) -> Tracked<I> {
    build::<I, _, _>(Mul(Shapes::of(&lhs, &rhs)), [lhs, rhs])
}

/// `lhs / rhs` in a region.
pub(crate) fn div<I: Backend>(lhs: Tracked<I>, rhs: Tracked<I>) -> Tracked<I> {
    build::<I, _, _>(Div(Shapes::of(&lhs, &rhs)), [lhs, rhs])
}

/// The other binary elementwise ops, whose backwards read both operands: Burn's formulas.
#[derive(Debug, Clone)]
struct Binary {
    kind: BinaryOp,
    shapes: Shapes,
}

#[derive(Debug, Clone, Copy)]
enum BinaryOp {
    Remainder,
    Powf,
    Atan2,
}

impl<I: Backend> RegionOp<I, 2> for Binary {
    fn name(&self) -> &'static str {
        match self.kind {
            BinaryOp::Remainder => "remainder",
            BinaryOp::Powf => "powf",
            BinaryOp::Atan2 => "atan2",
        }
    }

    fn forward(&self, [lhs, rhs]: [Primitive<I>; 2]) -> Primitive<I> {
        match self.kind {
            BinaryOp::Remainder => I::float_remainder(lhs, rhs),
            BinaryOp::Powf => I::float_powf(lhs, rhs),
            BinaryOp::Atan2 => I::float_atan2(lhs, rhs),
        }
    }

    fn saved(&self, [lhs, rhs]: [bool; 2]) -> [bool; 2] {
        match self.kind {
            // The dividend's gradient is the output gradient; the divisor's reads both.
            BinaryOp::Remainder => [rhs, rhs],
            BinaryOp::Powf | BinaryOp::Atan2 => [lhs || rhs, lhs || rhs],
        }
    }

    fn backward(
        self,
        [lhs_value, rhs_value]: [Option<Primitive<I>>; 2],
        grad: Primitive<I>,
        [lhs, rhs]: [bool; 2],
    ) -> [Option<Primitive<I>>; 2] {
        let for_rhs = rhs.then(|| grad.clone());
        let (lhs_grad, rhs_grad) = match self.kind {
            BinaryOp::Remainder => {
                let lhs_grad = lhs.then_some(grad);
                let rhs_grad = for_rhs.map(|grad| {
                    let quotient = I::float_div(lhs_value.unwrap(), rhs_value.unwrap());
                    I::float_mul(grad, I::float_neg(I::float_floor(quotient)))
                });
                (lhs_grad, rhs_grad)
            }
            BinaryOp::Powf => {
                let (x, y) = (lhs_value.unwrap(), rhs_value.unwrap());
                let for_rhs = for_rhs.map(|grad| (grad, x.clone(), y.clone()));
                let lhs_grad = lhs.then(|| {
                    let tmp = I::float_powf(x, I::float_sub_scalar(y.clone(), 1.0.into()));
                    I::float_mul(grad, I::float_mul(tmp, y))
                });
                let rhs_grad = for_rhs.map(|(grad, x, y)| {
                    let tmp = I::float_powf(x.clone(), y);
                    I::float_mul(grad, I::float_mul(tmp, I::float_log(x)))
                });
                (lhs_grad, rhs_grad)
            }
            BinaryOp::Atan2 => {
                let (y, x) = (lhs_value.unwrap(), rhs_value.unwrap());
                let for_rhs = for_rhs.map(|grad| (grad, y.clone(), x.clone()));
                let lhs_grad = lhs.then(|| {
                    let x_sq = I::float_powi_scalar(x.clone(), 2.into());
                    let y_sq = I::float_powi_scalar(y, 2.into());
                    let value = I::float_div(x, I::float_add(x_sq, y_sq));
                    I::float_mul(grad, value)
                });
                let rhs_grad = for_rhs.map(|(grad, y, x)| {
                    let x_sq = I::float_powi_scalar(x, 2.into());
                    let y_sq = I::float_powi_scalar(y.clone(), 2.into());
                    let value = I::float_neg(I::float_div(y, I::float_add(x_sq, y_sq)));
                    I::float_mul(grad, value)
                });
                (lhs_grad, rhs_grad)
            }
        };
        [
            lhs_grad.map(|grad| unbroadcast::<I>(grad, &self.shapes.lhs)),
            rhs_grad.map(|grad| unbroadcast::<I>(grad, &self.shapes.rhs)),
        ]
    }
}

fn binary<I: Backend>(kind: BinaryOp, lhs: Tracked<I>, rhs: Tracked<I>) -> Tracked<I> {
    let shapes = Shapes::of(&lhs, &rhs);
    build::<I, _, _>(Binary { kind, shapes }, [lhs, rhs])
}

/// `lhs % rhs` in a region.
pub(crate) fn remainder<I: Backend>(lhs: Tracked<I>, rhs: Tracked<I>) -> Tracked<I> {
    binary(BinaryOp::Remainder, lhs, rhs)
}

/// `lhs ^ rhs` in a region.
pub(crate) fn powf<I: Backend>(lhs: Tracked<I>, rhs: Tracked<I>) -> Tracked<I> {
    binary(BinaryOp::Powf, lhs, rhs)
}

/// `atan2(y, x)` in a region.
pub(crate) fn atan2<I: Backend>(y: Tracked<I>, x: Tracked<I>) -> Tracked<I> {
    binary(BinaryOp::Atan2, y, x)
}
