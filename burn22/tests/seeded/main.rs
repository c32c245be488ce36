//! The tests that compare what the generator draws (the same run with and without regions,
//! dropout, random region shapes), one binary of their own: Burn's CPU generator is one per
//! process, and each of these takes `common::generator()` for its whole body.

#[path = "../common/mod.rs"]
mod common;

mod every_input;
mod policies;
mod randomness;
mod region_shapes;
mod same_run;
