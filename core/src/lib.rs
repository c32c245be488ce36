//! What burn-checkpoint's two crates share, with no Burn in it: `burn-checkpoint` (Burn 0.21,
//! a backend decorator) and `burn-checkpoint-22` (Burn 0.22, regions as graph nodes) name
//! their regions, measure a step and plan for a memory budget with the same code and the same
//! JSON.
//!
//! - [`RegionName`], [`RegionId`]: what a region is called, and which call of it;
//! - [`KeptRegions`]: the nested regions a recomputed region keeps, by name;
//! - [`memory`]: the counting allocator, meters, the memory report of a step
//!   ([`StepReport`](memory::StepReport)) and its [`timeline`](memory::timeline);
//! - [`planner`]: a profile of a step under each [`Treatment`], the budget planner, and the
//!   [`Plan`](planner::Plan) that applies its choice to later steps;
//! - [`OpKind`], [`Segments`]: the vocabulary of policies and of `checkpoint_sequential`.
//!
//! Users reach all of it through the Burn crates, which re-export what they need.

#![warn(missing_docs)]

// Bottom-up: each module uses only those listed before it (docs/architecture.md has the table;
// tidy/src/layers.rs checks the order, as it does for both Burn crates).
//
// The vocabulary: names, then the patterns of kept regions (of names), op families, a scan's
// schedules, segments, treatments (of schedules). The comments keep rustfmt from sorting them.
mod names;
// Patterns of names.
mod kept;
mod op_kind;
mod schedule;
mod segments;
// What a plan does with a region (a scan's schedule among them).
mod treatment;
// Measuring a step, then planning from what was measured.
pub mod memory;
pub mod planner;
// What only the Burn crates call, and the lists they re-export.
#[doc(hidden)]
pub mod engine;

pub use kept::KeptRegions;
pub use names::{RegionId, RegionName};
pub use op_kind::OpKind;
pub use schedule::{ScanAction, ScanPlan, Schedule};
pub use segments::Segments;
pub use treatment::{RunAs, Treatment};

// The README's quick start, run as a doctest: what crates.io shows compiles and passes.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct Readme;

// Tests, last (they may use every module): what was saved as JSON before loads after.
#[cfg(test)]
mod saved_json;
