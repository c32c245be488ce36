//! A stored operand held in host memory: read back on the copy thread, uploaded again one region
//! ahead of backward (or when backward reads it), shared by every reader.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use burn_backend::tensor::Device;
use burn_backend::{Backend, TensorData, TensorMetadata};

use burn_checkpoint_core::engine::{host_copy_dropped, host_copy_made};

use super::prefetch::{self, Prefetch};
use super::{copier, read};
use crate::counters;
use crate::types::Primitive;

/// Where the value of a host copy is.
enum Place<I: Backend> {
    /// Being read back on the copy thread.
    InFlight,
    /// In host memory.
    OnHost(TensorData),
    /// Uploaded again, ahead of backward's first read (the host data dropped).
    OnDevice(Primitive<I>),
    /// Taken by the last reader.
    Taken,
    /// The read back failed, for this reason.
    Failed(String),
}

/// Where the value is and the signal that it arrived: the part of a host copy the copy thread
/// writes to. Kept apart from [`HostCopy`] so that the copy thread never holds a reference to the
/// copy itself: the strong count of a `HostCopy` is its readers, exactly, so the last reader knows
/// it is last, and the bytes leave the offload count when that reader is done, never a moment
/// later on the copy thread (tests read the count right after backward).
struct Slot<I: Backend> {
    place: Mutex<Place<I>>,
    arrived: Condvar,
}

impl<I: Backend> Slot<I> {
    fn lock(&self) -> MutexGuard<'_, Place<I>> {
        self.place
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl<I: Backend> read::Arrive for Slot<I> {
    fn arrive(&self, read: Result<TensorData, String>) {
        *self.lock() = match read {
            Ok(data) => Place::OnHost(data),
            Err(reason) => Place::Failed(reason),
        };
        self.arrived.notify_all();
    }
}

/// A stored operand held in host memory: one copy per tensor, shared by every operand that reads
/// it (a DenseNet feature read by each later layer is copied once), dropped with its last reader.
pub(crate) struct HostCopy<I: Backend> {
    slot: Arc<Slot<I>>,
    device: Device<I>,
    bytes: usize,
    /// The top-level region instance whose op first stored it (see `prefetch`).
    group: u64,
}

impl<I: Backend> HostCopy<I> {
    /// Starts the host copy of `tensor` and returns without waiting for it.
    pub(super) fn start(tensor: &Primitive<I>, group: u64) -> Arc<Self> {
        let bytes = tensor.shape().num_elements() * tensor.dtype().size();
        host_copy_made(bytes);
        let copy = Arc::new(HostCopy {
            slot: Arc::new(Slot {
                place: Mutex::new(Place::InFlight),
                arrived: Condvar::new(),
            }),
            device: I::float_device(tensor),
            bytes,
            group,
        });
        // `keeper`, dropped back on the training thread, keeps the copy thread from dropping the
        // last handle (see `copier`). Weak: a copy whose readers are all gone is not read.
        read::start::<I, _>(
            tensor.clone(),
            tensor.clone(),
            bytes,
            Arc::downgrade(&copy.slot),
        );
        let handle: Arc<dyn Prefetch> = copy.clone();
        prefetch::remember(&handle);
        copy
    }

    /// The place, once the copy has arrived (waiting for it is counted).
    fn arrived(&self) -> MutexGuard<'_, Place<I>> {
        copier::drop_finished();
        let mut place = self.slot.lock();
        if matches!(*place, Place::InFlight) {
            let waiting = Instant::now();
            while matches!(*place, Place::InFlight) {
                place = self
                    .slot
                    .arrived
                    .wait(place)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
            }
            counters::note_offload_wait(counters::Pass::Backward, waiting.elapsed());
        }
        place
    }

    /// The size of the copy.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// The value on its device again: the last reader takes it, the others copy the handle (or
    /// the host data).
    pub(crate) fn upload(self: Arc<Self>) -> Primitive<I> {
        prefetch::reached(self.group);
        let mut place = self.arrived();
        // Only readers hold a `HostCopy` (the copy thread holds its slot; `prefetch` a weak
        // reference, upgraded on this thread only): the count is exact.
        let last = Arc::strong_count(&self) == 1;
        match &*place {
            Place::OnDevice(primitive) if !last => primitive.clone(),
            Place::OnHost(data) if !last => I::float_from_data(data.clone(), &self.device),
            Place::Failed(reason) => panic!(
                "burn-checkpoint: reading an offloaded operand back from the device failed: \
                 {reason}"
            ),
            Place::Taken | Place::InFlight => {
                unreachable!("a host copy holds its value until its last reader")
            }
            _ => match std::mem::replace(&mut *place, Place::Taken) {
                Place::OnDevice(primitive) => primitive,
                Place::OnHost(data) => I::float_from_data(data, &self.device),
                _ => unreachable!(),
            },
        }
    }
}

impl<I: Backend> Prefetch for HostCopy<I> {
    fn group(&self) -> u64 {
        self.group
    }

    /// Uploads the value now, if it is in host memory, so that the device has it when backward
    /// reads it (a copy still in flight is left: its reader will upload it).
    fn upload_ahead(&self) {
        let mut place = self.slot.lock();
        if matches!(*place, Place::OnHost(_)) {
            let Place::OnHost(data) = std::mem::replace(&mut *place, Place::Taken) else {
                unreachable!()
            };
            *place = Place::OnDevice(I::float_from_data(data, &self.device));
        }
    }
}

impl<I: Backend> Drop for HostCopy<I> {
    fn drop(&mut self) {
        host_copy_dropped(self.bytes);
    }
}
