//! Matrix products: `matmul` (batched, with broadcast batch dimensions) and the `linear` module op.

use burn_backend::{Backend, Shape, TensorMetadata};

use crate::recompute::{RegionOp, build, unbroadcast};
use crate::types::{Primitive, Tracked};

#[derive(Debug, Clone)]
struct Matmul {
    lhs: Shape,
    rhs: Shape,
}

impl<I: Backend> RegionOp<I, 2> for Matmul {
    fn name(&self) -> &'static str {
        "matmul"
    }

    fn forward(&self, [lhs, rhs]: [Primitive<I>; 2]) -> Primitive<I> {
        I::float_matmul(lhs, rhs)
    }

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
        let lhs_grad = lhs.then(|| {
            let grad = I::float_matmul(grad, I::float_transpose(rhs_value.unwrap()));
            unbroadcast::<I>(grad, &self.lhs)
        });
        let rhs_grad = for_rhs.map(|grad| {
            let grad = I::float_matmul(I::float_transpose(lhs_value.unwrap()), grad);
            unbroadcast::<I>(grad, &self.rhs)
        });
        [lhs_grad, rhs_grad]
    }
}

/// `lhs · rhs` in a region.
pub(crate) fn matmul<I: Backend>(lhs: Tracked<I>, rhs: Tracked<I>) -> Tracked<I> {
    let op = Matmul {
        lhs: lhs.primitive.shape(),
        rhs: rhs.primitive.shape(),
    };
    build::<I, _, _>(op, [lhs, rhs])
}

/// `x · weight + bias`; operands are `[x, weight]` or `[x, weight, bias]`.
#[derive(Debug, Clone)]
struct Linear;

impl Linear {
    /// `x` is read for the weight's gradient, `weight` for `x`'s.
    fn saved_x_weight(needs_grad: &[bool]) -> [bool; 2] {
        [needs_grad[1], needs_grad[0]]
    }

    fn x_weight_grads<I: Backend>(
        x: Option<Primitive<I>>,
        weight: Option<Primitive<I>>,
        grad: &Primitive<I>,
        needs_grad: &[bool],
    ) -> [Option<Primitive<I>>; 2] {
        [
            needs_grad[0].then(|| I::linear_x_backward(weight.unwrap(), grad.clone())),
            needs_grad[1].then(|| I::linear_weight_backward(x.unwrap(), grad.clone())),
        ]
    }
}

impl<I: Backend> RegionOp<I, 3> for Linear {
    fn name(&self) -> &'static str {
        "linear"
    }

    fn forward(&self, [x, weight, bias]: [Primitive<I>; 3]) -> Primitive<I> {
        I::linear(x, weight, Some(bias))
    }

    fn saved(&self, needs_grad: [bool; 3]) -> [bool; 3] {
        let [x, weight] = Self::saved_x_weight(&needs_grad);
        [x, weight, false]
    }

    fn backward(
        self,
        [x, weight, _]: [Option<Primitive<I>>; 3],
        grad: Primitive<I>,
        needs_grad: [bool; 3],
    ) -> [Option<Primitive<I>>; 3] {
        let [x_grad, weight_grad] = Self::x_weight_grads::<I>(x, weight, &grad, &needs_grad);
        [
            x_grad,
            weight_grad,
            needs_grad[2].then(|| I::linear_bias_backward(grad)),
        ]
    }
}

impl<I: Backend> RegionOp<I, 2> for Linear {
    fn name(&self) -> &'static str {
        "linear"
    }

    fn forward(&self, [x, weight]: [Primitive<I>; 2]) -> Primitive<I> {
        I::linear(x, weight, None)
    }

    fn saved(&self, needs_grad: [bool; 2]) -> [bool; 2] {
        Self::saved_x_weight(&needs_grad)
    }

    fn backward(
        self,
        [x, weight]: [Option<Primitive<I>>; 2],
        grad: Primitive<I>,
        needs_grad: [bool; 2],
    ) -> [Option<Primitive<I>>; 2] {
        Self::x_weight_grads::<I>(x, weight, &grad, &needs_grad)
    }
}

/// The `linear` module op in a region.
pub(crate) fn linear<I: Backend>(
    x: Tracked<I>,
    weight: Tracked<I>,
    bias: Option<Tracked<I>>,
) -> Tracked<I> {
    match bias {
        Some(bias) => build::<I, _, _>(Linear, [x, weight, bias]),
        None => build::<I, _, _>(Linear, [x, weight]),
    }
}
