//! The trainer for Burn 0.22 users: `cargo run --release --manifest-path apps/train22/Cargo.toml
//! -- --checkpoint plain,balanced,regions` (`--help` for the rest).

use app_kit::table::markdown;
use burn_checkpoint_22::memory::{CountingAllocator, MemoryMeter, Meter};
use burn_checkpoint_22_train::trainer::Options;
use clap::Parser;

// The host meter reads this allocator's counts.
#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn main() -> anyhow::Result<()> {
    let options = Options::parse();
    let meter = Meter::Host;
    let trained = options.train_all(&meter)?;
    let rows: Vec<_> = trained.into_iter().map(|t| t.row).collect();
    println!("\n{}", markdown(&rows));
    println!(
        "memory: a training step's peak above its start (forward, loss, backward), {}; time per \
         step: the median over the steps after the first",
        meter.describe()
    );
    if let Some(path) = &options.json {
        let json = serde_json::to_vec_pretty(&rows)?;
        std::fs::write(path, json)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    }
    Ok(())
}
