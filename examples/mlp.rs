//! Trains an MLP with and without checkpoint regions, and prints peak memory and step time.
//!
//! ```text
//! cargo run --example mlp
//! ```
//!
//! Both runs start from the same weights and data; the plain run uses `Autodiff<NdArray>`, the
//! other `Checkpointed<Autodiff<NdArray>>` with the MLP split into regions of 4 layers. Steps
//! alternate between the two so that both see the same machine load.

use std::time::Instant;

use burn::backend::{Autodiff, NdArray};
use burn::module::Module;
use burn::nn::{Linear, LinearConfig, Relu};
use burn::optim::{GradientsParams, Optimizer, SgdConfig};
use burn::prelude::*;
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use burn::tensor::Distribution;
use burn::tensor::backend::AutodiffBackend;
use burn_checkpoint::memory::{CountingAllocator, Meter};
use burn_checkpoint::{Checkpointed, checkpoint};
use burn_checkpoint_core::memory::mib;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const LAYERS: usize = 16;
const PER_REGION: usize = 4;
const WIDTH: usize = 256;
const BATCH: usize = 2048;
const STEPS: usize = 7;

#[derive(Module, Debug)]
struct Mlp<B: Backend> {
    layers: Vec<Linear<B>>,
    relu: Relu,
}

impl<B: Backend> Mlp<B> {
    fn new(device: &B::Device) -> Self {
        Mlp {
            layers: (0..LAYERS)
                .map(|_| LinearConfig::new(WIDTH, WIDTH).init(device))
                .collect(),
            relu: Relu::new(),
        }
    }

    fn layers(&self, mut x: Tensor<B, 2>, layers: &[Linear<B>]) -> Tensor<B, 2> {
        for layer in layers {
            x = self.relu.forward(layer.forward(x));
        }
        x
    }

    fn forward(&self, mut x: Tensor<B, 2>, regions: bool) -> Tensor<B, 2> {
        for chunk in self.layers.chunks(PER_REGION) {
            x = if regions {
                checkpoint(|| self.layers(x, chunk))
            } else {
                self.layers(x, chunk)
            };
        }
        x
    }
}

/// One SGD step; returns the loss, the peak bytes above the start of the step, and the seconds.
fn step<B: AutodiffBackend>(
    model: Mlp<B>,
    optimizer: &mut impl Optimizer<Mlp<B>, B>,
    x: &Tensor<B, 2>,
    y: &Tensor<B, 2>,
    regions: bool,
) -> (Mlp<B>, f32, usize, f64) {
    let start = Instant::now();
    let measure = Meter::Host.start();
    let loss = (model.forward(x.clone(), regions) - y.clone())
        .powi_scalar(2)
        .mean();
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    let model = optimizer.step(1e-3, model, grads);
    let value = loss.into_scalar().elem::<f32>();
    (
        model,
        value,
        measure.finish().in_use as usize,
        start.elapsed().as_secs_f64(),
    )
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    type Plain = Autodiff<NdArray>;
    type Ckpt = Checkpointed<Autodiff<NdArray>>;
    let device = Default::default();

    // The same weights for both runs (parameters are initialised lazily: go through a record).
    let recorder = BinBytesRecorder::<FullPrecisionSettings>::default();
    let weights = recorder
        .record(Mlp::<Plain>::new(&device).into_record(), ())
        .unwrap();
    let mut plain =
        Mlp::<Plain>::new(&device).load_record(recorder.load(weights.clone(), &device).unwrap());
    let mut ckpt = Mlp::<Ckpt>::new(&device).load_record(recorder.load(weights, &device).unwrap());
    let mut plain_opt = SgdConfig::new().init();
    let mut ckpt_opt = SgdConfig::new().init();

    let x_data =
        Tensor::<NdArray, 2>::random([BATCH, WIDTH], Distribution::Normal(0.0, 1.0), &device)
            .into_data();
    let y_data =
        Tensor::<NdArray, 2>::random([BATCH, WIDTH], Distribution::Normal(0.0, 1.0), &device)
            .into_data();
    let (px, py) = (
        Tensor::<Plain, 2>::from_data(x_data.clone(), &device),
        Tensor::<Plain, 2>::from_data(y_data.clone(), &device),
    );
    let (cx, cy) = (
        Tensor::<Ckpt, 2>::from_data(x_data, &device),
        Tensor::<Ckpt, 2>::from_data(y_data, &device),
    );

    println!(
        "MLP: {LAYERS} layers Linear({WIDTH}, {WIDTH}) + ReLU, batch {BATCH}, regions of {PER_REGION} layers, SGD"
    );
    let (mut plain_peaks, mut ckpt_peaks, mut plain_times, mut ckpt_times) =
        (vec![], vec![], vec![], vec![]);
    // One warm-up step each, then STEPS measured steps, alternating.
    for i in 0..=STEPS {
        let (model, plain_loss, plain_peak, plain_time) =
            step(plain, &mut plain_opt, &px, &py, false);
        plain = model;
        let (model, ckpt_loss, ckpt_peak, ckpt_time) = step(ckpt, &mut ckpt_opt, &cx, &cy, true);
        ckpt = model;
        println!("step {i}: loss plain {plain_loss:.6}, with regions {ckpt_loss:.6}");
        if i > 0 {
            plain_peaks.push(plain_peak as f64);
            ckpt_peaks.push(ckpt_peak as f64);
            plain_times.push(plain_time);
            ckpt_times.push(ckpt_time);
        }
    }
    let plain_peak = median(&mut plain_peaks);
    let ckpt_peak = median(&mut ckpt_peaks);
    let plain_time = median(&mut plain_times);
    let ckpt_time = median(&mut ckpt_times);
    println!();
    println!("| run | peak memory of a step | step time (median of {STEPS}) |");
    println!("|---|---|---|");
    println!(
        "| Autodiff<NdArray> | {:.1} MiB | {:.3} s |",
        mib(plain_peak as usize),
        plain_time
    );
    println!(
        "| Checkpointed<Autodiff<NdArray>> + regions | {:.1} MiB | {:.3} s |",
        mib(ckpt_peak as usize),
        ckpt_time
    );
    println!(
        "| ratio | {:.2} | {:.2} |",
        ckpt_peak / plain_peak,
        ckpt_time / plain_time
    );
}
