//! What a meter needs from a device: [`DeviceMemory`], which each Burn crate implements for its
//! devices (cubecl's counts on Burn 0.21, `memory_pool_usage` on Burn 0.22).

use std::fmt::Debug;

/// A device's bytes, as its memory manager counts them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Bytes of live tensors.
    pub in_use: u64,
    /// Bytes the memory manager holds from the device (its pools' pages, used or not): what
    /// `nvidia-smi` sees, and what decides whether a batch fits.
    pub reserved: u64,
}

/// The memory counts of one device, for [`Meter::device`](super::Meter::device): what a Burn
/// crate implements so that the one [`Meter`](super::Meter) reads its devices.
///
/// ```
/// use burn_checkpoint_core::engine::{DeviceMemory, Usage};
/// use burn_checkpoint_core::memory::Meter;
///
/// /// A device that always holds 4 KiB in a 1 MiB pool.
/// #[derive(Clone, Debug)]
/// struct Fixed;
///
/// impl DeviceMemory for Fixed {
///     fn usage(&self) -> Option<Usage> {
///         Some(Usage { in_use: 4096, reserved: 1 << 20 })
///     }
///     fn reader(&self) -> impl Fn() -> Usage + Send + 'static {
///         || Usage { in_use: 4096, reserved: 1 << 20 }
///     }
///     fn sync(&self) {}
///     fn cleanup(&self) {}
///     fn describe(&self) -> String {
///         "a fixed device's bytes".into()
///     }
/// }
///
/// let meter = Meter::<Fixed>::device(Fixed).expect("Fixed keeps counts");
/// let peak = meter.start().finish();
/// assert_eq!((peak.in_use, peak.reserved), (0, Some(1 << 20)));
/// ```
pub trait DeviceMemory: Clone + Debug + Send + Sync + 'static {
    /// The bytes in use and reserved now, as the calling thread sees them (a cubecl device
    /// counts per stream, and a stream is a thread's); `None` where the device keeps no counts.
    fn usage(&self) -> Option<Usage>;

    /// Reads [`DeviceMemory::usage`] as the calling thread sees it, from another thread: what
    /// a [`Measure`](super::Measure)'s sampling thread calls (zeros where there are no counts).
    fn reader(&self) -> impl Fn() -> Usage + Send + 'static;

    /// Waits until the work queued on the device so far has run (a fused backend's queue
    /// included), so that the next read sees it. Errors are the step's to report, not the
    /// meter's.
    fn sync(&self);

    /// Gives the memory manager's wholly free pages back to the device.
    fn cleanup(&self);

    /// What the counts are, for reports ("CUDA device bytes in use and reserved (cubecl)").
    fn describe(&self) -> String;

    /// The device's memory in bytes, where its backend says it (CUDA's driver does; wgpu
    /// exposes no size of a device's memory); `None` by default. Read only when a step has
    /// failed to allocate, so that its out-of-memory report can set what was asked against what
    /// there is.
    fn capacity(&self) -> Option<u64> {
        None
    }
}
