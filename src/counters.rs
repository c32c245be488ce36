//! Per-thread counters of what regions did: recomputes, steps of the recompute walk, fallbacks.
//! Below the machinery, which counts into it; [`coverage`](crate::coverage) reads it out.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;

thread_local! {
    static FALLBACKS: RefCell<BTreeMap<&'static str, u64>> = const { RefCell::new(BTreeMap::new()) };
    static RECOMPUTES: RefCell<BTreeMap<&'static str, u64>> = const { RefCell::new(BTreeMap::new()) };
    static WALK_STEPS: Cell<u64> = const { Cell::new(0) };
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
    static SAID: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let first = SAID
        .lock()
        .map(|mut said| said.get_or_insert_with(HashSet::new).insert(op))
        .unwrap_or(false);
    if first {
        log::debug!(
            "burn-checkpoint: `{op}` has no region version: inside regions its output is stored"
        );
    }
}

/// How many steps the recompute walk took on this thread since it started or the last
/// [`reset`]: each region op's recipe is visited once per backward when it is recomputed, so
/// this stays equal to the sum of [`recomputes`], however the region's ops share inputs. (Burn
/// 0.21's own checkpointer walks every path instead: exponential in a residual region's length.)
pub fn walk_steps() -> u64 {
    WALK_STEPS.with(|steps| steps.get())
}

/// How many times each region op (named as in Burn, without the `float_` prefix) was recomputed
/// by backward passes on this thread, since the thread started or the last [`reset`].
pub fn recomputes() -> BTreeMap<&'static str, u64> {
    RECOMPUTES.with(|counts| counts.borrow().clone())
}

/// The ops that fell back to Burn's stored version inside regions on this thread, with how many
/// times each did, since the thread started or the last [`reset`].
///
/// ```
/// use burn::backend::{Autodiff, NdArray};
/// use burn::tensor::Tensor;
/// use burn_checkpoint::{Checkpointed, checkpoint, coverage};
///
/// type B = Checkpointed<Autodiff<NdArray>>;
/// let device = Default::default();
/// let x = Tensor::<B, 1>::from_floats([3.0, 1.0, 2.0], &device).require_grad();
/// let exponent = Tensor::<B, 1>::from_floats([2.0, 2.0, 2.0], &device);
/// coverage::reset();
/// // An untracked operand (here the exponent) is kept in the recompute: nothing falls back.
/// let _y = checkpoint(|| x.clone().powf(exponent.clone()));
/// assert!(coverage::fallbacks().is_empty());
/// ```
pub fn fallbacks() -> BTreeMap<&'static str, u64> {
    FALLBACKS.with(|counts| counts.borrow().clone())
}

/// Clears this thread's [`fallbacks`], [`recomputes`] and [`walk_steps`]. Region indices, which
/// saved plans address, count on ([`restart_region_indices`](crate::restart_region_indices)
/// starts them again).
pub fn reset() {
    FALLBACKS.with(|counts| counts.borrow_mut().clear());
    RECOMPUTES.with(|counts| counts.borrow_mut().clear());
    WALK_STEPS.with(|steps| steps.set(0));
}
