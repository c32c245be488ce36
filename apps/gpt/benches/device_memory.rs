//! Device memory as the user sees it: on a cubecl runtime, a GPT training step's bytes in use and
//! bytes **reserved** (the memory manager's pages: what `nvidia-smi` shows), plain autodiff
//! against regions, **one process per method** (a process's pools keep what earlier steps
//! reserved), each sampled every 100 µs on the step's stream.
//!
//! Runs on Burn's wgpu backend without fusion (Mesa's lavapipe on a machine without a GPU), or on
//! CUDA with `--features cuda --backend cuda`. `--cleanup` says what the library does about
//! reserved bytes (see `burn_checkpoint::memory::device`), so that the options are measured side
//! by side.
//!
//! ```text
//! cargo bench -p gpt --bench device_memory                         # 4 blocks, d 256, batch 8 × 128
//! cargo bench -p gpt --bench device_memory -- --cleanup none,step
//! ```

use std::process::Command;
use std::time::{Duration, Instant};

use burn::module::AutodiffModule;
use burn::optim::{AdamWConfig, GradientsParams, Optimizer};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Distribution, Int, Tensor};
use burn_checkpoint::Checkpointed;
use burn_checkpoint::memory::device::{DevicePeak, Usage, usage};
use burn_checkpoint::memory::mib;
use clap::{Parser, ValueEnum};
use gpt::{Cut, Gpt, GptConfig};
use serde::{Deserialize, Serialize};

