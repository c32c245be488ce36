//! Device memory as the user sees it: on a cubecl runtime, a GPT training step's bytes in use and
//! bytes **reserved** (the memory manager's pages: what `nvidia-smi` shows, and what decides
//! whether a batch fits), for plain autodiff, Burn's Balanced checkpointing and the region cuts,
//! **one process per method** (a process's pools keep what its earlier steps reserved), read with
//! the library's device [`Meter`] (sampled every 100 µs on the step's stream).
//!
//! Backends: Burn's wgpu without fusion (`wgpu`: Mesa's lavapipe on a machine without a GPU), with
//! fusion (`wgpu-fused`), and with `--features cuda`, `burn::backend::Cuda` (fused and autotuned,
//! as a Burn user gets it). `--pools` picks cubecl's pool layout on wgpu, through `init_setup`
//! (`exclusive` is what burn-checkpoint's `exclusive-pools` feature makes the default on every
//! runtime, CUDA included); `--cleanup step` returns wholly free pages after each step.
//!
//! ```text
//! cargo bench -p gpt --bench device_memory                      # 4 blocks, d 256, batch 8 × 128
//! cargo bench -p gpt --bench device_memory -- --pools exclusive --cleanup none,step
//! cargo bench -p gpt --features cuda --bench device_memory -- --backend cuda --blocks 12 \
//!     --d-model 768 --heads 12 --seq 512 --batch 8 --vocab 50257 \
//!     --methods plain,balanced,block,block-balanced,block-save,block-offload,seq-sqrt,whole \
//!     # GPT-2 small
//! ```

use std::path::PathBuf;

use bench_kit::child;
use bench_kit::device::{StepFigures, measure_steps};
use bench_kit::tape::Tape;
use bench_kit::wgpu::{Pools, set_pools};
use burn::backend::Autodiff;
use burn::backend::autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn::module::AutodiffModule;
use burn::optim::AdamWConfig;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn_checkpoint::Checkpointed;
use burn_checkpoint::memory::{MemoryMeter, Meter};
use burn_checkpoint_core::memory::mib;
use clap::{Parser, ValueEnum};
use gpt::{Cut, Gpt, Method};
use serde::{Deserialize, Serialize};

mod common;
use bench_kit::gpt::GptShape;

