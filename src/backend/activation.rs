//! Activation ops: the ones burn-autodiff overrides have region versions; the others are
//! composed of float ops by the trait's defaults.

use super::*;

forward_ops! {
    impl<I: Backend, C: CheckpointStrategy> ActivationOps<Self> for Checkpointed<Autodiff<I, C>> {
    #[region(relu, Elementwise)]
    fn relu(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(gelu, Elementwise)]
    fn gelu(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(sigmoid, Elementwise)]
    fn sigmoid(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(log_sigmoid, Elementwise)]
    fn log_sigmoid(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    }
}
