//! Checkpoint regions for Burn 0.22: what a region computes is not held between forward and
//! backward; backward runs it again and differentiates it then.
//!
//! Burn 0.22's tensors have no backend type parameter, so the backend decorator of
//! `burn-checkpoint` (for Burn 0.21) cannot be plugged in. A region here is one node of Burn's
//! autodiff graph instead, as in PyTorch's `torch.utils.checkpoint`: its forward runs the body
//! without recording, its backward runs the body again on fresh leaves and calls a nested
//! backward (which Burn 0.22 allows inside a backward step). See `docs/burn-0.22.md`.
//!
//! - [`Region`]: a region's name, what it keeps ([`Policy`]) and whether it offloads its inputs
//!   to host memory, and the ways to run one: over a module and its inputs, a body without
//!   parameters, a stack of layers.
//! - [`checkpoint()`], [`checkpoint_fn`], [`checkpoint_sequential`]: the one-liners, a region
//!   named by its place; [`macro@checkpoint`] makes a module's `&self` method one.
//! - [`Region::scan`], [`checkpoint_scan`]: a recurrent loop as one region node, its carries
//!   kept as a [`Schedule`] says (every step's, or binomial checkpointing's snapshots).
//! - [`region_seed`]: how a seeded region keeps dropout's masks.
//! - [`memory`]: meters and the memory report of a step (what each region holds and costs).
//! - [`planner`]: a plan of which regions to keep, keep compute-bound outputs of, recompute or
//!   offload to fit a byte budget.
//!
//! Names, the memory report, the planner and its JSON are burn-checkpoint-core's, shared with
//! the crate for Burn 0.21.

#![warn(missing_docs)]

// Bottom-up: each module uses only those listed before it (docs/architecture.md has the table;
// tidy/src/layers.rs checks the order, as it does for the crate for Burn 0.21). Below them all:
// burn-checkpoint-core.
//
// The vocabulary: leaves, importing nothing of the crate.
mod check;
mod convert;
mod ddp;
mod params;
mod produced;
mod seed;
mod survey;
mod tensors;
// What regions keep.
mod policy;
// Measuring and planning (the recording and the solver are the core's).
pub mod memory;
pub mod planner;
// The machinery: offload, the thread state, a save-compute-bound region's tags.
mod offload;
mod retag;
mod state;
// What backward runs again of a region's code.
mod recompute;
// A region in Burn's autodiff graph.
mod graph;
// Routing a region to the backend its tensors live on.
mod dispatch;
// A region's forward (the engine), then the public face and what is built on it.
mod forward;
mod region;
mod scan;
mod sequential;

pub use burn_checkpoint_22_macros::{RegionTensors, checkpoint};
pub use burn_checkpoint_core::{
    KeptRegions, RegionId, RegionName, ScanAction, ScanPlan, Schedule, Segments,
};
pub use ddp::REGIONS_UNDER_DDP;
pub use policy::Policy;
pub use region::{Region, checkpoint, checkpoint_fn};
pub use scan::checkpoint_scan;
pub use seed::region_seed;
pub use sequential::{Layer, checkpoint_sequential};
pub use tensors::{RegionTensors, Sequence, Stack};

#[doc(hidden)]
pub mod __private {
    pub use burn::backend::DispatchTensor;
    pub use burn_checkpoint_core::engine::method_region_name;
}

// The README's quick start, run as a doctest: what crates.io shows compiles and passes.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct Readme;
