//! The upstream report's reproduction, Burn alone: a backward's cost grows with the number of
//! autodiff nodes alive anywhere in the process, because every `backward()` ends by cloning and
//! walking burn-autodiff's map of every live node (`GraphCleaner::cleanup_orphaned_entries`,
//! burn-autodiff 0.22.1 `src/runtime/graph.rs:131-172`). A checkpoint region's recompute is a
//! backward inside the outer one, so a graph of N regions pays N such walks.
//!
//! `cargo run --release --manifest-path burn22/Cargo.toml --example sweep_repro`: the time of one
//! small backward (`(x * 2).sum()` over 16 values) while a chain of N other ops waits for its own
//! backward, for N from 0 to 100 000.

use std::time::Instant;

use burn::tensor::{Device, Tensor};

fn main() {
    let device = Device::flex().autodiff();
    println!("| Live nodes elsewhere | One small backward |");
    println!("|---|---|");
    for live in [0, 1_000, 10_000, 100_000] {
        // A graph waiting for its backward, as a model's forward is while a region recomputes.
        let waiting = Tensor::<1>::ones([16], &device).require_grad();
        let mut chain = waiting.clone();
        for _ in 0..live {
            chain = chain * 1.0001;
        }
        let repeats = 200;
        let clock = Instant::now();
        for _ in 0..repeats {
            let x = Tensor::<1>::ones([16], &device).require_grad();
            let grads = (x.clone() * 2.0).sum().backward();
            assert!(x.grad(&grads).is_some());
        }
        let each = clock.elapsed().as_secs_f64() * 1e6 / f64::from(repeats);
        println!("| {live} | {each:.1} µs |");
        // The waiting graph's own backward, as the step's would.
        assert!(waiting.grad(&chain.sum().backward()).is_some());
    }
}
