//! Offload: what a region stores for backward, kept in host memory instead of on the device.
//! Everything offload is lives here: the host copies and their registry, the flag that tells the
//! recompute machinery that the region op being built offloads, the outputs a policy marked
//! ([`Decision::Offload`](crate::Decision::Offload)). The bytes are counted in
//! burn-checkpoint-core's `memory::offloaded_bytes`, which the memory report reads.
//!
//! A region whose policy offloads ([`Policy::offloaded`](crate::Policy::offloaded)) keeps each
//! stored operand of its ops that is not a leaf (a parameter or a caller's input is held by its
//! owner anyway: a copy would free nothing) as a [`HostCopy`]: read back once per tensor when an
//! op first stores it, shared by every reader, uploaded when backward reads it, dropped with its
//! last reader.
//!
//! Below the recompute machinery and the region state, which use it; above the vocabulary.

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::sync::Weak;

use burn_autodiff::NodeId;
use burn_backend::tensor::Device;
use burn_backend::{Backend, TensorData, try_read_sync};

use burn_checkpoint_core::memory::{host_copy_dropped, host_copy_made};

use crate::node_map::{ErasedWeak, NodeMap};
use crate::types::{Primitive, Tracked};

// ---------------------------------------------------------------------------------------------
// What offloads, per thread

thread_local! {
    /// Whether the region op being built belongs to a region that offloads.
    static BUILDING: Cell<bool> = const { Cell::new(false) };
    /// Outputs a policy decided to keep in host memory, by node id.
    static MARKED: RefCell<NodeMap<Weak<NodeId>>> = RefCell::new(NodeMap::default());
    /// The live host copy of each offloaded node, by node id.
    static HOST_COPIES: RefCell<NodeMap<ErasedWeak>> = RefCell::new(NodeMap::default());
}

/// Runs `f` (building one region op) with the offload flag set to `offload`.
pub(crate) fn building<R>(offload: bool, f: impl FnOnce() -> R) -> R {
    if !offload {
        return f();
    }
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            BUILDING.with(|building| building.set(self.0));
        }
    }
    let _restore = Restore(BUILDING.with(|building| building.replace(true)));
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
    let wanted = BUILDING.with(Cell::get) || MARKED.with(|marked| marked.borrow().contains(id));
    (wanted && !tensor.node.parents.is_empty()).then(|| HostCopy::of(tensor))
}

// ---------------------------------------------------------------------------------------------
// Host copies

/// A stored operand held in host memory: one copy per tensor, shared by every operand that reads
/// it (a DenseNet feature read by each later layer is copied once), dropped with its last reader.
pub(crate) struct HostCopy<I: Backend> {
    /// Taken by the last reader's upload.
    data: Option<TensorData>,
    device: Device<I>,
    bytes: usize,
}

impl<I: Backend> HostCopy<I> {
    /// The host copy of `tensor`, made now (a read back from the device) unless one is alive.
    fn of(tensor: &Tracked<I>) -> Arc<Self> {
        let id = tensor.node.id.value;
        if let Some(copy) = HOST_COPIES.with(|copies| copies.borrow().get_shared::<Self>(id)) {
            return copy;
        }
        let data = try_read_sync(I::float_into_data(tensor.primitive.clone()))
            .expect(
                "burn-checkpoint: offloading needs a backend that reads data back synchronously",
            )
            .expect("burn-checkpoint: reading an offloaded operand back from the device failed");
        let bytes = data.bytes.len();
        host_copy_made(bytes);
        let copy = Arc::new(HostCopy {
            data: Some(data),
            device: I::float_device(&tensor.primitive),
            bytes,
        });
        HOST_COPIES.with(|copies| copies.borrow_mut().insert_shared(id, &copy));
        copy
    }

    /// The size of the copy.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// The value on its device again: the last reader takes the host data, the others copy it.
    pub(crate) fn upload(self: Arc<Self>) -> Primitive<I> {
        const HELD: &str = "a host copy holds its data until its last reader";
        match Arc::try_unwrap(self) {
            Ok(mut copy) => {
                let data = copy.data.take().expect(HELD);
                I::float_from_data(data, &copy.device)
            }
            Err(shared) => I::float_from_data(shared.data.clone().expect(HELD), &shared.device),
        }
    }
}

impl<I: Backend> Drop for HostCopy<I> {
    fn drop(&mut self) {
        host_copy_dropped(self.bytes);
    }
}
