//! Offload: what a region stores for backward, kept in host memory instead of on the device.
//! Everything offload is lives here: the host copies and their registry, the flag that tells the
//! recompute machinery that the region op being built offloads, the outputs a policy marked
//! ([`Decision::Offload`](crate::Decision::Offload)). The bytes are counted in
//! burn-checkpoint-core's memory module (`memory::OffloadedBytes` here), which the memory report
//! reads.
//!
//! A region whose policy offloads ([`Region::offloaded`](crate::Region::offloaded)) keeps each
//! stored operand of its ops that is not a leaf (a parameter or a caller's input is held by its
//! owner anyway: a copy would free nothing) as a [`HostCopy`]: read back once per tensor when an
//! op first stores it, shared by every reader, dropped with its last reader. Neither direction
//! stalls the training thread:
//! - `copier`: the read back runs on a copy thread of the training thread's (a stream of its own
//!   on a cubecl runtime); forward waits only past a bound on the bytes in flight;
//! - `prefetch`: when backward first reads a region's copies, the region before's start
//!   uploading;
//! - `host_copy`: one copy's life, in flight, on the host, on the device again.
//!
//! Below the recompute machinery and the region state, which use it; above the vocabulary.

mod copier;
mod host_copy;
mod prefetch;
mod read;

pub(crate) use copier::{in_flight_limit, set_in_flight_limit};
pub(crate) use host_copy::HostCopy;

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::sync::Weak;

use burn_autodiff::NodeId;
use burn_backend::Backend;

use crate::node_map::{ErasedWeak, NodeMap};
use crate::types::Tracked;

// ---------------------------------------------------------------------------------------------
// What offloads, per thread

/// The region op being built: its top-level region instance, and whether its region offloads.
#[derive(Clone, Copy)]
struct Building {
    group: u64,
    offloads: bool,
}

thread_local! {
    static BUILDING: Cell<Option<Building>> = const { Cell::new(None) };
    /// Outputs a policy decided to keep in host memory, by node id.
    static MARKED: RefCell<NodeMap<Weak<NodeId>>> = RefCell::new(NodeMap::default());
    /// The live host copy of each offloaded node, by node id.
    static HOST_COPIES: RefCell<NodeMap<ErasedWeak>> = RefCell::new(NodeMap::default());
}

/// Runs `f`, building one region op of the top-level region instance `group`, whose region
/// offloads if `offloads`.
pub(crate) fn building<R>(group: u64, offloads: bool, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Building>);
    impl Drop for Restore {
        fn drop(&mut self) {
            BUILDING.with(|building| building.set(self.0));
        }
    }
    let now = Building { group, offloads };
    let _restore = Restore(BUILDING.with(|building| building.replace(Some(now))));
    f()
}

/// Marks the stored node `id` (whose count is `rc`) as kept in host memory by its readers.
pub(crate) fn mark(id: u64, rc: &Arc<NodeId>) {
    MARKED.with(|marked| marked.borrow_mut().insert(id, Arc::downgrade(rc)));
}

/// The host copy a region op being built keeps of its stored operand `tensor`, if it keeps one:
/// when its region offloads or `tensor` was marked, and `tensor` is not a leaf.
pub(crate) fn host_copy<I: Backend>(tensor: &Tracked<I>) -> Option<Arc<HostCopy<I>>> {
    let id = tensor.node.id.value;
    let building = BUILDING.with(Cell::get)?;
    let wanted = building.offloads || MARKED.with(|marked| marked.borrow().contains(id));
    if !wanted || tensor.node.parents.is_empty() {
        return None;
    }
    if let Some(copy) = HOST_COPIES.with(|copies| copies.borrow().get_shared::<HostCopy<I>>(id)) {
        return Some(copy);
    }
    let copy = HostCopy::start(&tensor.primitive, building.group);
    HOST_COPIES.with(|copies| copies.borrow_mut().insert_shared(id, &copy));
    Some(copy)
}
