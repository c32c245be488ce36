//! Checkpoint regions: per-thread state, the RAII guard that opens and closes a region, and what
//! the decorator asks of that state on every op.
//!
//! A region is open while its [`RegionGuard`] lives. Regions nest; each has an instance number,
//! and the outermost open one (the *root*) decides what is inside: a tensor made by a region op
//! is recorded with the root it was made under. When an op takes such a tensor while that root is
//! no longer open (outside any region, or inside another one), the tensor is a region *output*:
//! the decorator stores it (`boundary.rs`) before the op uses it, so that backward recomputes
//! one region at a time from stored boundaries.

mod boundary;

use std::borrow::Cow;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};

use burn_checkpoint_core::memory::recording;
use burn_checkpoint_core::planner;
use burn_checkpoint_core::{RegionId, RegionName, Treatment, method_name};

use crate::policy::Policy;

pub(crate) use boundary::forget_dropped_outputs;
pub use boundary::remembered_outputs;

/// Runs `f` as a checkpoint region and returns what it returns.
///
/// On a [`Checkpointed`](crate::Checkpointed) backend, what the tensor ops inside `f` compute is
/// not held between forward and backward: backward recomputes it from the region's inputs. The
/// tensors `f` returns (and any other tensor made inside and used outside) are stored. On any
/// other backend the region changes nothing (and says so once through `log`).
///
/// `f` may return anything: a tensor, a tuple of tensors, a struct. Regions nest; the outermost
/// one decides what is recomputed together.
///
/// ```
/// use burn::backend::{Autodiff, NdArray};
/// use burn::tensor::{Tensor, activation::relu};
/// use burn_checkpoint::{Checkpointed, checkpoint};
///
/// type B = Checkpointed<Autodiff<NdArray>>;
/// let device = Default::default();
/// let x = Tensor::<B, 2>::ones([8, 16], &device).require_grad();
/// let w = Tensor::<B, 2>::ones([16, 16], &device).require_grad();
///
/// let (y, z) = checkpoint(|| {
///     let h = relu(x.clone().matmul(w.clone()));
///     (h.clone().sum(), h.mean())
/// });
/// let grads = (y + z).backward();
/// assert!(w.grad(&grads).is_some());
/// ```
#[track_caller]
pub fn checkpoint<R>(f: impl FnOnce() -> R) -> R {
    // `#[track_caller]` passes the caller's place on: the region is named after it.
    checkpoint_with(Policy::RecomputeAll, f)
}

/// [`checkpoint`] with a name of its own (see [`RegionName`]), rather than the place it is
/// called from.
///
/// ```
/// use burn_checkpoint::{checkpoint_named, current_region};
///
/// for index in 0..2 {
///     checkpoint_named("attention", || {
///         let region = current_region().unwrap();
///         assert_eq!(region.to_string(), format!("attention#{index}"));
///     });
/// }
/// ```
pub fn checkpoint_named<R>(name: impl Into<Cow<'static, str>>, f: impl FnOnce() -> R) -> R {
    let _region = open(None, Policy::RecomputeAll, RegionName::new(name));
    f()
}

/// Runs `f` as a checkpoint region with `policy` deciding, op by op, what is recomputed.
///
/// [`checkpoint`] is `checkpoint_with(Policy::RecomputeAll, f)`. In nested regions the innermost
/// region's policy decides for the ops it runs; the outermost region still decides what is
/// stored at the boundary.
///
/// ```
/// use burn::backend::{Autodiff, NdArray};
/// use burn::tensor::{Tensor, activation::relu};
/// use burn_checkpoint::{Checkpointed, Policy, checkpoint_with};
///
/// type B = Checkpointed<Autodiff<NdArray>>;
/// let device = Default::default();
/// let x = Tensor::<B, 2>::ones([8, 16], &device).require_grad();
/// let w = Tensor::<B, 2>::ones([16, 16], &device).require_grad();
///
/// // The matmul output is kept, the ReLU recomputed from it.
/// let y = checkpoint_with(Policy::SaveComputeBound, || relu(x.clone().matmul(w.clone())));
/// let grads = y.sum().backward();
/// assert!(x.grad(&grads).is_some());
/// ```
#[track_caller]
pub fn checkpoint_with<R>(policy: Policy, f: impl FnOnce() -> R) -> R {
    let _region = enter_with(policy);
    f()
}

/// The innermost open region on this thread: its name and index.
///
/// ```
/// use burn_checkpoint::{checkpoint, current_region};
///
/// assert!(current_region().is_none());
/// checkpoint(|| {
///     let here = current_region().unwrap().name.to_string();
///     assert!(here.contains(".rs:"), "the function form is named by its caller's place");
/// });
/// ```
pub fn current_region() -> Option<RegionId> {
    STATE.with(|state| state.borrow().stack.last().map(|frame| frame.id.clone()))
}

/// How many regions are open on this thread.
///
/// ```
/// use burn_checkpoint::{checkpoint, region_depth};
///
/// assert_eq!(region_depth(), 0);
/// checkpoint(|| assert_eq!(region_depth(), 1));
/// assert_eq!(region_depth(), 0);
/// ```
pub fn region_depth() -> usize {
    STATE.with(|state| state.borrow().stack.len())
}

