//! Where a profiled step's bytes are read: the counting allocator on the CPU, cubecl's count of
//! device bytes in use on CUDA. A leaf: the recording of a step reads it at every region event.

use super::host;

/// Where the memory of a profiled step is measured.
///
/// ```
/// use burn_checkpoint::memory::Meter;
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
    /// Bytes in use on a CUDA device by the calling thread's stream (cubecl's count), read at
    /// every region event: the peak is the most seen at those reads (a lower bound).
    #[cfg(feature = "cuda")]
    Cuda(burn::backend::cuda::CudaDevice),
}

impl Meter {
    /// Bytes in use now.
    pub fn in_use(&self) -> u64 {
        match self {
            Meter::Host => host::allocated() as u64,
            #[cfg(feature = "cuda")]
            Meter::Cuda(device) => super::cuda::in_use(device),
        }
    }

    /// The most bytes in use since [`Meter::reset_peak`], where the meter keeps a peak of its
    /// own (the counting allocator does; cubecl does not).
    pub fn peak(&self) -> Option<u64> {
        match self {
            Meter::Host => Some(host::peak() as u64),
            #[cfg(feature = "cuda")]
            Meter::Cuda(_) => None,
        }
    }

    /// Starts a new peak from the bytes in use now.
    pub fn reset_peak(&self) {
        match self {
            Meter::Host => host::reset_peak(),
            #[cfg(feature = "cuda")]
            Meter::Cuda(_) => {}
        }
    }

    /// Raises the meter's peak to at least `bytes` (after a measurement inside the step reset it).
    pub(crate) fn raise_peak(&self, bytes: u64) {
        match self {
            Meter::Host => host::raise_peak(bytes as usize),
            #[cfg(feature = "cuda")]
            Meter::Cuda(_) => {}
        }
    }

    /// What the figures are, for reports.
    pub fn describe(&self) -> &'static str {
        match self {
            Meter::Host => "host bytes allocated (counting allocator), exact peak",
            #[cfg(feature = "cuda")]
            Meter::Cuda(_) => "CUDA device bytes in use (cubecl), peak read at region events",
        }
    }
}
