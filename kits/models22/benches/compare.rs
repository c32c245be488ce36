//! Regions against Burn 0.22's own checkpointing, on the CPU (Flex): peak step memory and time
//! per step of plain autodiff, `device.autodiff().gradient_checkpointing()` (Balanced) and one
//! region per block, on DenseNet-BC (the layer cut) and a GPT-style model (per-block regions).
//!
//! `cargo bench --manifest-path kits/models22/Cargo.toml --bench compare -- --help`; the budget
//! planner on the same models is the `budget` benchmark. Methods run interleaved, one step each per
//! round after a warm-up round; memory is the counting allocator's peak above the step's start
//! (forward, loss, backward); time the median step.

// The tests' helpers: `initialised`, so that every method's copy holds the same weights.

use std::time::{Duration, Instant};

use app_kit::densenet::DenseNetShape;
use app_kit::gpt::GptShape;
use burn::tensor::Device;
use burn_checkpoint_22::memory::{CountingAllocator, Meter};
use burn_checkpoint_22_models::initialised;
use burn_checkpoint_22_models::{Cut, densenet, gpt};
use burn_checkpoint_core::memory::mib;
use clap::{Parser, ValueEnum};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

#[derive(Parser, Debug)]
#[command(
    about = "Regions against Burn 0.22's checkpointing: memory and time per step",
    // Not the flattened DenseNetShape's doc, which clap would take for it.
    long_about = None
)]
struct Args {
    /// Which models.
    #[arg(long, value_enum, default_value = "all")]
    model: Which,
    /// Measured steps per method (after one warm-up step each).
    #[arg(long, default_value_t = 3)]
    steps: usize,
    /// The DenseNet-BC.
    #[command(flatten)]
    densenet: DenseNetShape,
    /// DenseNet batch sizes (32×32 images).
    #[arg(long, value_delimiter = ',', default_value = "16,64")]
    batches: Vec<usize>,
    /// GPT: blocks, width, heads, vocabulary, sequence length, batch.
    #[arg(long, value_parser = GptShape::from_list, default_value = "8,128,4,512,128,16")]
    gpt: GptShape,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Which {
    All,
    Densenet,
    Gpt,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Method {
    Plain,
    Balanced,
    Regions,
    SavingComputeBound,
    KeepingAttention,
    KeepingProjections,
}

impl Method {
    /// DenseNet's methods (a dense layer holds no attention to keep).
    const DENSENET: [Method; 4] = [
        Method::Plain,
        Method::Balanced,
        Method::Regions,
        Method::SavingComputeBound,
    ];
    /// The GPT's methods.
    const GPT: [Method; 6] = [
        Method::Plain,
        Method::Balanced,
        Method::Regions,
        Method::SavingComputeBound,
        Method::KeepingAttention,
        Method::KeepingProjections,
    ];

    fn name(self) -> &'static str {
        match self {
            Method::Plain => "plain autodiff",
            Method::Balanced => "Burn's gradient_checkpointing() (Balanced)",
            Method::Regions => "regions",
            Method::SavingComputeBound => "regions, Policy::SaveComputeBound",
            Method::KeepingAttention => "regions, Policy::recompute_all_but([\"attention\"])",
            Method::KeepingProjections => {
                "regions, Policy::recompute_all_but([\"attention.*\"]) (the projections)"
            }
        }
    }

    fn cut(self) -> Cut {
        match self {
            Method::Regions => Cut::Regions,
            Method::SavingComputeBound => Cut::RegionsSave,
            Method::KeepingAttention => Cut::RegionsKeepAttention,
            Method::KeepingProjections => Cut::RegionsKeepProjections,
            _ => Cut::None,
        }
    }

    fn device(self) -> Device {
        let device = Device::flex().autodiff();
        match self {
            Method::Balanced => device.gradient_checkpointing(),
            _ => device,
        }
    }
}

/// One measured step: peak bytes above its start, and its time.
fn measure(step: impl FnOnce()) -> (usize, Duration) {
    let measure = Meter::Host.start();
    let clock = Instant::now();
    step();
    let elapsed = clock.elapsed();
    (measure.finish().in_use as usize, elapsed)
}

struct Row {
    model: String,
    method: Method,
    peak: usize,
    time: Duration,
}

/// Runs `steps` measured rounds (after a warm-up) of `step(method)` for every method,
/// interleaved.
fn compare(
    model: &str,
    steps: usize,
    methods: &[Method],
    mut step: impl FnMut(usize, Method),
) -> Vec<Row> {
    let mut samples: Vec<(Vec<usize>, Vec<Duration>)> = vec![Default::default(); methods.len()];
    for round in 0..=steps {
        for (index, &method) in methods.iter().enumerate() {
            let (bytes, time) = measure(|| step(index, method));
            if round > 0 {
                samples[index].0.push(bytes);
                samples[index].1.push(time);
            }
        }
    }
    methods
        .iter()
        .zip(samples)
        .map(|(method, (peaks, mut times))| {
            times.sort();
            Row {
                model: model.to_string(),
                method: *method,
                peak: peaks.into_iter().max().unwrap_or(0),
                time: times[times.len() / 2],
            }
        })
        .collect()
}

fn densenet(args: &Args, batch: usize) -> Vec<Row> {
    let models: Vec<_> = Method::DENSENET
        .into_iter()
        .map(|method| {
            let device = method.device();
            device.seed(1);
            initialised(densenet::model(&args.densenet, &device))
        })
        .collect();
    let name = format!("{}, batch {batch}", args.densenet.describe());
    compare(&name, args.steps, &Method::DENSENET, |index, method| {
        let device = method.device();
        device.seed(2);
        let images = densenet::images(batch, &device);
        drop(models[index].loss(images, method.cut()).backward());
    })
}

fn gpt(args: &Args) -> Vec<Row> {
    let shape = &args.gpt;
    let models: Vec<_> = Method::GPT
        .into_iter()
        .map(|method| {
            let device = method.device();
            device.seed(1);
            initialised(gpt::model(shape, &device))
        })
        .collect();
    let name = shape.describe();
    compare(&name, args.steps, &Method::GPT, |index, method| {
        let device = method.device();
        device.seed(2);
        let tokens = gpt::tokens(shape, &device);
        drop(models[index].loss(tokens, method.cut()).backward());
    })
}

fn main() {
    let args = Args::parse();
    let mut groups = Vec::new();
    if args.model != Which::Gpt {
        for &batch in &args.batches {
            groups.push(densenet(&args, batch));
        }
    }
    if args.model != Which::Densenet {
        groups.push(gpt(&args));
    }
    println!(
        "| Model | Method | Peak step memory | × plain | × Balanced | Time per step (median of {}) | × plain | × Balanced |",
        args.steps
    );
    println!("|---|---|---|---|---|---|---|---|");
    for group in &groups {
        let (plain, balanced) = (&group[0], &group[1]);
        for row in group {
            println!(
                "| {} | {} | {:.1} MiB | {:.2} | {:.2} | {:.3} s | {:.2} | {:.2} |",
                row.model,
                row.method.name(),
                mib(row.peak),
                row.peak as f64 / plain.peak as f64,
                row.peak as f64 / balanced.peak as f64,
                row.time.as_secs_f64(),
                row.time.as_secs_f64() / plain.time.as_secs_f64(),
                row.time.as_secs_f64() / balanced.time.as_secs_f64(),
            );
        }
    }
}
