//! `Policy::SaveComputeBound` on DenseNet-BC: a region whose body runs as Burn's own ops under
//! Balanced checkpointing gives plain autodiff's gradients and batch norm's running statistics,
//! bit for bit, whatever device the model was built on and whatever strategy the caller runs,
//! and whatever cut the step before ran.

use bench_kit_22::{generator, grad_of, initialised, param_grads};
use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::{Device, Distribution, Gradients, Tensor, TensorData};
use burn_checkpoint_22_models::Cut;
use burn_checkpoint_22_models::densenet::DenseNet;

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
    let _generator = generator();
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
        let saving = densenet_step(build, run, Cut::RegionsSave);
        assert!(saving.0 == plain.0, "{what}: the loss");
        assert!(saving.1 == plain.1, "{what}: the images' gradient");
        assert!(saving.2 == plain.2, "{what}: the parameters' gradients");
        assert!(
            saving.3 == plain.3,
            "{what}: the weights and running statistics"
        );
        // Twice: a region's state (running statistics' tags) is restored after it.
        let again = densenet_step(build, run, Cut::RegionsSave);
        assert!(again == plain, "{what}, again");
    }
}

/// One model, its cut changing from step to step (as while the planner profiles, or when a plan
/// changes): batch norm's running statistics carry a strategy, and a pending update made under
/// one meets a run under another. The same losses, gradients and running statistics as plain
/// steps, and no strategy mismatch.
#[test]
fn switching_between_plain_saving_and_recomputing_steps_keeps_batch_norm_exact() {
    let _generator = generator();
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
            Cut::RegionsSave,
            Cut::Regions,
            Cut::RegionsSave,
            Cut::None,
        ]);
        assert!(switching == plain, "{device:?}");
    }
}
