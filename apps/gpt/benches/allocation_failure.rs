//! How a cubecl backend fails an allocation, seen from a training loop (what an out-of-memory
//! report has to catch): GPT training steps with the batch doubling until one fails, caught with
//! `catch_unwind`. For each failure it prints where the panic was raised (the thread's name: the
//! caller's, or a runtime thread of cubecl's), its message's first line, whether the process lived
//! on, and whether the same device then trains a small batch again (a poisoned lock or a dead
//! stream would stop it). The doubling runs on the main thread, then on a spawned thread (what a
//! data-parallel worker sees).
//!
//! ```text
//! cargo bench -p gpt --bench allocation_failure -- --backend wgpu --largest 4096   # lavapipe
//! cargo bench -p gpt --features cuda --bench allocation_failure -- --backend cuda --blocks 12 \
//!     --d-model 768 --heads 12 --vocab 50257 --seq 1024
//! ```
//!
//! Not on Flex: a host allocation that fails aborts the process (Rust's `handle_alloc_error`), or
//! the kernel's OOM killer ends it first; there is nothing to catch.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::time::Instant;

use bench_kit::gpt::GptShape;
use burn::backend::Autodiff;
use burn::module::AutodiffModule;
use burn::optim::AdamWConfig;
use burn::tensor::backend::AutodiffBackend;
use burn_checkpoint_core::memory::panic_message;
use clap::{Parser, ValueEnum};
use gpt::Gpt;

mod common;

/// Doubles a GPT's batch until a step fails to allocate; says how it failed.
#[derive(Parser, Clone, Debug)]
struct Args {
    #[command(flatten)]
    shape: GptShape,
    /// The runtime.
    #[arg(long, value_enum, default_value_t = Runtime::Wgpu)]
    backend: Runtime,
    /// The batch past which it stops doubling (no failure up to it is reported as such).
    #[arg(long, default_value_t = 1024)]
    largest: usize,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
enum Runtime {
    /// `burn::backend::Wgpu` (fused, autotuned).
    Wgpu,
    /// `burn::backend::Cuda` (fused, autotuned).
    #[cfg(feature = "cuda")]
    Cuda,
}

/// Each panic's thread and first line, as the hook saw it (the default hook prints it too).
static PANICS: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());

fn record_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current()
            .name()
            .unwrap_or("(unnamed)")
            .to_string();
        let message = match panic_message(info.payload()) {
            message if message.is_empty() => "(not a string)".to_string(),
            message => message,
        };
        let first = message.lines().next().unwrap_or("").to_string();
        let location = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        if let Ok(mut panics) = PANICS.lock() {
            panics.push((thread, format!("{first}{location}")));
        }
        default(info);
    }));
}

/// One training step at `batch`; the loss read back (so the step has run on the device).
fn step<B: AutodiffBackend>(shape: &GptShape, batch: usize) -> f32
where
    Gpt<B>: AutodiffModule<B>,
{
    let device = B::Device::default();
    let shape = GptShape { batch, ..*shape };
    let model = common::config(&shape).init::<B>(&device);
    let mut optimizer = AdamWConfig::new().init();
    let tokens = common::tokens::<B>(&shape, &device);
    let (_, loss) = model.train_step(&mut optimizer, tokens, 1e-3, || ());
    loss.into_scalar().to_string().parse().expect("a float")
}

/// Doubles the batch from 1 until a step panics (or `largest` passes); then one step at batch 1.
fn doubling<B: AutodiffBackend>(args: &Args, on: &str)
where
    Gpt<B>: AutodiffModule<B>,
{
    let mut batch = 1;
    while batch <= args.largest {
        let before = PANICS.lock().map(|p| p.len()).unwrap_or(0);
        // Said before the step: a step that never ends (a hang, or a cold kernel cache) shows.
        println!("{on}: batch {batch}: stepping");
        let start = Instant::now();
        match catch_unwind(AssertUnwindSafe(|| step::<B>(&args.shape, batch))) {
            Ok(loss) => println!(
                "{on}: batch {batch} trained in {:.1} s (loss {loss:.4})",
                start.elapsed().as_secs_f64()
            ),
            Err(_) => {
                let panics = PANICS
                    .lock()
                    .map(|p| p[before..].to_vec())
                    .unwrap_or_default();
                println!(
                    "{on}: batch {batch} failed after {:.1} s; panics raised: {}",
                    start.elapsed().as_secs_f64(),
                    panics.len()
                );
                for (thread, line) in panics {
                    println!("  on thread {thread:?}: {line}");
                }
                let again = catch_unwind(AssertUnwindSafe(|| step::<B>(&args.shape, 1)));
                match again {
                    Ok(loss) => println!("{on}: afterwards batch 1 trains again (loss {loss:.4})"),
                    Err(_) => {
                        println!("{on}: afterwards batch 1 fails too: the device is unusable")
                    }
                }
                return;
            }
        }
        batch *= 2;
    }
    println!("{on}: no failure up to batch {}", args.largest);
}

fn run<B: AutodiffBackend>(args: &Args)
where
    Gpt<B>: AutodiffModule<B>,
{
    doubling::<B>(args, "main thread");
    let spawned = args.clone();
    let joined = std::thread::Builder::new()
        .name("worker".into())
        .spawn(move || doubling::<B>(&spawned, "spawned thread"))
        .expect("a thread")
        .join();
    println!(
        "spawned thread joined: {}",
        if joined.is_ok() { "ok" } else { "it panicked" }
    );
    println!("the process lived on");
}

fn main() {
    let args: Args = GptShape::parse_with(common::DEVICE_SHAPE);
    record_panics();
    match args.backend {
        Runtime::Wgpu => run::<Autodiff<burn::backend::Wgpu>>(&args),
        #[cfg(feature = "cuda")]
        Runtime::Cuda => run::<Autodiff<burn::backend::Cuda>>(&args),
    }
}
