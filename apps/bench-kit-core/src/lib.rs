//! What the benchmarks of both burn-checkpoint crates share, with no Burn in it (as
//! `burn-checkpoint-core` is to the libraries): [`figure`] writes a chart as SVG and PNG,
//! [`output`] a table and its rows as JSON, [`sweep`] runs the budget planner over a range of
//! budgets against hand-made cuts, with any [`MemoryMeter`](burn_checkpoint_core::memory::MemoryMeter).
//!
//! The Burn 0.21 applications reach it through `bench-kit`, which re-exports it; the Burn 0.22
//! crate's `compare` benchmark uses it directly.

pub mod figure;
pub mod output;
pub mod sweep;
