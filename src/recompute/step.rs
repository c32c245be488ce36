//! The backward step of a region op: what it holds from forward to backward, and what it does.

use core::fmt;
use std::sync::{Arc, Mutex};

use burn_autodiff::checkpoint::base::Checkpointer;
use burn_autodiff::grads::Gradients;
use burn_autodiff::ops::{Backward, Ops};
use burn_backend::Backend;

use super::recipe::{self, Operand, Recipe};
use super::region_op::RegionOp;

/// What a region op's backward step holds from forward to backward: how to get the inputs it
/// reads, and its own recipe (kept alive for the ops built from its output, drained after).
pub(super) struct StepState<I: Backend, const N: usize>(Arc<Mutex<Option<StepInputs<I, N>>>>);

struct StepInputs<I: Backend, const N: usize> {
    read: [Option<Operand<I>>; N],
    recipe: Arc<Recipe<I>>,
}

impl<I: Backend, const N: usize> StepState<I, N> {
    pub(super) fn new(read: [Option<Operand<I>>; N], recipe: Arc<Recipe<I>>) -> Self {
        StepState(Arc::new(Mutex::new(Some(StepInputs { read, recipe }))))
    }

    fn take(&self) -> StepInputs<I, N> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
            .expect("a backward step runs once")
    }
}

// Burn asks a backward state to be `Clone`; clones share the one state.
impl<I: Backend, const N: usize> Clone for StepState<I, N> {
    fn clone(&self) -> Self {
        StepState(Arc::clone(&self.0))
    }
}

impl<I: Backend, const N: usize> fmt::Debug for StepState<I, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.0.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(inputs) => write!(f, "StepState({}, {:?})", inputs.recipe.name(), inputs.read),
            None => f.write_str("StepState(done)"),
        }
    }
}

/// The backward step of a region op.
#[derive(Debug)]
pub(super) struct RegionBackward<Op>(pub(super) Op);

impl<I: Backend, Op: RegionOp<I, N>, const N: usize> Backward<I, N> for RegionBackward<Op> {
    type State = StepState<I, N>;

    fn backward(
        self,
        ops: Ops<Self::State, N>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let StepInputs { read, recipe } = ops.state.take();
        let grad = grads.consume::<I>(&ops.node);
        for operand in read.iter().flatten() {
            if let Operand::Recomputed(ticket) = operand {
                recipe::compute(ticket.recipe(), checkpointer);
            }
        }
        let inputs = read.map(|operand| operand.map(|operand| operand.get(checkpointer)));
        let needs_grad = ops.parents.each_ref().map(Option::is_some);
        let input_grads = self.0.backward(inputs, grad, needs_grad);
        for (parent, input_grad) in ops.parents.into_iter().zip(input_grads) {
            if let (Some(parent), Some(input_grad)) = (parent, input_grad) {
                grads.register::<I>(parent.id, input_grad);
            }
        }
        recipe.drain(checkpointer);
    }
}
