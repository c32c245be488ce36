//! What burn-checkpoint-22's tests and benches share (a crate, so that neither includes the
//! other's files by `#[path]`).

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::Tensor;

/// Initialises a module's lazy parameters now (Burn draws them from the generator at their
/// first use otherwise), so that a measured step does not count them.
///
/// ```
/// use burn::nn::LinearConfig;
/// use burn::tensor::Device;
/// use burn_checkpoint_22_test_kit::initialised;
///
/// let linear = initialised(LinearConfig::new(4, 4).init(&Device::flex()));
/// assert_eq!(linear.weight.val().dims(), [4, 4]);
/// ```
pub fn initialised<M: Module>(module: M) -> M {
    struct Touch;

    impl ModuleVisitor for Touch {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let _ = param.val();
        }
    }

    module.visit(&mut Touch);
    module
}
