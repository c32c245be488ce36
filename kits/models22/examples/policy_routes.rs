//! A measurement of what a region can keep on Burn 0.22, where a crate cannot see a
//! region's ops. One DenseNet-BC dense block (BN, ReLU, 1×1 conv, BN, ReLU, 3×3 conv over the
//! concatenation of every earlier output) trained one step per method, interleaved, on Flex:
//!
//! - `plain`, `balanced` (Burn's `gradient_checkpointing()`), `regions` (a region per layer);
//! - `save-compute-bound`: a `Policy::SaveComputeBound` region per layer (its body under Burn's
//!   Balanced checkpointing, on a plain run), alone, with the concatenation, first batch norm and
//!   ReLU a nested region (a memory-bound op Balanced recomputes), with both norms so, and the
//!   second under Burn's own `gradient_checkpointing()`;
//! - `plain, bn by ops` and `balanced, bn by ops`: batch norm written with elementwise ops and
//!   reductions instead of Burn's `batch_norm_train`, which burn-autodiff 0.22 marks
//!   compute-bound (`ops/module.rs`), so Balanced keeps every batch norm's output.
//!
//! `cargo run --release --manifest-path kits/models22/Cargo.toml --example policy_routes --
//! [LAYERS] [BATCH] [STEPS]` (default 12 16 3). Prints whether each method's gradients are plain's,
//! bit for bit (the "bn by ops" pair against each other), then peak step memory (the counting
//! allocator, above the step's start) and the median step time, both × Balanced's.

use std::time::{Duration, Instant};

use burn::module::{Module, ModuleVisitor, Param};
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{BatchNorm, BatchNormConfig, PaddingConfig2d, Relu};
use burn::tensor::{Device, Distribution, Gradients, Tensor};
use burn_checkpoint_22::memory::{CountingAllocator, Meter};
use burn_checkpoint_22::{Policy, Region, checkpoint};
use burn_checkpoint_22_models::initialised;
use burn_checkpoint_core::memory::mib;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const GROWTH: usize = 12;
const SIDE: usize = 32;

/// A dense layer: BN, ReLU, 1×1 conv to 4k channels, BN, ReLU, 3×3 conv to k.
#[derive(Module, Debug)]
struct Layer {
    norm1: BatchNorm,
    conv1: Conv2d,
    norm2: BatchNorm,
    conv2: Conv2d,
    relu: Relu,
}

impl Layer {
    fn new(channels: usize, device: &Device) -> Self {
        let width = 4 * GROWTH;
        Layer {
            norm1: BatchNormConfig::new(channels).init(device),
            conv1: Conv2dConfig::new([channels, width], [1, 1])
                .with_bias(false)
                .init(device),
            norm2: BatchNormConfig::new(width).init(device),
            conv2: Conv2dConfig::new([width, GROWTH], [3, 3])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .with_bias(false)
                .init(device),
            relu: Relu::new(),
        }
    }

    fn forward(&self, features: Vec<Tensor<4>>, norms: Norms) -> Tensor<4> {
        let norm = |bn: &BatchNorm, x: Tensor<4>| {
            if norms == Norms::ByOps {
                batch_norm_by_ops(bn, x)
            } else {
                bn.forward(x)
            }
        };
        let x = if norms == Norms::Plain || norms == Norms::ByOps {
            self.relu
                .forward(norm(&self.norm1, Tensor::cat(features, 1)))
        } else {
            // The concatenation, batch norm and ReLU as one region: inside a SaveComputeBound
            // region, a memory-bound op whose output backward recomputes.
            Region::named("norm1").run(&self.norm1, features, |bn, f| {
                Relu::new().forward(bn.forward(Tensor::cat(f, 1)))
            })
        };
        let x = self.conv1.forward(x);
        let x = if norms == Norms::BothRegions {
            Region::named("norm2").run(&self.norm2, x, |bn, x| Relu::new().forward(bn.forward(x)))
        } else {
            self.relu.forward(norm(&self.norm2, x))
        };
        self.conv2.forward(x)
    }
}

/// How a layer runs its batch norms.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Norms {
    /// Burn's `BatchNorm`.
    Plain,
    /// From elementwise ops and reductions.
    ByOps,
    /// The first (concatenation, batch norm, ReLU) a region of its own.
    FirstRegion,
    /// Both a region of their own.
    BothRegions,
}

