//! Step time and peak memory of each checkpoint policy against plain `Autodiff`, on a stack of
//! 16 residual MLP blocks `h + W2·gelu(W1·layer_norm(h))` (a transformer's feed-forward half),
//! cut into √16 = 4 segments by `Region::sequential`.
//!
//! All methods run in one process, interleaved step by step, on the same weights and input; each
//! figure is the median over the measured steps, after a warm-up step.
//!
//! ```text
//! cargo bench --bench policies                 # defaults: batch 2048, width 128, 7 steps
//! cargo bench --bench policies -- --steps 9 --batch 4096 --width 256
//! ```

use std::time::{Duration, Instant};

use burn::backend::autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn::backend::{Autodiff, NdArray};
use burn::nn::{LayerNorm, LayerNormConfig};
use burn::tensor::activation::gelu;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::module::linear;
use burn::tensor::{Distribution, Tensor, TensorData};
use burn_checkpoint::memory::{CountingAllocator, Meter};
use burn_checkpoint::{Checkpointed, Layer, Policy, Region, Segments};
use burn_checkpoint_core::memory::mib;
use clap::Parser;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const BLOCKS: usize = 16;

/// Region policies on an MLP of 16 blocks: memory and time of each policy against plain autodiff.
#[derive(Parser)]
struct Args {
    /// Rows of the input.
    #[arg(long, default_value_t = 2048)]
    batch: usize,
    /// Width of the blocks (their hidden layer is 4× as wide).
    #[arg(long, default_value_t = 128)]
    width: usize,
    /// Measured steps per policy (at least 5: a median of fewer is noise).
    #[arg(long, default_value_t = 7, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(5..))]
    steps: usize,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

/// `h + W2·gelu(W1·layer_norm(h) + b1) + b2`, hidden width 4× the model's.
struct Block<B: Backend> {
    norm: LayerNorm<B>,
    w1: Tensor<B, 2>,
    b1: Tensor<B, 1>,
    w2: Tensor<B, 2>,
    b2: Tensor<B, 1>,
}

impl<B: Backend> Layer<Tensor<B, 2>> for Block<B> {
    fn forward(&self, h: Tensor<B, 2>) -> Tensor<B, 2> {
        let inner = gelu(linear(
            self.norm.forward(h.clone()),
            self.w1.clone(),
            Some(self.b1.clone()),
        ));
        h + linear(inner, self.w2.clone(), Some(self.b2.clone()))
    }
}

/// The stack's weights as data, so that every backend gets the same ones.
struct Weights {
    input: TensorData,
    blocks: Vec<[TensorData; 4]>,
}

impl Weights {
    fn new(args: &Args) -> Weights {
        type D = NdArray;
        let device = Default::default();
        D::seed(&device, 1);
        let (w, hidden) = (args.width, 4 * args.width);
        let normal = |shape: [usize; 2], fan_in: usize| {
            let std = (2.0 / fan_in as f64).sqrt();
            Tensor::<D, 2>::random(shape, Distribution::Normal(0.0, std), &device).into_data()
        };
        let zeros = |n: usize| Tensor::<D, 1>::zeros([n], &device).into_data();
        Weights {
            input: normal([args.batch, w], 1),
            blocks: (0..BLOCKS)
                .map(|_| {
                    [
                        normal([w, hidden], w),
                        zeros(hidden),
                        normal([hidden, w], hidden),
                        zeros(w),
                    ]
                })
                .collect(),
        }
    }

