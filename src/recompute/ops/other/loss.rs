//! Losses with a backward of their own in the inner backend.

use burn_backend::Backend;

use crate::recompute::{RegionOp, build};
use crate::types::{IntPrimitive, Primitive, Tracked};

/// CTC loss on a backend with a native CTC backward (`has_ctc_loss_backward`): the backward reads
/// the log-probabilities, as Burn's does. (Elsewhere the decorator decomposes the loss into
/// tensor ops, as Burn does, and each of them is recomputed in a region.)
struct CtcLoss<I: Backend> {
    targets: IntPrimitive<I>,
    input_lengths: IntPrimitive<I>,
    target_lengths: IntPrimitive<I>,
    blank: usize,
}

// Hand-written: a derived Debug would print the targets.
impl<I: Backend> core::fmt::Debug for CtcLoss<I> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "CtcLoss(blank {})", self.blank)
    }
}

impl<I: Backend> Clone for CtcLoss<I> {
    fn clone(&self) -> Self {
        CtcLoss {
            targets: self.targets.clone(),
            input_lengths: self.input_lengths.clone(),
            target_lengths: self.target_lengths.clone(),
            blank: self.blank,
        }
    }
}

impl<I: Backend> RegionOp<I, 1> for CtcLoss<I> {
    fn name(&self) -> &'static str {
        "ctc_loss"
    }

    fn forward(&self, [log_probs]: [Primitive<I>; 1]) -> Primitive<I> {
        let op = self.clone();
        I::ctc_loss(
            log_probs,
            op.targets,
            op.input_lengths,
            op.target_lengths,
            op.blank,
        )
    }

    fn saved(&self, _: [bool; 1]) -> [bool; 1] {
        [true]
    }

    fn backward(
        self,
        [log_probs]: [Option<Primitive<I>>; 1],
        grad: Primitive<I>,
        _: [bool; 1],
    ) -> [Option<Primitive<I>>; 1] {
        [Some(I::ctc_loss_backward(
            log_probs.expect("the CTC backward reads the log-probabilities"),
            self.targets,
            self.input_lengths,
            self.target_lengths,
            grad,
            self.blank,
        ))]
    }
}

/// `ctc_loss` in a region, on a backend with a native CTC backward.
pub(crate) fn ctc_loss<I: Backend>(
    log_probs: Tracked<I>,
    targets: IntPrimitive<I>,
    input_lengths: IntPrimitive<I>,
    target_lengths: IntPrimitive<I>,
    blank: usize,
) -> Tracked<I> {
    let op = CtcLoss::<I> {
        targets,
        input_lengths,
        target_lengths,
        blank,
    };
    build::<I, _, 1>(op, [log_probs])
}
