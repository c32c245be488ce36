//! The peak memory of a training step: on the CPU, the bytes the counting global allocator
//! (`burn_checkpoint::memory::CountingAllocator`, installed by the `train` binary) saw in use
//! above what was in use when the step began; on CUDA, cubecl's bytes in use on the device,
//! sampled.

use burn_checkpoint::memory::{allocated, peak, reset_peak};

/// How a step's memory is measured.
#[derive(Clone, Debug)]
pub enum Meter {
    /// The counting global allocator: every thread of the process (the data loader's worker
    /// adds the next batch, a few hundred KiB). Reads 0 without the allocator installed.
    Host,
    /// cubecl's bytes in use on a CUDA device, the peak sampled every 100 µs.
    #[cfg(feature = "cuda")]
    Cuda(burn::backend::cuda::CudaDevice),
}

/// A step's measurement in progress.
pub enum Measure {
    /// On the host: bytes in use at the start.
    Host {
        /// Bytes in use when the step began.
        base: usize,
    },
    /// On a CUDA device.
    #[cfg(feature = "cuda")]
    Cuda {
        /// Device bytes in use when the step began.
        base: u64,
        /// The device measured.
        device: burn::backend::cuda::CudaDevice,
        /// The sampling thread.
        sampler: burn_checkpoint::memory::cuda::DevicePeak,
    },
}

impl Meter {
    /// Starts measuring a step.
    pub fn start(&self) -> Measure {
        match self {
            Meter::Host => {
                let base = allocated();
                reset_peak();
                Measure::Host { base }
            }
            #[cfg(feature = "cuda")]
            Meter::Cuda(device) => {
                use burn_checkpoint::memory::cuda::{DevicePeak, in_use};
                Measure::Cuda {
                    base: in_use(device),
                    sampler: DevicePeak::start(device, std::time::Duration::from_micros(100)),
                    device: device.clone(),
                }
            }
        }
    }

    /// The same meter as the library's profiler reads it (`burn_checkpoint::memory::Meter`).
    pub fn library(&self) -> burn_checkpoint::memory::Meter {
        match self {
            Meter::Host => burn_checkpoint::memory::Meter::Host,
            #[cfg(feature = "cuda")]
            Meter::Cuda(device) => burn_checkpoint::memory::Meter::Cuda(device.clone()),
        }
    }

    /// What the figures are, for the report.
    pub fn describe(&self) -> &'static str {
        match self {
            Meter::Host => {
                "host bytes allocated (counting allocator), peak of a step above its start"
            }
            #[cfg(feature = "cuda")]
            Meter::Cuda(_) => {
                "device bytes in use (cubecl, sampled every 100 µs), peak of a step above its start"
            }
        }
    }
}

impl Measure {
    /// Bytes in use now, above the start (what a step holds at some point of it, e.g. between
    /// forward and backward).
    pub fn now(&self) -> usize {
        match self {
            Measure::Host { base } => allocated().saturating_sub(*base),
            #[cfg(feature = "cuda")]
            Measure::Cuda { base, device, .. } => {
                let now = burn_checkpoint::memory::cuda::in_use(device);
                now.saturating_sub(*base) as usize
            }
        }
    }

    /// The peak bytes in use since the start, above the start.
    pub fn finish(self) -> usize {
        match self {
            Measure::Host { base } => peak().saturating_sub(base),
            #[cfg(feature = "cuda")]
            Measure::Cuda { base, sampler, .. } => sampler.finish().saturating_sub(base) as usize,
        }
    }
}
