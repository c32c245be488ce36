//! The example trainer: DenseNet-BC on Fashion-MNIST, CIFAR-10 or synthetic images, with or
//! without gradient checkpointing regions. `train --help` lists every flag; docs/trainer.md
//! explains them.
//!
//! ```text
//! cargo run --release -p densenet-bc --bin train -- --depth 22 --growth-rate 12 --epochs 2 --limit 300
//! ```

use anyhow::Context;
use burn_checkpoint::memory::CountingAllocator;
use clap::Parser;
use densenet_bc::train::TrainOptions;
use densenet_bc::train::run::{check_report_path, run};

// The peak memory of a training step is read from this allocator's counts.
#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn main() -> anyhow::Result<()> {
    let options = TrainOptions::parse();
    if let Some(path) = &options.report {
        check_report_path(path)?;
    }
    let report = run(&options)?;
    println!();
    print!("{}", report.markdown());
    println!(
        "\nwall time {:.1} s; memory: {}; time per step: median of {} steps",
        report.wall_seconds, report.memory_meter, report.steps_measured
    );
    if let Some(path) = &options.report {
        report.write_json(path).with_context(|| {
            format!(
                "the run finished, but its report was not written to {}",
                path.display()
            )
        })?;
        println!("report written to {}", path.display());
    }
    Ok(())
}
