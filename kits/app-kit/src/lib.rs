//! What the benchmarks of both burn-checkpoint crates share, with no Burn in it (as
//! `burn-checkpoint-core` is to the libraries): [`figure`] writes a chart as SVG and PNG,
//! [`output`] a table and its rows as JSON, [`table`] the trainers' table of methods and
//! [`schedule`] their learning rates, [`args`] their argument parsers, [`method`] the names
//! of the ways to train (one table for every app), [`gpt`] is the GPT's shape every GPT benchmark
//! takes, [`sweep`] runs the budget planner over a range of budgets against hand-made cuts,
//! every step measured with the [`Meter`](burn_checkpoint_core::memory::Meter) it is given
//! (host or device), and [`agreement`] says how closely a step with regions must agree with plain
//! autodiff's on a backend (the gradient tests of both crates), and [`vulkan`] whether their wgpu
//! tests have an adapter.
//!
//! The Burn 0.21 applications reach it through `bench-kit`, which re-exports it; the Burn 0.22
//! crate's benchmarks (`compare`, `budget`) and its trainer use it directly.

pub mod agreement;
pub mod args;
pub mod densenet;
pub mod figure;
pub mod gpt;
pub mod method;
pub mod output;
pub mod schedule;
pub mod sweep;
pub mod table;
pub mod tape;
pub mod vulkan;
