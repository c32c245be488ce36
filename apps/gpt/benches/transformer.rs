//! GPT training steps, each method in one process, interleaved, on the same weights and tokens:
//! plain `Autodiff<I>`, Burn's `BalancedCheckpointing`, and `Checkpointed<…>` with each cut.
//!
//! For each method: the peak bytes of a training step (forward, backward, AdamW step) above what
//! was held before it and the bytes held between forward and backward (counting allocator), and
//! the median wall and process-CPU time of a step after a warm-up step. Prints a markdown table
//! and writes it with the same rows as JSON, and a plot of peak memory against time (both as
//! ratios to plain `Autodiff`): `<out>.md`, `<out>.json`, `<out>.svg`, `<out>.png`.
//!
//! ```text
//! cargo bench -p gpt --bench transformer                                   # 8 blocks, d 128
//! cargo bench -p gpt --bench transformer -- --blocks 4 --d-model 64 --seq 64 --batch 4
//! cargo bench -p gpt --bench transformer -- --blocks 12 --d-model 768 --heads 12 --seq 256 \
//!     --batch 1 --vocab 50257                                             # GPT-2-small shapes
//! ```

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bench_kit::gpt::GptShape;
use bench_kit::tape::Tape;
use burn::backend::Autodiff;
use burn::backend::autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn::module::{AutodiffModule, Module};
use burn::optim::{AdamWConfig, GradientsParams, Optimizer};
use burn::prelude::ElementConversion;
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Int, Tensor, TensorData};
use burn_checkpoint::Checkpointed;
use burn_checkpoint::memory::{CountingAllocator, Meter};
use burn_checkpoint_core::memory::mib;
use clap::{Parser, ValueEnum};
use cpu_time::ProcessTime;
use gpt::{Cut, Gpt, GptConfig, Method};
use plotters::prelude::*;
use serde::Serialize;

