//! `Policy::SaveComputeBound` on Burn 0.22: a region whose body runs as Burn's own ops under
//! Balanced checkpointing gives plain autodiff's gradients and batch norm's running statistics,
//! bit for bit, whatever device the model was built on and whatever strategy the caller runs;
//! what it cannot take stops with a message saying what to do.
//!
//! Burn's CPU generator is one for the whole process: the tests that draw take turns through
//! `common::generator()`.

use crate::common;

use burn::module::{Module, ModuleVisitor, Param};
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Distribution, Gradients, Tensor, TensorData};
use burn_checkpoint_22::{Policy, Region};
use burn_checkpoint_22_models::densenet::DenseNet;
use burn_checkpoint_22_models::{Cut, initialised};
use common::{grad_of, param_grads};

/// Every float tensor of a module (batch norm's running statistics included), as data.
fn values(module: &impl Module) -> Vec<TensorData> {
    struct Read(Vec<TensorData>);

    impl ModuleVisitor for Read {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.0.push(param.val().into_data());
        }
    }

    let mut read = Read(Vec::new());
    module.visit(&mut read);
    read.0
}

/// One step of DenseNet-BC-22 (three dense layers per block) built on `build` and run on
/// `run`: the loss, the images' gradient, every parameter's gradient, and every value of the
/// model after the step (running statistics updated by its batch norms).
fn densenet_step(
    build: &Device,
    run: &Device,
    cut: Cut,
) -> (
    TensorData,
    Option<TensorData>,
    Vec<Option<TensorData>>,
    Vec<TensorData>,
) {
    build.seed(3);
    let model = initialised(DenseNet::new(22, 4, 3, 10, build));
    run.seed(4);
    let images = Tensor::<4>::random([2, 3, 8, 8], Distribution::Default, run).require_grad();
    let loss = model.forward(images.clone(), cut).powf_scalar(2.0).mean();
    let grads: Gradients = loss.backward();
    (
        loss.into_data(),
        grad_of(&images, &grads),
        param_grads(&model, &grads),
        // As validation and records see them: running statistics with their updates applied
        // (Burn applies an update at the layer's next use, or when asked).
        values(&model.valid()),
    )
}

/// The layer cut with `Policy::SaveComputeBound` (each layer's concatenation, batch norm and
/// ReLU a memory-bound region inside it): plain autodiff's loss, gradients and running
/// statistics — the model built on an autodiff device or a plain one, on a plain run or under
/// Burn's `gradient_checkpointing()`.
#[test]
fn dense_layers_saving_compute_bound_outputs_give_plain_autodiffs_run_batch_norm_included() {
    let _generator = common::generator();
    let autodiff = Device::flex().autodiff();
    let balanced = Device::flex().autodiff().gradient_checkpointing();
    let cases = [
        (
            "model on the autodiff device, plain run",
            &autodiff,
            &autodiff,
        ),
        (
            "model on the Balanced device, Balanced run",
            &balanced,
            &balanced,
        ),
        (
            "model on a plain device, plain run",
            &Device::flex(),
            &autodiff,
        ),
        (
            "model on a plain device, Balanced run",
            &Device::flex(),
            &balanced,
        ),
    ];
    for (what, build, run) in cases {
        let plain = densenet_step(build, run, Cut::None);
        assert!(plain.1.is_some(), "{what}: the images get a gradient");
        let saving = densenet_step(build, run, Cut::EachSavingComputeBound);
        assert!(saving.0 == plain.0, "{what}: the loss");
        assert!(saving.1 == plain.1, "{what}: the images' gradient");
        assert!(saving.2 == plain.2, "{what}: the parameters' gradients");
        assert!(
            saving.3 == plain.3,
            "{what}: the weights and running statistics"
        );
        // Twice: a region's state (running statistics' tags) is restored after it.
        let again = densenet_step(build, run, Cut::EachSavingComputeBound);
        assert!(again == plain, "{what}, again");
    }
}

/// One model, its cut changing from step to step (as while the planner profiles, or when a plan
/// changes): batch norm's running statistics carry a strategy, and a pending update made under
/// one meets a run under another. The same losses, gradients and running statistics as plain
/// steps, and no strategy mismatch.
#[test]
fn switching_between_plain_saving_and_recomputing_steps_keeps_batch_norm_exact() {
    let _generator = common::generator();
    for device in [
        Device::flex().autodiff(),
        Device::flex().autodiff().gradient_checkpointing(),
    ] {
        let run = |cuts: &[Cut]| {
            device.seed(3);
            let model = initialised(DenseNet::new(16, 4, 3, 10, &device));
            let steps: Vec<_> = cuts
                .iter()
                .map(|&cut| {
                    let images = Tensor::<4>::random([2, 3, 8, 8], Distribution::Default, &device);
                    let loss = model.forward(images, cut).powf_scalar(2.0).mean();
                    let grads = loss.backward();
                    (loss.into_data(), param_grads(&model, &grads))
                })
                .collect();
            (steps, values(&model.valid()))
        };
        let plain = run(&[Cut::None; 5]);
        let switching = run(&[
            Cut::None,
            Cut::EachSavingComputeBound,
            Cut::Each,
            Cut::EachSavingComputeBound,
            Cut::None,
        ]);
        assert!(switching == plain, "{device:?}");
    }
}

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