/// Bytes in use and reserved on a cubecl device, one process per method.
#[derive(Parser, Clone, Debug)]
struct Args {
    #[command(flatten)]
    shape: GptShape,
    /// Measured steps per process (after one warm-up step).
    #[arg(long, default_value_t = 3)]
    steps: usize,
    /// Methods, each in a process of its own.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Method::Plain, Method::Block])]
    methods: Vec<Method>,
    /// What is done about reserved bytes, each measured for every method.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Cleanup::None])]
    cleanup: Vec<Cleanup>,
    /// The runtime.
    #[arg(long, value_enum, default_value_t = Runtime::Wgpu)]
    backend: Runtime,
    /// cubecl's pools on wgpu (CUDA takes none at run time: see the `exclusive-pools` feature).
    #[arg(long, value_enum, default_value_t = Pools::Default)]
    pools: Pools,
    /// Where the table and JSON go (extensions added).
    #[arg(long, default_value = "device-memory")]
    out: PathBuf,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
enum Cleanup {
    /// Nothing: cubecl's pools keep every page they allocated.
    None,
    /// The memory manager's wholly free pages go back after each step (`Meter::release`).
    Step,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Runtime {
    /// Burn's wgpu backend without fusion.
    Wgpu,
    /// `burn::backend::Wgpu`: with fusion.
    WgpuFused,
    /// `burn::backend::Cuda` (fused, autotuned).
    #[cfg(feature = "cuda")]
    Cuda,
}

/// One process's figures.
#[derive(Debug, Serialize, Deserialize)]
struct Row {
    method: Method,
    cleanup: Cleanup,
    figures: StepFigures,
}

fn measure<B: AutodiffBackend>(
    args: &Args,
    cut: Cut,
    cleanup: Cleanup,
    meter: &Meter,
) -> StepFigures
where
    Gpt<B>: AutodiffModule<B>,
{
    let device = B::Device::default();
    B::seed(&device, 1);
    let mut model = Some(common::config(&args.shape).with_cut(cut).init::<B>(&device));
    let mut optimizer = AdamWConfig::new().init();
    let tokens = common::tokens::<B>(&args.shape, &device);
    measure_steps(meter, 1, args.steps, |measure| {
        let mut held = 0;
        let (next, _) = model.take().expect("a model between steps").train_step(
            &mut optimizer,
            tokens.clone(),
            1e-3,
            || held = measure.now(),
        );
        model = Some(next);
        if cleanup == Cleanup::Step {
            meter.release();
        }
        held
    })
}

fn methods<I: Backend>(
    args: &Args,
    method: Method,
    cleanup: Cleanup,
    meter: &Meter,
) -> StepFigures {
    type Bal<I> = Autodiff<I, BalancedCheckpointing>;
    let cut = method.cut();
    match method.tape() {
        Tape::Plain => measure::<Autodiff<I>>(args, cut, cleanup, meter),
        Tape::Balanced => measure::<Bal<I>>(args, cut, cleanup, meter),
        Tape::Regions => measure::<Checkpointed<Autodiff<I>>>(args, cut, cleanup, meter),
        Tape::RegionsOverBalanced => measure::<Checkpointed<Bal<I>>>(args, cut, cleanup, meter),
    }
}

/// The child: one method, one cleanup, in this process.
fn run_child(args: &Args, method: Method, cleanup: Cleanup) -> StepFigures {
    match args.backend {
        Runtime::Wgpu | Runtime::WgpuFused => {
            let device = burn::backend::wgpu::WgpuDevice::default();
            set_pools(args.pools, &device);
            let meter = Meter::device(device).expect("cubecl counts wgpu bytes");
            if args.backend == Runtime::Wgpu {
                methods::<bench_kit::wgpu::Unfused>(args, method, cleanup, &meter)
            } else {
                methods::<burn::backend::Wgpu>(args, method, cleanup, &meter)
            }
        }
        #[cfg(feature = "cuda")]
        Runtime::Cuda => {
            let meter = Meter::device(burn::backend::cuda::CudaDevice::default())
                .expect("cubecl counts CUDA bytes");
            methods::<burn::backend::Cuda>(args, method, cleanup, &meter)
        }
    }
}

fn main() {
    let args: Args = GptShape::parse_with(common::DEVICE_SHAPE);
    if let Some(task) = child::task() {
        let (method, cleanup) = serde_json::from_str(&task).expect("a child's task");
        child::report(&run_child(&args, method, cleanup));
        return;
    }
    if matches!(args.backend, Runtime::Wgpu | Runtime::WgpuFused)
        && bench_kit::wgpu::claim().is_none()
    {
        return;
    }
    let passed: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let mut rows = Vec::new();
    for &cleanup in &args.cleanup {
        for &method in &args.methods {
            let task = serde_json::to_string(&(method, cleanup)).expect("a task serialises");
            match child::run::<StepFigures>(&task, &passed) {
                Ok(figures) => {
                    eprintln!("{method:?} {cleanup:?}: {figures:?}");
                    rows.push(Row {
                        method,
                        cleanup,
                        figures,
                    });
                }
                // The largest batch is found by trying: an out-of-memory is a row, not the end.
                Err(error) => eprintln!("{method:?} {cleanup:?} failed: {error}"),
            }
        }
    }
    let title = format!(
        "{}; {:?} backend, {:?} pools, AdamW; one process per row, median of {} steps after a \
         warm-up",
        args.shape.describe(),
        args.backend,
        args.pools,
        args.steps
    );
    let table = markdown(&title, &rows);
    print!("{table}");
    bench_kit::output::write_table(&args.out, &table, &rows);
}

fn markdown(title: &str, rows: &[Row]) -> String {
    let mut table = format!(
        "{title}\n\n| cleanup | method | in use at start | in use, peak | held fwd→bwd | reserved, peak | \
         live at peak | reserved ÷ live | × plain in-use peak | × plain reserved peak | step s | \
         × plain time |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    );
    for row in rows {
        let f = &row.figures;
        let plain = rows
            .iter()
            .find(|r| r.cleanup == row.cleanup && r.method == Method::Plain)
            .map(|r| &r.figures);
        let ratio = |of: fn(&StepFigures) -> f64| plain.map_or(f64::NAN, |p| of(f) / of(p));
        table += &format!(
            "| {:?} | {} | {:.1} MiB | {:.1} MiB | {:.1} MiB | {:.1} MiB | {:.1} MiB | {:.2} | {:.2} | {:.2} | {:.3} | {:.2} |\n",
            row.cleanup,
            row.method.name(),
            mib(f.base as usize),
            mib(f.in_use_peak as usize),
            mib(f.held as usize),
            mib(f.reserved_peak as usize),
            mib(f.live_peak() as usize),
            f.reserved_peak as f64 / f.live_peak() as f64,
            ratio(|f| f.in_use_peak as f64),
            ratio(|f| f.reserved_peak as f64),
            f.seconds,
            ratio(|f| f.seconds),
        );
    }
    table
}