/// Bytes in use and reserved on a cubecl device, plain against regions, one process each.
#[derive(Parser, Clone)]
struct Args {
    /// Transformer blocks.
    #[arg(long, default_value_t = 4)]
    blocks: usize,
    /// Model width.
    #[arg(long, default_value_t = 256)]
    d_model: usize,
    /// Attention heads.
    #[arg(long, default_value_t = 4)]
    heads: usize,
    /// Sequence length.
    #[arg(long, default_value_t = 128)]
    seq: usize,
    /// Sequences per step.
    #[arg(long, default_value_t = 8)]
    batch: usize,
    /// Vocabulary.
    #[arg(long, default_value_t = 256)]
    vocab: usize,
    /// Measured steps per process (after one warm-up step).
    #[arg(long, default_value_t = 3)]
    steps: usize,
    /// Methods, each in a process of its own.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Method::Plain, Method::Block])]
    methods: Vec<Method>,
    /// What the library does about reserved bytes, each measured for every method.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Cleanup::None, Cleanup::Step])]
    cleanup: Vec<Cleanup>,
    /// The runtime.
    #[arg(long, value_enum, default_value_t = Runtime::Wgpu)]
    backend: Runtime,
    /// cubecl's pools on wgpu, set through `init_setup` before the first tensor (user code: what
    /// each layout would do; CUDA takes none of them at run time).
    #[arg(long, value_enum, default_value_t = Pools::Default)]
    pools: Pools,
    /// Run one method in this process and print its figures as JSON (used by the parent).
    #[arg(long, hide = true)]
    child: Option<Method>,
    /// The cleanup of a child process.
    #[arg(long, hide = true, value_enum, default_value_t = Cleanup::None)]
    child_cleanup: Cleanup,
    /// Passed by `cargo bench`.
    #[arg(long, hide = true)]
    bench: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
enum Method {
    /// Plain `Autodiff`.
    Plain,
    /// A region per block.
    Block,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
enum Cleanup {
    /// Nothing: cubecl's pools keep every page they allocated.
    None,
    /// `memory_cleanup` after each step (after the optimizer): pages wholly free go back.
    Step,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Pools {
    /// cubecl's default (`SubSlices`: pages from 32 MiB up to the largest buffer).
    Default,
    /// `ExclusivePages`: a buffer per allocation, in 24 size buckets.
    Exclusive,
    /// Sliced pages of 8 MiB for allocations up to 8 MiB, exclusive pages above.
    Small,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Runtime {
    Wgpu,
    #[cfg(feature = "cuda")]
    Cuda,
}

/// One process's figures.
#[derive(Debug, Serialize, Deserialize)]
struct Figures {
    method: Method,
    cleanup: Cleanup,
    /// Peak bytes in use during a step, above the step's start (max over measured steps).
    in_use_peak: u64,
    /// Bytes in use between forward and backward, above the step's start.
    held: u64,
    /// The most bytes reserved during a step.
    reserved_peak: u64,
    /// Bytes reserved after the last step.
    reserved_after: u64,
    /// Median step time, seconds.
    seconds: f64,
}

fn step<B: AutodiffBackend, O: Optimizer<Gpt<B>, B>>(
    model: Gpt<B>,
    optimizer: &mut O,
    tokens: &Tensor<B, 2, Int>,
    cleanup: Cleanup,
    sample: &dyn Fn() -> Usage,
) -> (Gpt<B>, u64) {
    let device = tokens.device();
    let [batch, seq] = tokens.dims();
    let inputs = tokens.clone().slice([0..batch, 0..seq - 1]);
    let targets = tokens.clone().slice([0..batch, 1..seq]);
    let base = sample().in_use;
    let loss = model.loss(inputs, targets);
    B::sync(&device).expect("the device syncs");
    let held = sample().in_use.saturating_sub(base);
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    let model = optimizer.step(1e-3, model, grads);
    B::sync(&device).expect("the device syncs");
    if cleanup == Cleanup::Step {
        B::memory_cleanup(&device);
        B::sync(&device).expect("the device syncs");
    }
    (model, held)
}

fn child<R: burn::cubecl::Runtime, I: Backend<Device = R::Device>>(
    args: &Args,
    method: Method,
) -> Figures
where
    Gpt<Checkpointed<burn::backend::Autodiff<I>>>:
        AutodiffModule<Checkpointed<burn::backend::Autodiff<I>>>,
{
    type B<I> = Checkpointed<burn::backend::Autodiff<I>>;
    let device = R::Device::default();
    if args.backend == Runtime::Wgpu && args.pools != Pools::Default {
        set_pools(args.pools);
    }
    let cut = match method {
        Method::Plain => Cut::None,
        Method::Block => Cut::Block,
    };
    I::seed(&device, 1);
    let config = GptConfig::new(args.vocab, args.d_model, args.blocks, args.heads, args.seq);
    let mut model = config.with_cut(cut).init::<B<I>>(&device);
    let mut optimizer = AdamWConfig::new().init();
    let tokens = Tensor::<B<I>, 2, Int>::random(
        [args.batch, args.seq + 1],
        Distribution::Uniform(0.0, args.vocab as f64),
        &device,
    );
    let sample = || usage::<R>(&device);
    let mut figures = Figures {
        method,
        cleanup: args.child_cleanup,
        in_use_peak: 0,
        held: 0,
        reserved_peak: 0,
        reserved_after: 0,
        seconds: 0.0,
    };
    let mut times = Vec::new();
    for index in 0..=args.steps {
        let base = sample().in_use;
        let sampler = DevicePeak::<R>::start(&device, Duration::from_micros(100));
        let started = Instant::now();
        let (next, held) = step(model, &mut optimizer, &tokens, args.child_cleanup, &sample);
        model = next;
        let elapsed = started.elapsed();
        let peak = sampler.finish();
        if index > 0 {
            // The first step also allocates the optimizer's state and tunes kernels.
            times.push(elapsed.as_secs_f64());
            figures.in_use_peak = figures.in_use_peak.max(peak.in_use.saturating_sub(base));
            figures.held = figures.held.max(held);
            figures.reserved_peak = figures.reserved_peak.max(peak.reserved);
        }
    }
    figures.reserved_after = sample().reserved;
    times.sort_by(f64::total_cmp);
    figures.seconds = times[times.len() / 2];
    figures
}

fn set_pools(pools: Pools) {
    use burn::backend::wgpu::graphics::AutoGraphicsApi;
    use burn::backend::wgpu::{MemoryConfiguration, RuntimeOptions, WgpuDevice, init_setup};
    use cubecl_runtime::memory_management::{MemoryPoolOptions, PoolType};
    const MIB: u64 = 1 << 20;
    let memory_config = match pools {
        Pools::Default => return,
        Pools::Exclusive => MemoryConfiguration::ExclusivePages,
        Pools::Small => MemoryConfiguration::Custom {
            pool_options: vec![
                MemoryPoolOptions {
                    pool_type: PoolType::ExclusivePages { max_alloc_size: 0 },
                    dealloc_period: None,
                },
                MemoryPoolOptions {
                    pool_type: PoolType::SlicedPages {
                        page_size: 8 * MIB,
                        max_slice_size: 8 * MIB,
                    },
                    dealloc_period: None,
                },
                MemoryPoolOptions {
                    pool_type: PoolType::ExclusivePages {
                        max_alloc_size: 1 << 40,
                    },
                    dealloc_period: Some(1000),
                },
            ],
        },
    };
    let options = RuntimeOptions {
        memory_config,
        ..RuntimeOptions::default()
    };
    init_setup::<AutoGraphicsApi>(&WgpuDevice::default(), options);
}

fn run_child(args: &Args, method: Method) -> Figures {
    match args.backend {
        Runtime::Wgpu => {
            child::<burn::cubecl::wgpu::WgpuRuntime, bench_kit::wgpu::Unfused>(args, method)
        }
        #[cfg(feature = "cuda")]
        Runtime::Cuda => child::<
            burn::cubecl::cuda::CudaRuntime,
            burn::backend::cuda::CubeBackend<burn::cubecl::cuda::CudaRuntime, f32, i32, u8>,
        >(args, method),
    }
}

fn main() {
    let args = Args::parse();
    if let Some(method) = args.child {
        let figures = run_child(&args, method);
        println!(
            "{}",
            serde_json::to_string(&figures).expect("figures serialise")
        );
        return;
    }
    if args.backend == Runtime::Wgpu && bench_kit::wgpu::claim().is_none() {
        return;
    }
    let exe = std::env::current_exe().expect("this benchmark's path");
    let mut rows: Vec<Figures> = Vec::new();
    for &cleanup in &args.cleanup {
        for &method in &args.methods {
            let mut command = Command::new(&exe);
            command.args(std::env::args().skip(1).filter(|a| a != "--bench"));
            command.args([
                "--child",
                method_name(method),
                "--child-cleanup",
                cleanup_name(cleanup),
            ]);
            let output = command.output().expect("a child process runs");
            let stdout = String::from_utf8_lossy(&output.stdout);
            let Some(line) = stdout.lines().rev().find(|l| l.starts_with('{')) else {
                panic!(
                    "{method:?} {cleanup:?}: no figures; stderr:\n{}",
                    String::from_utf8_lossy(&output.stderr)
                );
            };
            let figures: Figures = serde_json::from_str(line).expect("figures parse");
            eprintln!("{figures:?}");
            rows.push(figures);
        }
    }
    println!(
        "GPT {} blocks, d {}, {} heads, batch {} × {}, vocab {}; {:?} backend, AdamW; one process \
         per row, median of {} steps after a warm-up\n",
        args.blocks,
        args.d_model,
        args.heads,
        args.batch,
        args.seq,
        args.vocab,
        args.backend,
        args.steps
    );
    println!(
        "| cleanup | method | in use, peak | held fwd→bwd | reserved, peak | reserved after | × plain reserved peak | step s | × plain time |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for row in &rows {
        let plain = rows
            .iter()
            .find(|r| r.cleanup == row.cleanup && r.method == Method::Plain);
        let ratio = |f: fn(&Figures) -> f64| plain.map_or(f64::NAN, |p| f(row) / f(p));
        println!(
            "| {:?} | {:?} | {:.1} MiB | {:.1} MiB | {:.1} MiB | {:.1} MiB | {:.2} | {:.3} | {:.2} |",
            row.cleanup,
            row.method,
            mib(row.in_use_peak as usize),
            mib(row.held as usize),
            mib(row.reserved_peak as usize),
            mib(row.reserved_after as usize),
            ratio(|f| f.reserved_peak as f64),
            row.seconds,
            ratio(|f| f.seconds),
        );
    }
}

fn method_name(method: Method) -> &'static str {
    match method {
        Method::Plain => "plain",
        Method::Block => "block",
    }
}

fn cleanup_name(cleanup: Cleanup) -> &'static str {
    match cleanup {
        Cleanup::None => "none",
        Cleanup::Step => "step",
    }
}
