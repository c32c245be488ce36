//! Per-thread counters of what regions did: recomputes, steps of the recompute walk, fallbacks;
//! and what they cost the thread in waits: device reads, waits on offload copies. A leaf: the
//! machinery counts into it, [`Counters::now`] reads it out.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

thread_local! {
    static FALLBACKS: RefCell<BTreeMap<&'static str, u64>> = const { RefCell::new(BTreeMap::new()) };
    static RECOMPUTES: RefCell<BTreeMap<&'static str, u64>> = const { RefCell::new(BTreeMap::new()) };
    static WALK_STEPS: Cell<u64> = const { Cell::new(0) };
    static DEVICE_READS: Cell<u64> = const { Cell::new(0) };
    static OFFLOAD: Cell<OffloadCopies> = const { Cell::new(OffloadCopies::NONE) };
}

/// Counts one step of the recompute walk (a recipe looked at for the first time) on this thread.
pub(crate) fn note_walk_step() {
    WALK_STEPS.with(|steps| steps.set(steps.get() + 1));
}

/// Counts one recompute of a region op on this thread.
pub(crate) fn note_recompute(op: &'static str) {
    RECOMPUTES.with(|counts| *counts.borrow_mut().entry(op).or_default() += 1);
}

/// Counts one fallback of `op` on this thread (and says so once per op through `log::debug!`).
// Called by `route::stored_op`, which no op uses today.
#[allow(dead_code)]
pub(crate) fn note_fallback(op: &'static str) {
    FALLBACKS.with(|counts| *counts.borrow_mut().entry(op).or_default() += 1);
    // A `BTreeSet`, whose `new` is `const`: the static needs no `Option` around it.
    static SAID: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let first = SAID.lock().map(|mut said| said.insert(op)).unwrap_or(false);
    if first {
        log::debug!(
            "burn-checkpoint: `{op}` has no region version: inside regions its output is stored"
        );
    }
}

/// Counts one read of device data (or one device sync) asked on this thread.
pub(crate) fn note_device_read() {
    DEVICE_READS.with(|reads| reads.set(reads.get() + 1));
}

/// Where an offload wait happened.
pub(crate) enum Pass {
    /// Forward, on the bound of the copies in flight.
    Forward,
    /// Backward, on a copy not yet in host memory.
    Backward,
}

/// Counts one offload copy of `bytes` started on this thread, with `in_flight` bytes of copies
/// in flight now (it included).
pub(crate) fn note_offload_copy(bytes: usize, in_flight: usize) {
    OFFLOAD.with(|offload| {
        let mut now = offload.get();
        now.copies += 1;
        now.bytes += bytes as u64;
        now.most_in_flight = now.most_in_flight.max(in_flight as u64);
        offload.set(now);
    });
}

/// Counts one offload copy whose read this (training) thread issued itself.
pub(crate) fn note_offload_issued_here() {
    OFFLOAD.with(|offload| {
        let mut now = offload.get();
        now.issued_here += 1;
        offload.set(now);
    });
}

/// Counts one wait of this thread on offload copies, of `waited`.
pub(crate) fn note_offload_wait(pass: Pass, waited: Duration) {
    OFFLOAD.with(|offload| {
        let mut now = offload.get();
        match pass {
            Pass::Forward => now.forward_waits += 1,
            Pass::Backward => now.backward_waits += 1,
        }
        now.waited_seconds += waited.as_secs_f64();
        offload.set(now);
    });
}

