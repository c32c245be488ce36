//! What the tests on a cubecl runtime (wgpu over Mesa's lavapipe) share: a deeper model than
//! [`super::mlp::Mlp`], on which runs raced while the workers shared parameter buffers, its loss,
//! and a process's autotune cache of its own.
#![allow(dead_code)]

use std::path::PathBuf;

use burn::module::Module;
use burn::nn::Linear;
use burn::tensor::Tensor;
use burn::tensor::backend::Backend;
use burn_checkpoint::checkpoint;
use cubecl_runtime::config::cache::CacheConfig;
use cubecl_runtime::config::{CubeClRuntimeConfig, RuntimeConfig};

use super::mlp::{Batch, INPUT, OUTPUT, linear};

/// Float reassociation between the mean of several workers and one worker's whole batch after
/// `STEPS` steps of the deep model.
pub const TOLERANCE: f32 = 2e-6;

const HIDDEN: usize = 32;
const LAYERS: usize = 6;

/// Six `Linear` layers with tanh between them, deterministic weights; optionally a region per
/// layer.
#[derive(Module, Debug)]
pub struct Deep<B: Backend> {
    layers: Vec<Linear<B>>,
    regions: bool,
}

impl<B: Backend> Deep<B> {
    pub fn new(device: &B::Device, regions: bool) -> Self {
        let widths: Vec<usize> = std::iter::once(INPUT)
            .chain([HIDDEN; LAYERS - 1])
            .chain([OUTPUT])
            .collect();
        Deep {
            layers: widths
                .windows(2)
                .enumerate()
                .map(|(i, w)| linear(w[0], w[1], 10 + 2 * i as u64, device))
                .collect(),
            regions,
        }
    }

    pub fn forward(&self, mut x: Tensor<B, 2>) -> Tensor<B, 2> {
        let last = self.layers.len() - 1;
        for (i, layer) in self.layers.iter().enumerate() {
            let step = |x: Tensor<B, 2>| {
                let y = layer.forward(x);
                if i < last { y.tanh() } else { y }
            };
            x = if self.regions {
                checkpoint(|| step(x))
            } else {
                step(x)
            };
        }
        x
    }
}

/// Mean squared error over the shard.
pub fn deep_mse<B: Backend>(model: &Deep<B>, (x, y): Batch<B>) -> Tensor<B, 1> {
    (model.forward(x) - y).powi_scalar(2).mean()
}

/// Points this process's autotune cache at an empty directory of its own, before its first
/// kernel, and returns the directory (the caller removes it when done). cubecl keeps tuning
/// results on disk (under `target/autotune` of the nearest `Cargo.toml`), and a process that
/// finds them tunes nothing: with its own empty cache, every run tunes, as a user's first does.
pub fn own_autotune_cache(name: &str) -> PathBuf {
    let cache = std::env::temp_dir().join(format!("{name}-autotune-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let mut config = CubeClRuntimeConfig::default();
    config.autotune.cache = CacheConfig::File(cache.clone());
    CubeClRuntimeConfig::set(config);
    cache
}

/// The largest difference between two sets of parameters.
fn largest(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    a.iter()
        .zip(b)
        .flat_map(|(a, b)| a.iter().zip(b).map(|(a, b)| (a - b).abs()))
        .fold(0.0, f32::max)
}

/// How the runs of one training compare with the first run, and with a reference.
pub struct Spread {
    /// The largest difference from the first run of each run that differs from it.
    pub differing: Vec<f32>,
    /// The largest difference of any run from the reference.
    pub from_reference: f32,
}

impl Spread {
    pub fn of(trained: &[Vec<Vec<f32>>], reference: &[Vec<f32>]) -> Spread {
        let first = &trained[0];
        Spread {
            differing: trained[1..]
                .iter()
                .filter(|t| *t != first)
                .map(|t| largest(t, first))
                .collect(),
            from_reference: trained
                .iter()
                .map(|t| largest(t, reference))
                .fold(0.0, f32::max),
        }
    }

    /// The largest difference of a run from the first.
    pub fn worst(&self) -> f32 {
        self.differing.iter().copied().fold(0.0, f32::max)
    }
}
