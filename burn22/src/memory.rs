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

use burn::tensor::Device;
use burn_checkpoint_core::Treatment;
use burn_checkpoint_core::memory::HostMeter;
pub use burn_checkpoint_core::memory::{
    CountingAllocator, MemoryMeter, NameTotals, OffloadedBytes, RegionRecord, StepReport,
};

/// Where a step's memory is read, for [`StepReport::measure`] and the
/// [`planner`](crate::planner).
///
/// ```
/// use burn::tensor::Device;
/// use burn_checkpoint_22::memory::{MemoryMeter, Meter};
///
/// assert!(Meter::Host.describe().contains("allocator"));
/// // Flex reports no memory pools: a device meter is for CubeCL devices (wgpu, CUDA).
/// assert!(Meter::device(Device::flex()).is_none());
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub enum Meter {
    /// Host bytes allocated, through [`CountingAllocator`] installed as the global allocator:
    /// every thread of the process, the exact peak. What Flex's tensors take.
    #[default]
    Host,
    /// A device's bytes in use and reserved (its memory pools' pages, used or not), through
    /// Burn 0.22's `Device::memory_pool_usage`; read at region events after a sync, so the
    /// in-use peak is the most seen then. Made by [`Meter::device`].
    Device(Device),
}

impl Meter {
    /// The meter of `device`'s memory pools; `None` if its backend reports none (Flex).
    pub fn device(device: Device) -> Option<Meter> {
        device.memory_pool_usage()?;
        Some(Meter::Device(device))
    }

    fn usage(device: &Device) -> (u64, u64) {
        device
            .memory_pool_usage()
            .map_or((0, 0), |usage| (usage.bytes_in_use, usage.bytes_reserved))
    }
}

impl MemoryMeter for Meter {
    fn in_use(&self) -> u64 {
        match self {
            Meter::Host => HostMeter.in_use(),
            Meter::Device(device) => Meter::usage(device).0,
        }
    }

    fn settle(&self) {
        if let Meter::Device(device) = self {
            // A failed op surfaces at the step's own reads; the meter reads what ran.
            let _ = device.sync();
        }
    }

    fn release(&self) {
        if let Meter::Device(device) = self {
            let _ = device.sync();
            device.memory_cleanup();
            let _ = device.sync();
        }
    }

    fn reserved(&self) -> Option<u64> {
        match self {
            Meter::Host => None,
            Meter::Device(device) => Some(Meter::usage(device).1),
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

    fn describe(&self) -> String {
        match self {
            Meter::Host => HostMeter.describe(),
            Meter::Device(device) => format!(
                "{device:?} bytes in use and reserved (memory_pool_usage), read at region events"
            ),
        }
    }

    /// Keep and recompute-all (a region on Burn 0.22 recomputes its whole body); on a device
    /// offload too.
    fn treatments(&self) -> Vec<Treatment> {
        let mut treatments = vec![Treatment::Keep, Treatment::RecomputeAll];
        if let Meter::Device(_) = self {
            treatments.push(Treatment::Offload);
        }
        treatments
    }
}
