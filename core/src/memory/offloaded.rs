//! How many bytes regions hold in host memory (offload), over every thread: each Burn crate's
//! offload counts its host copies here, and the recording reads it.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// Whether copies are logged (a timeline is being recorded), and the log: when each copy was
/// made (bytes, positive) or dropped (negative), from whichever thread.
static LOGGING: AtomicBool = AtomicBool::new(false);
static COPIES: Mutex<Vec<(Instant, i64)>> = Mutex::new(Vec::new());

fn log(bytes: i64) {
    if LOGGING.load(Ordering::Relaxed) {
        COPIES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((Instant::now(), bytes));
    }
}

/// Starts (emptying the log) or stops logging copies.
pub(crate) fn log_copies(on: bool) {
    if on {
        COPIES.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
    LOGGING.store(on, Ordering::Relaxed);
}

/// The copies logged since [`log_copies`] turned logging on, taken.
pub(crate) fn take_copies() -> Vec<(Instant, i64)> {
    std::mem::take(&mut *COPIES.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Bytes of region operands held in host memory by regions that offload, over every thread:
/// now, and at most since the last [`OffloadedBytes::reset_peak`]. What the memory report's
/// `offloaded_peak_bytes` reads.
///
/// ```
/// use burn_checkpoint_core::memory::OffloadedBytes;
///
/// OffloadedBytes::reset_peak();
/// // ... a training step with offloading regions ...
/// let offloaded = OffloadedBytes::now();
/// println!("in host memory: {} bytes now, {} at most", offloaded.in_use, offloaded.peak);
/// assert!(offloaded.peak >= offloaded.in_use);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OffloadedBytes {
    /// Held in host memory now.
    pub in_use: u64,
    /// The most held at once since the last [`OffloadedBytes::reset_peak`].
    pub peak: u64,
}

impl OffloadedBytes {
    /// The counts now.
    pub fn now() -> OffloadedBytes {
        OffloadedBytes {
            in_use: offloaded_bytes() as u64,
            peak: offloaded_peak() as u64,
        }
    }

    /// Starts a new peak from the bytes held now.
    pub fn reset_peak() {
        reset_offloaded_peak();
    }
}

/// Bytes of region operands held in host memory now (by regions that offload).
pub(crate) fn offloaded_bytes() -> usize {
    NOW.load(Ordering::Relaxed)
}

/// The most bytes held in host memory at once since the last [`reset_offloaded_peak`].
pub(crate) fn offloaded_peak() -> usize {
    PEAK.load(Ordering::Relaxed)
}

/// Starts a new offload peak from the bytes held now.
pub(crate) fn reset_offloaded_peak() {
    PEAK.store(offloaded_bytes(), Ordering::Relaxed);
}

/// A host copy of `bytes` was made (for the Burn crates' offload).
pub fn host_copy_made(bytes: usize) {
    let now = NOW.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
    log(bytes as i64);
}

/// A host copy of `bytes` was dropped (for the Burn crates' offload).
pub fn host_copy_dropped(bytes: usize) {
    NOW.fetch_sub(bytes, Ordering::Relaxed);
    log(-(bytes as i64));
}
