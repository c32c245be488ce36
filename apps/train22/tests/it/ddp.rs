//! Regions under burn-train's data parallelism (`ExecutionStrategy::ddp`: each parameter's
//! gradient all-reduced at its last use in backward), on the CPU: two wgpu devices over Mesa's
//! lavapipe, whose collectives CubeCL emulates. Burn 0.22 has no collectives on
//! wgpu and refuses regions under data parallelism (`REGIONS_UNDER_DDP`; burn22's wgpu tests
//! check the refusal); `scripts/burn23` runs these on Burn 0.23.
//!
//! `cargo test --manifest-path apps/train22/Cargo.toml --features wgpu --test it ddp`

use burn::tensor::{Device, DeviceKind};
use burn_checkpoint_22_train::mlp::{Mlp, Run, Strategy};
use burn_checkpoint_22_train::parameters;

use crate::bits;

/// Two wgpu devices: wgpu's default one and its CPU one, both Mesa's lavapipe here. Two devices
/// rather than one listed twice: burn-train forks the model to each worker's device, which on
/// the same device shares every parameter's buffer between the workers, and CubeCL orders work
/// on a shared buffer only on the stream that allocated it; plain runs then differ from run to
/// run (docs/burn-0.22-devices.md, "Data parallelism").
fn wgpu() -> [Device; 2] {
    app_kit::vulkan::runtime_dir();
    [
        Device::wgpu(DeviceKind::DefaultDevice),
        Device::wgpu(DeviceKind::Cpu),
    ]
}

#[test]
fn regions_under_data_parallelism_train_the_weights_of_plain_autodiff() {
    same_under_ddp(Mlp::new);
}

/// A layer shared by two regions and used outside them: its gradient, three terms (two from the
/// regions' backwards), all-reduced once, after the last; a reduction at the first region's
/// backward would leave the workers apart and the weights off plain's, one a second time would
/// hang or panic.
#[test]
fn a_layer_shared_by_two_regions_and_outside_them_is_reduced_once() {
    same_under_ddp(Mlp::with_shared_layer);
}

/// `new`'s model trained under `ExecutionStrategy::ddp` on two wgpu devices: twice without
/// regions and once with, the same run each time.
fn same_under_ddp(new: fn(&Device, bool) -> Mlp) {
    // `wgpu()` sets the environment before wgpu's threads start: no other test beside it.
    let _alone = crate::alone();
    if !burn_checkpoint_22::REGIONS_UNDER_DDP {
        eprintln!(
            "skipped: Burn 0.22 ends a region's recompute with the collective sync and refuses \
             regions under data parallelism; scripts/burn23 runs this on Burn 0.23"
        );
        return;
    }
    let devices = wgpu();
    let run = Run {
        strategy: Strategy::Ddp,
        devices: devices.to_vec(),
        ..Run::default()
    };
    let autodiff = devices[0].clone().autodiff();
    autodiff.seed(7);
    let model = new(&autodiff, false);
    let initial = parameters(&model);
    let plain = run.clone().train(model.clone()).sorted();
    let again = run.clone().train(model.clone()).sorted();
    let regions = run.train(model.with_regions(true)).sorted();

    assert_eq!(
        plain.train_losses.len(),
        16,
        "2 epochs of 4 steps on each of 2 workers"
    );
    assert!(!plain.valid_losses.is_empty());
    assert!(plain.parameters != initial, "trained");
    for (name, other) in [("a second run", &again), ("the run with regions", &regions)] {
        assert_eq!(
            bits(&other.train_losses),
            bits(&plain.train_losses),
            "{name}: losses"
        );
        assert_eq!(
            bits(&other.valid_losses),
            bits(&plain.valid_losses),
            "{name}: validation"
        );
        assert!(
            other.parameters == plain.parameters,
            "{name}: trained weights differ"
        );
    }
}
