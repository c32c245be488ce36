//! What the benchmarks of burn-checkpoint's applications share: [`figure`] writes a chart as SVG
//! and PNG, [`sweep`] runs the budget planner over a range of budgets against hand-made cuts.
//! Its own benchmark, `cpu_backend`, measures NdArray against burn-flex (`docs/cpu-backend.md`).

pub mod figure;
pub mod sweep;
