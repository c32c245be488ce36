//! What the benchmarks and tests of burn-checkpoint's applications share: [`figure`] writes a
//! chart as SVG and PNG, [`output`] the table and its rows as JSON, [`sweep`] runs the budget
//! planner over a range of budgets against hand-made cuts, [`agreement`] says how closely a
//! step with regions must agree with plain autodiff's, [`gpt`] and [`densenet`] give the models'
//! sizes as flags, [`tape`] names a method's autodiff backend and [`repeats`] says how often a
//! test repeats a run that could race (those eight are `app-kit`'s, shared with the Burn 0.22
//! crates), [`wgpu`] is Burn's wgpu backend as the tests run it, [`device`] measures a step's
//! device memory and [`child`] runs one measurement per process, and [`backend_tests!`] writes
//! one `#[test]` per backend.

pub use app_kit::{agreement, densenet, figure, gpt, output, repeats, sweep, tape};

mod backends;
pub mod child;
pub mod device;
pub mod wgpu;