/// This benchmark's GPT unless flags say otherwise.
const DEFAULT_SHAPE: GptShape = GptShape {
    blocks: 8,
    d_model: 128,
    heads: 4,
    seq: 128,
    batch: 8,
    vocab: 256,
};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// GPT training steps with and without checkpoint regions, interleaved in one process.
#[derive(Parser, Debug)]
struct Args {
    /// The GPT (batch 8, vocab 256 unless given).
    #[command(flatten)]
    shape: GptShape,
    /// Measured steps per method (after one warm-up step).
    #[arg(long, default_value_t = 5)]
    steps: usize,
    /// The methods, in the order they run in each round.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = default_methods())]
    methods: Vec<Method>,
    /// The CPU backend.
    #[arg(long, value_enum, default_value_t = CpuBackend::Flex)]
    backend: CpuBackend,
    /// Where the table, JSON and plot go (extensions added).
    #[arg(long, default_value = "transformer-bench")]
    out: PathBuf,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum CpuBackend {
    Flex,
    Ndarray,
}

/// The methods run unless `--methods` says otherwise: all but offload (`--bench offload_time`
/// measures it).
fn default_methods() -> Vec<Method> {
    Method::ALL
        .into_iter()
        .filter(|&method| method != Method::BlockOffload)
        .collect()
}

/// What one measured step gives.
struct Step {
    wall: Duration,
    /// Process CPU time of the forward pass alone (up to the loss).
    forward_cpu: Duration,
    /// Process CPU time: on a shared CPU it counts the step's own work, not the time it waited.
    cpu: Duration,
    peak: usize,
    held: usize,
    loss: f32,
}

/// A method with its own backend type, model and optimizer state.
trait Runner {
    fn step(&mut self, tokens: &TensorData) -> Step;
}

struct Trainer<B: AutodiffBackend, O> {
    model: Option<Gpt<B>>,
    optimizer: O,
}

impl<B: AutodiffBackend, O: Optimizer<Gpt<B>, B>> Runner for Trainer<B, O> {
    fn step(&mut self, tokens: &TensorData) -> Step {
        let device = Default::default();
        let model = self.model.take().expect("a model between steps");
        let tokens = Tensor::<B, 2, Int>::from_data(tokens.clone(), &device);
        let [batch, seq] = tokens.dims();
        let inputs = tokens.clone().slice([0..batch, 0..seq - 1]);
        let targets = tokens.slice([0..batch, 1..seq]);
        B::sync(&device).expect("the device syncs");
        let measure = Meter::Host.start();
        let (start, cpu_start) = (Instant::now(), ProcessTime::now());
        let loss = model.loss(inputs, targets);
        B::sync(&device).expect("the device syncs");
        let forward_cpu = cpu_start.elapsed();
        let held = measure.now() as usize;
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        let model = self.optimizer.step(1e-3, model, grads);
        let loss = loss.into_scalar().elem::<f32>();
        B::sync(&device).expect("the device syncs");
        let (wall, cpu) = (start.elapsed(), cpu_start.elapsed());
        let peak = measure.finish().in_use as usize;
        self.model = Some(model);
        Step {
            wall,
            forward_cpu,
            cpu,
            peak,
            held,
            loss,
        }
    }
}

fn trainer<B: AutodiffBackend>(config: &GptConfig, weights: &[u8], cut: Cut) -> Box<dyn Runner>
where
    Gpt<B>: AutodiffModule<B>,
{
    let device = Default::default();
    let record = BinBytesRecorder::<FullPrecisionSettings>::default()
        .load(weights.to_vec(), &device)
        .expect("the weights load");
    let model = config.init::<B>(&device).load_record(record).with_cut(cut);
    Box::new(Trainer {
        model: Some(model),
        optimizer: AdamWConfig::new().init::<B, Gpt<B>>(),
    })
}

/// One row of the table.
#[derive(Serialize)]
struct Row {
    method: &'static str,
    blocks: usize,
    d_model: usize,
    seq: usize,
    batch: usize,
    peak_bytes: usize,
    held_bytes: usize,
    median_step_s: f64,
    median_step_cpu_s: f64,
    /// Median CPU time of the forward pass alone: what recomputing a region costs at most.
    median_forward_cpu_s: f64,
    peak_vs_plain: f64,
    cpu_vs_plain: f64,
    wall_vs_plain: f64,
    /// The last measured step's loss: the same for every method (same weights, tokens, steps).
    loss: f32,
}

fn median(values: impl Iterator<Item = Duration>) -> f64 {
    let mut sorted: Vec<Duration> = values.collect();
    sorted.sort();
    sorted[sorted.len() / 2].as_secs_f64()
}

fn run<I: Backend>(args: &Args, config: &GptConfig) -> Vec<Row> {
    let device: I::Device = Default::default();
    I::seed(&device, 1);
    let weights = BinBytesRecorder::<FullPrecisionSettings>::default()
        .record(config.init::<Autodiff<I>>(&device).into_record(), ())
        .expect("the weights serialise");
    let tokens = common::tokens::<I>(&args.shape, &device).into_data();
    type Bal<I> = Autodiff<I, BalancedCheckpointing>;
    let mut runners: Vec<Box<dyn Runner>> = args
        .methods
        .iter()
        .map(|&method| {
            let cut = method.cut();
            match method.tape() {
                Tape::Plain => trainer::<Autodiff<I>>(config, &weights, cut),
                Tape::Balanced => trainer::<Bal<I>>(config, &weights, cut),
                Tape::Regions => trainer::<Checkpointed<Autodiff<I>>>(config, &weights, cut),
                Tape::RegionsOverBalanced => trainer::<Checkpointed<Bal<I>>>(config, &weights, cut),
            }
        })
        .collect();
    let mut measured: Vec<Vec<Step>> = runners.iter().map(|_| Vec::new()).collect();
    for round in 0..=args.steps {
        for ((runner, steps), method) in runners.iter_mut().zip(&mut measured).zip(&args.methods) {
            let step = runner.step(&tokens);
            eprintln!(
                "round {round} {}: {:.2?} (CPU {:.2?}), peak {:.1} MiB, loss {}",
                method.label(),
                step.wall,
                step.cpu,
                mib(step.peak),
                step.loss
            );
            // Round 0 warms up thread pools and allocates the optimizer state.
            if round > 0 {
                steps.push(step);
            }
        }
    }
    let reference = args.methods.iter().position(|&m| m == Method::Plain);
    let summary: Vec<Summary> = measured.iter().map(|steps| Summary::of(steps)).collect();
    let plain = reference.map(|i| &summary[i]);
    let ratio = |value: f64, of: fn(&Summary) -> f64| plain.map_or(f64::NAN, |p| value / of(p));
    args.methods
        .iter()
        .zip(&summary)
        .map(|(method, s)| Row {
            method: method.label(),
            blocks: args.shape.blocks,
            d_model: args.shape.d_model,
            seq: args.shape.seq,
            batch: args.shape.batch,
            peak_bytes: s.peak,
            held_bytes: s.held,
            median_step_s: s.wall,
            median_step_cpu_s: s.cpu,
            median_forward_cpu_s: s.forward_cpu,
            peak_vs_plain: ratio(s.peak as f64, |p| p.peak as f64),
            cpu_vs_plain: ratio(s.cpu, |p| p.cpu),
            wall_vs_plain: ratio(s.wall, |p| p.wall),
            loss: s.loss,
        })
        .collect()
}

/// One method's steps, summed up: maxima of memory, medians of time.
struct Summary {
    peak: usize,
    held: usize,
    wall: f64,
    cpu: f64,
    forward_cpu: f64,
    loss: f32,
}

impl Summary {
    fn of(steps: &[Step]) -> Self {
        Summary {
            peak: steps.iter().map(|s| s.peak).max().unwrap(),
            held: steps.iter().map(|s| s.held).max().unwrap(),
            wall: median(steps.iter().map(|s| s.wall)),
            cpu: median(steps.iter().map(|s| s.cpu)),
            forward_cpu: median(steps.iter().map(|s| s.forward_cpu)),
            loss: steps.last().unwrap().loss,
        }
    }
}

fn markdown(title: &str, rows: &[Row]) -> String {
    let mut table = format!(
        "{title}\n\n| Method | Peak step memory | Held fwd→bwd | Step (wall) | Step (CPU) | Forward (CPU) | × plain memory | × plain CPU time | × plain wall time | loss |\n|---|---|---|---|---|---|---|---|---|---|\n"
    );
    for r in rows {
        table += &format!(
            "| {} | {:.1} MiB | {:.1} MiB | {:.3} s | {:.3} s | {:.3} s | {:.2} | {:.2} | {:.2} | {} |\n",
            r.method,
            mib(r.peak_bytes),
            mib(r.held_bytes),
            r.median_step_s,
            r.median_step_cpu_s,
            r.median_forward_cpu_s,
            r.peak_vs_plain,
            r.cpu_vs_plain,
            r.wall_vs_plain,
            r.loss
        );
    }
    table
}

use bench_kit::figure;

/// Peak memory against CPU time, both × plain, one labelled point per method.
struct MemoryAgainstTime<'a> {
    rows: &'a [Row],
    title: &'a str,
}

