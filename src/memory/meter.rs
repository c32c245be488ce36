//! Where a step's bytes are read: the counting allocator on the CPU, cubecl's count of device
//! bytes in use on CUDA; and [`Measure`], one step's peak measured with a meter.

use burn_checkpoint_core::memory::{HostMeter, MemoryMeter};

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
    /// Bytes in use on a CUDA device by the calling thread's stream (cubecl's count). A step's
    /// report reads it at every region event (its peak is the most seen then, a lower bound);
    /// a [`Measure`] samples it every 100 µs.
    #[cfg(feature = "cuda")]
    Cuda(burn::backend::cuda::CudaDevice),
}

impl MemoryMeter for Meter {
    fn in_use(&self) -> u64 {
        match self {
            Meter::Host => HostMeter.in_use(),
            #[cfg(feature = "cuda")]
            Meter::Cuda(device) => super::cuda::in_use(device),
        }
    }

    fn peak(&self) -> Option<u64> {
        match self {
            Meter::Host => HostMeter.peak(),
            #[cfg(feature = "cuda")]
            Meter::Cuda(_) => None,
        }
    }

    fn reset_peak(&self) {
        match self {
            Meter::Host => HostMeter.reset_peak(),
            #[cfg(feature = "cuda")]
            Meter::Cuda(_) => {}
        }
    }

    fn raise_peak(&self, bytes: u64) {
        match self {
            Meter::Host => HostMeter.raise_peak(bytes),
            #[cfg(feature = "cuda")]
            Meter::Cuda(_) => {}
        }
    }

    fn describe(&self) -> String {
        match self {
            Meter::Host => HostMeter.describe(),
            #[cfg(feature = "cuda")]
            Meter::Cuda(_) => {
                "CUDA device bytes in use (cubecl), peak read at region events".into()
            }
        }
    }
}

impl Meter {
    /// Starts measuring a step's peak: on the host the allocator's peak is reset; on CUDA a
    /// thread samples the bytes in use on the calling thread's stream every 100 µs.
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
    /// assert!(measure.finish() >= 1 << 20, "the peak above the start");
    /// ```
    pub fn start(&self) -> Measure {
        let base = self.in_use();
        match self {
            Meter::Host => {
                self.reset_peak();
                Measure {
                    meter: self.clone(),
                    base,
                    #[cfg(feature = "cuda")]
                    sampler: None,
                }
            }
            #[cfg(feature = "cuda")]
            Meter::Cuda(device) => Measure {
                meter: self.clone(),
                base,
                sampler: Some(super::cuda::DevicePeak::start(
                    device,
                    std::time::Duration::from_micros(100),
                )),
            },
        }
    }

    /// What a [`Measure`]'s figures are, for reports.
    pub fn describe_measure(&self) -> &'static str {
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

/// One step's memory being measured ([`Meter::start`]).
pub struct Measure {
    meter: Meter,
    /// Bytes in use when the step began.
    base: u64,
    #[cfg(feature = "cuda")]
    sampler: Option<super::cuda::DevicePeak>,
}

impl Measure {
    /// Bytes in use now, above the start (what a step holds at some point of it, e.g. between
    /// forward and backward).
    pub fn now(&self) -> u64 {
        self.meter.in_use().saturating_sub(self.base)
    }

    /// The peak bytes in use since the start, above the start.
    pub fn finish(self) -> u64 {
        #[cfg(feature = "cuda")]
        if let Some(sampler) = self.sampler {
            return sampler.finish().saturating_sub(self.base);
        }
        let peak = self.meter.peak().unwrap_or_else(|| self.meter.in_use());
        peak.saturating_sub(self.base)
    }
}
