//! The budget planner: "fit this step in N bytes".
//!
//! A [`Profile`] measures a training step once per [`Treatment`](crate::Treatment), every
//! top-level region run that way; [`Profile::plan`] chooses a treatment per region instance so
//! that the step's peak fits a byte budget at the least predicted step time (the solver,
//! `solver.rs`); [`Profile::fit`] checks the choice on real steps; a [`Plan`] applies it to later
//! steps without code changes ([`Plan::run`]), and is saved and loaded as JSON. A step's
//! regions sit on a [`Base`] (plain autodiff or Burn's Balanced): profiled on each (or on other
//! placements of the regions), [`Candidates`] holds the profiles with their steps and says whose
//! plan for a budget is fastest.
//!
//! The region machinery of each Burn crate asks [`planned`](crate::engine::planned) how a
//! top-level region runs.

mod base;
mod candidates;
mod fit;
pub(crate) mod plan;
mod profile;
mod solver;

pub use base::Base;
pub use candidates::{Candidate, Candidates};
pub use fit::{FitError, Fitted};
pub use plan::Plan;
pub use profile::{Profile, ProfileError, Step, TreatedStep};
pub use solver::PlanError;
