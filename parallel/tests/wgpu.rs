//! `DataParallel` on a cubecl runtime: wgpu (Mesa's lavapipe in CI, the same cubecl machinery as
//! CUDA), two workers on one device listed twice. Every run of the same training must give the
//! same parameters, bit for bit, and stay within float reassociation of one worker on the whole
//! batch (plain `Autodiff<Wgpu>`).
//!
//! Two runs differed by whole updates before the replicas got buffers of their own: they started
//! from clones of one model, so they shared every parameter's buffer, and on cubecl one worker
//! could update a shared buffer in place while the other's read of it was still queued on its own
//! stream (parallel/src/owned.rs). The runs are spread over processes (this executable again,
//! `bench_kit::child`), each with an empty autotune cache of its own: cubecl tunes a kernel the
//! first time a process meets it, and two workers on one device meeting it together is the other
//! way runs could differ (`DataParallel`'s `run_user_code`). A `harness = false` test: `main` is
//! the parent, or a child named by its task.

mod common;

use burn::backend::wgpu::WgpuDevice;
use burn::backend::{Autodiff, Wgpu};
use burn::optim::momentum::MomentumConfig;
use burn::optim::{GradientsParams, Optimizer, SgdConfig};
use burn::tensor::backend::AutodiffBackend;
use burn_checkpoint::Checkpointed;
use burn_checkpoint_parallel::{AllReduceStrategy, DataParallel, DataParallelConfig};
use common::cubecl::{Deep, Spread, TOLERANCE, deep_mse as mse, own_autotune_cache};
use common::mlp::{LR, STEPS, batch, split, tensors};

fn sgd<B: AutodiffBackend>() -> impl Optimizer<Deep<B>, B> {
    SgdConfig::new()
        .with_momentum(Some(MomentumConfig::new()))
        .init()
}

/// What one run trains.
#[derive(Debug, Clone, Copy)]
struct Variant {
    fused: bool,
    regions: bool,
    strategy: AllReduceStrategy,
}

impl Variant {
    fn task(&self) -> String {
        format!(
            "{}-{}-{}",
            if self.fused { "fused" } else { "unfused" },
            if self.regions { "regions" } else { "plain" },
            match self.strategy {
                AllReduceStrategy::Centralized => "centralized",
                AllReduceStrategy::Tree(_) => "tree",
                AllReduceStrategy::Ring => "ring",
            }
        )
    }

    fn parse(task: &str) -> Option<Variant> {
        let mut parts = task.split('-');
        let fused = parts.next()? == "fused";
        let regions = parts.next()? == "regions";
        let strategy = match parts.next()? {
            "centralized" => AllReduceStrategy::Centralized,
            "tree" => AllReduceStrategy::Tree(2),
            "ring" => AllReduceStrategy::Ring,
            _ => return None,
        };
        Some(Variant {
            fused,
            regions,
            strategy,
        })
    }
}

/// Two workers on the one wgpu device, `STEPS` SGD steps with momentum: the trained parameters.
fn data_parallel<B: AutodiffBackend<Device = WgpuDevice>>(variant: Variant) -> Vec<Vec<f32>> {
    let devices = vec![WgpuDevice::default(); 2];
    let model = Deep::<B>::new(&devices[0], variant.regions);
    let config = DataParallelConfig::new().with_strategy(variant.strategy);
    let mut dp = DataParallel::with_config(devices.clone(), model, sgd::<B>(), LR, config)
        .expect("two workers");
    for step in 0..STEPS {
        let shards = split(batch::<B>(step, &devices[0]), &devices);
        dp.step(shards, mse::<B>).expect("a step");
    }
    tensors(&dp.into_model().expect("the model"))
}

/// One worker, plain autodiff, the whole batch: the reference.
fn whole_batch<B: AutodiffBackend<Device = WgpuDevice>>() -> Vec<Vec<f32>> {
    let device = WgpuDevice::default();
    let mut model = Deep::<B>::new(&device, false);
    let mut optimizer = sgd::<B>();
    for step in 0..STEPS {
        let loss = mse(&model, batch::<B>(step, &device));
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optimizer.step(LR, model, grads);
    }
    tensors(&model)
}

type Fused = Autodiff<Wgpu>;
type Unfused = Autodiff<bench_kit::wgpu::Unfused>;

/// Parameters as bits, one `Vec` per tensor.
type Trained = Vec<Vec<u32>>;

