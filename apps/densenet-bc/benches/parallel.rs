//! DenseNet-BC data-parallel training steps with `DataParallel` on CPU workers: step time with
//! checkpoint regions against without, the share of the step spent in all-reduce, and the
//! all-reduce calls per step (bucketed and, for contrast, one call per tensor).
//!
//! burn-collective allows one session per backend type at a time, so methods cannot run side by
//! side: the bench runs rounds, each building every method's `DataParallel` in turn from the
//! same weights, one warm-up step and `--steps` timed steps; a method's time is the median over
//! all rounds. Interleaving rounds spreads the noise of a shared machine over every method.
//!
//! ```text
//! cargo bench -p densenet-bc --bench parallel                             # BC-100, batch 32
//! cargo bench -p densenet-bc --bench parallel -- --depth 40 --batch 16 \
//!     --methods bottleneck,layer-save
//! cargo bench -p densenet-bc --bench parallel -- --workers 4 --strategy ring
//! ```

use std::time::Duration;

use app_kit::tape::Tape;
use bench_kit::densenet::DenseNetShape;
use burn::backend::autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn::backend::{Autodiff, Flex};
use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::SgdConfig;
use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Distribution, Int, Tensor, TensorData};
use burn_checkpoint::Checkpointed;
use burn_checkpoint_parallel::{
    AllReduceStrategy, DEFAULT_BUCKET_BYTES, DataParallel, DataParallelConfig, StepStats,
    split_batch,
};
use cpu_time::ProcessTime;
use densenet_bc::{DenseNet, DenseNetConfig, Method};

/// DenseNet-BC trained data-parallel: time per step and all-reduce cost of each method.
#[derive(clap::Parser)]
struct Args {
    /// The network.
    #[command(flatten)]
    shape: DenseNetShape,
    /// Images per step, split among the workers.
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Worker threads (one Flex device each).
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Timed steps per round.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    steps: u64,
    /// Rounds (methods interleaved).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    rounds: u64,
    /// The methods to run besides plain, which always runs (the ratios' base) twice: bucketed
    /// and, for contrast, with one all-reduce call per tensor.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "bottleneck,bottleneck-reduce,layer,layer-reduce"
    )]
    methods: Vec<Method>,
    /// All-reduce strategy.
    #[arg(long, value_enum, default_value_t = Strategy::Tree)]
    strategy: Strategy,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Strategy {
    Centralized,
    /// A tree of arity 2.
    Tree,
    Ring,
}

impl Args {
    fn parse() -> Args {
        let args: Args = clap::Parser::parse();
        if !args.batch.is_multiple_of(args.workers) {
            clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                "--batch must be a multiple of --workers\n",
            )
            .exit();
        }
        args
    }

    fn strategy(&self) -> AllReduceStrategy {
        match self.strategy {
            Strategy::Centralized => AllReduceStrategy::Centralized,
            Strategy::Tree => AllReduceStrategy::Tree(2),
            Strategy::Ring => AllReduceStrategy::Ring,
        }
    }
}

type I = Flex;
type Plain = Autodiff<I>;
type Balanced = Autodiff<I, BalancedCheckpointing>;
/// Regions over plain autodiff, not Balanced: the all-reduce's cost against plain's, with
/// nothing else changed (docs/data-parallel.md's figures).
type Regions = Checkpointed<Autodiff<I>>;

/// One configuration measured: a method and its all-reduce buckets.
struct Configuration {
    method: Method,
    name: String,
    bucket_bytes: usize,
}

/// Every timed step of one method.
#[derive(Default)]
struct Measured {
    stats: Vec<StepStats>,
    /// The process's CPU time per step (every worker's threads together).
    cpu: Vec<Duration>,
    calls: usize,
}

