//! Measuring a step: the counting allocator (burn-checkpoint-core's, the same as the crate for
//! Burn 0.21's), the [`Meter`] a step is read with (host bytes, or a device's bytes in use and
//! reserved through Burn 0.22's `memory_pool_usage`), the bytes offloading regions hold in host
//! memory, and the memory report of one step ([`StepReport::measure`]), whose JSON is the 0.21
//! crate's.
//!
//! A step's report: per top-level region instance the bytes held from forward to backward and
//! its recompute time, what forward held outside regions, the step's peak and where it was.
//!
//! ```
//! use burn::nn::{Linear, LinearConfig};
//! use burn::tensor::{Device, Tensor};
//! use burn_checkpoint_22::Region;
//! use burn_checkpoint_22::memory::{CountingAllocator, Meter, StepReport};
//!
//! #[global_allocator]
//! static ALLOCATOR: CountingAllocator = CountingAllocator;
//!
//! let device = Device::flex().autodiff();
//! let blocks: Vec<Linear> = (0..4).map(|_| LinearConfig::new(64, 64).init(&device)).collect();
//! let x = Tensor::<2>::ones([32, 64], &device);
//! let (_, report) = StepReport::measure(Meter::Host, || {
//!     let mut h = x.clone();
//!     for block in &blocks {
//!         h = Region::named("block").run(block, h, |block, h| block.forward(h).tanh());
//!     }
//!     let _grads = h.sum().backward();
//! });
//! assert_eq!(report.regions.len(), 4);
//! assert_eq!(report.regions[3].id(), "block#3");
//! assert!(report.regions.iter().all(|r| r.recompute_seconds > 0.0));
//! println!("{report}");
//! ```
//!
//! A [`Timeline`] records the same step over time with its report (the same hooks): the bytes
//! in use from start to end, each region instance's forward, recompute and backward as spans, and
//! what was live at the peak, by region; two timelines compare their peaks by region
//! ([`Timeline::compare`]). `train22 --memory-timeline step.svg` draws them
//! (docs/memory-timeline.md):
//!
//! ```
//! use burn::nn::{Linear, LinearConfig};
//! use burn::tensor::{Device, Tensor};
//! use burn_checkpoint_22::Region;
//! use burn_checkpoint_22::memory::timeline::Phase;
//! use burn_checkpoint_22::memory::{Meter, Timeline};
//!
//! let device = Device::flex().autodiff();
//! let blocks: Vec<Linear> = (0..3).map(|_| LinearConfig::new(64, 64).init(&device)).collect();
//! let x = Tensor::<2>::ones([32, 64], &device);
//! let (_, timeline) = Timeline::measure(Meter::Host, || {
//!     let mut h = x.clone();
//!     for block in &blocks {
//!         h = Region::named("block").run(block, h, |block, h| block.forward(h).tanh());
//!     }
//!     let _grads = h.sum().backward();
//! });
//! let recomputes = timeline.spans.iter().filter(|s| s.phase == Phase::Recompute);
//! let order: Vec<String> = recomputes.map(|s| s.label()).collect();
//! assert_eq!(order, ["block#2", "block#1", "block#0"], "backward runs them in reverse");
//! ```

use burn::tensor::Device;
// The names both crates re-export, listed once in the core.
pub use burn_checkpoint_core::engine::memory::*;
use burn_checkpoint_core::engine::{DeviceMemory, Usage};

/// A device whose memory [`Meter::device`] reads: its pools' bytes in use and reserved,
/// through Burn 0.22's `Device::memory_pool_usage` (device-wide). Made from the device by
/// [`Meter::device`], which refuses a backend without pools (Flex: its tensors are the host's).
///
/// ```
/// use burn::tensor::Device;
/// use burn_checkpoint_22::memory::{MemoryMeter, Meter};
///
/// assert!(Meter::Host.describe().contains("allocator"));
/// // Flex reports no memory pools: a device meter is for CubeCL devices (wgpu, CUDA).
/// assert!(Meter::device(Device::flex()).is_none());
/// ```
#[derive(Clone, Debug)]
pub struct MeteredDevice(pub Device);

impl From<Device> for MeteredDevice {
    fn from(device: Device) -> Self {
        MeteredDevice(device)
    }
}

fn pool_usage(device: &Device) -> Option<Usage> {
    device.memory_pool_usage().map(|usage| Usage {
        in_use: usage.bytes_in_use,
        reserved: usage.bytes_reserved,
    })
}

// No `capacity`: Burn 0.22's `Device` tells no size of its memory (its pools' usage and an
// identity only), so an out-of-memory report there says the backend does not say it.
impl DeviceMemory for MeteredDevice {
    fn usage(&self) -> Option<Usage> {
        pool_usage(&self.0)
    }

    fn reader(&self) -> impl Fn() -> Usage + Send + 'static {
        // The pools' counts are the device's, whichever thread reads them.
        let device = self.0.clone();
        move || pool_usage(&device).unwrap_or_default()
    }

    fn sync(&self) {
        // A failed op surfaces at the step's own reads; the meter reads what ran.
        let _ = self.0.sync();
    }

    fn cleanup(&self) {
        self.0.memory_cleanup();
    }

    fn describe(&self) -> String {
        format!("{:?} bytes in use and reserved (memory_pool_usage)", self.0)
    }
}

/// Where a step's memory is read: the host's allocator ([`Meter::Host`]) or a device's pools
/// ([`Meter::device`]). What [`StepReport::measure`], the [`planner`](crate::planner) and
/// [`Meter::start`] read: burn-checkpoint-core's one meter, as in the crate for Burn 0.21, with
/// this crate's devices.
///
/// ```
/// use burn_checkpoint_22::memory::{CountingAllocator, Meter};
///
/// #[global_allocator]
/// static ALLOCATOR: CountingAllocator = CountingAllocator;
///
/// let measure = Meter::Host.start();
/// let buffer = vec![1u8; 1 << 20];
/// drop(buffer);
/// assert!(measure.finish().in_use >= 1 << 20, "the peak above the start");
/// ```
pub type Meter = burn_checkpoint_core::memory::Meter<MeteredDevice>;

/// One step's memory being measured: [`Meter::start`] gives it, [`Measure::finish`] the step's
/// [`Peak`] above its start (on a device, sampled every 100 µs).
///
/// ```
/// use burn_checkpoint_22::memory::{CountingAllocator, Meter};
///
/// #[global_allocator]
/// static ALLOCATOR: CountingAllocator = CountingAllocator;
///
/// let measure = Meter::Host.start();
/// let kept = vec![1u8; 1 << 20];
/// assert!(measure.now() >= 1 << 20, "held now, above the start");
/// drop(kept);
/// ```
pub type Measure = burn_checkpoint_core::memory::Measure<MeteredDevice>;
