//! Gradient checkpointing of whole regions for [Burn](https://burn.dev).
//!
//! Swap one type parameter and mark the blocks to recompute:
//!
//! ```
//! use burn::backend::{Autodiff, NdArray};
//! use burn::nn::{Linear, LinearConfig, Relu};
//! use burn::prelude::*;
//! use burn_checkpoint::{Checkpointed, checkpoint};
//!
//! type B = Checkpointed<Autodiff<NdArray>>; // 1. the backend: `Autodiff<NdArray>` before
//!
//! #[derive(Module, Debug)]
//! struct Block<B: Backend> {
//!     first: Linear<B>,
//!     second: Linear<B>,
//!     relu: Relu,
//! }
//!
//! impl<B: Backend> Block<B> {
//!     #[checkpoint] // 2. a region: recomputed during backward, not held
//!     fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
//!         self.second.forward(self.relu.forward(self.first.forward(x)))
//!     }
//! }
//!
//! let device = Default::default();
//! let block = Block::<B> {
//!     first: LinearConfig::new(8, 32).init(&device),
//!     second: LinearConfig::new(32, 8).init(&device),
//!     relu: Relu::new(),
//! };
//! let x = Tensor::<B, 2>::ones([4, 8], &device);
//! let grads = block.forward(x).sum().backward();
//! assert!(block.first.weight.grad(&grads).is_some());
//! ```
//!
//! How it works: inside a region, every op is built as a node of Burn's autodiff graph that keeps
//! a recipe instead of its output; when a backward step needs the output, the crate recomputes
//! it (each op at most once per backward). What a region returns is stored. See the guide in
//! `docs/` for the details.

#![warn(missing_docs)]

extern crate self as burn_checkpoint;

// Bottom-up: each module uses only those listed before it (docs/architecture.md has the table).
// Below them all: burn-checkpoint-core (names, the memory report and its recording, the planner,
// segments; shared with the crate for Burn 0.22).
//
// The vocabulary: leaves, importing nothing of the crate.
pub mod counters;
mod node_map;
mod op;
mod types;
// What regions decide per op.
mod policy;
// Measuring: meters and device memory (the recording itself is the core's).
pub mod memory;
// The machinery: offload, the recompute walk and the op families, the region state, routing.
mod offload;
mod recompute;
mod region;
mod route;
// The decorator and what is built on regions.
mod backend;
pub mod coverage;
mod scan;
mod sequential;
mod settings;
// Planning: runs steps under plans.
pub mod planner;

pub use backend::Checkpointed;
pub use burn_checkpoint_core::{KeptRegions, RegionId, RegionName, Schedule, Segments};
pub use burn_checkpoint_macros::checkpoint;
pub use op::OpKind;
pub use policy::{Decision, OpInfo, Policy, SavePredicate};
pub use region::{Region, RegionGuard, checkpoint};
pub use scan::{Carry, Sequence, Stack, checkpoint_scan};
pub use sequential::{Layer, checkpoint_sequential};
pub use settings::Settings;

#[doc(hidden)]
pub mod __private {
    pub use crate::region::remembered_outputs;
    pub use burn_checkpoint_core::engine::method_region_name;
}

// The package's README (what crates.io shows) and the repository's, run as doctests: their
// quick starts compile and pass.
#[cfg(doctest)]
#[doc = include_str!("../burn21/README.md")]
struct PackageReadme;
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct Readme;
