//! Where the bytes at a training step's peak come from: runs one DenseNet-BC training step
//! (`Checkpointed<Autodiff<Flex, BalancedCheckpointing>>`) under dhat's heap profiler, writes
//! `dhat-heap.json` (dhat's viewer reads it) and prints the allocation sites live at the peak,
//! largest first, each named by its innermost Burn / burn-checkpoint frames.
//!
//! ```text
//! cargo run --release -p densenet-bc --example peak_sites -- \
//!     <none|bottleneck|layer|block> [depth] [batch]
//! cargo run --release -p densenet-bc --example peak_sites -- layer 100 16
//! ```
//!
//! The cut `none` is Burn's `BalancedCheckpointing` alone. Allocations made before the profiled
//! step (weights, inputs) are not counted.

use burn::backend::Autodiff;
use burn::backend::autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::{GradientsParams, Optimizer, SgdConfig};
use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, Int, Tensor};
use burn_checkpoint::Checkpointed;
use burn_checkpoint::counters::Counters;
use burn_checkpoint_core::memory::mib;
use densenet_bc::{Cut, DenseNetConfig};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

#[cfg(feature = "flex")]
type I = burn::backend::Flex;
#[cfg(not(feature = "flex"))]
type I = burn::backend::NdArray;
type B = Checkpointed<Autodiff<I, BalancedCheckpointing>>;

/// Profiles one DenseNet-BC training step and prints the allocation sites live at its peak.
#[derive(clap::Parser)]
struct Args {
    /// Which regions the network has (`none`: Burn's BalancedCheckpointing alone).
    #[arg(value_enum, default_value_t = CutArg::Layer)]
    cut: CutArg,
    /// DenseNet-BC depth.
    #[arg(default_value_t = 40)]
    depth: usize,
    /// Images in the step.
    #[arg(default_value_t = 16)]
    batch: usize,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum CutArg {
    None,
    Bottleneck,
    Layer,
    Block,
}

fn main() {
    let Args { cut, depth, batch } = clap::Parser::parse();
    let cut = match cut {
        CutArg::None => Cut::None,
        CutArg::Bottleneck => Cut::Bottleneck,
        CutArg::Layer => Cut::Layer,
        CutArg::Block => Cut::Block,
    };
    let device = Default::default();
    I::seed(&device, 1);
    let model = DenseNetConfig::new(depth).with_cut(cut).init::<B>(&device);
    let images = Tensor::<B, 4>::random([batch, 3, 32, 32], Distribution::Default, &device);
    let labels = Tensor::<B, 1, Int>::random([batch], Distribution::Uniform(0.0, 10.0), &device);
    let mut optimizer = SgdConfig::new().init::<B, _>();
    // A first step initialises the lazy parameters outside the profile.
    let step = |model, optimizer: &mut _| {
        let loss = CrossEntropyLossConfig::new().init(&device).forward(
            densenet_bc::DenseNet::forward(&model, images.clone()),
            labels.clone(),
        );
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        Optimizer::step(optimizer, 0.1, model, grads)
    };
    let model = step(model, &mut optimizer);
    Counters::reset();
    let profiler = dhat::Profiler::new_heap();
    let _model = step(model, &mut optimizer);
    drop(profiler);
    summarise("dhat-heap.json", 20);
    // A region op recomputed more often than the model has it would show up here.
    println!(
        "region ops recomputed during the step: {:?}",
        Counters::now().recomputes
    );
}

/// Prints the `top` allocation sites by bytes live at the global peak (dhat's `gb`).
fn summarise(path: &str, top: usize) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let profile: serde_json::Value = serde_json::from_str(&text).expect("dhat writes JSON");
    let frames = profile["ftbl"].as_array().expect("a frame table");
    let mut sites: Vec<(u64, u64, String)> = profile["pps"]
        .as_array()
        .expect("program points")
        .iter()
        .filter_map(|pp| {
            let bytes = pp["gb"].as_u64()?;
            let blocks = pp["gbk"].as_u64()?;
            (bytes > 0).then(|| {
                let names: Vec<String> = pp["fs"]
                    .as_array()?
                    .iter()
                    .filter_map(|f| frames[f.as_u64()? as usize].as_str())
                    .map(frame_name)
                    .filter(|f| f.contains("burn") || f.contains("densenet"))
                    .take(4)
                    .collect();
                Some((bytes, blocks, names.join(" <- ")))
            })?
        })
        .collect();
    sites.sort_by_key(|site| std::cmp::Reverse(site.0));
    let total: u64 = sites.iter().map(|s| s.0).sum();
    println!("live at the peak: {:.1} MiB", mib(total as usize));
    for (bytes, blocks, names) in sites.iter().take(top) {
        println!(
            "{:8.2} MiB {blocks:5} blocks  {names}",
            mib(*bytes as usize)
        );
    }
}

/// `0x1234: path::to::fn (file:line)` → `path::to::fn`, shortened.
fn frame_name(frame: &str) -> String {
    let name = frame.split_once(": ").map_or(frame, |(_, name)| name);
    let name = name.split(" (").next().unwrap_or(name);
    name.chars().take(110).collect()
}
