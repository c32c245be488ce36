//! Device memory on a cubecl runtime (Burn's wgpu: Mesa's lavapipe in CI, the memory manager,
//! autotune and fusion code that CUDA runs too): a small GPT's training step with a region per
//! block against plain autodiff, **one process each** (pools keep what earlier steps reserved),
//! read with the library's device meter, without and with fusion and under two pool layouts.
//!
//! What it checks: regions hold and peak less than plain by the device's own count, and reserve
//! less; the meter reads the same under fused (lazy) execution as without (it runs the fusion
//! queue before reading); and the figures a report's planner budgets on a device (reserved
//! bytes) are there. A `harness = false` test: its `main` is the parent, and runs itself again
//! for each child.

use bench_kit::child;
use bench_kit::device::{StepFigures, measure_steps};
use bench_kit::wgpu::{Pools, Unfused, set_pools};
use burn::backend::Autodiff;
use burn::backend::wgpu::WgpuDevice;
use burn::module::AutodiffModule;
use burn::optim::AdamWConfig;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Distribution, Int, Tensor};
use burn_checkpoint::Checkpointed;
use burn_checkpoint::memory::{Meter, mib};
use gpt::{Cut, Gpt, GptConfig};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Task {
    fused: bool,
    exclusive: bool,
    block: bool,
}

fn measure<B: AutodiffBackend>(cut: Cut, meter: &Meter) -> StepFigures
where
    Gpt<B>: AutodiffModule<B>,
{
    let device = B::Device::default();
    B::seed(&device, 1);
    let (vocab, seq, batch) = (128, 64, 8);
    let mut model = Some(
        GptConfig::new(vocab, 128, 2, 4, seq)
            .with_cut(cut)
            .init::<B>(&device),
    );
    let mut optimizer = AdamWConfig::new().init();
    let tokens = Tensor::<B, 2, Int>::random(
        [batch, seq + 1],
        Distribution::Uniform(0.0, vocab as f64),
        &device,
    );
    measure_steps(meter, 1, 2, |measure| {
        let mut held = 0;
        let (next, _) =
            model
                .take()
                .expect("a model")
                .train_step(&mut optimizer, tokens.clone(), 1e-3, || {
                    held = measure.now()
                });
        model = Some(next);
        held
    })
}

fn child_figures(task: Task) -> StepFigures {
    let device = WgpuDevice::default();
    if task.exclusive {
        set_pools(Pools::Exclusive, &device);
    }
    let meter = Meter::Wgpu(device);
    let cut = if task.block { Cut::Block } else { Cut::None };
    match (task.fused, task.block) {
        (false, false) => measure::<Autodiff<Unfused>>(cut, &meter),
        (false, true) => measure::<Checkpointed<Autodiff<Unfused>>>(cut, &meter),
        (true, false) => measure::<Autodiff<burn::backend::Wgpu>>(cut, &meter),
        (true, true) => measure::<Checkpointed<Autodiff<burn::backend::Wgpu>>>(cut, &meter),
    }
}

fn run(task: Task) -> StepFigures {
    let json = serde_json::to_string(&task).expect("a task serialises");
    let figures = child::run(&json, &[]).unwrap_or_else(|error| panic!("{error}"));
    let f: &StepFigures = &figures;
    println!(
        "| {} | {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
        if task.fused { "fused" } else { "unfused" },
        if task.exclusive {
            "exclusive"
        } else {
            "default"
        },
        if task.block { "per block" } else { "plain" },
        mib(f.base as usize),
        mib(f.held as usize),
        mib(f.in_use_peak as usize),
        mib(f.reserved_peak as usize),
        f.reserved_peak as f64 / f.live_peak() as f64,
    );
    figures
}

fn main() {
    if let Some(task) = child::task() {
        let task: Task = serde_json::from_str(&task).expect("a child's task");
        child::report(&child_figures(task));
        return;
    }
    let Some(_wgpu) = bench_kit::wgpu::claim() else {
        return;
    };
    println!(
        "| backend | pools | method | in use at start MiB | held MiB | in-use peak MiB | reserved peak MiB | reserved ÷ live |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut held = Vec::new();
    for fused in [false, true] {
        for exclusive in [false, true] {
            let plain = run(Task {
                fused,
                exclusive,
                block: false,
            });
            let block = run(Task {
                fused,
                exclusive,
                block: true,
            });
            let what = format!("fused {fused}, exclusive pools {exclusive}");
            assert!(
                block.held * 4 < plain.held,
                "{what}: per-block regions hold {} bytes between forward and backward, plain {}",
                block.held,
                plain.held
            );
            assert!(
                block.in_use_peak * 4 < plain.in_use_peak * 3,
                "{what}: per-block peak {} bytes in use, plain {}",
                block.in_use_peak,
                plain.in_use_peak
            );
            assert!(
                block.reserved_peak < plain.reserved_peak,
                "{what}: per-block regions reserved {} bytes, plain {}",
                block.reserved_peak,
                plain.reserved_peak
            );
            for figures in [&plain, &block] {
                assert!(
                    figures.reserved_peak >= figures.live_peak(),
                    "{what}: reserved {} < live {}: the meter misreads",
                    figures.reserved_peak,
                    figures.live_peak()
                );
            }
            if !exclusive {
                held.push((fused, plain.held, block.held));
            }
        }
    }
    // Fusion may keep a little more or less (its kernels' outputs are not the unfused ops'); a
    // meter that read before the fusion queue ran would see next to nothing.
    let [(_, plain, block), (_, plain_fused, block_fused)] = held[..] else {
        unreachable!()
    };
    for (what, unfused, fused) in [
        ("plain", plain, plain_fused),
        ("per block", block, block_fused),
    ] {
        assert!(
            fused * 2 > unfused && fused < unfused * 3 / 2,
            "{what}: held under fusion {fused} bytes, without {unfused}: the meter misreads a \
             fused step"
        );
    }
}
