//! The example trainer: DenseNet-BC on Fashion-MNIST, CIFAR-10 or synthetic images, with or
//! without gradient checkpointing regions. `train --help` lists every flag; docs/trainer.md
//! explains them.
//!
//! ```text
//! cargo run --release -p densenet-bc --bin train -- --depth 22 --growth-rate 12 --epochs 2 \
//!     --limit 300
//! ```

use std::io::Write;
use std::process::ExitCode;

use burn_checkpoint::memory::CountingAllocator;
use clap::Parser;
use densenet_bc::train::{TrainOptions, exit_status, run};

// The peak memory of a training step is read from this allocator's counts.
#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn main() -> ExitCode {
    let options = TrainOptions::parse();
    match run(&options, &mut std::io::stdout()) {
        Ok(_) => ExitCode::SUCCESS,
        Err(error) => {
            // One message, its causes after colons; no backtrace, whatever RUST_BACKTRACE says:
            // these are the user's errors, not the program's.
            let _ = writeln!(std::io::stderr(), "error: {error:#}");
            // 3 where a step ran out of device memory, 1 for the others.
            ExitCode::from(exit_status(&error))
        }
    }
}
