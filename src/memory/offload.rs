//! The offload store's accounting and the flag that tells the recompute machinery, while a region
//! op is built, that its region keeps what it stores in host memory. A leaf.
//!
//! Bytes are counted when a host copy is made and when it is dropped, over every thread.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
    /// Outputs a policy decided to keep in host memory (`Decision::Offload`), by node id, with
    /// their node's count (weak: dead entries are pruned).
    static MARKED: RefCell<HashMap<u64, Weak<burn_autodiff::NodeId>>> = RefCell::new(HashMap::new());
}

/// Fewest marks before dead ones are pruned.
const MIN_PRUNE_AT: usize = 4096;

/// Marks the stored node `id` (whose count is `rc`) as kept in host memory by its readers.
pub(crate) fn mark(id: u64, rc: &Arc<burn_autodiff::NodeId>) {
    MARKED.with(|marked| {
        let mut marked = marked.borrow_mut();
        if marked.len() >= MIN_PRUNE_AT {
            marked.retain(|_, rc| rc.strong_count() > 0);
        }
        marked.insert(id, Arc::downgrade(rc));
    });
}

/// Whether the node `id` was marked to be kept in host memory.
pub(crate) fn marked(id: u64) -> bool {
    MARKED.with(|marked| marked.borrow().contains_key(&id))
}

/// Bytes of region operands held in host memory now (by regions whose policy offloads, see
/// [`Policy::offloaded`](crate::Policy::offloaded)).
///
/// ```
/// use burn_checkpoint::memory::{offloaded_bytes, offloaded_peak, reset_offloaded_peak};
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

/// A host copy of `bytes` was made.
pub(crate) fn copied(bytes: usize) {
    let now = NOW.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

/// A host copy of `bytes` was dropped.
pub(crate) fn released(bytes: usize) {
    NOW.fetch_sub(bytes, Ordering::Relaxed);
}

/// Runs `f` (building one region op) with the offload flag set to `offload`.
pub(crate) fn building<R>(offload: bool, f: impl FnOnce() -> R) -> R {
    if !offload {
        return f();
    }
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            ACTIVE.with(|active| active.set(self.0));
        }
    }
    let _restore = Restore(ACTIVE.with(|active| active.replace(true)));
    f()
}

/// Whether the region op being built keeps its stored operands in host memory.
pub(crate) fn active() -> bool {
    ACTIVE.with(Cell::get)
}
