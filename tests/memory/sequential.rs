//! `checkpoint_sequential` on a stack of 16 blocks `relu(linear(h))`: gradients bitwise equal to
//! plain `Autodiff` for every segment count, and peak step memory that falls as Chen et al.'s
//! √n analysis predicts: with k segments of n/k blocks, a step holds the k − 1 stored boundaries
//! plus one segment's activations (2 per block: the linear's and the ReLU's output), about
//! k − 1 + 2n/k activations, smallest near k = √(2n) and flat around √n.
//!
//! Runs alone (`common::alone`): the allocator counts every thread of the process.

use crate::common;

use burn::tensor::activation::relu;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::module::linear;
use burn::tensor::{Tensor, TensorData};
use burn_checkpoint::{Layer, Segments, checkpoint_sequential};
use burn_checkpoint_core::memory::mib;
use common::{Ckpt, Plain, assert_values_bitwise, data, values};

use crate::measured::{Measured, measured};

const BLOCKS: usize = 16;
const WIDTH: usize = 128;
const BATCH: usize = 1024;

/// `relu(h·W + b)`.
struct Block<B: Backend> {
    weight: Tensor<B, 2>,
    bias: Tensor<B, 1>,
}

impl<B: Backend> Layer<Tensor<B, 2>> for Block<B> {
    fn forward(&self, h: Tensor<B, 2>) -> Tensor<B, 2> {
        relu(linear(h, self.weight.clone(), Some(self.bias.clone())))
    }
}

fn step<B: AutodiffBackend>(
    x: &TensorData,
    weights: &[(TensorData, TensorData)],
    segments: Option<Segments>,
) -> Measured {
    let device = Default::default();
    let blocks: Vec<Block<B>> = weights
        .iter()
        .map(|(w, b)| Block {
            weight: Tensor::from_data(w.clone(), &device).require_grad(),
            bias: Tensor::from_data(b.clone(), &device).require_grad(),
        })
        .collect();
    let x = Tensor::<B, 2>::from_data(x.clone(), &device);
    measured(
        || {
            match segments {
                Some(segments) => checkpoint_sequential(&blocks, segments, x),
                None => blocks.iter().fold(x, |h, block| block.forward(h)),
            }
            .sum()
        },
        |grads| {
            blocks
                .iter()
                .flat_map(|block| {
                    [
                        values(block.weight.grad(grads).unwrap()),
                        values(block.bias.grad(grads).unwrap()),
                    ]
                })
                .collect()
        },
    )
}

#[test]
fn peak_memory_falls_as_sqrt_n_predicts() {
    let _alone = common::alone();
    let x = data([BATCH, WIDTH], 1);
    let scale = (2.0 / WIDTH as f32).sqrt();
    let weights: Vec<(TensorData, TensorData)> = (0..BLOCKS as u64)
        .map(|i| {
            let w: Vec<f32> = data([WIDTH, WIDTH], 10 + i)
                .iter::<f32>()
                .map(|v| v * scale)
                .collect();
            (TensorData::new(w, [WIDTH, WIDTH]), data([WIDTH], 100 + i))
        })
        .collect();
    // Warm-up: thread pools and caches allocate once.
    step::<Plain>(&x, &weights, None);
    step::<Ckpt>(&x, &weights, Some(Segments::Sqrt));

    let plain = step::<Plain>(&x, &weights, None);
    let runs: Vec<(usize, &str, Measured)> = [
        (1, "1", Segments::Count(1)),
        (2, "2", Segments::Count(2)),
        (4, "4 = √n (`Segments::Sqrt`)", Segments::Sqrt),
        (8, "8", Segments::Count(8)),
        (16, "16 = n", Segments::Count(16)),
    ]
    .into_iter()
    .map(|(k, name, segments)| (k, name, step::<Ckpt>(&x, &weights, Some(segments))))
    .collect();

    let activation = BATCH * WIDTH * 4;
    println!(
        "{BLOCKS} blocks relu(linear(h)), width {WIDTH}, batch {BATCH} \
         (one activation = {:.2} MiB); peak of a step above the inputs and weights",
        mib(activation)
    );
    println!("| segments | peak | activations | model k − 1 + 2n/k |");
    println!("|---|---|---|---|");
    let units = |bytes: usize| bytes as f64 / activation as f64;
    println!(
        "| plain Autodiff | {:.2} MiB | {:.1} | 2n = {} |",
        mib(plain.peak),
        units(plain.peak),
        2 * BLOCKS
    );
    for (k, name, m) in &runs {
        println!(
            "| {name} | {:.2} MiB | {:.1} | {} |",
            mib(m.peak),
            units(m.peak),
            k - 1 + 2 * BLOCKS / k
        );
    }

    for (_, name, m) in &runs {
        for (i, (a, b)) in plain.grads.iter().zip(&m.grads).enumerate() {
            assert_values_bitwise(&format!("{name} segments: gradient {i}"), a, b);
        }
    }
    let peak_of = |k: usize| runs.iter().find(|(n, ..)| *n == k).unwrap().2.peak;
    let sqrt = peak_of(4);
    // Falls from 1 to 2 to √n segments, and √n is within 10% of the best count measured.
    assert!(peak_of(2) < peak_of(1), "2 segments peaked above 1");
    assert!(sqrt < peak_of(2), "√n segments peaked above 2");
    let best = runs.iter().map(|(.., m)| m.peak).min().unwrap();
    assert!(
        sqrt as f64 <= 1.10 * best as f64,
        "√n segments peaked at {:.1} activations, the best count at {:.1}",
        units(sqrt),
        units(best)
    );
    assert!(
        units(sqrt) < 0.5 * units(peak_of(1)),
        "√n segments did not halve the peak of one segment"
    );
}
