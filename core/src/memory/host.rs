//! A counting global allocator: bytes in use and their peak, over every thread of the process.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting the bytes in use and their peak.
pub struct CountingAllocator;

fn grew(bytes: usize) {
    let now = ALLOCATED.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

fn shrank(bytes: usize) {
    ALLOCATED.fetch_sub(bytes, Ordering::Relaxed);
}

// SAFETY: every call is forwarded to `System` unchanged; the counters only observe sizes.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                shrank(layout.size() - new_size);
            }
        }
        new
    }
}

/// Bytes allocated now (0 unless [`CountingAllocator`] is the global allocator).
pub fn allocated() -> usize {
    ALLOCATED.load(Ordering::Relaxed)
}

/// The most bytes allocated at once since the last [`reset_peak`].
pub fn peak() -> usize {
    PEAK.load(Ordering::Relaxed)
}

/// Starts a new peak from the bytes allocated now.
pub fn reset_peak() {
    PEAK.store(allocated(), Ordering::Relaxed);
}

/// Raises the peak to at least `bytes` (a measurement nested in another, which reset the peak
/// to measure its own part, gives the outer one its peak back).
pub fn raise_peak(bytes: usize) {
    PEAK.fetch_max(bytes, Ordering::Relaxed);
}

/// Bytes as MiB, for reports.
pub fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Bytes as a size to read: MiB with one decimal from 1 MiB, KiB below it, bytes below 1 KiB —
/// so that a small size is not shown as `0.0 MiB`.
///
/// ```
/// use burn_checkpoint_core::memory::size;
///
/// assert_eq!(size(1), "1 B");
/// assert_eq!(size(1536), "1.5 KiB");
/// assert_eq!(size(68 << 20), "68.0 MiB");
/// ```
pub fn size(bytes: u64) -> String {
    size_with(bytes, 1)
}

/// Two sizes said so that they read apart where they differ: [`size`]'s, with more decimals
/// until the two texts differ (at most six): a budget below a floor never reads as equal to it.
pub(crate) fn sizes_apart(a: u64, b: u64) -> (String, String) {
    (1..=6)
        .map(|decimals| (size_with(a, decimals), size_with(b, decimals)))
        .find(|(a, b)| a != b)
        .unwrap_or_else(|| (size_with(a, 6), size_with(b, 6)))
}

fn size_with(bytes: u64, decimals: usize) -> String {
    const KIB: u64 = 1024;
    match bytes {
        _ if bytes >= KIB * KIB => format!("{:.decimals$} MiB", mib(bytes as usize)),
        _ if bytes >= KIB => format!("{:.decimals$} KiB", bytes as f64 / KIB as f64),
        _ => format!("{bytes} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::sizes_apart;

    #[test]
    fn two_sizes_read_apart_where_they_differ() {
        let (budget, floor) = sizes_apart(68 << 20, (68 << 20) + 30_000);
        assert_eq!(
            (budget.as_str(), floor.as_str()),
            ("68.00 MiB", "68.03 MiB")
        );
        let (one, two) = sizes_apart(1 << 20, 2 << 20);
        assert_eq!((one.as_str(), two.as_str()), ("1.0 MiB", "2.0 MiB"));
        let (a, b) = sizes_apart(1, 1);
        assert_eq!((a.as_str(), b.as_str()), ("1 B", "1 B"));
    }
}
