//! Uploading one region ahead: when backward first reads a host copy of one top-level region,
//! the host copies of the region before it (the next one backward reaches) start uploading, so
//! that they are on the device when that region's backward reads them.
//!
//! The copies are remembered per training thread in the order forward made them, with the
//! top-level region instance whose op first stored them (instances grow along forward). The
//! price is the next region's stored operands on the device one region early, as in PyTorch's
//! and Megatron's prefetching offload.

use std::cell::{Cell, RefCell};
use std::sync::{Arc, Weak};

/// What prefetching asks of a host copy, whatever its backend (`host_copy` implements it: this
/// file knows no host copy, so that it stands below it).
pub(super) trait Prefetch: Send + Sync {
    /// The top-level region instance whose op first stored the copy.
    fn group(&self) -> u64;
    /// Starts uploading the copy to the device, if it is not there already.
    fn upload_ahead(&self);
}

thread_local! {
    /// This thread's live host copies, in the order forward made them.
    static COPIES: RefCell<Vec<Weak<dyn Prefetch>>> = const { RefCell::new(Vec::new()) };
    /// The group backward reached last on this thread.
    static REACHED: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Remembers a host copy forward just made.
pub(super) fn remember(copy: &Arc<dyn Prefetch>) {
    COPIES.with(|copies| copies.borrow_mut().push(Arc::downgrade(copy)));
}

/// Backward reads a host copy of `group`: the first time, the copies of the group before it
/// start uploading.
pub(super) fn reached(group: u64) {
    if REACHED.with(|reached| reached.replace(Some(group))) == Some(group) {
        return;
    }
    let ahead: Vec<Arc<dyn Prefetch>> = COPIES.with(|copies| {
        let mut copies = copies.borrow_mut();
        copies.retain(|copy| copy.strong_count() > 0);
        let live: Vec<Arc<dyn Prefetch>> = copies.iter().filter_map(Weak::upgrade).collect();
        let Some(before) = live
            .iter()
            .map(|copy| copy.group())
            .filter(|&other| other < group)
            .max()
        else {
            return Vec::new();
        };
        live.into_iter()
            .filter(|copy| copy.group() == before)
            .collect()
    });
    // Outside the borrow: an upload runs backend code.
    for copy in &ahead {
        copy.upload_ahead();
    }
}
