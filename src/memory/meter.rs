//! Where a step's bytes are read: the counting allocator on the CPU, cubecl's counts on a device;
//! and [`Measure`], one step's peak measured with a meter.

use burn_checkpoint_core::Treatment;
use burn_checkpoint_core::memory::{HostMeter, MemoryMeter};

#[cfg(any(feature = "cuda", feature = "wgpu"))]
use super::device::usage;

/// Where the memory of a step is measured: what [`StepReport::measure`](super::StepReport),
/// the [`planner`](crate::planner) and [`Measure`] read.
///
/// ```
/// use burn_checkpoint::memory::{Meter, MemoryMeter};
///
/// // Reads 0 unless `CountingAllocator` is the program's global allocator.
/// let meter = Meter::Host;
/// assert!(meter.describe().contains("allocator"));
/// ```
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub enum Meter {
    /// Host bytes allocated, through [`CountingAllocator`](super::CountingAllocator) installed
    /// as the global allocator: every thread of the process, the exact peak.
    #[default]
    Host,
    /// Bytes in use on a CUDA device by the calling thread's stream, and bytes reserved
    /// (cubecl's counts). A step's report reads them at every region event, after a sync (so
    /// that a fused backend's queue has run and a recompute's time is the device's): the in-use
    /// peak is the most seen then, a lower bound; a [`Measure`] samples them every 100 µs.
    #[cfg(feature = "cuda")]
    Cuda(burn::backend::cuda::CudaDevice),
    /// The same on a wgpu device (Vulkan, Metal, ...; Mesa's lavapipe on the CPU).
    #[cfg(feature = "wgpu")]
    Wgpu(burn::backend::wgpu::WgpuDevice),
}

impl MemoryMeter for Meter {
    fn in_use(&self) -> u64 {
        match self {
            Meter::Host => HostMeter.in_use(),
            #[cfg(feature = "cuda")]
            Meter::Cuda(device) => usage::<burn::cubecl::cuda::CudaRuntime>(device).in_use,
            #[cfg(feature = "wgpu")]
            Meter::Wgpu(device) => usage::<burn::cubecl::wgpu::WgpuRuntime>(device).in_use,
        }
    }

    fn settle(&self) {
        // The result is ignored: a meter has no error to give, and a failed device fails the
        // step's own next read.
        match self {
            Meter::Host => {}
            // `burn::backend::Cuda` (and `Wgpu`) are fused wherever the program's Burn has
            // `fusion`: their sync runs the fusion queue of the calling thread's stream (an
            // unfused backend's has nothing queued), then waits for the device.
            #[cfg(feature = "cuda")]
            Meter::Cuda(device) => {
                let _ = <burn::backend::Cuda as burn::tensor::backend::Backend>::sync(device);
            }
            #[cfg(feature = "wgpu")]
            Meter::Wgpu(device) => {
                let _ = <burn::backend::Wgpu as burn::tensor::backend::Backend>::sync(device);
            }
        }
    }

    fn release(&self) {
        // Burn's fused backends pass the cleanup on without running their queue: settle first.
        self.settle();
        match self {
            Meter::Host => {}
            #[cfg(feature = "cuda")]
            Meter::Cuda(device) => {
                <burn::backend::Cuda as burn::tensor::backend::Backend>::memory_cleanup(device)
            }
            #[cfg(feature = "wgpu")]
            Meter::Wgpu(device) => {
                <burn::backend::Wgpu as burn::tensor::backend::Backend>::memory_cleanup(device)
            }
        }
        self.settle();
    }

    fn reserved(&self) -> Option<u64> {
        match self {
            Meter::Host => None,
            #[cfg(feature = "cuda")]
            Meter::Cuda(device) => Some(usage::<burn::cubecl::cuda::CudaRuntime>(device).reserved),
            #[cfg(feature = "wgpu")]
            Meter::Wgpu(device) => Some(usage::<burn::cubecl::wgpu::WgpuRuntime>(device).reserved),
        }
    }

    fn peak(&self) -> Option<u64> {
        match self {
            Meter::Host => HostMeter.peak(),
            #[cfg(any(feature = "cuda", feature = "wgpu"))]
            _ => None,
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
            #[cfg(feature = "cuda")]
            Meter::Cuda(_) => {
                "CUDA device bytes in use and reserved (cubecl), read at region events".into()
            }
            #[cfg(feature = "wgpu")]
            Meter::Wgpu(_) => {
                "wgpu device bytes in use and reserved (cubecl), read at region events".into()
            }
        }
    }