/// An open checkpoint region; dropping it closes the region, on every exit path (panics too).
///
/// Made by [`enter`]; most code uses [`checkpoint`] or the `#[checkpoint]` attribute instead.
#[must_use = "the region closes when the guard is dropped"]
pub struct RegionGuard {
    instance: u64,
    // Region state is per thread: the guard must be dropped on the thread that made it.
    _not_send: PhantomData<*const ()>,
}

/// Opens a region on this thread until the returned guard is dropped.
///
/// ```
/// use burn_checkpoint::{enter, region_depth};
///
/// let region = enter();
/// assert_eq!(region_depth(), 1);
/// drop(region);
/// assert_eq!(region_depth(), 0);
/// ```
#[track_caller]
pub fn enter() -> RegionGuard {
    enter_with(Policy::RecomputeAll)
}

/// Opens a region with `policy` on this thread until the returned guard is dropped.
///
/// ```
/// use burn_checkpoint::{Policy, enter_with, region_depth};
///
/// let region = enter_with(Policy::SaveComputeBound);
/// assert_eq!(region_depth(), 1);
/// drop(region);
/// ```
#[track_caller]
pub fn enter_with(policy: Policy) -> RegionGuard {
    open(None, policy, RegionName::caller())
}

/// Opens a region named `name` with `policy` on this thread until the returned guard is dropped.
pub fn enter_named(name: impl Into<Cow<'static, str>>, policy: Policy) -> RegionGuard {
    open(None, policy, RegionName::new(name))
}

/// Opens a region for code generic over the backend `B`, so that a region on a backend that is
/// not `Checkpointed` can name it in its warning. Used by `#[checkpoint]`.
#[doc(hidden)]
pub fn enter_on<B: ?Sized>(policy: Policy, name: &'static str) -> RegionGuard {
    open(
        Some(core::any::type_name::<B>()),
        policy,
        RegionName::new(name),
    )
}

/// The name `#[checkpoint]` gives a method of `T`: `path::Type::method`, generics left out.
/// Made once per method (the attribute keeps it in a static).
#[doc(hidden)]
pub fn method_region_name<T: ?Sized>(method: &str) -> &'static str {
    method_name(core::any::type_name::<T>(), method).leak()
}

pub(crate) fn open(backend: Option<&'static str>, policy: Policy, name: RegionName) -> RegionGuard {
    let id = RegionId::next(name);
    STATE.with(|state| {
        let mut state = state.borrow_mut();
        state.next_instance += 1;
        let instance = state.next_instance;
        let top_level = state.stack.is_empty();
        // A plan decides for top-level regions only; nested ones run as the code says.
        let planned = top_level.then(|| planner::planned(&id)).flatten();
        let (active, policy) = match planned {
            Some(Treatment::Keep) => (false, policy),
            Some(treatment) => (true, Policy::for_treatment(treatment).unwrap_or(policy)),
            None => (true, policy),
        };
        if top_level && recording::on() {
            recording::top_level_opened(&id.name, id.index, planned);
        }
        state.stack.push(Frame {
            instance,
            id,
            active,
            backend,
            decorated_ops: 0,
            policy,
        });
        RegionGuard {
            instance,
            _not_send: PhantomData,
        }
    })
}

impl Drop for RegionGuard {
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
    /// False for a region a plan keeps ([`Treatment::Keep`]): its ops run as Burn's own.
    active: bool,
    backend: Option<&'static str>,
    /// Ops of a `Checkpointed` backend run in this region (nested regions included once closed).
    decorated_ops: u64,
    /// Decides for the ops run while this is the innermost region.
    policy: Policy,
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

/// What one op of the decorator needs to know of the region state: read once per op.
pub(crate) struct OpContext {
    /// The outermost open region, if any.
    root: Option<u64>,
    /// The innermost region's policy, unless it recomputes everything.
    policy: Option<Policy>,
    /// Whether an open region's policy keeps what it stores in host memory.
    offload: bool,
    /// Whether any tensor made in a region may still be used (so operands must be checked).
    watch: bool,
}

/// The region state as the op the decorator is about to run sees it.
pub(crate) fn op_context() -> OpContext {
    let watch = boundary::watching();
    STATE.with(|state| {
        let mut state = state.borrow_mut();
        let policy = state.stack.last_mut().and_then(|innermost| {
            innermost.decorated_ops += 1;
            let asks = innermost.active && !innermost.policy.recomputes_all();
            asks.then(|| innermost.policy.clone())
        });
        // A region nested in an offloading one offloads too.
        let offload = state
            .stack
            .iter()
            .any(|frame| frame.active && frame.policy.offloads());
        OpContext {
            offload,
            // Only a region a plan keeps is inactive, and only a top-level one: the root is the
            // first active frame.
            root: state
                .stack
                .iter()
                .find(|frame| frame.active)
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
    pub(crate) fn region(&self) -> Option<Region<'_>> {
        self.root.map(|root| Region {
            root,
            policy: self.policy.as_ref(),
            offload: self.offload,
        })
    }
}

/// The region an op runs in.
pub(crate) struct Region<'a> {
    root: u64,
    policy: Option<&'a Policy>,
    offload: bool,
}

impl Region<'_> {
    /// The instance of the top-level region (its number on this thread, growing along forward).
    pub(crate) fn instance(&self) -> u64 {
        self.root
    }

    /// Whether the region keeps what its ops store in host memory.
    pub(crate) fn offloads(&self) -> bool {
        self.offload
    }
}
