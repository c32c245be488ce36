//! What recording a step costs: the same training step with regions (a residual MLP, a region
//! per block, Flex) run plain, under `StepReport::measure` and under `Timeline::measure` (the
//! report's reads and hooks, plus a point per read, the spans, and the sampler thread),
//! interleaved round after round; each figure the median of the rounds, each ratio over the
//! unrecorded step's median in the same run. The issue's bar: a timeline adds at most 5 % to a
//! step.
//!
//! ```text
//! cargo bench --bench timeline                      # 8 blocks, width 256, batch 512; 15 rounds
//! cargo bench --bench timeline -- --blocks 32 --rounds 25
//! ```

use std::time::{Duration, Instant};

use burn::backend::{Autodiff, Flex};
use burn::tensor::activation::relu;
use burn::tensor::{Distribution, Tensor};
use burn_checkpoint::memory::{CountingAllocator, Meter, StepReport, Timeline};
use burn_checkpoint::{Checkpointed, Region};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

type B = Checkpointed<Autodiff<Flex>>;

#[derive(clap::Parser)]
struct Args {
    /// Regions in the step (one per residual block).
    #[arg(long, default_value_t = 8)]
    blocks: usize,
    /// Width of each block.
    #[arg(long, default_value_t = 256)]
    width: usize,
    /// Rows of the batch.
    #[arg(long, default_value_t = 512)]
    batch: usize,
    /// Rounds (each runs the three ways once, in turn).
    #[arg(long, default_value_t = 15)]
    rounds: usize,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let args: Args = clap::Parser::parse();
    let device = Default::default();
    let weights: Vec<Tensor<B, 2>> = (0..args.blocks)
        .map(|_| {
            Tensor::random(
                [args.width, args.width],
                Distribution::Normal(0.0, 0.05),
                &device,
            )
            .require_grad()
        })
        .collect();
    let x = Tensor::<B, 2>::random([args.batch, args.width], Distribution::Default, &device);
    let step = || {
        let mut h = x.clone();
        for w in &weights {
            h = Region::named("block").run(|| relu(h.clone().matmul(w.clone())) + h.clone());
        }
        drop(h.sum().backward());
    };
    // Warm-up: pools and caches allocate once.
    step();
    let ways = ["no recording", "StepReport::measure", "Timeline::measure"];
    let mut times: [Vec<Duration>; 3] = Default::default();
    let mut points = 0;
    for _ in 0..args.rounds {
        for (way, kept) in times.iter_mut().enumerate() {
            let start = Instant::now();
            match way {
                0 => step(),
                1 => drop(StepReport::measure(Meter::Host, step)),
                _ => points = Timeline::measure(Meter::Host, step).1.points.len(),
            }
            kept.push(start.elapsed());
        }
    }
    let plain = median(times[0].clone()).as_secs_f64();
    println!(
        "{} blocks relu(h·W) + h, width {}, batch {} (Flex), {} rounds interleaved; the \
         timeline kept {points} points",
        args.blocks, args.width, args.batch, args.rounds
    );
    println!("| step | median | × unrecorded |");
    println!("|---|---|---|");
    for (way, kept) in ways.iter().zip(times) {
        let median = median(kept).as_secs_f64();
        println!("| {way} | {:.2} ms | {:.3} |", median * 1e3, median / plain);
    }
}
