//! DenseNet-BC training steps, each method in one process, interleaved, on the same weights and
//! inputs: plain `Autodiff<I>`, Burn's `Autodiff<I, BalancedCheckpointing>`, and
//! `Checkpointed<Autodiff<I, BalancedCheckpointing>>` with each checkpoint cut.
//!
//! For each method and batch size: the peak bytes of a full training step (forward, backward,
//! optimizer step) above what was held before it, the bytes held between forward and backward
//! (counting allocator), and the median step time after a warm-up step. Prints a markdown table
//! in the reference's form and writes it with the same rows as JSON and a plot of peak memory
//! against batch size (`<out>.md`, `<out>.json`, `<out>.svg`, `<out>.png`).
//!
//! ```text
//! cargo bench -p densenet-bc --bench densenet                          # BC-100, batches 16 32 64
//! cargo bench -p densenet-bc --bench densenet -- --depth 40 --batches 16 --steps 5
//! cargo bench -p densenet-bc --bench densenet --features ndarray -- --backend ndarray
//! cargo bench -p densenet-bc --bench densenet --features cuda -- --backend cuda
//! ```
//!
//! On CUDA the memory columns are cubecl's bytes in use on the device (the peak sampled every
//! 100 µs from a second thread), not the host allocator's.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;
use cpu_time::ProcessTime;

use app_kit::tape::Tape;
use bench_kit::densenet::DenseNetShape;
use burn::backend::Autodiff;
use burn::backend::autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{GradientsParams, Optimizer, SgdConfig};
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Distribution, Int, Tensor, TensorData};
use burn_checkpoint::Checkpointed;
use burn_checkpoint::memory::CountingAllocator;
use burn_checkpoint::memory::Meter;
use burn_checkpoint_core::memory::mib;
use densenet_bc::{DenseNet, DenseNetConfig, Method};
use serde::Serialize;

mod plot;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// The methods run unless `--methods` says otherwise.
const DEFAULT_METHODS: &[Method] = &[
    Method::Plain,
    Method::Balanced,
    Method::Bottleneck,
    Method::Layer,
    Method::LayerSave,
    Method::Block,
];

/// DenseNet-BC training steps with every checkpoint method: peak memory and time per step
/// against plain autodiff and Burn's BalancedCheckpointing.
#[derive(Parser)]
struct Args {
    /// The network.
    #[command(flatten)]
    shape: DenseNetShape,
    /// Batch sizes, one table each.
    #[arg(long, value_delimiter = ',', default_value = "16,32,64")]
    batches: Vec<usize>,
    /// Measured steps per method (at least 5: a median of fewer is noise).
    #[arg(long, default_value_t = 5, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(5..))]
    steps: usize,
    /// flex, ndarray (`--features ndarray`) or cuda (`--features cuda`).
    #[arg(long, default_value = "flex")]
    backend: String,
    /// Methods to run, comma-separated (default: plain, balanced, bottleneck, layer, layer-save,
    /// block).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = DEFAULT_METHODS.to_vec())]
    methods: Vec<Method>,
    /// Where the table, JSON and plots go (`<out>.md`, `.json`, `.svg`, `.png`).
    #[arg(long, default_value = "densenet-bench")]
    out: PathBuf,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

/// One method's measurements at one batch size: medians and maxima over the measured steps.
struct Summary {
    method: Method,
    peak: usize,
    held: usize,
    wall: f64,
    cpu: f64,
}

/// One row of the table.
#[derive(Serialize)]
pub struct Row {
    pub method: String,
    devices: usize,
    pub batch: usize,
    pub peak_bytes: usize,
    held_bytes: usize,
    /// Median wall-clock time of a step.
    median_step_s: f64,
    /// Median process CPU time of a step.
    median_step_cpu_s: f64,
    /// Which of the two the time ratios compare: "cpu" on CPU backends, "wall" on CUDA.
    time_basis: &'static str,
    peak_vs_plain: f64,
    peak_vs_balanced: f64,
    time_vs_plain: f64,
    time_vs_balanced: f64,
}

/// What one measured step gives.
struct Step {
    time: Duration,
    /// Process CPU time: on a shared CPU it counts the step's own work, not the time it waited.
    cpu: Duration,
    peak: usize,
    held: usize,
}

/// A method under test: its own backend, model and optimizer.
trait Runner {
    fn method(&self) -> Method;
    fn step(&mut self, images: &TensorData, labels: &TensorData) -> Step;
}

struct Trainer<B: AutodiffBackend, O: Optimizer<DenseNet<B>, B>> {
    method: Method,
    model: Option<DenseNet<B>>,
    optimizer: O,
    meter: Meter,
}

impl<B: AutodiffBackend, O: Optimizer<DenseNet<B>, B>> Runner for Trainer<B, O> {
    fn method(&self) -> Method {
        self.method
    }