    /// Keep, save-compute-bound, recompute-all; on a device offload too (a region's stored
    /// operands in host memory leave the device's count).
    fn treatments(&self) -> Vec<Treatment> {
        let mut treatments = HostMeter.treatments();
        if !matches!(self, Meter::Host) {
            treatments.push(Treatment::Offload);
        }
        treatments
    }
}

/// The peak of one step measured with [`Meter::start`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Peak {
    /// The most bytes in use, above those in use when the step began.
    pub in_use: u64,
    /// On a device, the most bytes its memory manager held during the step (absolute: pages
    /// reserved before the step count, as `nvidia-smi` counts them); `None` on the host.
    pub reserved: Option<u64>,
}

impl Meter {
    /// Starts measuring a step's peak: on the host the allocator's peak is reset; on a device a
    /// thread samples the bytes in use and reserved on the calling thread's stream every 100 µs.
    ///
    /// ```
    /// use burn_checkpoint::memory::{CountingAllocator, Meter};
    ///
    /// #[global_allocator]
    /// static ALLOCATOR: CountingAllocator = CountingAllocator;
    ///
    /// let measure = Meter::Host.start();
    /// let buffer = vec![1u8; 1 << 20];
    /// assert!(measure.now() >= 1 << 20);
    /// drop(buffer);
    /// assert!(measure.finish().in_use >= 1 << 20, "the peak above the start");
    /// ```
    pub fn start(&self) -> Measure {
        self.settle();
        let base = self.in_use();
        self.reset_peak();
        Measure {
            meter: self.clone(),
            base,
            #[cfg(any(feature = "cuda", feature = "wgpu"))]
            sampler: self.sampler(),
        }
    }

    #[cfg(any(feature = "cuda", feature = "wgpu"))]
    fn sampler(&self) -> Option<Sampler> {
        use super::device::DevicePeak;
        let period = std::time::Duration::from_micros(100);
        match self {
            Meter::Host => None,
            #[cfg(feature = "cuda")]
            Meter::Cuda(device) => Some(Sampler::Cuda(DevicePeak::start(device, period))),
            #[cfg(feature = "wgpu")]
            Meter::Wgpu(device) => Some(Sampler::Wgpu(DevicePeak::start(device, period))),
        }
    }

    /// What a [`Measure`]'s figures are, for reports.
    pub fn describe_measure(&self) -> &'static str {
        match self {
            Meter::Host => {
                "host bytes allocated (counting allocator), peak of a step above its start"
            }
            #[cfg(any(feature = "cuda", feature = "wgpu"))]
            _ => {
                "device bytes in use (cubecl, sampled every 100 µs), peak of a step above its \
                 start; reserved: the most the memory manager held"
            }
        }
    }
}

/// A device's sampler, whichever runtime.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
enum Sampler {
    #[cfg(feature = "cuda")]
    Cuda(super::device::DevicePeak<burn::cubecl::cuda::CudaRuntime>),
    #[cfg(feature = "wgpu")]
    Wgpu(super::device::DevicePeak<burn::cubecl::wgpu::WgpuRuntime>),
}

/// One step's memory being measured ([`Meter::start`]).
pub struct Measure {
    meter: Meter,
    /// Bytes in use when the step began.
    base: u64,
    #[cfg(any(feature = "cuda", feature = "wgpu"))]
    sampler: Option<Sampler>,
}

impl Measure {
    /// Bytes in use now, above the start (what a step holds at some point of it, e.g. between
    /// forward and backward).
    pub fn now(&self) -> u64 {
        self.meter.settle();
        self.meter.in_use().saturating_sub(self.base)
    }

    /// The peaks since the start.
    pub fn finish(self) -> Peak {
        self.meter.settle();
        #[cfg(any(feature = "cuda", feature = "wgpu"))]
        if let Some(sampler) = self.sampler {
            let usage = match sampler {
                #[cfg(feature = "cuda")]
                Sampler::Cuda(sampler) => sampler.finish(),
                #[cfg(feature = "wgpu")]
                Sampler::Wgpu(sampler) => sampler.finish(),
            };
            return Peak {
                in_use: usage.in_use.saturating_sub(self.base),
                reserved: Some(usage.reserved),
            };
        }
        let peak = self.meter.peak().unwrap_or_else(|| self.meter.in_use());
        Peak {
            in_use: peak.saturating_sub(self.base),
            reserved: None,
        }
    }
}