/// A child: `task` is `name*runs,name*runs,…`, each training `name` names run `runs` times in
/// this process (the first of the first tunes cubecl's kernels, the later ones find them
/// tuned); each run's parameters as bits. Its autotune cache is a directory of its own, empty
/// (`own_autotune_cache`).
fn child(task: &str) -> Vec<Vec<Trained>> {
    let cache = own_autotune_cache("data-parallel");
    let trained = task
        .split(',')
        .map(|item| {
            let (name, runs) = item.split_once('*').expect("name*runs");
            let runs: usize = runs.parse().expect("a number of runs");
            (0..runs).map(|_| bits(train(name))).collect()
        })
        .collect();
    let _ = std::fs::remove_dir_all(&cache);
    trained
}

/// The training `name` names: a reference or a [`Variant`].
fn train(name: &str) -> Vec<Vec<f32>> {
    match name {
        "reference-fused" => whole_batch::<Fused>(),
        "reference-unfused" => whole_batch::<Unfused>(),
        _ => {
            let variant = Variant::parse(name).expect("a variant");
            match (variant.fused, variant.regions) {
                (true, false) => data_parallel::<Fused>(variant),
                (true, true) => data_parallel::<Checkpointed<Fused>>(variant),
                (false, false) => data_parallel::<Unfused>(variant),
                (false, true) => data_parallel::<Checkpointed<Unfused>>(variant),
            }
        }
    }
}

fn bits(trained: Vec<Vec<f32>>) -> Trained {
    trained
        .into_iter()
        .map(|t| t.into_iter().map(f32::to_bits).collect())
        .collect()
}

fn floats(bits: Trained) -> Vec<Vec<f32>> {
    bits.into_iter()
        .map(|t| t.into_iter().map(f32::from_bits).collect())
        .collect()
}

fn main() {
    if let Some(task) = bench_kit::child::task() {
        bench_kit::child::report(&child(&task));
        return;
    }
    if bench_kit::wgpu::claim().is_none() {
        return;
    }
    // Per backend, `PROCESSES` processes (1 unless set; `scripts/soak` runs 2), each: the
    // reference twice, the variant the race showed most in (plain replicas, centralized)
    // `bench_kit::repeats(3)` times (`scripts/soak`: its count), every other variant twice.
    let setting = |name: &str, default: usize| -> usize {
        std::env::var(name)
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(default)
    };
    let (processes, repeats) = (setting("PROCESSES", 1), bench_kit::repeats(3));
    let mut failures = Vec::new();
    for fused in [true, false] {
        let backend = if fused { "fused" } else { "unfused" };
        let mut variants = Vec::new();
        for regions in [false, true] {
            for strategy in [
                AllReduceStrategy::Centralized,
                AllReduceStrategy::Tree(2),
                AllReduceStrategy::Ring,
            ] {
                let main = !regions && matches!(strategy, AllReduceStrategy::Centralized);
                let variant = Variant {
                    fused,
                    regions,
                    strategy,
                };
                variants.push((variant.task(), if main { repeats } else { 2 }));
            }
        }
        let task: Vec<String> = std::iter::once(format!("reference-{backend}*2"))
            .chain(variants.iter().map(|(name, runs)| format!("{name}*{runs}")))
            .collect();
        // Per process, per item of the task, its runs.
        let per_process: Vec<Vec<Vec<Trained>>> = (0..processes)
            .map(|_| bench_kit::child::run(&task.join(","), &[]).unwrap_or_else(|e| panic!("{e}")))
            .collect();
        let item = |index: usize| -> Vec<Vec<Vec<f32>>> {
            per_process
                .iter()
                .flat_map(|items| items[index].iter().cloned().map(floats))
                .collect()
        };
        let references = item(0);
        let reference = &references[0];
        assert!(
            references.iter().all(|r| r == reference),
            "the one-worker reference, {backend}, differs from run to run"
        );
        for (index, (name, _)) in variants.iter().enumerate() {
            let trained = item(index + 1);
            let spread = Spread::of(&trained, reference);
            let (differing, worst, from_reference) =
                (&spread.differing, spread.worst(), spread.from_reference);
            println!(
                "{name}: {} runs in {processes} processes, {} differ from the first (largest \
                 {worst:e}); at most {from_reference:e} from the whole-batch reference",
                trained.len(),
                differing.len()
            );
            if !differing.is_empty() {
                failures.push(format!(
                    "{name}: {} of {} runs differ",
                    differing.len(),
                    trained.len()
                ));
            }
            if from_reference > TOLERANCE {
                failures.push(format!("{name}: {from_reference:e} from the reference"));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