/// What offload copied for this thread, and how it waited on the copies: forward waits only
/// when the copies in flight would pass their bound, backward only when a copy has not arrived
/// in host memory by the time it is read.
///
/// ```
/// use burn::backend::{Autodiff, NdArray};
/// use burn::tensor::{Tensor, activation::relu};
/// use burn_checkpoint::counters::Counters;
/// use burn_checkpoint::{Checkpointed, Region};
///
/// type B = Checkpointed<Autodiff<NdArray>>;
/// let device = Default::default();
/// let w = Tensor::<B, 2>::ones([16, 16], &device).require_grad();
/// let x = Tensor::<B, 2>::ones([8, 16], &device);
/// Counters::reset();
/// let h = relu(x.matmul(w.clone())); // not a leaf: the region below copies it
/// let y = Region::new().offloaded().run(|| relu(h.matmul(w.clone())));
/// let _grads = y.sum().backward();
/// let copies = Counters::now().offload;
/// assert_eq!((copies.copies, copies.bytes), (1, 8 * 16 * 4));
/// assert_eq!(copies.forward_waits, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OffloadCopies {
    /// Copies read back to host memory.
    pub copies: u64,
    /// Their bytes.
    pub bytes: u64,
    /// The most bytes of copies in flight at once (started, not yet in host memory).
    pub most_in_flight: u64,
    /// Copies whose read the training thread issued itself, at the op that stored the tensor,
    /// leaving only the wait to the copy thread: on a backend whose read returns before it is
    /// done (wgpu). The others were read wholly on the copy thread (CUDA in cubecl 0.10, whose
    /// read waits as it is issued; the CPU backends, which copy at once).
    pub issued_here: u64,
    /// Waits in forward: more bytes of copies would have been in flight than
    /// [`Settings::offload_in_flight_limit`](crate::Settings) allows.
    pub forward_waits: u64,
    /// Waits in backward: a copy was not yet in host memory when backward read it.
    pub backward_waits: u64,
    /// The time spent in all the waits.
    pub waited_seconds: f64,
}

impl OffloadCopies {
    const NONE: OffloadCopies = OffloadCopies {
        copies: 0,
        bytes: 0,
        most_in_flight: 0,
        issued_here: 0,
        forward_waits: 0,
        backward_waits: 0,
        waited_seconds: 0.0,
    };
}

/// What regions did on this thread since the last [`Counters::reset`]: a snapshot, read with
/// [`Counters::now`]. Tests and benchmarks read it to see that a model's ops were recomputed and
/// what the thread waited on.
///
/// ```
/// use burn::backend::{Autodiff, NdArray};
/// use burn::tensor::{Tensor, activation::relu};
/// use burn_checkpoint::counters::Counters;
/// use burn_checkpoint::{Checkpointed, checkpoint, Region};
///
/// type B = Checkpointed<Autodiff<NdArray>>;
/// let device = Default::default();
/// let x = Tensor::<B, 2>::ones([4, 8], &device).require_grad();
///
/// Counters::reset();
/// let y = checkpoint(|| relu(x.clone().exp()));
/// let _ = y.sum().backward();
/// let counters = Counters::now();
/// assert_eq!(counters.recomputes["exp"], 1, "the exp was recomputed once");
/// assert!(counters.fallbacks.is_empty(), "no op fell back to a stored output");
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Counters {
    /// Recomputes backward ran, per op (Burn's name without the `float_` prefix: `exp`,
    /// `matmul`, `conv2d`, ...).
    pub recomputes: BTreeMap<&'static str, u64>,
    /// Steps of the recompute walk: one per recipe expanded, so their sum equals the
    /// recomputes' (docs/regions.md, "The recompute walk").
    pub walk_steps: u64,
    /// Ops run inside a region as Burn's own (their output stored), per op: *fallbacks*.
    /// Empty unless an op has no region version (none today: see `coverage::ops`).
    pub fallbacks: BTreeMap<&'static str, u64>,
    /// Reads of device data (or device syncs) asked through a `Checkpointed` backend
    /// (`into_data` of any tensor kind, a transaction, `sync`) or through offload: each is a
    /// wait on the device. Offload reads its copies back on a thread of its own, so that with it
    /// on a step counts the same reads as with it off.
    pub device_reads: u64,
    /// Offload's copies and the waits they cost.
    pub offload: OffloadCopies,
}

impl Counters {
    /// This thread's counts now.
    pub fn now() -> Counters {
        Counters {
            recomputes: RECOMPUTES.with(|counts| counts.borrow().clone()),
            walk_steps: WALK_STEPS.with(Cell::get),
            fallbacks: FALLBACKS.with(|counts| counts.borrow().clone()),
            device_reads: DEVICE_READS.with(Cell::get),
            offload: OFFLOAD.with(Cell::get),
        }
    }

    /// Starts this thread's counts again from zero.
    pub fn reset() {
        FALLBACKS.with(|counts| counts.borrow_mut().clear());
        RECOMPUTES.with(|counts| counts.borrow_mut().clear());
        WALK_STEPS.with(|steps| steps.set(0));
        DEVICE_READS.with(|reads| reads.set(0));
        OFFLOAD.with(|offload| offload.set(OffloadCopies::NONE));
    }

    /// All recomputes, whatever the op.
    pub fn total_recomputes(&self) -> u64 {
        self.recomputes.values().sum()
    }
}
