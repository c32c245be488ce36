//! Which ops regions recompute, and which ones fell back to Burn's stored op.
//!
//! Every op of Burn's backend traits that the decorator lists has a [`Routing`]. Inside a region,
//! an op with routing [`Routing::Stored`] runs as Burn's own op: its gradients stay exact, but its
//! output is held from forward to backward. Each such run is a *fallback*, counted per thread so
//! that tests and users can see what a model still stores.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::collections::HashSet;
use std::sync::Mutex;

/// How the decorator runs an op inside a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Routing {
    /// Recomputed: a region version built by this crate (compute-bound in Burn).
    Region,
    /// Recomputed: Burn's own memory-bound version (`BalancedCheckpointing`).
    Balanced,
    /// Stored: Burn's op, output held until backward (a fallback).
    Stored,
    /// Builds no graph node (tensor creation, comparisons, int and bool ops, data access).
    Plain,
    /// Written out by hand (conversions of Burn's backend-generic structs, or a decomposition
    /// through the decorator).
    Custom,
}

/// One op of Burn's backend traits as the decorator lists it.
#[derive(Clone, Copy, Debug)]
pub struct OpEntry {
    /// The trait: `FloatTensorOps`, `ModuleOps`, ...
    pub family: &'static str,
    /// The method, as Burn names it (`float_matmul`, `conv2d`, ...).
    pub name: &'static str,
    /// How it runs inside a region.
    pub routing: Routing,
}

/// Every op the decorator lists, with its routing.
///
/// ```
/// use burn_checkpoint::coverage::{Routing, ops};
///
/// let conv2d = ops().find(|op| op.name == "conv2d").unwrap();
/// assert_eq!(conv2d.routing, Routing::Region);
/// ```
pub fn ops() -> impl Iterator<Item = &'static OpEntry> {
    crate::backend::listed_ops()
}

thread_local! {
    static FALLBACKS: RefCell<BTreeMap<&'static str, u64>> = const { RefCell::new(BTreeMap::new()) };
    static RECOMPUTES: RefCell<BTreeMap<&'static str, u64>> = const { RefCell::new(BTreeMap::new()) };
}

/// Counts one recompute of a region op on this thread.
pub(crate) fn note_recompute(op: &'static str) {
    RECOMPUTES.with(|counts| *counts.borrow_mut().entry(op).or_default() += 1);
}

/// How many times each region op (named as in Burn, without the `float_` prefix) was recomputed
/// by backward passes on this thread, since the thread started or the last [`reset`].
///
/// Ops that run on Burn's `BalancedCheckpointing` inside regions (elementwise ops, activations,
/// reshapes) are recomputed too, but by Burn's code: they are not counted here.
pub fn recomputes() -> BTreeMap<&'static str, u64> {
    RECOMPUTES.with(|counts| counts.borrow().clone())
}

/// Clears this thread's [`fallbacks`] and [`recomputes`].
pub fn reset() {
    FALLBACKS.with(|counts| counts.borrow_mut().clear());
    RECOMPUTES.with(|counts| counts.borrow_mut().clear());
}

/// Counts one fallback of `op` on this thread (and says so once per op through `log::debug!`).
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
/// // Burn stores a memory-bound op's output when one operand is untracked.
/// let _y = checkpoint(|| x.clone().powf(exponent.clone()));
/// assert_eq!(coverage::fallbacks().get("float_powf (untracked operand)"), Some(&1));
/// ```
pub fn fallbacks() -> BTreeMap<&'static str, u64> {
    FALLBACKS.with(|counts| counts.borrow().clone())
}
