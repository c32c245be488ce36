//! Memory a region saves, measured by a counting allocator: the bytes held between forward and
//! backward and the step's peak, plain autodiff against one region per block.

use crate::common;

use burn::tensor::{Device, Distribution, Tensor};
use burn_checkpoint_22::checkpoint;
use burn_checkpoint_22::memory::Meter;
use burn_checkpoint_core::memory::mib;
use common::Block;

/// Bytes held after forward (the graph's saved activations) and the step's peak, both above
/// what was allocated before the step.
fn step(blocks: &[Block], x: &Tensor<2>, regions: bool) -> (usize, usize) {
    let measure = Meter::Host.start();
    let mut h = x.clone();
    for block in blocks {
        h = if regions {
            checkpoint(block, h, |block, h| block.body(h))
        } else {
            block.body(h)
        };
    }
    let loss = h.powf_scalar(2.0).mean();
    let held = measure.now();
    let grads = loss.backward();
    let peak = measure.finish().in_use;
    drop(grads);
    (held as usize, peak as usize)
}

#[test]
fn regions_hold_a_fraction_of_plain_autodiffs_activations() {
    let _alone = common::alone();
    let device = Device::flex().autodiff();
    device.seed(1);
    let (depth, width, batch) = (8, 128, 1024);
    let blocks: Vec<Block> = (0..depth).map(|_| Block::new(width, &device)).collect();
    let x = Tensor::<2>::random([batch, width], Distribution::Default, &device);
    // Warm up both: first allocations of the backend's pools are not the step's.
    step(&blocks, &x, false);
    step(&blocks, &x, true);
    let (plain_held, plain_peak) = step(&blocks, &x, false);
    let (region_held, region_peak) = step(&blocks, &x, true);
    println!(
        "{depth} blocks {width}→{}→{width}, batch {batch}: held after forward {:.1} MiB plain, \
         {:.1} MiB regions ({:.2}×); step peak {:.1} MiB plain, {:.1} MiB regions ({:.2}×)",
        4 * width,
        mib(plain_held),
        mib(region_held),
        region_held as f64 / plain_held as f64,
        mib(plain_peak),
        mib(region_peak),
        region_peak as f64 / plain_peak as f64,
    );
    // A block's activations are 4·width + a few width per row; a region keeps its input only.
    assert!(
        (region_held as f64) < 0.25 * plain_held as f64,
        "regions held {region_held} bytes after forward, plain {plain_held}"
    );
    assert!(
        (region_peak as f64) < 0.6 * plain_peak as f64,
        "regions peaked at {region_peak} bytes, plain at {plain_peak}"
    );
}
