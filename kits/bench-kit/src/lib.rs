//! What the benchmarks and tests of burn-checkpoint's applications share: [`figure`] writes a
//! chart as SVG and PNG, [`output`] the table and its rows as JSON, [`sweep`] runs the budget
//! planner over a range of budgets against hand-made cuts, [`agreement`] says how closely a
//! step with regions must agree with plain autodiff's, [`gpt`] and [`densenet`] give the models'
//! sizes as flags and [`tape`] names a method's autodiff backend (those seven are
//! `app-kit`'s, shared with the Burn 0.22 crate), [`wgpu`] is Burn's wgpu backend as the tests
//! run it, [`device`] measures a step's device memory and [`child`] runs one measurement per
//! process, [`repeats`] says how often a test repeats a run that could race, and
//! [`backend_tests!`] writes one `#[test]` per backend.

pub use app_kit::{agreement, densenet, figure, gpt, output, sweep, tape};

mod backends;
pub mod child;
pub mod device;
pub mod wgpu;

/// How many times a test repeats a run that could race: `REPEATS` when set (`scripts/soak`
/// sets it high), else `few`, the count CI and a contributor's `cargo test` run.
///
/// ```
/// // SAFETY: no other thread of this doctest reads the environment.
/// unsafe { std::env::remove_var("REPEATS") };
/// assert_eq!(bench_kit::repeats(2), 2);
/// ```
pub fn repeats(few: usize) -> usize {
    std::env::var("REPEATS")
        .ok()
        .and_then(|count| count.parse().ok())
        .unwrap_or(few)
}
