//! The per-thread region state: the open regions, innermost last, each with its name and index,
//! how it runs (as its code says or as a plan's treatment says), the backend it ran on and how
//! many of a `Checkpointed` backend's ops it ran; opening and closing them (the recording hears of
//! top-level ones); and what one op sees of it ([`OpContext`], [`OpRegion`]).

use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};

use burn_checkpoint_core::engine;
use burn_checkpoint_core::engine::recording;
use burn_checkpoint_core::{RegionId, RegionName, RunAs, Treatment};

use crate::policy::Policy;

/// How a region runs: as its code says, or as a plan's treatment says (the crate for Burn 0.22
/// has the same enum, with the runs its mechanism adds).
enum Run {
    /// Its ops run as Burn's own: a plan keeps it ([`Treatment::Keep`]).
    Keep,
    /// A region: what it keeps, and whether what it stores waits in host memory (for the regions
    /// nested in it too).
    Region { policy: Policy, offload: bool },
}

impl Run {
    /// The policy of a region that is one; `None` for one a plan keeps.
    fn policy(&self) -> Option<&Policy> {
        match self {
            Run::Region { policy, .. } => Some(policy),
            Run::Keep => None,
        }
    }

    fn offloads(&self) -> bool {
        matches!(self, Run::Region { offload: true, .. })
    }
}

/// How a region whose code asks for `coded` runs under a plan's `treatment` (the core's rule,
/// [`Treatment::run_as`], in this crate's words). Recomputing keeps what the code keeps by name
/// (`Policy::recompute_all_but`).
fn planned_run(treatment: Treatment, coded: &Policy, offload: bool) -> Run {
    let region = |policy, offload| Run::Region { policy, offload };
    match treatment.run_as() {
        RunAs::Keep => Run::Keep,
        RunAs::SaveComputeBound => region(Policy::SaveComputeBound, false),
        RunAs::RecomputeAll { offload } => match coded {
            Policy::RecomputeAllBut(_) => region(coded.clone(), offload),
            _ => region(Policy::RecomputeAll, offload),
        },
        RunAs::AsWritten => region(coded.clone(), offload),
    }
}

/// An open region's place in the state: dropping it closes the region (and those opened inside
/// it and leaked).
pub(super) struct Opened {
    instance: u64,
    // Region state is per thread: the region must be closed on the thread that opened it.
    _not_send: PhantomData<*const ()>,
}

/// Opens a region named `name` whose code asks for `policy` and `offload`, as `backend` runs it
/// (`None`: a `Checkpointed` backend's ops will say so).
pub(super) fn open(
    backend: Option<&'static str>,
    name: &RegionName,
    policy: &Policy,
    offload: bool,
) -> Opened {
    let id = RegionId::next(name.clone());
    STATE.with(|state| {
        let mut state = state.borrow_mut();
        state.next_instance += 1;
        let instance = state.next_instance;
        let top_level = state.stack.is_empty();
        // A plan decides for top-level regions only; nested ones run as the code says.
        let planned = top_level.then(|| engine::planned(&id)).flatten();
        let run = match planned {
            Some(treatment) => planned_run(treatment, policy, offload),
            None => Run::Region {
                policy: policy.clone(),
                offload,
            },
        };
        // A recomputed region that keeps this one by name (`Policy::recompute_all_but`): the ops
        // of its body run as Burn's own, as outside regions (`op_context`).
        let kept = state
            .stack
            .iter()
            .any(|frame| frame.run.policy().is_some_and(|p| p.keeps(&id.name)));
        if top_level && recording::on() {
            recording::top_level_opened(&id.name, id.index, planned);
        }
        state.stack.push(Frame {
            instance,
            id,
            run,
            backend,
            decorated_ops: 0,
            kept,
        });
        Opened {
            instance,
            _not_send: PhantomData,
        }
    })
}

impl Drop for Opened {
    fn drop(&mut self) {
        // `try_with`: a guard dropped while the thread is being torn down has nothing to restore.
        let closed = STATE.try_with(|state| {
            let mut state = state.borrow_mut();
            let position = state
                .stack
                .iter()
                .rposition(|frame| frame.instance == self.instance)?;
            // Regions close in reverse order; a guard leaked with `mem::forget` inside this one
            // is closed with it.
            let closed = state.stack.split_off(position);
            let ops: u64 = closed.iter().map(|frame| frame.decorated_ops).sum();
            // The enclosing region ran what this one ran.
            if let Some(enclosing) = state.stack.last_mut() {
                enclosing.decorated_ops += ops;
            }
            if position == 0 {
                recording::top_level_closed();
            }
            Some((closed[0].backend, ops))
        });
        if let Ok(Some((backend, 0))) = closed {
            warn_not_decorated(backend);
        }
    }
}

