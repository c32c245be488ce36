//! What each policy holds between forward and backward, measured with a counting allocator on a
//! stack of convolutions: `RecomputeAll` keeps no convolution output (only the region's output),
//! `SaveComputeBound` keeps every convolution output and recomputes the ReLUs from them.
//!
//! Runs alone (`common::alone`): the allocator counts every thread of the process.

use crate::common;

use burn::tensor::activation::relu;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::module::conv2d;
use burn::tensor::ops::ConvOptions;
use burn::tensor::{Tensor, TensorData};
use burn_checkpoint::memory::Meter;
use burn_checkpoint::{Policy, Region};
use burn_checkpoint_core::memory::mib;
use common::{Ckpt, Plain, assert_values_bitwise, data, values};

const LAYERS: usize = 8;
const BATCH: usize = 4;
const CHANNELS: usize = 4;
const SIDE: usize = 32;

/// `LAYERS` times `relu(conv3x3(h))`.
fn stack<B: AutodiffBackend>(mut h: Tensor<B, 4>, weights: &[Tensor<B, 4>]) -> Tensor<B, 4> {
    for w in weights {
        h = relu(conv2d(
            h,
            w.clone(),
            None,
            ConvOptions::new([1, 1], [1, 1], [1, 1], 1),
        ));
    }
    h
}

/// Bytes held after forward (above the inputs and weights), and the weight gradients.
fn held<B: AutodiffBackend>(
    x: &TensorData,
    ws: &[TensorData],
    policy: Option<Policy>,
) -> (usize, Vec<Vec<f32>>) {
    let device = Default::default();
    let ws: Vec<Tensor<B, 4>> = ws
        .iter()
        .map(|w| Tensor::from_data(w.clone(), &device).require_grad())
        .collect();
    let x = Tensor::<B, 4>::from_data(x.clone(), &device);
    let measure = Meter::Host.start();
    let out = match policy {
        Some(policy) => Region::new().policy(policy).run(|| stack(x, &ws)),
        None => stack(x, &ws),
    };
    let held = measure.now() as usize;
    let grads = out.sum().backward();
    (
        held,
        ws.iter().map(|w| values(w.grad(&grads).unwrap())).collect(),
    )
}

#[test]
fn save_compute_bound_keeps_convolution_outputs_and_recompute_all_none() {
    let _alone = common::alone();
    let x = data([BATCH, CHANNELS, SIDE, SIDE], 1);
    let ws: Vec<TensorData> = (0..LAYERS)
        .map(|i| {
            let w = data([CHANNELS, CHANNELS, 3, 3], 10 + i as u64);
            let scale = (2.0 / (9 * CHANNELS) as f32).sqrt();
            let values: Vec<f32> = w.iter::<f32>().map(|v| v * scale).collect();
            TensorData::new(values, [CHANNELS, CHANNELS, 3, 3])
        })
        .collect();
    // Warm-up: thread pools and caches allocate once.
    held::<Plain>(&x, &ws, None);
    held::<Ckpt>(&x, &ws, Some(Policy::SaveComputeBound));

    let (plain, plain_grads) = held::<Plain>(&x, &ws, None);
    let (all, all_grads) = held::<Ckpt>(&x, &ws, Some(Policy::RecomputeAll));
    let (save, save_grads) = held::<Ckpt>(&x, &ws, Some(Policy::SaveComputeBound));

    let activation = BATCH * CHANNELS * SIDE * SIDE * 4;
    println!(
        "{LAYERS} x relu(conv3x3(h)), batch {BATCH}, {CHANNELS} channels, {SIDE}x{SIDE} \
         (one activation = {:.2} MiB), one region",
        mib(activation)
    );
    println!("| run | held between forward and backward | activations |");
    println!("|---|---|---|");
    for (name, bytes) in [
        ("plain Autodiff", plain),
        ("RecomputeAll", all),
        ("SaveComputeBound", save),
    ] {
        println!(
            "| {name} | {:.2} MiB | {:.2} |",
            mib(bytes),
            bytes as f64 / activation as f64
        );
    }
    for (i, ((p, a), s)) in plain_grads
        .iter()
        .zip(&all_grads)
        .zip(&save_grads)
        .enumerate()
    {
        assert_values_bitwise(&format!("RecomputeAll gradient {i}"), p, a);
        assert_values_bitwise(&format!("SaveComputeBound gradient {i}"), p, s);
    }

    // RecomputeAll: the region's output only.
    let all_activations = all as f64 / activation as f64;
    assert!(
        (0.9..1.5).contains(&all_activations),
        "RecomputeAll held {all_activations:.2} activations; expected the output only"
    );
    // SaveComputeBound: that, and one output per convolution.
    let kept = (save as f64 - all as f64) / activation as f64;
    assert!(
        (LAYERS as f64 - 0.5..LAYERS as f64 + 0.5).contains(&kept),
        "SaveComputeBound kept {kept:.2} activations more than RecomputeAll; expected {LAYERS}"
    );
}
