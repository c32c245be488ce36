//! What the benchmarks, trainers and tests of both burn-checkpoint crates share, with no Burn in it
//! (as `burn-checkpoint-core` is to the libraries): [`figure`] writes a chart as SVG and PNG,
//! [`output`] a table and its rows as JSON, [`table`] the trainers' table of methods and
//! [`schedule`] their learning rates, [`args`] their argument parsers, [`method`] the names of the
//! ways to train (one table for every app), [`devices`] the `--devices` both trainers take, [`gpt`]
//! and [`densenet`] the models' shapes as flags, [`tape`] the autodiff backend a method trains on,
//! [`sweep`] runs the budget planner over a range of budgets against hand-made cuts, every step
//! measured with the [`Meter`](burn_checkpoint_core::memory::Meter) it is given (host or device),
//! [`agreement`] says how closely a step with regions must agree with plain autodiff's on a backend
//! (the gradient tests of both crates), [`vulkan`] whether their wgpu tests have an adapter, and
//! the device for one test at a time, [`repeats`] how often a test repeats a run that could race,
//! [`out_of_memory`] how both trainers end a run that ran out of device memory, [`save`] how they
//! save a run to resume it, [`timeline`] a step's memory timeline as a picture (several runs
//! overlaid) and a file, with the trainers' `--memory-timeline` flags, [`conformance`] the words
//! of both crates' conformance matrices, and [`generated`] a page's section that a test measures
//! and writes (those matrices' tables).
//!
//! The Burn 0.21 applications (`densenet-bc`, `gpt`) and their test support (`bench-kit`, which
//! re-exports some of it) use it directly, as the Burn 0.22 library's wgpu tests, the networks'
//! benchmarks (`kits/models22`) and `train22` do.

pub mod agreement;
pub mod args;
pub mod conformance;
pub mod densenet;
pub mod devices;
pub mod figure;
pub mod generated;
pub mod gpt;
pub mod method;
pub mod out_of_memory;
pub mod output;
pub mod save;
pub mod schedule;
pub mod sweep;
pub mod table;
pub mod tape;
pub mod timeline;
pub mod vulkan;

/// How many times a test repeats a run that could race: `REPEATS` when set (`scripts/soak`
/// sets it high), else `few`, the count CI and a contributor's `cargo test` run.
///
/// ```
/// // SAFETY: no other thread of this doctest reads the environment.
/// unsafe { std::env::remove_var("REPEATS") };
/// assert_eq!(app_kit::repeats(2), 2);
/// ```
pub fn repeats(few: usize) -> usize {
    std::env::var("REPEATS")
        .ok()
        .and_then(|count| count.parse().ok())
        .unwrap_or(few)
}
