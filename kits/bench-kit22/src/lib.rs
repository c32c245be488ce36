//! What the tests of burn-checkpoint-22 and of its networks (`kits/models22`), and the networks'
//! benches, share — Burn 0.22 alone, not the library, so that the library's own tests use it as
//! the networks' do (the Burn 0.21 crates' `bench-kit` is the same for their apps):
//!
//! - [`initialised`]: a module's lazy parameters drawn now;
//! - [`param_grads`], [`grad_of`]: gradients as data, to compare runs; [`assert_close`] where
//!   they may differ in their last bits; [`sgd`], a training step's update;
//! - [`generator`] and [`alone`]: the locks of a test that reads what the whole process does.
//!
//! ```
//! use burn::nn::LinearConfig;
//! use burn::tensor::{Device, Tensor};
//! use bench_kit_22::{initialised, param_grads};
//!
//! let device = Device::flex().autodiff();
//! let linear = initialised(LinearConfig::new(4, 4).init(&device));
//! let loss = linear.forward(Tensor::<2>::ones([2, 4], &device)).sum();
//! let grads = param_grads(&linear, &loss.backward());
//! assert_eq!(grads.len(), 2);
//! assert!(grads.iter().all(Option::is_some));
//! ```

use std::sync::{Mutex, MutexGuard};

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::tensor::{Gradients, Tensor, TensorData};

/// Initialises a module's lazy parameters now (Burn draws them from the generator at their
/// first use otherwise), so that a measured step does not count them and a copy of the module
/// holds the same values.
///
/// ```
/// use burn::nn::LinearConfig;
/// use burn::tensor::Device;
/// use bench_kit_22::initialised;
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

/// One SGD step of rate `lr` on every parameter with a gradient in `grads` (each detached and
/// requiring a gradient again): a training run's update, for tests that run several steps.
///
/// ```
/// use burn::nn::LinearConfig;
/// use burn::tensor::{Device, Tensor};
/// use bench_kit_22::{initialised, sgd};
///
/// let device = Device::flex().autodiff();
/// let linear = initialised(LinearConfig::new(2, 2).init(&device));
/// let before = linear.weight.val().into_data();
/// let grads = linear.forward(Tensor::<2>::ones([1, 2], &device)).sum().backward();
/// let linear = sgd(linear, &grads, 0.1);
/// assert_ne!(linear.weight.val().into_data(), before);
/// ```
pub fn sgd<M: Module>(module: M, grads: &Gradients, lr: f64) -> M {
    struct Step<'a>(&'a Gradients, f64);

    impl ModuleMapper for Step<'_> {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
            let Some(grad) = param.val().grad(self.0) else {
                return param;
            };
            let lr = self.1;
            param.map(|value| (value - grad.mul_scalar(lr)).detach().require_grad())
        }
    }

    module.map(&mut Step(grads, lr))
}

/// Every float parameter's gradient, in visit order.
pub fn param_grads(module: &impl Module, grads: &Gradients) -> Vec<Option<TensorData>> {
    struct Grads<'a>(&'a Gradients, Vec<Option<TensorData>>);

    impl ModuleVisitor for Grads<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.1.push(param.val().grad(self.0).map(|g| g.into_data()));
        }
    }

    let mut visitor = Grads(grads, Vec::new());
    module.visit(&mut visitor);
    visitor.1
}

/// The gradient of `x`, as data.
pub fn grad_of<const D: usize>(x: &Tensor<D>, grads: &Gradients) -> Option<TensorData> {
    x.grad(grads).map(|g| g.into_data())
}

/// Asserts two gradients equal within `4e-6` relative to their size (where several outputs of a
/// region share a path, or several regions share a weight, their terms add in another order than
/// in plain autodiff).
///
/// # Panics
///
/// Where they differ by more, naming `what` and the element.
pub fn assert_close(left: Option<TensorData>, right: Option<TensorData>, what: &str) {
    let (Some(left), Some(right)) = (left.clone(), right.clone()) else {
        assert_eq!(left, right, "{what}");
        return;
    };
    assert_eq!(left.shape(), right.shape(), "{what}");
    let left = left.try_to_vec::<f32>().expect("f32");
    let right = right.try_to_vec::<f32>().expect("f32");
    for (index, (l, r)) in left.iter().zip(&right).enumerate() {
        assert!(
            l.to_bits() == r.to_bits() || (l - r).abs() <= 4e-6 * l.abs().max(1.0),
            "{what}: element {index} is {l} and {r}"
        );
    }
}

/// The device's generator, one test at a time: Burn's CPU generator is one for the whole process,
/// so a test that seeds it and compares what is drawn after takes this for its whole body.
pub fn generator() -> MutexGuard<'static, ()> {
    static GENERATOR: Mutex<()> = Mutex::new(());
    GENERATOR
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Holds off every other test that takes it: for a test that reads what the whole process does
/// (the counting allocator, the offload store).
pub fn alone() -> MutexGuard<'static, ()> {
    static ALONE: Mutex<()> = Mutex::new(());
    ALONE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