    fn step(&mut self, images: &TensorData, labels: &TensorData) -> Step {
        let device = Default::default();
        let model = self.model.take().expect("a model");
        let x = Tensor::<B, 4>::from_data(images.clone(), &device);
        let y = Tensor::<B, 1, Int>::from_data(labels.clone(), &device);
        B::sync(&device).expect("the device syncs");
        let measure = self.meter.start();
        let start = Instant::now();
        let cpu_start = ProcessTime::now();
        let loss = CrossEntropyLossConfig::new()
            .init(&device)
            .forward(model.forward(x), y);
        let held = measure.now() as usize;
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        let model = self.optimizer.step(0.1, model, grads);
        // Lazy backends: finish the step inside the timing.
        B::sync(&device).expect("the device syncs");
        let time = start.elapsed();
        let cpu = cpu_start.elapsed();
        let peak = measure.finish().in_use as usize;
        self.model = Some(model);
        Step {
            time,
            cpu,
            peak,
            held,
        }
    }
}

fn trainer<B: AutodiffBackend>(
    meter: &Meter,
    method: Method,
    config: &DenseNetConfig,
    weights: &[u8],
) -> Box<dyn Runner> {
    let device = Default::default();
    let recorder = BinBytesRecorder::<FullPrecisionSettings>::default();
    let model = config
        .init::<B>(&device)
        .load_record(recorder.load(weights.to_vec(), &device).unwrap());
    let optimizer = SgdConfig::new()
        .with_momentum(Some(MomentumConfig::new().with_nesterov(true)))
        .with_weight_decay(Some(WeightDecayConfig::new(1e-4)))
        .init::<B, DenseNet<B>>();
    Box::new(Trainer {
        method,
        meter: meter.clone(),
        model: Some(model),
        optimizer,
    })
}

fn median(values: &[Duration]) -> Duration {
    let mut sorted = values.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

fn run<I: Backend>(args: &Args, meter: Meter) -> Vec<Row> {
    let config = DenseNetConfig::new(args.shape.depth).with_growth_rate(args.shape.growth);
    let device: I::Device = Default::default();
    I::seed(&device, 1);
    let recorder = BinBytesRecorder::<FullPrecisionSettings>::default();
    let weights = recorder
        .record(config.init::<Autodiff<I>>(&device).into_record(), ())
        .unwrap();
    type Bal<I> = Autodiff<I, BalancedCheckpointing>;
    let mut rows = Vec::new();
    for &batch in &args.batches {
        let mut runners: Vec<Box<dyn Runner>> = Vec::new();
        for &method in &args.methods {
            let config = method.configure(config.clone());
            runners.push(match method.tape() {
                Tape::Plain => trainer::<Autodiff<I>>(&meter, method, &config, &weights),
                Tape::Balanced => trainer::<Bal<I>>(&meter, method, &config, &weights),
                Tape::Regions => unreachable!("DenseNet's methods run regions over Balanced"),
                Tape::RegionsOverBalanced => {
                    trainer::<Checkpointed<Bal<I>>>(&meter, method, &config, &weights)
                }
            });
        }
        let images =
            Tensor::<I, 4>::random([batch, 3, 32, 32], Distribution::Default, &device).into_data();
        let labels =
            Tensor::<I, 1, Int>::random([batch], Distribution::Uniform(0.0, 10.0), &device)
                .into_data();
        let mut measured: Vec<Vec<Step>> = runners.iter().map(|_| Vec::new()).collect();
        for step in 0..=args.steps {
            for (runner, steps) in runners.iter_mut().zip(&mut measured) {
                let s = runner.step(&images, &labels);
                eprintln!(
                    "batch {batch} step {step} {}: {:.2?} (CPU {:.2?}), peak {:.1} MiB",
                    runner.method().label(),
                    s.time,
                    s.cpu,
                    mib(s.peak)
                );
                // Step 0 warms up thread pools and caches.
                if step > 0 {
                    steps.push(s);
                }
            }
        }
        let summary: Vec<Summary> = runners
            .iter()
            .zip(&measured)
            .map(|(runner, steps)| {
                let wall: Vec<Duration> = steps.iter().map(|s| s.time).collect();
                let cpu: Vec<Duration> = steps.iter().map(|s| s.cpu).collect();
                Summary {
                    method: runner.method(),
                    peak: steps.iter().map(|s| s.peak).max().unwrap(),
                    held: steps.iter().map(|s| s.held).max().unwrap(),
                    wall: median(&wall).as_secs_f64(),
                    cpu: median(&cpu).as_secs_f64(),
                }
            })
            .collect();
        // The time the ratios compare: CPU time on the host (robust to other processes on a
        // shared machine), wall time on a GPU (the host thread mostly waits for the device).
        let on_host = matches!(meter, Meter::Host);
        let basis = |s: &Summary| if on_host { s.cpu } else { s.wall };
        // Ratios to a method left out of `--methods` are NaN (JSON null).
        let reference = |method: Method| {
            summary
                .iter()
                .find(|s| s.method == method)
                .map_or((f64::NAN, f64::NAN), |s| (s.peak as f64, basis(s)))
        };
        let (plain, balanced) = (reference(Method::Plain), reference(Method::Balanced));
        for s in &summary {
            rows.push(Row {
                method: s.method.label().to_string(),
                devices: 1,
                batch,
                peak_bytes: s.peak,
                held_bytes: s.held,
                median_step_s: s.wall,
                median_step_cpu_s: s.cpu,
                time_basis: if on_host { "cpu" } else { "wall" },
                peak_vs_plain: s.peak as f64 / plain.0,
                peak_vs_balanced: s.peak as f64 / balanced.0,
                time_vs_plain: basis(s) / plain.1,
                time_vs_balanced: basis(s) / balanced.1,
            });
        }
    }
    rows
}

fn main() {
    let args = Args::parse();
    let rows = match args.backend.as_str() {
        #[cfg(feature = "ndarray")]
        "ndarray" => run::<burn::backend::NdArray>(&args, Meter::Host),
        #[cfg(feature = "flex")]
        "flex" => run::<burn::backend::Flex>(&args, Meter::Host),
        #[cfg(feature = "cuda")]
        "cuda" => run::<burn::backend::Cuda>(
            &args,
            Meter::device(burn::backend::cuda::CudaDevice::default())
                .expect("cubecl counts CUDA bytes"),
        ),
        other => panic!("backend `{other}` is not built in (features: flex, ndarray, cuda)"),
    };
    let basis = if args.backend == "cuda" {
        "wall"
    } else {
        "CPU"
    };
    let title = format!(
        "{}, 3×32×32, SGD step, {} backend, median of {} steps; time ratios from {basis} time",
        args.shape.describe(),
        args.backend,
        args.steps
    );
    let table = markdown(&title, &rows);
    print!("{table}");
    bench_kit::output::write_table(&args.out, &table, &rows);
    match plot::write(
        &rows,
        &format!(
            "DenseNet-BC-{}, {}: peak step memory",
            args.shape.depth, args.backend
        ),
        &args.out,
    ) {
        Ok(()) => eprintln!("plotted: {0}.svg, {0}.png", args.out.display()),
        Err(e) => eprintln!("{e}"),
    }
}

/// The table in the reference's form (Method | # devices | Batch | Memory | Time), with ratios.
fn markdown(title: &str, rows: &[Row]) -> String {
    let mut table = format!(
        "{title}\n\n| Method | # devices | Batch | Memory (peak) | held fwd→bwd | Time (wall) | CPU time | × plain mem | × Balanced mem | × plain time | × Balanced time |\n|---|---|---|---|---|---|---|---|---|---|---|\n"
    );
    for r in rows {
        table += &format!(
            "| {} | {} | {} | {:.1} MiB | {:.1} MiB | {:.3} s | {:.3} s | {:.2} | {:.2} | {:.2} | {:.2} |\n",
            r.method,
            r.devices,
            r.batch,
            mib(r.peak_bytes),
            mib(r.held_bytes),
            r.median_step_s,
            r.median_step_cpu_s,
            r.peak_vs_plain,
            r.peak_vs_balanced,
            r.time_vs_plain,
            r.time_vs_balanced
        );
    }
    table
}
