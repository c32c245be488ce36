//! Measuring memory: a counting global allocator for the CPU, the [`MemoryMeter`] a step is read
//! with, what regions hold in host memory, and the memory report of one step
//! ([`StepReport::measure`]), recorded through the hooks of [`recording`].
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

mod device;
mod failure;
mod host;
mod measure;
mod meter;
mod offloaded;
pub mod recording;
mod report;
mod sampler;
mod timeline;

pub use device::{DeviceMemory, Usage};
#[cfg(test)]
pub(crate) use failure::one_failing_test_at_a_time;
pub use failure::{OutOfMemory, panic_message};
pub(crate) use host::sizes_apart;
pub use host::{CountingAllocator, mib, size};
pub use measure::{Measure, Peak};
pub use meter::{HostMeter, MemoryMeter, Meter, Reader};
pub use offloaded::{OffloadedBytes, host_copy_dropped, host_copy_made};
pub use report::{NameTotals, RegionRecord, StepReport};
pub(crate) use report::{mib_signed, shorten};
pub use timeline::{
    AtPeak, Holding, Live, MAX_POINTS, PeakDifference, Phase, Point, Schema, Span, TIMELINE_SCHEMA,
    Timeline,
};
