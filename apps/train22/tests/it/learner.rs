//! Regions in burn-train's `Learner`: losses (training and validation) and trained weights bit
//! for bit those of the same run without regions, with Burn's own gradient checkpointing on the
//! Learner and without, on one device and with burn-train's multi-device strategy.

use burn::tensor::Device;

use crate::bits;
use burn_checkpoint_22_train::mlp::{Mlp, Run, Strategy, Trained};

/// The same model (`Mlp::new` or `Mlp::with_shared_layer`), trained with and without a region
/// per block.
fn both(device: &Device, run: Run, new: fn(&Device, bool) -> Mlp) -> (Trained, Trained) {
    // One test at a time between the seed and the draws: every Flex device shares one generator.
    let _alone = crate::alone();
    device.seed(7);
    let model = new(device, false);
    let plain = run.clone().train(model.clone());
    let regions = run.train(model.with_regions(true));
    (plain, regions)
}

fn assert_same(plain: &Trained, regions: &Trained) {
    assert_eq!(plain.train_losses.len(), 16, "2 epochs of 8 batches");
    assert_eq!(bits(&regions.train_losses), bits(&plain.train_losses));
    assert!(!plain.valid_losses.is_empty());
    assert_eq!(bits(&regions.valid_losses), bits(&plain.valid_losses));
    assert!(
        regions.parameters == plain.parameters,
        "trained weights differ"
    );
}

#[test]
fn regions_train_through_the_learner_bit_for_bit() {
    let (plain, regions) = both(&Device::flex().autodiff(), Run::default(), Mlp::new);
    assert_same(&plain, &regions);
}

#[test]
fn regions_under_the_learners_gradient_checkpointing_bit_for_bit() {
    let balanced = Run {
        gradient_checkpointing: true,
        ..Run::default()
    };
    let device = Device::flex().autodiff().gradient_checkpointing();
    let (plain, regions) = both(&device, balanced, Mlp::new);
    assert_same(&plain, &regions);
    // Burn's checkpointing changes what is kept, not a bit of the result.
    let (without, _) = both(&Device::flex().autodiff(), Run::default(), Mlp::new);
    assert_same(&without, &plain);
}

#[test]
fn regions_under_the_learners_multi_device_strategy_bit_for_bit() {
    let two = Run {
        strategy: Strategy::Multi,
        devices: vec![Device::flex(); 2],
        ..Run::default()
    };
    let (plain, regions) = both(&Device::flex().autodiff(), two, Mlp::new);
    assert_same(&plain.sorted(), &regions.sorted());
}

/// A layer shared by two regions and used outside them: its gradient gathers a term from each
/// region's backward and one from outside, on one device and summed across two.
#[test]
fn a_layer_shared_by_two_regions_and_used_outside_them_trains_as_without_regions() {
    let (plain, regions) = both(
        &Device::flex().autodiff(),
        Run::default(),
        Mlp::with_shared_layer,
    );
    assert_same(&plain, &regions);
    let two = Run {
        strategy: Strategy::Multi,
        devices: vec![Device::flex(); 2],
        ..Run::default()
    };
    let (plain, regions) = both(&Device::flex().autodiff(), two, Mlp::with_shared_layer);
    assert_same(&plain.sorted(), &regions.sorted());
}