    fn blocks<B: Backend>(&self) -> Vec<Block<B>> {
        let device = Default::default();
        fn param<B: Backend, const D: usize>(data: &TensorData) -> Tensor<B, D> {
            Tensor::from_data(data.clone(), &Default::default()).require_grad()
        }
        self.blocks
            .iter()
            .map(|[w1, b1, w2, b2]| Block {
                norm: LayerNormConfig::new(w1.shape[0]).init(&device),
                w1: param(w1),
                b1: param(b1),
                w2: param(w2),
                b2: param(b2),
            })
            .collect()
    }
}

/// One forward and backward step; returns its time and peak bytes above what was held before.
fn step<B: AutodiffBackend>(
    blocks: &[Block<B>],
    input: &TensorData,
    policy: Option<&Policy>,
) -> (Duration, usize) {
    let x = Tensor::<B, 2>::from_data(input.clone(), &Default::default());
    let measure = Meter::Host.start();
    let start = Instant::now();
    let out = match policy {
        Some(policy) => Region::new()
            .policy(policy.clone())
            .sequential(blocks, Segments::Sqrt, x),
        None => blocks.iter().fold(x, |h, block| block.forward(h)),
    };
    let grads = out.powi_scalar(2).mean().backward();
    // Read one gradient so that lazy backends finish the step inside the timing.
    let _ = blocks[0].w1.grad(&grads).map(|g| g.into_data());
    let time = start.elapsed();
    (time, measure.finish().in_use as usize)
}

/// A method: a name and a step on its own backend.
struct Method {
    name: &'static str,
    run: Box<dyn FnMut() -> (Duration, usize)>,
    times: Vec<Duration>,
    peaks: Vec<usize>,
}

fn method<B: AutodiffBackend>(
    name: &'static str,
    weights: &'static Weights,
    policy: Option<Policy>,
) -> Method {
    let blocks = weights.blocks::<B>();
    Method {
        name,
        run: Box::new(move || step(&blocks, &weights.input, policy.as_ref())),
        times: Vec::new(),
        peaks: Vec::new(),
    }
}

fn median<T: Copy + Ord>(values: &[T]) -> T {
    let mut sorted = values.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

fn main() {
    let args = Args::parse();
    let weights: &'static Weights = Box::leak(Box::new(Weights::new(&args)));
    type Plain = Autodiff<NdArray>;
    type Balanced = Autodiff<NdArray, BalancedCheckpointing>;
    type Ckpt = Checkpointed<Autodiff<NdArray>>;
    type CkptBalanced = Checkpointed<Balanced>;
    let mut methods = vec![
        method::<Plain>("plain `Autodiff<NdArray>`", weights, None),
        method::<Balanced>("Burn `BalancedCheckpointing`", weights, None),
        method::<Ckpt>(
            "`Policy::RecomputeAll`, √n segments",
            weights,
            Some(Policy::RecomputeAll),
        ),
        method::<Ckpt>(
            "`Policy::SaveComputeBound`, √n segments",
            weights,
            Some(Policy::SaveComputeBound),
        ),
        // Over Burn's balanced strategy the last (unregioned) segment recomputes its cheap ops.
        method::<CkptBalanced>(
            "`Policy::RecomputeAll`, √n segments, over Balanced",
            weights,
            Some(Policy::RecomputeAll),
        ),
        method::<CkptBalanced>(
            "`Policy::SaveComputeBound`, √n segments, over Balanced",
            weights,
            Some(Policy::SaveComputeBound),
        ),
    ];

    for step in 0..=args.steps {
        for m in &mut methods {
            let (time, peak) = (m.run)();
            // Step 0 warms up thread pools and caches.
            if step > 0 {
                m.times.push(time);
                m.peaks.push(peak);
            }
        }
        eprint!(".");
    }
    eprintln!();

    println!(
        "{BLOCKS} residual MLP blocks, width {}, hidden {}, batch {}; median of {} steps \
         (forward + backward), NdArray",
        args.width,
        4 * args.width,
        args.batch,
        args.steps
    );
    println!("| method | peak step memory | × plain | step time | × plain |");
    println!("|---|---|---|---|---|");
    let plain_time = median(&methods[0].times).as_secs_f64();
    let plain_peak = median(&methods[0].peaks) as f64;
    for m in &methods {
        let (time, peak) = (median(&m.times).as_secs_f64(), median(&m.peaks));
        println!(
            "| {} | {:.1} MiB | {:.2} | {:.3} s | {:.2} |",
            m.name,
            mib(peak),
            peak as f64 / plain_peak,
            time,
            time / plain_time
        );
    }
}