/// Builds a `DataParallel` for `B` from `weights`, runs a warm-up step and `steps` timed steps.
fn run<B: AutodiffBackend<InnerBackend = I>>(
    args: &Args,
    method: &Configuration,
    weights: &[u8],
    images: &TensorData,
    labels: &TensorData,
    measured: &mut Measured,
) {
    let device = Default::default();
    let recorder = BinBytesRecorder::<FullPrecisionSettings>::default();
    let model = (method.method)
        .configure(DenseNetConfig::new(args.shape.depth).with_growth_rate(args.shape.growth))
        .init::<B>(&device)
        .load_record(
            recorder
                .load(weights.to_vec(), &device)
                .expect("weights load"),
        );
    let optimizer = SgdConfig::new()
        .with_momentum(Some(MomentumConfig::new().with_nesterov(true)))
        .with_weight_decay(Some(WeightDecayConfig::new(1e-4)))
        .init::<B, DenseNet<B>>();
    let devices = vec![device.clone(); args.workers];
    let config = DataParallelConfig::new()
        .with_strategy(args.strategy())
        .with_bucket_bytes(method.bucket_bytes);
    let mut dp = DataParallel::with_config(devices.clone(), model, optimizer, 0.1, config)
        .expect("workers start");
    measured.calls = dp.all_reduce_calls_per_step();
    let x = Tensor::<B, 4>::from_data(images.clone(), &device);
    let y = Tensor::<B, 1, Int>::from_data(labels.clone(), &device);
    for step in 0..=args.steps {
        let shards: Vec<_> = split_batch(x.clone(), &devices)
            .expect("the batch splits")
            .into_iter()
            .zip(split_batch(y.clone(), &devices).expect("the labels split"))
            .collect();
        let cpu = ProcessTime::now();
        dp.step(
            shards,
            |model: &DenseNet<B>, (x, y): (Tensor<B, 4>, Tensor<B, 1, Int>)| {
                CrossEntropyLossConfig::new()
                    .init(&y.device())
                    .forward(model.forward(x), y)
            },
        )
        .expect("a step");
        let cpu = cpu.elapsed();
        let stats = dp.last_stats().expect("stats");
        eprintln!(
            "{}: step {step}: {:.2?}, CPU {:.2?} (all-reduce {:.2?} in {} calls)",
            method.name, stats.step, cpu, stats.all_reduce, stats.all_reduce_calls
        );
        // Step 0 warms up thread pools and caches.
        if step > 0 {
            measured.stats.push(stats);
            measured.cpu.push(cpu);
        }
    }
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn main() {
    let args = Args::parse();
    let device = Default::default();
    I::seed(&device, 1);
    let config = DenseNetConfig::new(args.shape.depth).with_growth_rate(args.shape.growth);
    let recorder = BinBytesRecorder::<FullPrecisionSettings>::default();
    let weights = recorder
        .record(config.init::<Plain>(&device).into_record(), ())
        .expect("weights serialise");
    let parameters: usize = config.init::<I>(&device).num_params();
    let images =
        Tensor::<I, 4>::random([args.batch, 3, 32, 32], Distribution::Default, &device).into_data();
    let labels =
        Tensor::<I, 1, Int>::random([args.batch], Distribution::Uniform(0.0, 10.0), &device)
            .into_data();

    let configuration = |method: Method, name: &str, bucket_bytes| Configuration {
        method,
        name: name.to_string(),
        bucket_bytes,
    };
    let methods: Vec<Configuration> = [
        configuration(Method::Plain, Method::Plain.label(), DEFAULT_BUCKET_BYTES),
        configuration(Method::Plain, "plain Autodiff, one call per tensor", 0),
    ]
    .into_iter()
    .chain(
        args.methods
            .iter()
            .filter(|&&method| method != Method::Plain)
            .map(|&method| configuration(method, method.label(), DEFAULT_BUCKET_BYTES)),
    )
    .collect();
    let mut measured: Vec<Measured> = methods.iter().map(|_| Measured::default()).collect();
    for round in 0..args.rounds {
        eprintln!("round {round}");
        for (method, measured) in methods.iter().zip(&mut measured) {
            match method.method.tape() {
                Tape::Plain => run::<Plain>(&args, method, &weights, &images, &labels, measured),
                Tape::Balanced => {
                    run::<Balanced>(&args, method, &weights, &images, &labels, measured)
                }
                // Over plain autodiff here, whatever the method's tape (see `Regions`).
                Tape::Regions | Tape::RegionsOverBalanced => {
                    run::<Regions>(&args, method, &weights, &images, &labels, measured)
                }
            }
        }
    }

    println!(
        "{} ({} parameters), 3×32×32, batch {} on {} Flex workers ({} each), {:?} all-reduce, \
         SGD step, median of {} steps",
        args.shape.describe(),
        parameters,
        args.batch,
        args.workers,
        args.batch / args.workers,
        args.strategy(),
        args.rounds * args.steps
    );
    println!(
        "| Method | Workers | Batch | All-reduce calls / step | Step time (wall) | × plain | CPU time / step | × plain | All-reduce time | Share of step in all-reduce |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let step_time = |m: &Measured| median(m.stats.iter().map(|s| s.step).collect());
    let plain = step_time(&measured[0]);
    let plain_cpu = median(measured[0].cpu.clone());
    for (method, m) in methods.iter().zip(&measured) {
        let step = step_time(m);
        let cpu = median(m.cpu.clone());
        let all_reduce = median(m.stats.iter().map(|s| s.all_reduce).collect());
        let share = median(
            m.stats
                .iter()
                .map(|s| Duration::from_secs_f64(s.all_reduce_share()))
                .collect(),
        );
        println!(
            "| {} | {} | {} | {} | {:.3} s | {:.2} | {:.3} s | {:.2} | {:.1} ms | {:.1} % |",
            method.name,
            args.workers,
            args.batch,
            m.calls,
            step.as_secs_f64(),
            step.as_secs_f64() / plain.as_secs_f64(),
            cpu.as_secs_f64(),
            cpu.as_secs_f64() / plain_cpu.as_secs_f64(),
            all_reduce.as_secs_f64() * 1e3,
            share.as_secs_f64() * 100.0
        );
    }
}