/// Batch norm in training from elementwise ops and reductions (no running statistics): what
/// Balanced would do if Burn's fused op were memory-bound. Not bitwise Burn's.
fn batch_norm_by_ops(bn: &BatchNorm, x: Tensor<4>) -> Tensor<4> {
    let [_, channels, _, _] = x.dims();
    let mean = x.clone().mean_dim(0).mean_dim(2).mean_dim(3);
    let centred = x - mean;
    let variance = centred
        .clone()
        .powi_scalar(2)
        .mean_dim(0)
        .mean_dim(2)
        .mean_dim(3);
    let normed = centred / (variance + bn.epsilon).sqrt();
    normed * bn.gamma.val().reshape([1, channels, 1, 1])
        + bn.beta.val().reshape([1, channels, 1, 1])
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Method {
    Plain,
    Balanced,
    Regions,
    SaveComputeBound,
    SaveComputeBoundNorm1,
    SaveComputeBoundNorms,
    BalancedSaveComputeBoundNorm1,
    PlainByOps,
    BalancedByOps,
}

impl Method {
    const ALL: [Method; 9] = [
        Method::Plain,
        Method::Balanced,
        Method::Regions,
        Method::SaveComputeBound,
        Method::SaveComputeBoundNorm1,
        Method::SaveComputeBoundNorms,
        Method::BalancedSaveComputeBoundNorm1,
        Method::PlainByOps,
        Method::BalancedByOps,
    ];

    fn name(self) -> &'static str {
        match self {
            Method::Plain => "plain",
            Method::Balanced => "balanced",
            Method::Regions => "regions (recompute-all)",
            Method::SaveComputeBound => "save-compute-bound",
            Method::SaveComputeBoundNorm1 => "save-compute-bound, norm1 a region",
            Method::SaveComputeBoundNorms => "save-compute-bound, both norms regions",
            Method::BalancedSaveComputeBoundNorm1 => {
                "balanced + save-compute-bound, norm1 a region"
            }
            Method::PlainByOps => "plain, bn by ops",
            Method::BalancedByOps => "balanced, bn by ops",
        }
    }

    fn device(self) -> Device {
        let device = Device::flex().autodiff();
        match self {
            Method::Balanced | Method::BalancedByOps | Method::BalancedSaveComputeBoundNorm1 => {
                device.gradient_checkpointing()
            }
            _ => device,
        }
    }

    fn norms(self) -> Norms {
        match self {
            Method::PlainByOps | Method::BalancedByOps => Norms::ByOps,
            Method::SaveComputeBoundNorm1 | Method::BalancedSaveComputeBoundNorm1 => {
                Norms::FirstRegion
            }
            Method::SaveComputeBoundNorms => Norms::BothRegions,
            _ => Norms::Plain,
        }
    }

    /// The method whose gradients this one's must equal, bit for bit.
    fn reference(self) -> Method {
        match self {
            Method::PlainByOps | Method::BalancedByOps => Method::PlainByOps,
            _ => Method::Plain,
        }
    }
}

/// One step of `method` over `layers`: the loss's gradients.
fn step(method: Method, layers: &[Layer], batch: usize) -> Gradients {
    let device = method.device();
    device.seed(2);
    let x = Tensor::<4>::random(
        [batch, 2 * GROWTH, SIDE, SIDE],
        Distribution::Default,
        &device,
    );
    let mut features = vec![x];
    for layer in layers {
        let norms = method.norms();
        let new = match method {
            Method::Regions => checkpoint(layer, features.clone(), |layer, f| {
                layer.forward(f, Norms::Plain)
            }),
            Method::SaveComputeBound
            | Method::SaveComputeBoundNorm1
            | Method::SaveComputeBoundNorms
            | Method::BalancedSaveComputeBoundNorm1 => Region::named("layer")
                .policy(Policy::SaveComputeBound)
                .run(layer, features.clone(), move |layer, f| {
                    layer.forward(f, norms)
                }),
            _ => layer.forward(features.clone(), norms),
        };
        features.push(new);
    }
    Tensor::cat(features, 1).powf_scalar(2.0).mean().backward()
}

/// Every parameter's gradient, as values.
fn gradients(layers: &[Layer], grads: &Gradients) -> Vec<Vec<f32>> {
    struct Values<'a>(&'a Gradients, Vec<Vec<f32>>);
    impl ModuleVisitor for Values<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if let Some(grad) = param.val().grad(self.0) {
                let data = grad.into_data().convert::<f32>();
                self.1.push(data.try_to_vec::<f32>().expect("f32 values"));
            }
        }
    }
    let mut values = Values(grads, Vec::new());
    for layer in layers {
        layer.visit(&mut values);
    }
    values.1
}

fn main() {
    let arg = |index: usize, default: usize| {
        std::env::args()
            .nth(index)
            .map(|a| a.parse().expect("LAYERS BATCH STEPS: numbers"))
            .unwrap_or(default)
    };
    let (count, batch, steps) = (arg(1, 12), arg(2, 16), arg(3, 3));
    let models: Vec<Vec<Layer>> = Method::ALL
        .iter()
        .map(|method| {
            let device = method.device();
            device.seed(1);
            (0..count)
                .map(|j| initialised(Layer::new(2 * GROWTH + j * GROWTH, &device)))
                .collect()
        })
        .collect();
    let index = |method: Method| Method::ALL.iter().position(|m| *m == method).unwrap();

    let grads: Vec<_> = Method::ALL
        .iter()
        .map(|&m| gradients(&models[index(m)], &step(m, &models[index(m)], batch)))
        .collect();
    for &method in &Method::ALL {
        let same = grads[index(method)] == grads[index(method.reference())];
        println!(
            "{}: gradients bit for bit {}'s: {same}",
            method.name(),
            method.reference().name()
        );
    }

    let mut samples = vec![(0usize, Vec::<Duration>::new()); Method::ALL.len()];
    for _ in 0..steps {
        for &method in &Method::ALL {
            let measure = Meter::Host.start();
            let clock = Instant::now();
            drop(step(method, &models[index(method)], batch));
            let time = clock.elapsed();
            let sample = &mut samples[index(method)];
            sample.0 = sample.0.max(measure.finish().in_use as usize);
            sample.1.push(time);
        }
    }
    let median = |times: &[Duration]| {
        let mut times = times.to_vec();
        times.sort();
        times[times.len() / 2].as_secs_f64()
    };
    let (balanced_peak, balanced_time) = {
        let sample = &samples[index(Method::Balanced)];
        (sample.0 as f64, median(&sample.1))
    };
    println!(
        "\none dense block of {count} layers (k = {GROWTH}, {SIDE}×{SIDE}), batch {batch}, Flex; \
         median of {steps} steps\n"
    );
    println!("| Method | Peak step memory | × Balanced | Time per step | × Balanced |");
    println!("|---|---|---|---|---|");
    for &method in &Method::ALL {
        let (peak, times) = &samples[index(method)];
        let time = median(times);
        println!(
            "| {} | {:.1} MiB | {:.2} | {time:.3} s | {:.2} |",
            method.name(),
            mib(*peak),
            *peak as f64 / balanced_peak,
            time / balanced_time
        );
    }
}
