//! Measuring memory: a counting global allocator for the CPU, the [`MemoryMeter`] a step is read
//! with, what regions hold in host memory, and the memory report of one step
//! ([`StepReport::measure`]) and its [`timeline`], recorded through hooks only the Burn crates
//! call.
//!
//! Install the allocator in a binary or test (one global allocator per program), then read the
//! bytes in use and the peak through a meter:
//!
//! ```
//! use burn_checkpoint_core::memory::{CountingAllocator, HostMeter, MemoryMeter};
//!
//! #[global_allocator]
//! static ALLOCATOR: CountingAllocator = CountingAllocator;
//!
//! HostMeter.reset_peak();
//! let before = HostMeter.in_use();
//! let buffer = vec![0u8; 1 << 20];
//! assert!(HostMeter.peak().unwrap() - before >= 1 << 20);
//! drop(buffer);
//! ```
//!
//! The Burn crates' `memory::Meter` and `Measure` are the way users read it.
//!
//! The counts cover every thread of the process: measure with nothing else running.

pub(crate) mod device;
mod failure;
mod host;
mod measure;
pub(crate) mod meter;
pub(crate) mod offloaded;
pub(crate) mod recording;
mod report;
mod sampler;
pub mod timeline;

#[cfg(test)]
pub(crate) use failure::one_failing_test_at_a_time;
pub use failure::{OutOfMemory, panic_message};
pub(crate) use host::sizes_apart;
pub use host::{CountingAllocator, mib, size};
pub use measure::{Measure, Peak};
pub use meter::{HostMeter, MemoryMeter, Meter};
pub use offloaded::OffloadedBytes;
pub use report::{NameTotals, RegionRecord, StepReport};
pub(crate) use report::{mib_signed, shorten};
pub use timeline::Timeline;
