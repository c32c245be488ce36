//! What offload costs in time, in one process: GPT training steps on one model alternate, round
//! after round, between a region per block kept on the device (`block`), the same regions with
//! their inputs offloaded and every copy waited for as soon as it starts (`offload-waited`:
//! `Settings::offload_in_flight_limit` at 0, the synchronous read back that offload was before its
//! copy thread) and offloaded on the copy thread (`offload`: the default bound). The modes share
//! the weights, the tokens and the device's pools, so the ratios of their median step times are
//! free of what differs between processes.
//!
//! ```text
//! cargo bench -p gpt --bench offload_time                          # flex, 4 blocks, d 256
//! cargo bench -p gpt --bench offload_time -- --backend wgpu-fused --rounds 12
//! cargo bench -p gpt --features cuda --bench offload_time -- --backend cuda --blocks 12 \
//!     --d-model 768 --heads 12 --seq 512 --batch 8 --vocab 50257   # GPT-2 small
//! ```

use std::path::PathBuf;
use std::time::Instant;

use burn::module::AutodiffModule;
use burn::optim::AdamWConfig;
use burn::tensor::backend::Backend;
use burn_checkpoint::counters::{self, Counters};
use burn_checkpoint::{Checkpointed, Settings};
use clap::{Parser, ValueEnum};
use cpu_time::ProcessTime;
use gpt::{Cut, Gpt};
use serde::Serialize;

mod common;
use bench_kit::gpt::GptShape;

/// Offload's time against the same regions on the device, modes alternating in one process.
#[derive(Parser, Debug)]
struct Args {
    #[command(flatten)]
    shape: GptShape,
    /// Rounds of one step per mode (after a warm-up round); each round starts at the next mode.
    #[arg(long, default_value_t = 8)]
    rounds: usize,
    /// The modes that alternate (`block` always runs: the ratios are to it).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Mode::ALL)]
    modes: Vec<Mode>,
    /// The backend.
    #[arg(long, value_enum, default_value_t = Runtime::Flex)]
    backend: Runtime,
    /// Where the table and JSON go (extensions added).
    #[arg(long, default_value = "offload-time")]
    out: PathBuf,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Runtime {
    /// burn-flex on the CPU.
    Flex,
    /// Burn's wgpu without fusion (Mesa's lavapipe on a machine without a GPU).
    Wgpu,
    /// `burn::backend::Wgpu`: with fusion.
    WgpuFused,
    /// `burn::backend::Cuda` (fused, autotuned).
    #[cfg(feature = "cuda")]
    Cuda,
}

/// A way to run the step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ValueEnum)]
enum Mode {
    /// A region per block, on the device.
    Block,
    /// The same regions offloaded, each copy waited for when it starts.
    OffloadWaited,
    /// The same regions offloaded on the copy thread.
    Offload,
}

impl Mode {
    const ALL: [Mode; 3] = [Mode::Block, Mode::OffloadWaited, Mode::Offload];

    fn name(self) -> &'static str {
        match self {
            Mode::Block => "block",
            Mode::OffloadWaited => "offload-waited",
            Mode::Offload => "offload",
        }
    }

    fn cut(self) -> Cut {
        match self {
            Mode::Block => Cut::Block,
            Mode::OffloadWaited | Mode::Offload => Cut::BlockOffload,
        }
    }
}

/// One mode's figures: medians over the rounds.
#[derive(Debug, Serialize)]
struct Row {
    mode: Mode,
    step_seconds: f64,
    cpu_seconds: f64,
    vs_block: f64,
    cpu_vs_block: f64,
    /// Each round's step time ÷ the same round's `block` step.
    round_ratios: Vec<f64>,
    copies_per_step: f64,
    forward_waits_per_step: f64,
    backward_waits_per_step: f64,
    waited_seconds_per_step: f64,
}

