//! DenseNet-BC training steps, each method in one process, interleaved, on the same weights and
//! inputs: plain `Autodiff<I>`, Burn's `Autodiff<I, BalancedCheckpointing>`, and
//! `Checkpointed<Autodiff<I, BalancedCheckpointing>>` with each checkpoint cut.
//!
//! For each method and batch size: the peak bytes of a full training step (forward, backward,
//! optimizer step) above what was held before it, the bytes held between forward and backward
//! (counting allocator), and the median step time after a warm-up step. Prints a markdown table
//! in the reference's form and writes the same rows as JSON.
//!
//! ```text
//! cargo bench -p densenet-bc --bench densenet                          # BC-100, batches 16 32 64
//! cargo bench -p densenet-bc --bench densenet -- --depth 40 --batches 16 --steps 5
//! cargo bench -p densenet-bc --bench densenet --features flex -- --backend flex
//! ```

use std::time::{Duration, Instant};

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
use burn_checkpoint::memory::{CountingAllocator, allocated, mib, peak, reset_peak};
use densenet_bc::{Cut, DenseNet, DenseNetConfig, RegionPolicy};
use serde::Serialize;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

struct Args {
    depth: usize,
    growth: usize,
    batches: Vec<usize>,
    steps: usize,
    backend: String,
    block: bool,
    json: String,
}

impl Args {
    fn parse() -> Args {
        let mut args = Args {
            depth: 100,
            growth: 12,
            batches: vec![16, 32, 64],
            steps: 5,
            backend: "ndarray".into(),
            block: false,
            json: "densenet-bench.json".into(),
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            let mut value = || it.next().unwrap_or_else(|| panic!("{flag} takes a value"));
            let number = |v: String| -> usize {
                v.parse()
                    .unwrap_or_else(|_| panic!("expected a number, got `{v}`"))
            };
            match flag.as_str() {
                "--depth" => args.depth = number(value()),
                "--growth" => args.growth = number(value()),
                "--batches" => {
                    args.batches = value().split(',').map(|v| number(v.into())).collect()
                }
                "--steps" => args.steps = number(value()).max(5),
                "--backend" => args.backend = value(),
                "--json" => args.json = value(),
                // The whole-block cut: exponential in layers per block on burn-autodiff 0.21
                // (docs/regions.md), so only on request.
                "--block" => args.block = true,
                "--bench" => {}
                other => panic!(
                    "unknown flag `{other}`; flags: --depth N --growth N --batches 16,32,64 \
                     --steps N --backend ndarray|flex --json PATH --block"
                ),
            }
        }
        args
    }
}

/// One row of the table.
#[derive(Serialize)]
struct Row {
    method: String,
    devices: usize,
    batch: usize,
    peak_bytes: usize,
    held_bytes: usize,
    median_step_s: f64,
    peak_vs_plain: f64,
    peak_vs_balanced: f64,
    time_vs_plain: f64,
    time_vs_balanced: f64,
}

/// What one measured step gives.
struct Step {
    time: Duration,
    peak: usize,
    held: usize,
}

/// A method under test: its own backend, model and optimizer.
trait Method {
    fn name(&self) -> String;
    fn step(&mut self, images: &TensorData, labels: &TensorData) -> Step;
}

struct Trainer<B: AutodiffBackend, O: Optimizer<DenseNet<B>, B>> {
    name: String,
    model: Option<DenseNet<B>>,
    optimizer: O,
}

impl<B: AutodiffBackend, O: Optimizer<DenseNet<B>, B>> Method for Trainer<B, O> {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn step(&mut self, images: &TensorData, labels: &TensorData) -> Step {
        let device = Default::default();
        let model = self.model.take().expect("a model");
        let x = Tensor::<B, 4>::from_data(images.clone(), &device);
        let y = Tensor::<B, 1, Int>::from_data(labels.clone(), &device);
        let base = allocated();
        reset_peak();
        let start = Instant::now();
        let loss = CrossEntropyLossConfig::new()
            .init(&device)
            .forward(model.forward(x), y);
        let held = allocated().saturating_sub(base);
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        let model = self.optimizer.step(0.1, model, grads);
        // Lazy backends: finish the step inside the timing.
        B::sync(&device).expect("the device syncs");
        let time = start.elapsed();
        let peak = peak().saturating_sub(base);
        self.model = Some(model);
        Step { time, peak, held }
    }
}

fn trainer<B: AutodiffBackend>(
    name: &str,
    config: &DenseNetConfig,
    weights: &[u8],
) -> Box<dyn Method> {
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
        name: name.to_string(),
        model: Some(model),
        optimizer,
    })
}

