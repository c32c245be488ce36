//! What the benchmarks and tests of burn-checkpoint's applications share: [`figure`] writes a
//! chart as SVG and PNG, [`output`] the table and its rows as JSON, [`sweep`] runs the budget
//! planner over a range of budgets against hand-made cuts, [`agreement`] says how closely a
//! step with regions must agree with plain autodiff's, [`gpt`] and [`densenet`] give the models'
//! sizes as flags and [`tape`] names a method's autodiff backend (those seven are
//! `bench-kit-core`'s, shared with the Burn 0.22 crate), [`wgpu`] is Burn's wgpu backend as the tests
//! run it, [`device`] measures a step's device memory and [`child`] runs one measurement per
//! process. Its own benchmark, `cpu_backend`, measures NdArray against burn-flex
//! (`docs/cpu-backend.md`).

pub use bench_kit_core::{agreement, densenet, figure, gpt, output, sweep, tape};

mod backends;
pub mod child;
pub mod device;
pub mod wgpu;
