//! One measurement per process. A device's memory manager keeps the pages that earlier steps
//! reserved, so bytes reserved compare only between processes of their own: the parent runs its
//! own executable again, naming the child's task in an environment variable, and the child prints
//! its figures as one JSON line.
//!
//! ```no_run
//! // In a benchmark's or a `harness = false` test's `main`:
//! if let Some(task) = bench_kit::child::task() {
//!     let figures: u64 = task.len() as u64; // measure what `task` names
//!     bench_kit::child::report(&figures);
//!     return;
//! }
//! let figures: u64 = bench_kit::child::run("plain", &[]).expect("the child measures");
//! ```

use std::process::Command;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The environment variable naming a child's task.
const TASK: &str = "BENCH_KIT_CHILD_TASK";
/// What starts the line of a child's figures on its standard output.
const MARK: &str = "bench-kit child figures: ";

/// The task this process was started for, when it is a child of [`run`].
pub fn task() -> Option<String> {
    std::env::var(TASK).ok()
}

/// Prints a child's figures for its parent.
pub fn report<T: Serialize>(figures: &T) {
    let json = serde_json::to_string(figures).expect("figures serialise");
    println!("{MARK}{json}");
}

/// Runs this executable again with `args`, as a child for `task`, and reads the figures it
/// [`report`]s; an error with the child's status and the end of its standard error if it gave
/// none.
pub fn run<T: DeserializeOwned>(task: &str, args: &[String]) -> Result<T, String> {
    let exe = std::env::current_exe().map_err(|e| format!("this executable's path: {e}"))?;
    let output = Command::new(&exe)
        .args(args)
        .env(TASK, task)
        .output()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    match stdout.lines().find_map(|line| line.strip_prefix(MARK)) {
        Some(json) => serde_json::from_str(json)
            .map_err(|e| format!("child `{task}`: its figures do not parse ({e}): {json}")),
        None => {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(30).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            Err(format!(
                "child `{task}` gave no figures ({}); the end of its stderr:\n{}",
                output.status,
                tail.join("\n")
            ))
        }
    }
}
