//! The meeting point of a trainer run over several machines: burn-collective's orchestrator on
//! `--port` and burn-checkpoint's rendezvous on the next port, until interrupted. Start it once,
//! then one `train --nodes N --node-rank R --orchestrator HOST:PORT …` per machine
//! (`scripts/multinode` does both on one machine).
//!
//! ```text
//! cargo run --release -p densenet-bc --bin orchestrator -- --port 3000
//! ```

use std::process::ExitCode;

use clap::Parser;

/// Serves the nodes of a multi-node `train` run until interrupted (Ctrl-C or SIGTERM).
#[derive(Parser, Debug)]
#[command(name = "orchestrator", version)]
struct Options {
    /// burn-collective's orchestrator listens here; the rendezvous on PORT + 1. Both on every
    /// interface, without authentication: keep them on the nodes' private network.
    #[arg(long, default_value_t = 3000)]
    port: u16,
}

fn main() -> ExitCode {
    let options = Options::parse();
    match burn_checkpoint_parallel::run_orchestrator(options.port) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!(
                "error: cannot serve on ports {} and {}: {error}",
                options.port,
                options.port.saturating_add(1)
            );
            ExitCode::FAILURE
        }
    }
}
