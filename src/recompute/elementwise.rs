//! Binary elementwise ops. Burn marks them memory-bound but turns them compute-bound when an
//! operand is untracked (`h * dropout_mask`, `h + constant`); these versions keep the untracked
//! operand in the recompute instead.

use burn_backend::{Backend, Shape, TensorMetadata};

use super::{RegionOp, build, unbroadcast};
use crate::backend::{Primitive, Tracked};

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

#[derive(Debug, Clone)]
struct Add(Shapes);

impl<I: Backend> RegionOp<I, 2> for Add {
    fn name(&self) -> &'static str {
        "add"
    }

    fn forward(&self, [lhs, rhs]: [Primitive<I>; 2]) -> Primitive<I> {
        I::float_add(lhs, rhs)
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
        let for_rhs = rhs.then(|| grad.clone());
        [
            lhs.then(|| unbroadcast::<I>(grad, &self.0.lhs)),
            for_rhs.map(|grad| unbroadcast::<I>(grad, &self.0.rhs)),
        ]
    }
}

#[derive(Debug, Clone)]
struct Sub(Shapes);

impl<I: Backend> RegionOp<I, 2> for Sub {
    fn name(&self) -> &'static str {
        "sub"
    }

    fn forward(&self, [lhs, rhs]: [Primitive<I>; 2]) -> Primitive<I> {
        I::float_sub(lhs, rhs)
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
        let for_rhs = rhs.then(|| grad.clone());
        [
            lhs.then(|| unbroadcast::<I>(grad, &self.0.lhs)),
            for_rhs.map(|grad| unbroadcast::<I>(I::float_neg(grad), &self.0.rhs)),
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
    build::<I, _, _>(Add(Shapes::of(&lhs, &rhs)), [lhs, rhs])
}

/// `lhs - rhs` in a region.
pub(crate) fn sub<I: Backend>(lhs: Tracked<I>, rhs: Tracked<I>) -> Tracked<I> {
    build::<I, _, _>(Sub(Shapes::of(&lhs, &rhs)), [lhs, rhs])
}

/// `lhs * rhs` in a region.
pub(crate) fn mul<I: Backend>(lhs: Tracked<I>, rhs: Tracked<I>) -> Tracked<I> {
    build::<I, _, _>(Mul(Shapes::of(&lhs, &rhs)), [lhs, rhs])
}

/// `lhs / rhs` in a region.
pub(crate) fn div<I: Backend>(lhs: Tracked<I>, rhs: Tracked<I>) -> Tracked<I> {
    build::<I, _, _>(Div(Shapes::of(&lhs, &rhs)), [lhs, rhs])
}
