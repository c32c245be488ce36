//! The small model the data-parallel tests train: a two-layer perceptron with deterministic
//! weights and data, optionally with its body in a checkpoint region.
#![allow(dead_code)]

use burn::module::{Module, ModuleVisitor, Param};
use burn::nn::Linear;
use burn::optim::LearningRate;
use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, Shape, Tensor, TensorData};
use burn_checkpoint::checkpoint;
use burn_checkpoint_parallel::split_batch;
use rand::SeedableRng;
use rand::rngs::StdRng;

/// Uniform values in [-1, 1), the same for the same seed (rand's seeded generator, the one
/// Burn's `TensorData::random` takes).
pub fn data(shape: impl Into<Shape>, seed: u64) -> TensorData {
    let mut rng = StdRng::seed_from_u64(seed);
    TensorData::random::<f32, _, _>(shape, Distribution::Uniform(-1.0, 1.0), &mut rng)
}

pub const LR: LearningRate = 0.05;
pub const STEPS: usize = 4;
pub const BATCH: usize = 16;
pub const INPUT: usize = 8;
pub const HIDDEN: usize = 16;
// 3 outputs: 195 parameters in all, not a multiple of 2 or 4, so buckets need padding.
pub const OUTPUT: usize = 3;

pub fn linear<B: Backend>(input: usize, output: usize, seed: u64, device: &B::Device) -> Linear<B> {
    Linear {
        weight: Param::from_data(data([input, output], seed), device),
        bias: Some(Param::from_data(data([output], seed + 1), device)),
    }
}

/// A two-layer perceptron, optionally with its body in a checkpoint region.
#[derive(Module, Debug)]
pub struct Mlp<B: Backend> {
    pub first: Linear<B>,
    pub second: Linear<B>,
    pub region: bool,
}

impl<B: Backend> Mlp<B> {
    /// Deterministic weights: NdArray's random generator is global to the process.
    pub fn new(device: &B::Device, region: bool) -> Self {
        Mlp {
            first: linear(INPUT, HIDDEN, 1, device),
            second: linear(HIDDEN, OUTPUT, 3, device),
            region,
        }
    }

    pub fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let body = || self.second.forward(self.first.forward(x).tanh());
        if self.region {
            checkpoint(body)
        } else {
            body()
        }
    }
}

pub type Batch<B> = (Tensor<B, 2>, Tensor<B, 2>);

/// Mean squared error over the shard.
pub fn mse<B: Backend>(model: &Mlp<B>, (x, y): Batch<B>) -> Tensor<B, 1> {
    (model.forward(x) - y).powi_scalar(2).mean()
}

pub fn batch<B: Backend>(step: usize, device: &B::Device) -> Batch<B> {
    let seed = 100 + 2 * step as u64;
    (
        Tensor::from_data(data([BATCH, INPUT], seed), device),
        Tensor::from_data(data([BATCH, OUTPUT], seed + 1), device),
    )
}

pub fn shards<B: Backend>(step: usize, devices: &[B::Device]) -> Vec<Batch<B>> {
    split(batch::<B>(step, &devices[0]), devices)
}

/// One equal part of `batch` per device.
pub fn split<B: Backend>((x, y): Batch<B>, devices: &[B::Device]) -> Vec<Batch<B>> {
    split_batch(x, devices)
        .unwrap()
        .into_iter()
        .zip(split_batch(y, devices).unwrap())
        .collect()
}

/// Every float tensor of a module (parameters and running statistics), in visiting order.
pub fn tensors<B: Backend, M: Module<B>>(module: &M) -> Vec<Vec<f32>> {
    struct Collect(Vec<Vec<f32>>);
    impl<B: Backend> ModuleVisitor<B> for Collect {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            self.0
                .push(param.val().into_data().convert::<f32>().to_vec().unwrap());
        }
    }
    let mut collect = Collect(Vec::new());
    module.visit(&mut collect);
    collect.0
}

/// Every value of `actual` within `tolerance` of `expected`'s, tensor by tensor.
pub fn assert_close(actual: &[Vec<f32>], expected: &[Vec<f32>], tolerance: f32) {
    assert_eq!(actual.len(), expected.len());
    for (t, (a, e)) in actual.iter().zip(expected).enumerate() {
        for (i, (a, e)) in a.iter().zip(e).enumerate() {
            assert!(
                (a - e).abs() <= tolerance,
                "tensor {t}[{i}]: {a} against {e} (tolerance {tolerance})"
            );
        }
    }
}
