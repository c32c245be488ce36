//! Memory of a training step with and without regions, measured with a counting allocator.
//!
//! An activation-dominated MLP (16 layers `relu(h·W)`, width 256, batch 4096) split into 4 regions
//! of 4 layers. Above the bytes held before the step (input and parameters), the run with regions
//! must hold at most 20% of the plain run's bytes between forward and backward, and peak at most at
//! 60% of the plain run's peak. The peak bound fails if region outputs are not stored: a chain of
//! regions must be recomputed one region at a time.
//!
//! Runs alone (`common::alone`): the allocator counts every thread of the process.

use crate::common;

use burn::tensor::activation::relu;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use burn_checkpoint::checkpoint;
use burn_checkpoint_core::memory::mib;
use common::{Ckpt, Plain, assert_values_bitwise, data, values};

use crate::measured::{Measured, measured};

const LAYERS: usize = 16;
const LAYERS_PER_REGION: usize = 4;
const WIDTH: usize = 256;
const BATCH: usize = 4096;

fn layers<B: AutodiffBackend>(mut h: Tensor<B, 2>, weights: &[Tensor<B, 2>]) -> Tensor<B, 2> {
    for w in weights {
        h = relu(h.matmul(w.clone()));
    }
    h
}

fn step<B: AutodiffBackend>(
    x: &TensorData,
    ws: &[TensorData],
    r: &TensorData,
    regions: bool,
) -> Measured {
    let device = Default::default();
    let ws: Vec<Tensor<B, 2>> = ws
        .iter()
        .map(|w| Tensor::from_data(w.clone(), &device).require_grad())
        .collect();
    let x = Tensor::<B, 2>::from_data(x.clone(), &device);
    let r = Tensor::<B, 2>::from_data(r.clone(), &device);

    measured(
        || {
            let mut h = x;
            for chunk in ws.chunks(LAYERS_PER_REGION) {
                h = if regions {
                    checkpoint(|| layers(h, chunk))
                } else {
                    layers(h, chunk)
                };
            }
            (h * r).sum()
        },
        |grads| ws.iter().map(|w| values(w.grad(grads).unwrap())).collect(),
    )
}

#[test]
fn regions_hold_a_fraction_of_the_activations() {
    let _alone = common::alone();
    let scale = (6.0f32 / WIDTH as f32).sqrt();
    let x = data([BATCH, WIDTH], 1);
    let ws: Vec<TensorData> = (0..LAYERS)
        .map(|i| {
            let w = data([WIDTH, WIDTH], 100 + i as u64);
            TensorData::new(
                w.to_vec::<f32>()
                    .unwrap()
                    .iter()
                    .map(|v| v * scale)
                    .collect(),
                [WIDTH, WIDTH],
            )
        })
        .collect();
    let r = data([BATCH, WIDTH], 7);

    // Warm-up: thread pools and caches allocate once; keep that out of the figures.
    step::<Plain>(&x, &ws, &r, false);
    step::<Ckpt>(&x, &ws, &r, true);

    let plain = step::<Plain>(&x, &ws, &r, false);
    let regions = step::<Ckpt>(&x, &ws, &r, true);

    let activation = BATCH * WIDTH * 4;
    println!(
        "MLP {LAYERS} x relu(h·W), width {WIDTH}, batch {BATCH} (one activation = {:.1} MiB), \
         {} regions of {LAYERS_PER_REGION} layers",
        mib(activation),
        LAYERS / LAYERS_PER_REGION
    );
    println!("| run | held between forward and backward | peak during the step |");
    println!("|---|---|---|");
    for (name, m) in [
        ("plain Autodiff", &plain),
        ("Checkpointed + regions", &regions),
    ] {
        println!(
            "| {name} | {:.1} MiB | {:.1} MiB |",
            mib(m.held),
            mib(m.peak)
        );
    }
    let held_ratio = regions.held as f64 / plain.held as f64;
    let peak_ratio = regions.peak as f64 / plain.peak as f64;
    println!("| ratio | {held_ratio:.3} | {peak_ratio:.3} |");

    for (i, (a, b)) in plain.grads.iter().zip(&regions.grads).enumerate() {
        assert_values_bitwise(&format!("gradient of W{i}"), a, b);
    }
    assert!(
        held_ratio <= 0.20,
        "regions held {held_ratio:.3} of the plain run's bytes"
    );
    assert!(
        peak_ratio <= 0.60,
        "regions peaked at {peak_ratio:.3} of the plain run's peak"
    );
}
