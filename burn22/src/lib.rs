//! Checkpoint regions for Burn 0.22: what a region computes is not held between forward and
//! backward; backward runs it again and differentiates it then.
//!
//! Burn 0.22's tensors have no backend type parameter, so the backend decorator of
//! `burn-checkpoint` (for Burn 0.21) cannot be plugged in. A region here is one node of Burn's
//! autodiff graph instead, as in PyTorch's `torch.utils.checkpoint`: its forward runs the body
//! without recording, its backward runs the body again on fresh leaves and calls a nested
//! backward (which Burn 0.22 allows inside a backward step). See `docs/burn-0.22.md`.
//!
//! - [`checkpoint()`]: a region over a module and its inputs; [`macro@checkpoint`] makes a
//!   module's `&self` method one; [`checkpoint_fn`] a body without parameters.
//! - [`checkpoint_sequential`]: a stack of layers cut into regions.
//! - [`region_seed`]: how regions keep dropout's masks.
//! - [`memory`]: the counting allocator the tests and benchmarks measure with.

mod body;
mod checkpoint;
mod dispatch;
mod graph;
mod params;
mod sequential;
mod tensors;

pub use burn_checkpoint_22_macros::checkpoint;
pub use burn_checkpoint_core::Segments;
pub use checkpoint::{checkpoint, checkpoint_fn, region_seed};
pub use sequential::{Layer, checkpoint_sequential};
pub use tensors::RegionTensors;

/// The counting global allocator the tests and benchmarks measure with (burn-checkpoint-core's,
/// the same as the crate for Burn 0.21's).
pub mod memory {
    pub use burn_checkpoint_core::memory::{
        CountingAllocator, allocated, mib, peak, raise_peak, reset_peak,
    };
}
