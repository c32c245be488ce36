//! Deformable 2-D convolution, with or without mask and bias.

use burn_backend::Backend;
use burn_backend::ops::DeformConvOptions;

use crate::recompute::{RegionOp, build};
use crate::types::{Primitive, Tracked};

/// Operands `[x, offset, weight]`, then `mask` if `mask`, then `bias` if `bias`: `N` is 3, 4 or 5.
#[derive(Debug, Clone)]
struct DeformConv2d {
    options: DeformConvOptions<2>,
    mask: bool,
    bias: bool,
}

impl DeformConv2d {
    /// `[x, offset, weight, mask, bias]` from the operands.
    fn split<T>(&self, operands: impl IntoIterator<Item = T>) -> (T, T, T, Option<T>, Option<T>) {
        let mut operands = operands.into_iter();
        let mut next = || operands.next().expect("an operand per position");
        let (x, offset, weight) = (next(), next(), next());
        let mask = self.mask.then(&mut next);
        let bias = self.bias.then(&mut next);
        (x, offset, weight, mask, bias)
    }
}

impl<I: Backend, const N: usize> RegionOp<I, N> for DeformConv2d {
    fn name(&self) -> &'static str {
        "deform_conv2d"
    }

    fn forward(&self, operands: [Primitive<I>; N]) -> Primitive<I> {
        let (x, offset, weight, mask, bias) = self.split(operands);
        I::deform_conv2d(x, offset, weight, mask, bias, self.options.clone())
    }

    /// Burn's backward computes every gradient at once from every operand.
    fn saved(&self, _: [bool; N]) -> [bool; N] {
        [true; N]
    }

    fn backward(
        self,
        operands: [Option<Primitive<I>>; N],
        grad: Primitive<I>,
        needs_grad: [bool; N],
    ) -> [Option<Primitive<I>>; N] {
        let (x, offset, weight, mask, bias) = self.split(operands.map(Option::unwrap));
        let (mask_present, bias_present) = (mask.is_some(), bias.is_some());
        let grads = I::deform_conv2d_backward(x, offset, weight, mask, bias, grad, self.options);
        let mut grads = [
            Some(grads.x_grad),
            Some(grads.offset_grad),
            Some(grads.weight_grad),
        ]
        .into_iter()
        .chain(mask_present.then_some(grads.mask_grad))
        .chain(bias_present.then_some(grads.bias_grad));
        core::array::from_fn(|i| {
            let grad = grads.next().flatten();
            if needs_grad[i] { grad } else { None }
        })
    }
}

/// `deform_conv2d` in a region.
pub(crate) fn deform_conv2d<I: Backend>(
    x: Tracked<I>,
    offset: Tracked<I>,
    weight: Tracked<I>,
    mask: Option<Tracked<I>>,
    bias: Option<Tracked<I>>,
    options: DeformConvOptions<2>,
) -> Tracked<I> {
    let op = DeformConv2d {
        options,
        mask: mask.is_some(),
        bias: bias.is_some(),
    };
    match (mask, bias) {
        (Some(mask), Some(bias)) => build::<I, _, _>(op, [x, offset, weight, mask, bias]),
        (Some(extra), None) | (None, Some(extra)) => {
            build::<I, _, _>(op, [x, offset, weight, extra])
        }
        (None, None) => build::<I, _, _>(op, [x, offset, weight]),
    }
}
