//! How many bytes regions hold in host memory (offload), over every thread: each Burn crate's
//! offload counts its host copies here, and the recording reads it.

use std::sync::atomic::{AtomicUsize, Ordering};

static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// Bytes of region operands held in host memory now (by regions that offload).
///
/// ```
/// use burn_checkpoint_core::memory::{offloaded_bytes, offloaded_peak, reset_offloaded_peak};
///
/// reset_offloaded_peak();
/// // ... a training step with offloading regions ...
/// println!("in host memory: {} bytes now, {} at most", offloaded_bytes(), offloaded_peak());
/// ```
pub fn offloaded_bytes() -> usize {
    NOW.load(Ordering::Relaxed)
}

/// The most bytes held in host memory at once since the last [`reset_offloaded_peak`].
pub fn offloaded_peak() -> usize {
    PEAK.load(Ordering::Relaxed)
}

/// Starts a new offload peak from the bytes held now.
pub fn reset_offloaded_peak() {
    PEAK.store(offloaded_bytes(), Ordering::Relaxed);
}

/// A host copy of `bytes` was made (for the Burn crates' offload).
pub fn host_copy_made(bytes: usize) {
    let now = NOW.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

/// A host copy of `bytes` was dropped (for the Burn crates' offload).
pub fn host_copy_dropped(bytes: usize) {
    NOW.fetch_sub(bytes, Ordering::Relaxed);
}