#[derive(Default)]
struct Samples {
    seconds: Vec<f64>,
    cpu: Vec<f64>,
    offload: Vec<counters::OffloadCopies>,
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

fn run<I: Backend>(args: &Args) -> Vec<Row>
where
    Gpt<Checkpointed<burn::backend::Autodiff<I>>>:
        AutodiffModule<Checkpointed<burn::backend::Autodiff<I>>>,
{
    type B<I> = Checkpointed<burn::backend::Autodiff<I>>;
    let device = Default::default();
    B::<I>::seed(&device, 1);
    let mut model = Some(common::config(&args.shape).init::<B<I>>(&device));
    let mut optimizer = AdamWConfig::new().init();
    let tokens = common::tokens::<B<I>>(&args.shape, &device);
    let copy_thread_limit = Settings::current().offload_in_flight_limit;
    let mut modes = vec![Mode::Block];
    modes.extend(args.modes.iter().filter(|&&mode| mode != Mode::Block));
    let mut samples: Vec<Samples> = modes.iter().map(|_| Samples::default()).collect();
    for round in 0..=args.rounds {
        for turn in 0..modes.len() {
            let index = (round + turn) % modes.len();
            let mode = modes[index];
            set_in_flight_limit(match mode {
                Mode::OffloadWaited => 0,
                Mode::Block | Mode::Offload => copy_thread_limit,
            });
            B::<I>::sync(&device).expect("the device settles");
            Counters::reset();
            let (started, cpu) = (Instant::now(), ProcessTime::now());
            let (next, loss) = model
                .take()
                .expect("a model between steps")
                .with_cut(mode.cut())
                .train_step(&mut optimizer, tokens.clone(), 1e-3, || {});
            drop(loss);
            B::<I>::sync(&device).expect("the step completes");
            let (seconds, cpu) = (started.elapsed().as_secs_f64(), cpu.elapsed().as_secs_f64());
            model = Some(next);
            // Round 0 warms up every mode.
            if round > 0 {
                let sample = &mut samples[index];
                sample.seconds.push(seconds);
                sample.cpu.push(cpu);
                sample.offload.push(Counters::now().offload);
            }
        }
    }
    set_in_flight_limit(copy_thread_limit);
    let block = &samples[0];
    modes
        .iter()
        .zip(&samples)
        .map(|(&mode, sample)| {
            let per_step = |of: fn(&counters::OffloadCopies) -> f64| {
                sample.offload.iter().map(of).sum::<f64>() / sample.offload.len() as f64
            };
            Row {
                mode,
                step_seconds: median(&sample.seconds),
                cpu_seconds: median(&sample.cpu),
                vs_block: median(&sample.seconds) / median(&block.seconds),
                cpu_vs_block: median(&sample.cpu) / median(&block.cpu),
                round_ratios: sample
                    .seconds
                    .iter()
                    .zip(&block.seconds)
                    .map(|(s, b)| s / b)
                    .collect(),
                copies_per_step: per_step(|o| o.copies as f64),
                forward_waits_per_step: per_step(|o| o.forward_waits as f64),
                backward_waits_per_step: per_step(|o| o.backward_waits as f64),
                waited_seconds_per_step: per_step(|o| o.waited_seconds),
            }
        })
        .collect()
}

fn markdown(title: &str, rows: &[Row]) -> String {
    let mut table = format!(
        "{title}\n\n| mode | step s | × block | median of round ratios | CPU s | CPU × block | \
         copies / step | forward waits / step | backward waits / step | waited s / step |\n\
         |---|---|---|---|---|---|---|---|---|---|\n"
    );
    for row in rows {
        table += &format!(
            "| {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.1} | {:.1} | {:.1} | {:.4} |\n",
            row.mode.name(),
            row.step_seconds,
            row.vs_block,
            median(&row.round_ratios),
            row.cpu_seconds,
            row.cpu_vs_block,
            row.copies_per_step,
            row.forward_waits_per_step,
            row.backward_waits_per_step,
            row.waited_seconds_per_step,
        );
    }
    table
}

fn main() {
    let args: Args = GptShape::parse_with(common::DEVICE_SHAPE);
    let _wgpu = match args.backend {
        Runtime::Wgpu | Runtime::WgpuFused => match bench_kit::wgpu::claim() {
            Some(claim) => Some(claim),
            None => return,
        },
        _ => None,
    };
    let rows = match args.backend {
        Runtime::Flex => run::<burn::backend::Flex>(&args),
        Runtime::Wgpu => run::<bench_kit::wgpu::Unfused>(&args),
        Runtime::WgpuFused => run::<burn::backend::Wgpu>(&args),
        #[cfg(feature = "cuda")]
        Runtime::Cuda => run::<burn::backend::Cuda>(&args),
    };
    let title = format!(
        "{}; {:?} backend, AdamW; the modes alternate in one process, median of {} rounds after \
         a warm-up",
        args.shape.describe(),
        args.backend,
        args.rounds
    );
    let table = markdown(&title, &rows);
    print!("{table}");
    bench_kit::output::write_table(&args.out, &table, &rows);
}

/// Sets offload's bound on the bytes in flight (`0`: forward waits for each copy).
fn set_in_flight_limit(bytes: usize) {
    Settings {
        offload_in_flight_limit: bytes,
        ..Settings::current()
    }
    .apply();
}
