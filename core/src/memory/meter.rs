//! Where a measured step's bytes are read: [`MemoryMeter`], and the counting allocator's
//! [`HostMeter`]. Each Burn crate adds the meters of its devices.

use super::host;
use crate::treatment::Treatment;

/// Where the memory of a measured step is read: the recording reads it at every region event.
///
/// ```
/// use burn_checkpoint_core::memory::{HostMeter, MemoryMeter};
///
/// // Reads 0 unless `CountingAllocator` is the program's global allocator.
/// assert!(HostMeter.describe().contains("allocator"));
/// ```
pub trait MemoryMeter: Send + 'static {
    /// Bytes in use now.
    fn in_use(&self) -> u64;

    /// Waits until the work queued so far has run, so that the next reads (and clocks) see it:
    /// a device runs behind the host, and a fused backend allocates only when its queue runs.
    /// The recording calls it before every read; on the host it does nothing.
    fn settle(&self) {}

    /// Gives the memory manager's wholly free pages back to the device, so that what the next
    /// step reserves starts from what is live (a cubecl pool keeps every page it allocated
    /// until it is told); a report starts with it. On the host it does nothing.
    fn release(&self) {}

    /// Bytes the device's memory manager holds now, used or not (its pools' pages), where the
    /// meter is a device's; `None` on the host.
    fn reserved(&self) -> Option<u64> {
        None
    }

    /// The most bytes in use since [`MemoryMeter::reset_peak`], where the meter keeps a peak of
    /// its own (the counting allocator does; a device's memory manager may not).
    fn peak(&self) -> Option<u64> {
        None
    }

    /// Starts a new peak from the bytes in use now (where the meter keeps one).
    fn reset_peak(&self) {}

    /// Raises the meter's peak to at least `bytes` (after a measurement inside the step reset
    /// it): the recording's hook, not for callers.
    #[doc(hidden)]
    fn raise_peak(&self, bytes: u64) {
        let _ = bytes;
    }

    /// What the figures are, for reports.
    fn describe(&self) -> String;

    /// The treatments a [`Profile`](crate::planner::Profile) measured with this meter tries, one
    /// step each: those the region machinery of the meter's crate can run, [`Treatment::Keep`]
    /// first, and [`Treatment::Offload`] only where this meter's bytes are a device's (on the
    /// host, a host copy is as many bytes as what it replaces). The default is Burn 0.21's on
    /// the host: keep, save-compute-bound, recompute-all.
    fn treatments(&self) -> Vec<Treatment> {
        vec![
            Treatment::Keep,
            Treatment::SaveComputeBound,
            Treatment::RecomputeAll,
        ]
    }
}

/// Host bytes allocated, through [`CountingAllocator`](super::CountingAllocator) installed as
/// the global allocator: every thread of the process, the exact peak.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostMeter;

impl MemoryMeter for HostMeter {
    fn in_use(&self) -> u64 {
        host::allocated() as u64
    }

    fn peak(&self) -> Option<u64> {
        Some(host::peak() as u64)
    }

    fn reset_peak(&self) {
        host::reset_peak();
    }

    fn raise_peak(&self, bytes: u64) {
        host::raise_peak(bytes as usize);
    }

    fn describe(&self) -> String {
        "host bytes allocated (counting allocator), exact peak".to_string()
    }
}
