//! `Policy::SaveComputeBound` on Burn 0.22: a region whose body runs as Burn's own ops under
//! Balanced checkpointing keeps frozen parameters frozen, takes a captured tensor under Burn's
//! own Balanced, and what it cannot take stops with a message saying what to do. On DenseNet-BC
//! (plain autodiff's gradients and batch norm's running statistics, bit for bit): the networks'
//! tests, `kits/models22/tests/models/policies.rs`.
//!
//! Burn's CPU generator is one for the whole process: the tests that draw take turns through
//! `common::generator()`.

use crate::common;

use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Distribution, Tensor};
use burn_checkpoint_22::{Policy, Region};
use common::{grad_of, initialised, param_grads};

/// A module with a frozen layer (no gradient) beside a trained one.
#[derive(Module, Debug)]
struct HalfFrozen {
    frozen: Linear,
    trained: Linear,
}

impl HalfFrozen {
    fn new(device: &Device) -> Self {
        Self {
            frozen: LinearConfig::new(8, 8).init(device).no_grad(),
            trained: LinearConfig::new(8, 8).init(device),
        }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.trained.forward(self.frozen.forward(x).tanh()).exp()
    }
}

#[test]
fn frozen_parameters_in_a_save_compute_bound_region_stay_frozen_and_the_rest_train() {
    let _generator = common::generator();
    let device = Device::flex().autodiff();
    device.seed(5);
    let module = initialised(HalfFrozen::new(&device));
    let x = Tensor::<2>::random([4, 8], Distribution::Default, &device).require_grad();
    let plain_grads = module.forward(x.clone()).sum().backward();
    let saving = Region::named("half-frozen")
        .policy(Policy::SaveComputeBound)
        .run(&module, x.clone(), |m, x| m.forward(x));
    let saving_grads = saving.sum().backward();
    assert_eq!(grad_of(&x, &plain_grads), grad_of(&x, &saving_grads));
    let plain = param_grads(&module, &plain_grads);
    assert_eq!(plain.iter().flatten().count(), 2, "the trained layer's two");
    assert_eq!(plain, param_grads(&module, &saving_grads));
}

/// A tensor with autodiff the closure captures, made on the caller's device, carries the
/// caller's strategy while the region's run Balanced: Burn's mismatch panic becomes one that
/// says what to do.
#[test]
#[should_panic(expected = "pass it as an input or hold it in the region's module")]
fn a_captured_tensor_of_the_callers_strategy_is_refused_with_what_to_do() {
    let _generator = common::generator();
    let device = Device::flex().autodiff();
    let linear: Linear = LinearConfig::new(8, 8).init(&device);
    let x = Tensor::<2>::ones([4, 8], &device).require_grad();
    let mask = Tensor::<2>::ones([4, 8], &device);
    let y = Region::named("masked")
        .policy(Policy::SaveComputeBound)
        .run(&linear, x, move |linear, x| {
            linear.forward(x) * mask.clone()
        });
    let _ = y.sum().backward();
}

/// The same capture under Burn's own `gradient_checkpointing()`: every tensor is Balanced
/// already, and the captured tensor gets its gradient as in plain autodiff.
#[test]
fn a_captured_tensor_is_fine_when_the_caller_runs_balanced() {
    let _generator = common::generator();
    let device = Device::flex().autodiff().gradient_checkpointing();
    let linear: Linear = LinearConfig::new(8, 8).init(&device);
    let x = Tensor::<2>::ones([4, 8], &device).require_grad();
    let scale = Tensor::<2>::full([4, 8], 0.5, &device).require_grad();
    let plain = (linear.forward(x.clone()) * scale.clone()).sum().backward();
    let captured = scale.clone();
    let y = Region::named("scaled")
        .policy(Policy::SaveComputeBound)
        .run(&linear, x, move |linear, x| {
            linear.forward(x) * captured.clone()
        });
    let grads = y.sum().backward();
    assert_eq!(grad_of(&scale, &plain), grad_of(&scale, &grads));
}

#[test]
#[should_panic(expected = "Policy::SaveComputeBound stores nothing for a recompute")]
fn offloading_a_save_compute_bound_region_is_refused() {
    let _generator = common::generator();
    let device = Device::flex().autodiff();
    let x = Tensor::<2>::ones([4, 8], &device).require_grad();
    let _ = Region::named("both")
        .policy(Policy::SaveComputeBound)
        .offloaded()
        .run_fn(x, |x| x.exp());
}
