//! Where a measured step's bytes are read: [`MemoryMeter`], the counting allocator's
//! [`HostMeter`], and [`Meter`], the host or a device of a Burn crate ([`DeviceMemory`]).

use super::device::{DeviceMemory, Usage};
use super::host;

/// Reads a meter's bytes from another thread: what a timeline's sampler calls.
pub type Reader = Box<dyn Fn() -> Usage + Send + 'static>;

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

    /// Reads the bytes in use (and reserved, on a device) from another thread, for a
    /// [`Timeline`](super::Timeline)'s sampler while the step runs; `None` (the default) where
    /// the meter has no such reader: the timeline then has the region events' readings only.
    fn reader(&self) -> Option<Reader> {
        None
    }

    /// The memory there is in bytes, where it is known: a device's, as its backend says it
    /// ([`DeviceMemory::capacity`]); `None` on the host (whose limit is the process's, not a
    /// device's) and where the backend does not say.
    fn capacity(&self) -> Option<u64> {
        None
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

    fn reader(&self) -> Option<Reader> {
        Some(Box::new(|| Usage {
            in_use: host::allocated() as u64,
            reserved: 0,
        }))
    }
}

/// Where a step's memory is read: the host's allocator or a device's memory manager. What
/// [`StepReport::measure`](super::StepReport::measure), the planner and [`Meter::start`] read;
/// each Burn crate names it `memory::Meter`, with its devices as `D`.
///
/// ```
/// use burn_checkpoint_core::engine::DeviceMemory;
/// use burn_checkpoint_core::memory::{CountingAllocator, MemoryMeter, Meter};
///
/// #[global_allocator]
/// static ALLOCATOR: CountingAllocator = CountingAllocator;
///
/// fn held_by<D: DeviceMemory>(meter: &Meter<D>, work: impl FnOnce() -> Vec<u8>) -> u64 {
///     let measure = meter.start();
///     let kept = work();
///     let held = measure.now();
///     drop(kept);
///     held
/// }
/// # #[derive(Clone, Debug)] struct NoCounts;
/// # impl DeviceMemory for NoCounts {
/// #     fn usage(&self) -> Option<burn_checkpoint_core::engine::Usage> { None }
/// #     fn reader(&self) -> impl Fn() -> burn_checkpoint_core::engine::Usage + Send + 'static {
/// #         Default::default
/// #     }
/// #     fn sync(&self) {}
/// #     fn cleanup(&self) {}
/// #     fn describe(&self) -> String { String::new() }
/// # }
/// let meter = Meter::<NoCounts>::Host;
/// assert!(meter.describe().contains("allocator"));
/// assert!(held_by(&meter, || vec![1u8; 1 << 20]) >= 1 << 20);
/// ```
#[derive(Clone, Debug, Default)]
pub enum Meter<D> {
    /// Host bytes allocated, through [`CountingAllocator`](super::CountingAllocator) installed
    /// as the global allocator: every thread of the process, the exact peak.
    #[default]
    Host,
    /// A device's bytes in use and reserved. A step's report reads them at every region event,
    /// after a sync (so that a fused backend's queue has run and a recompute's time is the
    /// device's): the in-use peak is the most seen then, a lower bound; a
    /// [`Measure`](super::Measure) samples them every 100 µs. Made by [`Meter::device`].
    Device(D),
}

impl<D: DeviceMemory> Meter<D> {
    /// The meter of `device`'s memory; `None` where it keeps no counts (a CPU backend's tensors
    /// are the host's: measure them with [`Meter::Host`]).
    pub fn device(device: impl Into<D>) -> Option<Self> {
        let device = device.into();
        device.usage()?;
        Some(Meter::Device(device))
    }

    /// Whether the bytes read are a device's (where offloading to host memory saves some).
    pub fn is_device(&self) -> bool {
        matches!(self, Meter::Device(_))
    }
}

impl<D: DeviceMemory> MemoryMeter for Meter<D> {
    fn in_use(&self) -> u64 {
        match self {
            Meter::Host => HostMeter.in_use(),
            Meter::Device(device) => device.usage().unwrap_or_default().in_use,
        }
    }

    fn settle(&self) {
        if let Meter::Device(device) = self {
            device.sync();
        }
    }

    fn release(&self) {
        if let Meter::Device(device) = self {
            // A fused backend passes the cleanup on without running its queue: sync first.
            device.sync();
            device.cleanup();
            device.sync();
        }
    }

    fn reserved(&self) -> Option<u64> {
        match self {
            Meter::Host => None,
            Meter::Device(device) => Some(device.usage().unwrap_or_default().reserved),
        }
    }

    fn peak(&self) -> Option<u64> {
        match self {
            Meter::Host => HostMeter.peak(),
            Meter::Device(_) => None,
        }
    }

    fn reset_peak(&self) {
        if let Meter::Host = self {
            HostMeter.reset_peak();
        }
    }

    fn raise_peak(&self, bytes: u64) {
        if let Meter::Host = self {
            HostMeter.raise_peak(bytes);
        }
    }

    fn capacity(&self) -> Option<u64> {
        match self {
            Meter::Host => None,
            Meter::Device(device) => device.capacity(),
        }
    }

    fn reader(&self) -> Option<Reader> {
        match self {
            Meter::Host => HostMeter.reader(),
            Meter::Device(device) => Some(Box::new(device.reader())),
        }
    }

    fn describe(&self) -> String {
        match self {
            Meter::Host => HostMeter.describe(),
            Meter::Device(device) => format!("{}, read at region events", device.describe()),
        }
    }
}
