//! How a region op becomes a node of Burn's autodiff graph: [`build`], the plumbing every op
//! shares. A region op is a **compute-bound** node of Burn's graph (Burn never recomputes it, and
//! never walks through it) whose backward state says how to get each input it reads back
//! ([`Operand`]): recomputed from its recipe, retrieved from Burn's checkpointer, held as it is,
//! or uploaded from a host copy (see `recipe.rs` for why the recompute is ours and how it walks).

use std::sync::Arc;

use burn_autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn_autodiff::ops::{Backward, OpsKind};
use burn_backend::Backend;
use burn_backend::backend::AutodiffBackend;

use super::check;
use super::recipe::{self, Operand, Recipe};
use super::region_op::{Forward, RegionOp};
use super::step::{RegionBackward, StepState};
use crate::types::{Plain, Primitive, Tracked};
use burn_checkpoint_core::engine::recording;

/// Builds `op` over `inputs` as a node recomputed in backward.
pub(crate) fn build<I, Op, const N: usize>(op: Op, inputs: [Tracked<I>; N]) -> Tracked<I>
where
    I: Backend,
    Op: RegionOp<I, N>,
{
    build_with::<I, _, _, _>(op, inputs, |op, prims| (op.forward(prims), ())).0
}

/// Like [`build`], with a forward that also yields something besides the output (the indices of
/// a max pool, say). `forward` must compute the same output as [`RegionOp::forward`].
pub(crate) fn build_with<I, Op, X, const N: usize>(
    op: Op,
    inputs: [Tracked<I>; N],
    forward: impl FnOnce(&Op, [Primitive<I>; N]) -> (Primitive<I>, X),
) -> (Tracked<I>, X)
where
    I: Backend,
    Op: RegionOp<I, N>,
{
    let needs_grad = inputs.each_ref().map(|t| t.is_tracked());
    if !needs_grad.contains(&true) {
        let (output, extra) = forward(&op, inputs.map(|t| t.primitive));
        return (Plain::<I>::from_inner(output), extra);
    }
    let saved = op.saved(needs_grad);
    let expected = check::Expected::new_if_verifying();
    let nodes = inputs.each_ref().map(|t| t.node.clone());
    // Compute-bound: Burn never recomputes this node nor walks through it; a Burn op that reads
    // it (an op without a region version) stores it, as it stores any compute-bound output.
    let prep = RegionBackward(op.clone())
        .prepare::<BalancedCheckpointing>(nodes)
        .compute_bound()
        .stateful();
    let OpsKind::Tracked(mut prep) = prep else {
        unreachable!("an op with a tracked operand is tracked")
    };
    let mut register = |tensor: &Tracked<I>| prep.checkpoint(tensor);
    let mut read = [const { None }; N];
    for (i, input) in inputs.iter().enumerate() {
        if saved[i] {
            read[i] = Some(Operand::of(input, &mut register));
        }
    }
    let operands = inputs
        .iter()
        .map(|input| Operand::of(input, &mut register))
        .collect();
    let recipe = Recipe::new(
        Box::new(Forward::<Op, N>(op.clone())),
        operands,
        expected.clone(),
        recording::current_region(),
    );
    let state = StepState::new(read, Arc::clone(&recipe));
    // Keep the operands' nodes referenced until this node is registered: burn-autodiff frees a
    // graph none of whose nodes is referenced, from any thread's backward, and an operand may
    // still be alone in its graph until `finish` links it to this node.
    let referenced = inputs.each_ref().map(|t| t.rc.clone());
    // Move the primitives in last: an input nothing else holds may then be reused in place.
    let (output, extra) = forward(&op, inputs.map(|t| t.primitive));
    if let Some(expected) = expected {
        expected.set::<I>(&output);
    }
    let output = prep.finish(state, output);
    recipe::remember(&output, &recipe);
    drop(referenced);
    (output, extra)
}

// The recompute check (`check.rs`) on an op built here: it stands below this file, so its test
// is here.
#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, NdArray};
    use burn::tensor::{Tensor, TensorPrimitive};

    use super::build_with;
    use crate::recompute::RegionOp;
    use crate::recompute::verify_recomputes;
    use crate::types::Primitive;
    use crate::{Checkpointed, checkpoint};

    type I = NdArray;
    type B = Checkpointed<Autodiff<I>>;

    /// An op whose recompute (a copy) disagrees with the forward that `build_with` is given (a
    /// transpose): the bug the check is there to catch.
    #[derive(Clone, Debug)]
    struct Inconsistent;

    impl RegionOp<I, 1> for Inconsistent {
        fn name(&self) -> &'static str {
            "inconsistent_op"
        }
        fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
            x
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
            [Some(grad)]
        }
    }

    #[test]
    #[should_panic(expected = "recomputing `inconsistent_op` during backward gave")]
    fn a_recompute_of_another_shape_fails_naming_the_op() {
        use burn_backend::ops::FloatTensorOps;

        verify_recomputes(true);
        let device = Default::default();
        let x = Tensor::<B, 2>::ones([2, 3], &device).require_grad();
        let y = checkpoint(|| {
            let x = x.clone().into_primitive().tensor();
            let (y, ()) = build_with::<I, _, _, 1>(Inconsistent, [x], |op, inputs| {
                (I::float_swap_dims(op.forward(inputs), 0, 1), ())
            });
            let y = Tensor::<B, 2>::from_primitive(TensorPrimitive::Float(y));
            // The product's backward reads `y`, so backward recomputes it.
            y.clone() * y
        });
        let _ = y.sum().backward();
    }
}