fn median(values: &[Duration]) -> Duration {
    let mut sorted = values.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

fn run<I: Backend>(args: &Args) -> Vec<Row> {
    let config = DenseNetConfig::new(args.depth).with_growth_rate(args.growth);
    let device: I::Device = Default::default();
    I::seed(&device, 1);
    let recorder = BinBytesRecorder::<FullPrecisionSettings>::default();
    let weights = recorder
        .record(config.init::<Autodiff<I>>(&device).into_record(), ())
        .unwrap();
    type Bal<I> = Autodiff<I, BalancedCheckpointing>;
    let cut = |cut: Cut, policy: RegionPolicy| config.clone().with_cut(cut).with_policy(policy);
    let mut rows = Vec::new();
    for &batch in &args.batches {
        let mut methods: Vec<Box<dyn Method>> = vec![
            trainer::<Autodiff<I>>("plain Autodiff", &config, &weights),
            trainer::<Bal<I>>("Burn BalancedCheckpointing", &config, &weights),
            trainer::<Checkpointed<Bal<I>>>(
                "regions: bottleneck (the reference's cut)",
                &cut(Cut::Bottleneck, RegionPolicy::RecomputeAll),
                &weights,
            ),
            trainer::<Checkpointed<Bal<I>>>(
                "regions: layer",
                &cut(Cut::Layer, RegionPolicy::RecomputeAll),
                &weights,
            ),
            trainer::<Checkpointed<Bal<I>>>(
                "regions: layer, SaveComputeBound",
                &cut(Cut::Layer, RegionPolicy::SaveComputeBound),
                &weights,
            ),
        ];
        if args.block {
            methods.push(trainer::<Checkpointed<Bal<I>>>(
                "regions: block",
                &cut(Cut::Block, RegionPolicy::RecomputeAll),
                &weights,
            ));
        }
        let images =
            Tensor::<I, 4>::random([batch, 3, 32, 32], Distribution::Default, &device).into_data();
        let labels =
            Tensor::<I, 1, Int>::random([batch], Distribution::Uniform(0.0, 10.0), &device)
                .into_data();
        let mut measured: Vec<Vec<Step>> = methods.iter().map(|_| Vec::new()).collect();
        for step in 0..=args.steps {
            for (method, steps) in methods.iter_mut().zip(&mut measured) {
                let s = method.step(&images, &labels);
                eprintln!(
                    "batch {batch} step {step} {}: {:.2?}, peak {:.1} MiB",
                    method.name(),
                    s.time,
                    mib(s.peak)
                );
                // Step 0 warms up thread pools and caches.
                if step > 0 {
                    steps.push(s);
                }
            }
        }
        let summary: Vec<(String, usize, usize, f64)> = methods
            .iter()
            .zip(&measured)
            .map(|(method, steps)| {
                let times: Vec<Duration> = steps.iter().map(|s| s.time).collect();
                (
                    method.name(),
                    steps.iter().map(|s| s.peak).max().unwrap(),
                    steps.iter().map(|s| s.held).max().unwrap(),
                    median(&times).as_secs_f64(),
                )
            })
            .collect();
        let (plain, balanced) = (&summary[0], &summary[1]);
        for (name, peak, held, time) in &summary {
            rows.push(Row {
                method: name.clone(),
                devices: 1,
                batch,
                peak_bytes: *peak,
                held_bytes: *held,
                median_step_s: *time,
                peak_vs_plain: *peak as f64 / plain.1 as f64,
                peak_vs_balanced: *peak as f64 / balanced.1 as f64,
                time_vs_plain: time / plain.3,
                time_vs_balanced: time / balanced.3,
            });
        }
    }
    rows
}

fn main() {
    let args = Args::parse();
    let rows = match args.backend.as_str() {
        #[cfg(feature = "ndarray")]
        "ndarray" => run::<burn::backend::NdArray>(&args),
        #[cfg(feature = "flex")]
        "flex" => run::<burn::backend::Flex>(&args),
        other => panic!("backend `{other}` is not built in (features: ndarray, flex)"),
    };
    println!(
        "DenseNet-BC-{} (growth {}), 3×32×32, SGD step, {} backend, median of {} steps",
        args.depth, args.growth, args.backend, args.steps
    );
    println!(
        "| Method | # devices | Batch | Memory (peak) | held fwd→bwd | Time | × plain mem | × Balanced mem | × plain time | × Balanced time |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {:.1} MiB | {:.1} MiB | {:.3} s | {:.2} | {:.2} | {:.2} | {:.2} |",
            r.method,
            r.devices,
            r.batch,
            mib(r.peak_bytes),
            mib(r.held_bytes),
            r.median_step_s,
            r.peak_vs_plain,
            r.peak_vs_balanced,
            r.time_vs_plain,
            r.time_vs_balanced
        );
    }
    let json = serde_json::to_string_pretty(&rows).expect("rows serialise");
    std::fs::write(&args.json, json).unwrap_or_else(|e| panic!("cannot write {}: {e}", args.json));
    eprintln!("rows written to {}", args.json);
}
