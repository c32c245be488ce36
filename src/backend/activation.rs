//! Activation ops: the ones burn-autodiff overrides have region versions; the others are
//! composed of float ops by the trait's defaults.

use super::*;

forward_ops! {
    impl<I: Backend, C: CheckpointStrategy> ActivationOps<Self> for Checkpointed<Autodiff<I, C>> {
    #[region(crate::recompute::relu)]
    fn relu(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::gelu)]
    fn gelu(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::sigmoid)]
    fn sigmoid(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::log_sigmoid)]
    fn log_sigmoid(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    }
}
