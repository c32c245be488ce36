//! DenseNet-BC training steps of one method alone, for a profiler: the `compare` benchmark
//! interleaves its methods in one process, so a profile of it mixes them.
//!
//! `cargo build --release --manifest-path kits/models22/Cargo.toml --example densenet_steps`, then
//! `perf record --call-graph dwarf target/release/examples/densenet_steps save-compute-bound 3`
//! (`--help` for the methods and sizes); docs/burn-0.22-policies.md reads two such profiles.
//! Prints each step's time.

use std::time::Instant;

use app_kit::densenet::DenseNetShape;
use burn::tensor::Device;
use burn_checkpoint_22_models::{Cut, densenet, initialised};
use clap::{Parser, ValueEnum};

#[derive(Parser, Debug)]
#[command(
    about = "DenseNet-BC steps of one method alone (Flex), for a profiler",
    long_about = None
)]
struct Args {
    /// How the step runs.
    #[arg(value_enum)]
    method: Method,
    /// Steps to run (the first allocates and is slower).
    #[arg(default_value_t = 3)]
    steps: usize,
    /// The DenseNet-BC.
    #[command(flatten)]
    densenet: DenseNetShape,
    /// Images per batch (32×32).
    #[arg(long, default_value_t = 16)]
    batch: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Method {
    /// Plain autodiff.
    Plain,
    /// Burn's `gradient_checkpointing()` (Balanced).
    Balanced,
    /// A region per dense layer, recomputing it.
    Regions,
    /// A region per dense layer keeping its compute-bound outputs, the norm nested.
    SaveComputeBound,
}

fn main() {
    let args = Args::parse();
    let device = Device::flex().autodiff();
    let (device, cut) = match args.method {
        Method::Plain => (device, Cut::None),
        Method::Balanced => (device.gradient_checkpointing(), Cut::None),
        Method::Regions => (device, Cut::Regions),
        Method::SaveComputeBound => (device, Cut::RegionsSave),
    };
    device.seed(1);
    let model = initialised(densenet::model(&args.densenet, &device));
    for step in 0..args.steps {
        device.seed(2);
        let images = densenet::images(args.batch, &device);
        let clock = Instant::now();
        drop(model.loss(images, cut).backward());
        println!(
            "{:?} step {step}: {:.3} s",
            args.method,
            clock.elapsed().as_secs_f64()
        );
    }
}