/// Says once per process that a region ran no op on a `Checkpointed` backend.
fn warn_not_decorated(backend: Option<&'static str>) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if WARNED.swap(true, Ordering::Relaxed) {
        return;
    }
    match backend {
        Some(backend) => log::warn!(
            "burn-checkpoint: a checkpoint region ran on backend `{backend}`, which is not \
             `Checkpointed<Autodiff<..>>`: the region has no effect (said once per process)"
        ),
        None => log::warn!(
            "burn-checkpoint: a checkpoint region ran no tensor op on a `Checkpointed<Autodiff<..>>` \
             backend: regions have no effect on other backends (said once per process)"
        ),
    }
}

struct Frame {
    instance: u64,
    /// The region's name and index.
    id: RegionId,
    /// A region (its policy decides for the ops run while it is the innermost region), or kept
    /// by a plan.
    run: Run,
    backend: Option<&'static str>,
    /// Ops of a `Checkpointed` backend run in this region (nested regions included once closed).
    decorated_ops: u64,
    /// Kept by name by an enclosing region: the ops it runs itself are Burn's own.
    kept: bool,
}

#[derive(Default)]
struct State {
    /// Open regions, outermost first.
    stack: Vec<Frame>,
    next_instance: u64,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
}

/// The innermost open region's name and index.
pub(super) fn current() -> Option<RegionId> {
    STATE.with(|state| state.borrow().stack.last().map(|frame| frame.id.clone()))
}

/// How many regions are open on this thread.
pub(super) fn depth() -> usize {
    STATE.with(|state| state.borrow().stack.len())
}

/// What one op of the decorator needs to know of the region state: read once per op.
pub(crate) struct OpContext {
    /// The outermost open region, if any.
    pub(super) root: Option<u64>,
    /// The innermost region's policy, unless it recomputes everything.
    pub(super) policy: Option<Policy>,
    /// Whether an open region's policy keeps what it stores in host memory.
    offload: bool,
    /// Whether any tensor made in a region may still be used (so operands must be checked).
    pub(super) watch: bool,
}

/// The region state as the op the decorator is about to run sees it; `watch`: whether a tensor
/// made in a region may still be used (`boundary::watching`).
pub(super) fn op_context(watch: bool) -> OpContext {
    STATE.with(|state| {
        let mut state = state.borrow_mut();
        let policy = state.stack.last_mut().and_then(|innermost| {
            innermost.decorated_ops += 1;
            let policy = innermost.run.policy();
            policy.filter(|policy| !policy.recomputes_all()).cloned()
        });
        // A region nested in an offloading one offloads too.
        let offload = state.stack.iter().any(|frame| frame.run.offloads());
        OpContext {
            offload,
            // Only a top-level region can be kept by a plan: the root is the first frame that
            // runs as a region. The ops a region kept by name runs itself are Burn's own, as
            // outside regions: held as plain autodiff holds them (their operands made in the
            // enclosing region stored at their first use, as at any region's boundary).
            root: state
                .stack
                .last()
                .is_none_or(|innermost| !innermost.kept)
                .then(|| {
                    state
                        .stack
                        .iter()
                        .find(|frame| frame.run.policy().is_some())
                })
                .flatten()
                .map(|frame| frame.instance),
            watch,
            policy,
        }
    })
}

impl OpContext {
    /// Whether the op runs inside a region (asked by `route::stored_op`, which no op uses today).
    #[allow(dead_code)]
    pub(crate) fn in_region(&self) -> bool {
        self.root.is_some()
    }

    /// The region the op runs in, if any.
    pub(crate) fn region(&self) -> Option<OpRegion<'_>> {
        self.root.map(|root| OpRegion {
            root,
            policy: self.policy.as_ref(),
            offload: self.offload,
        })
    }
}

/// The region an op runs in, as that op sees it.
pub(crate) struct OpRegion<'a> {
    pub(super) root: u64,
    pub(super) policy: Option<&'a Policy>,
    offload: bool,
}

impl OpRegion<'_> {
    /// The instance of the top-level region (its number on this thread, growing along forward).
    pub(crate) fn instance(&self) -> u64 {
        self.root
    }

    /// Whether the region keeps what its ops store in host memory.
    pub(crate) fn offloads(&self) -> bool {
        self.offload
    }
}
