//! Memory of regions of any size, measured with a counting allocator: a stack of transformer
//! blocks (attention and MLP with residuals) in one region holds its input between forward and
//! backward, and its backward holds no more than one plain forward of the region (its peak stays
//! within the plain step's); per-block regions and `checkpoint_sequential` peak lower still.
//!
//! Runs alone (`common::alone`): the allocator counts every thread of the process.

use crate::common;

use burn::tensor::Tensor;
use burn::tensor::backend::AutodiffBackend;
use burn_checkpoint::{Layer, Segments, checkpoint, checkpoint_sequential};
use burn_checkpoint_core::memory::mib;
use common::transformer::Block;
use common::{Ckpt, Plain, assert_values_bitwise, data, values};

use crate::measured::{Measured, measured};

const BLOCKS: usize = 8;
const WIDTH: usize = 64;
const BATCH: usize = 8;
const SEQ: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Cut {
    Plain,
    Whole,
    PerBlock,
    Sequential,
}

fn step<B: AutodiffBackend>(cut: Cut) -> Measured {
    let device = Default::default();
    let layers: Vec<Block<B>> = (0..BLOCKS as u64).map(|i| Block::new(WIDTH, i)).collect();
    let x = Tensor::<B, 3>::from_data(data([BATCH, SEQ, WIDTH], 1), &device);
    let r = Tensor::<B, 3>::from_data(data([BATCH, SEQ, WIDTH], 2), &device);
    let stack = |x| layers.iter().fold(x, |x, layer| layer.forward(x));
    measured(
        || {
            let y = match cut {
                Cut::Plain => stack(x),
                Cut::Whole => checkpoint(|| stack(x)),
                Cut::PerBlock => layers
                    .iter()
                    .fold(x, |x, layer| checkpoint(|| layer.forward(x))),
                Cut::Sequential => checkpoint_sequential(&layers, Segments::Sqrt, x),
            };
            (y * r).sum()
        },
        |grads| {
            layers
                .iter()
                .flat_map(|layer| layer.weights().map(|w| values(w.grad(grads).unwrap())))
                .collect()
        },
    )
}

#[test]
fn a_region_of_any_size_holds_at_most_one_forward() {
    let _alone = common::alone();
    // Warm-up: thread pools and caches allocate once; keep that out of the figures.
    step::<Plain>(Cut::Plain);
    step::<Ckpt>(Cut::Whole);

    let plain = step::<Plain>(Cut::Plain);
    println!(
        "{BLOCKS} transformer blocks, width {WIDTH}, batch {BATCH}, sequence {SEQ}; bytes above \
         the inputs and weights"
    );
    println!("| run | held between forward and backward | peak during the step | peak × plain |");
    println!("|---|---|---|---|");
    println!(
        "| plain Autodiff | {:.1} MiB | {:.1} MiB | 1.00 |",
        mib(plain.held),
        mib(plain.peak)
    );
    let mut peaks = Vec::new();
    for cut in [Cut::Whole, Cut::PerBlock, Cut::Sequential] {
        let run = step::<Ckpt>(cut);
        let ratio = run.peak as f64 / plain.peak as f64;
        println!(
            "| {cut:?} | {:.1} MiB | {:.1} MiB | {ratio:.2} |",
            mib(run.held),
            mib(run.peak)
        );
        for (i, (a, b)) in plain.grads.iter().zip(&run.grads).enumerate() {
            assert_values_bitwise(&format!("{cut:?}: gradient {i}"), a, b);
        }
        // `checkpoint_sequential` leaves its last segment (2 of 8 blocks here) out of regions,
        // as torch's does: backward starts there, so recomputing it would only cost time.
        let bound = if cut == Cut::Sequential { 0.4 } else { 0.1 };
        assert!(
            run.held as f64 <= bound * plain.held as f64,
            "{cut:?} held {:.1} MiB between forward and backward (plain: {:.1} MiB)",
            mib(run.held),
            mib(plain.held)
        );
        peaks.push((cut, ratio));
    }
    // The whole stack in one region recomputes it all in its backward: one forward's worth.
    let whole = peaks[0].1;
    assert!(whole <= 1.05, "one region peaked at {whole:.2}× plain");
    for (cut, ratio) in &peaks[1..] {
        assert!(*ratio <= 0.6, "{cut:?} peaked at {ratio:.2}× plain");
    }
}
