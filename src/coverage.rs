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
    /// Recomputed: a region version built by this crate (Burn's own op with its backward
    /// formula, recomputed by this crate's walk).
    Region,
    /// Stored: Burn's op, output held until backward (a fallback). Only the ops of
    /// [`DELIBERATELY_STORED`] are routed so.
    Stored,
    /// Builds no graph node (tensor creation, comparisons, int and bool ops, data access).
    Plain,
    /// Written out by hand (conversions of Burn's backend-generic structs, a decomposition
    /// through the decorator, or a region version returning a struct of Burn's); what each does
    /// inside a region is in [`HAND_WRITTEN`].
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

/// The ops Burn builds compute-bound (it stores their output) that the decorator leaves stored on
/// purpose, each with the reason. Inside a region such an op runs as Burn's own op: exact
/// gradients, its output held from forward to backward, counted by [`fallbacks`].
///
/// Every other op that burn-autodiff builds compute-bound has a region version: the test
/// `tests/coverage.rs` walks burn-autodiff's own source to check it (so that an op a later Burn
/// adds is caught), and checks that `docs/coverage.md` names each op listed here with its reason.
///
/// ```
/// use burn_checkpoint::coverage::{DELIBERATELY_STORED, Routing, ops};
///
/// for (name, _reason) in DELIBERATELY_STORED {
///     let op = ops().find(|op| op.name == *name).unwrap();
///     assert_eq!(op.routing, Routing::Stored);
/// }
/// ```
///
/// Empty since region ops are recomputed by this crate's own walk: `ctc_loss` was here while
/// regions used Burn 0.21's checkpointer, whose walk is exponential on the loss's recursion.
pub const DELIBERATELY_STORED: &[(&str, &str)] = &[];

/// The ops the decorator writes out by hand ([`Routing::Custom`]), with what each does inside a
/// region: [`Routing::Region`] for a region version the macro cannot generate (it returns a
/// struct of Burn's, or depends on what the backend implements), [`Routing::Plain`] for one that builds no node of its own (a conversion of
/// Burn's backend-generic structs, or a decomposition through the decorator, whose ops are then
/// routed one by one).
pub const HAND_WRITTEN: &[(&str, Routing, &str)] = &[
    (
        "max_pool1d_with_indices",
        Routing::Region,
        "region version; the indices go to the caller, the backward recomputes them",
    ),
    (
        "max_pool2d_with_indices",
        Routing::Region,
        "region version; the indices go to the caller, the backward recomputes them",
    ),
    (
        "ctc_loss",
        Routing::Region,
        "region version on a backend with a native CTC backward; elsewhere decomposed through \
         the decorator into tensor ops, as Burn decomposes it, each recomputed",
    ),
    (
        "attention",
        Routing::Plain,
        "decomposed through the decorator (Burn decomposes it through autodiff's ops)",
    ),
    (
        "deform_conv2d_backward",
        Routing::Plain,
        "forwarded (a backward op: no graph node), its result struct converted",
    ),
    (
        "max_pool1d_with_indices_backward",
        Routing::Plain,
        "forwarded (a backward op: no graph node), its result struct converted",
    ),
    (
        "max_pool2d_with_indices_backward",
        Routing::Plain,
        "forwarded (a backward op: no graph node), its result struct converted",
    ),
    (
        "quantize",
        Routing::Plain,
        "forwarded (no graph node), its parameters struct converted",
    ),
    (
        "tr_execute",
        Routing::Plain,
        "forwarded (reads data: no graph node), its transaction struct converted",
    ),
];

thread_local! {
    static FALLBACKS: RefCell<BTreeMap<&'static str, u64>> = const { RefCell::new(BTreeMap::new()) };
    static RECOMPUTES: RefCell<BTreeMap<&'static str, u64>> = const { RefCell::new(BTreeMap::new()) };
    static WALK_STEPS: core::cell::Cell<u64> = const { core::cell::Cell::new(0) };
}

/// Counts one step of the recompute walk (a recipe looked at for the first time) on this thread.
pub(crate) fn note_walk_step() {
    WALK_STEPS.with(|steps| steps.set(steps.get() + 1));
}

/// How many steps the recompute walk took on this thread since it started or the last
/// [`reset`]: each region op's recipe is visited once per backward when it is recomputed, so
/// this stays equal to the sum of [`recomputes`], however the region's ops share inputs. (Burn
/// 0.21's own checkpointer walks every path instead: exponential in a residual region's length.)
pub fn walk_steps() -> u64 {
    WALK_STEPS.with(|steps| steps.get())
}

/// Counts one recompute of a region op on this thread.
pub(crate) fn note_recompute(op: &'static str) {
    RECOMPUTES.with(|counts| *counts.borrow_mut().entry(op).or_default() += 1);
}

/// How many times each region op (named as in Burn, without the `float_` prefix) was recomputed
/// by backward passes on this thread, since the thread started or the last [`reset`].
///
pub fn recomputes() -> BTreeMap<&'static str, u64> {
    RECOMPUTES.with(|counts| counts.borrow().clone())
}

/// Clears this thread's [`fallbacks`] and [`recomputes`].
pub fn reset() {
    FALLBACKS.with(|counts| counts.borrow_mut().clear());
    RECOMPUTES.with(|counts| counts.borrow_mut().clear());
    WALK_STEPS.with(|steps| steps.set(0));
}

/// Counts one fallback of `op` on this thread (and says so once per op through `log::debug!`).
// Called by ops routed `#[stored]` (an op without a region version); none is, today.
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
