//! The trainer for Burn 0.22 users: `cargo run --release --manifest-path apps/train22/Cargo.toml
//! -- --checkpoint plain,balanced,regions` (`--help` for the rest).

use std::process::ExitCode;

use app_kit::out_of_memory::exit_status;
use burn_checkpoint_22::memory::CountingAllocator;
use burn_checkpoint_22_train::run::run;
use burn_checkpoint_22_train::stop::{Interrupted, StopRequest};
use burn_checkpoint_22_train::trainer::Options;
use clap::Parser;

// The host meter reads this allocator's counts.
#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn main() -> ExitCode {
    let options = Options::parse();
    let meter = options.devices.meter();
    let stop = match StopRequest::new().on_signals() {
        Ok(stop) => stop,
        Err(error) => {
            eprintln!("error: cannot watch for SIGINT and SIGTERM: {error:#}");
            return ExitCode::FAILURE;
        }
    };
    match run(&options, &meter, &stop, &mut std::io::stdout()) {
        Ok(_) => ExitCode::SUCCESS,
        Err(error) => {
            // A stop asked for (--stop-after) is not an error; a signal's or the dashboard's is
            // said with the status a shell expects.
            if let Some(stopped) = error.downcast_ref::<Interrupted>() {
                match stopped.status {
                    0 => eprintln!("{stopped}"),
                    _ => eprintln!("error: {stopped}"),
                }
                return ExitCode::from(stopped.status);
            }
            // One message, its causes after colons: these are the user's errors, not the
            // program's.
            eprintln!("error: {error:#}");
            // 3 where a step ran out of device memory, 1 for the others.
            ExitCode::from(exit_status(&error))
        }
    }
}