impl figure::Figure for MemoryAgainstTime<'_> {
    fn draw<D: DrawingBackend>(
        &self,
        area: &DrawingArea<D, plotters::coord::Shift>,
    ) -> Result<(), Box<dyn std::error::Error>>
    where
        D::ErrorType: 'static,
    {
        let Self { rows, title } = *self;
        let max_time = rows.iter().map(|r| r.cpu_vs_plain).fold(1.0, f64::max) * 1.1;
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 20))
            .margin(20)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d(0.8..max_time, 0.0..1.1)?;
        chart
            .configure_mesh()
            .x_desc("CPU time per step × plain Autodiff")
            .y_desc("peak step memory × plain Autodiff")
            .label_style(("sans-serif", 14))
            .draw()?;
        for (i, row) in rows.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let point = (row.cpu_vs_plain, row.peak_vs_plain);
            chart.draw_series([Circle::new(point, 6, color.filled())])?;
            chart.draw_series([Text::new(
                row.method.to_string(),
                (point.0 + 0.01, point.1 + 0.02),
                ("sans-serif", 13),
            )])?;
        }
        Ok(())
    }
}

fn main() {
    let args: Args = GptShape::parse_with(DEFAULT_SHAPE);
    let shape = &args.shape;
    let config = common::config(shape);
    let rows = match args.backend {
        #[cfg(feature = "flex")]
        CpuBackend::Flex => run::<burn::backend::Flex>(&args, &config),
        #[cfg(feature = "ndarray")]
        CpuBackend::Ndarray => run::<burn::backend::NdArray>(&args, &config),
        #[allow(unreachable_patterns)]
        other => panic!("backend {other:?} is not built in (features: flex, ndarray)"),
    };
    let title = format!(
        "{}; {:?} backend, AdamW step, median of {} steps, methods interleaved",
        shape.describe(),
        args.backend,
        args.steps
    );
    let table = markdown(&title, &rows);
    print!("{table}");
    bench_kit::output::write_table(&args.out, &table, &rows);
    let short = format!(
        "GPT, {} blocks, d {}, batch {}×{}: peak memory and CPU time per step × plain",
        shape.blocks, shape.d_model, shape.batch, shape.seq
    );
    let figure = MemoryAgainstTime {
        rows: &rows,
        title: &short,
    };
    match figure::write(&figure, &args.out) {
        Ok(()) => eprintln!("plotted: {0}.svg, {0}.png", args.out.display()),
        Err(e) => eprintln!("{e}"),
    }
}
