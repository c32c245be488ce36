//! The trainer for Burn 0.22 users: `cargo run --release --manifest-path apps/train22/Cargo.toml
//! -- --checkpoint plain,balanced,regions` (`--help` for the rest).

use std::process::ExitCode;

use app_kit::out_of_memory::exit_status;
use burn_checkpoint_22::memory::CountingAllocator;
use burn_checkpoint_22_train::run::run;
use burn_checkpoint_22_train::trainer::Options;
use clap::Parser;

// The host meter reads this allocator's counts.
#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn main() -> ExitCode {
    let options = Options::parse();
    let meter = options.devices.meter();
    match run(&options, &meter, &mut std::io::stdout()) {
        Ok(_) => ExitCode::SUCCESS,
        Err(error) => {
            // One message, its causes after colons: these are the user's errors, not the
            // program's.
            eprintln!("error: {error:#}");
            // 3 where a step ran out of device memory, 1 for the others.
            ExitCode::from(exit_status(&error))
        }
    }
}
