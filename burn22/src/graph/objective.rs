//! Where a recompute's nested backward starts: each output given the gradient backward brought
//! to the region ([`giving_gradient`]), for a region node's recompute and a scan's steps alike.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Backend, TensorMetadata};

use super::join::placeholder;

/// The node a recompute's nested backward starts from, one per output: its own gradient (a
/// one-element placeholder, as is its value) is dropped and the output gets `grad`, the gradient
/// backward brought to the region, as it is. The objective Σ⟨output, grad⟩ gives the same bits
/// for three more passes over every output (its product, its sum, their backward).
#[derive(Debug)]
struct OutputGradient;

impl<B: Backend> Backward<B, 1> for OutputGradient {
    type State = FloatTensor<B>;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let _ = grads.consume::<B>(&ops.node);
        if let [Some(parent)] = ops.parents {
            grads.register::<B>(parent.id, ops.state);
        }
    }
}

/// A one-element placeholder whose backward gives `output` the gradient `grad` (see
/// [`OutputGradient`]).
pub(super) fn giving_gradient<B: Backend, C: CheckpointStrategy>(
    output: FloatTensor<Autodiff<B, C>>,
    grad: FloatTensor<B>,
) -> FloatTensor<Autodiff<B, C>> {
    let (device, dtype) = (output.primitive().device(), output.primitive().dtype());
    let value = placeholder::<B>(&device, dtype);
    match OutputGradient
        .prepare::<C>([output.node()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish(grad, value),
        OpsKind::UnTracked(prep) => prep.finish(value),
    }
}
