//! What a region op is: [`RegionOp`], the trait every op family implements (its forward and
//! backward on the inner backend, and which operands the backward reads), and the same forward
//! with its operand count erased, as a recipe holds it. The bottom of `recompute/`: it knows no
//! recipe, step or build.

use core::fmt;

use burn_backend::{Backend, Shape, TensorMetadata};

use crate::types::{IntPrimitive, Primitive};

/// An op rebuilt to be recomputed on backward, written against the inner backend `I` only.
///
/// `N` is the number of float operands (Burn's `Backward` has a compile-time parent count).
/// Non-float operands (options, masks, indices) live in the struct itself.
pub(crate) trait RegionOp<I: Backend, const N: usize>:
    fmt::Debug + Clone + Send + Sync + 'static
{
    /// The op's name, for debug output and reports.
    fn name(&self) -> &'static str;

    /// The op's output from its float operands.
    fn forward(&self, inputs: [Primitive<I>; N]) -> Primitive<I>;

    /// Which operands the backward reads, given which operands need a gradient.
    fn saved(&self, needs_grad: [bool; N]) -> [bool; N];

    /// The gradient of each operand that needs one. `inputs[i]` is `Some` where `saved` said so.
    fn backward(
        self,
        inputs: [Option<Primitive<I>>; N],
        grad: Primitive<I>,
        needs_grad: [bool; N],
    ) -> [Option<Primitive<I>>; N];
}

/// A region op's forward, with its operand count erased so that recipes of all ops share a type.
pub(super) trait ErasedForward<I: Backend>: Send + Sync {
    fn name(&self) -> &'static str;
    fn forward(&self, inputs: Vec<Primitive<I>>) -> Primitive<I>;
}

pub(super) struct Forward<Op, const N: usize>(pub(super) Op);

impl<I: Backend, Op: RegionOp<I, N>, const N: usize> ErasedForward<I> for Forward<Op, N> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn forward(&self, inputs: Vec<Primitive<I>>) -> Primitive<I> {
        let Ok(inputs) = <[Primitive<I>; N]>::try_from(inputs) else {
            unreachable!("a recipe holds one operand per input of its op")
        };
        self.0.forward(inputs)
    }
}

/// Gradient of a broadcast operand: summed over the dimensions it was broadcast along (Burn's
/// own rule, so that gradients stay bitwise equal).
pub(crate) fn unbroadcast<I: Backend>(
    grad: Primitive<I>,
    shape: &burn_backend::Shape,
) -> Primitive<I> {
    burn_autodiff::ops::broadcast_shape::<I>(grad, shape)
}

/// Gradient of an op that picked its values along `dim` at `indices` (max/min along a dim, sort,
/// gather, cummax/cummin): `grad` added into zeros of the operand's `shape` at those indices
/// (Burn's own rule, so that gradients stay bitwise equal).
pub(crate) fn scatter_grad<I: Backend>(
    dim: usize,
    shape: Shape,
    indices: IntPrimitive<I>,
    grad: Primitive<I>,
) -> Primitive<I> {
    let zeros = I::float_zeros(shape, &I::float_device(&grad), grad.dtype().into());
    I::float_scatter_add(dim, zeros, indices, grad)
}
