//! Activation ops: Burn marks the ones it overrides memory-bound.

use super::*;

forward_ops! {
    impl<I: Backend, C: CheckpointStrategy> ActivationOps<Self> for Checkpointed<Autodiff<I, C>> {
    #[balanced]
    fn relu(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[balanced]
    fn gelu(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[balanced]
    fn sigmoid(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[balanced]
    fn log_sigmoid(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    }
}
