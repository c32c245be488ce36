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
use burn_checkpoint_core::{RegionId, RegionName, Treatment};

use crate::policy::Policy;

pub(crate) use boundary::forget_dropped_outputs;
pub use boundary::remembered_outputs;

/// A checkpoint region: its name, the [`Policy`] that decides op by op what it recomputes, and
/// whether what it stores for backward waits in host memory. One value, three ways in:
/// [`run`](Region::run) a closure, [`enter`](Region::enter) a guard, or
/// [`sequential`](Region::sequential) a stack of layers; [`checkpoint`] is `Region::new().run(f)`
/// and `#[checkpoint(name = .., policy = .., offload)]` expands to the guard.
///
/// On a [`Checkpointed`](crate::Checkpointed) backend, what the tensor ops inside a region
/// compute is not held between forward and backward: backward recomputes it from the region's
/// inputs. What the region returns (and any other tensor made inside and used outside) is stored.
/// On any other backend a region changes nothing (and says so once through `log`).
///
/// Each time a region opens it is one instance of its name, `name#0`, `name#1`, ... counted per
/// thread ([`RegionId`]), as the memory report and a [`Plan`](crate::planner::Plan) call it; a
/// plan in force may run a top-level region otherwise than the code says (kept, recomputed,
/// offloaded). Regions nest: the outermost one decides what is recomputed together, the
/// innermost one's policy decides for the ops it runs. A `Region` can be opened many times.
///
/// ```
/// use burn::backend::{Autodiff, NdArray};
/// use burn::tensor::{Tensor, activation::relu};
/// use burn_checkpoint::{Checkpointed, Policy, Region};
///
/// type B = Checkpointed<Autodiff<NdArray>>;
/// let device = Default::default();
/// let x = Tensor::<B, 2>::ones([8, 16], &device).require_grad();
/// let w = Tensor::<B, 2>::ones([16, 16], &device).require_grad();
///
/// // Named "block", the matmul's output kept, what it stores in host memory.
/// let block = Region::named("block").policy(Policy::SaveComputeBound).offloaded();
/// let mut h = x.clone();
/// for _ in 0..3 {
///     h = block.run(|| relu(h.matmul(w.clone())));
/// }
/// let grads = h.sum().backward();
/// assert!(w.grad(&grads).is_some());
/// ```
#[derive(Clone, Debug)]
pub struct Region {
    name: RegionName,
    policy: Policy,
    offload: bool,
}

impl Region {
    /// A region named after the place in the source this is called from (`src/model.rs:42:17`),
    /// recomputing everything ([`Policy::RecomputeAll`]), stored operands on the device.
    ///
    /// ```
    /// use burn_checkpoint::Region;
    ///
    /// Region::new().run(|| {
    ///     let here = Region::current().unwrap().name.to_string();
    ///     assert!(here.contains(".rs:"), "named by the caller's place");
    /// });
    /// ```
    #[track_caller]
    #[allow(clippy::new_without_default)] // `Default` could not name the caller's place
    pub fn new() -> Self {
        Region {
            name: RegionName::caller(),
            policy: Policy::RecomputeAll,
            offload: false,
        }
    }

    /// A region named `name` (see [`RegionName`]): its instances are `name#0`, `name#1`, ...
    ///
    /// ```
    /// use burn_checkpoint::Region;
    ///
    /// for index in 0..2 {
    ///     Region::named("attention").run(|| {
    ///         assert_eq!(Region::current().unwrap().to_string(), format!("attention#{index}"));
    ///     });
    /// }
    /// ```
    pub fn named(name: impl Into<Cow<'static, str>>) -> Self {
        Region {
            name: RegionName::new(name),
            policy: Policy::RecomputeAll,
            offload: false,
        }
    }

    /// This region with `policy` deciding, op by op, what it recomputes and what it keeps
    /// ([`Policy::RecomputeAll`] unless set).
    ///
    /// ```
    /// use burn::backend::{Autodiff, NdArray};
    /// use burn::tensor::{Tensor, activation::relu};
    /// use burn_checkpoint::{Checkpointed, Policy, Region};
    ///
    /// type B = Checkpointed<Autodiff<NdArray>>;
    /// let device = Default::default();
    /// let x = Tensor::<B, 2>::ones([8, 16], &device).require_grad();
    /// let w = Tensor::<B, 2>::ones([16, 16], &device).require_grad();
    ///
    /// // The matmul output is kept, the ReLU recomputed from it.
    /// let y = Region::new()
    ///     .policy(Policy::SaveComputeBound)
    ///     .run(|| relu(x.clone().matmul(w.clone())));
    /// let grads = y.sum().backward();
    /// assert!(x.grad(&grads).is_some());
    /// ```
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// This region with what it stores for backward held in host memory instead of the
    /// device's (fairscale's `offload_to_cpu`): each stored operand that is not a leaf (not a
    /// parameter or an input the caller holds) is copied to the host when the region's op is
    /// built, once per tensor, on a copy thread (forward waits for it only past
    /// [`Settings::offload_in_flight_limit`](crate::Settings) bytes in flight), and copied back
    /// one region ahead of backward's reads. Regions nested in an offloading region offload
    /// too. Values are unchanged, bit for bit; on a CPU backend the bytes only move from one host
    /// buffer to another ([`OffloadedBytes`](crate::memory::OffloadedBytes) counts them). One op's
    /// output alone: [`Decision::Offload`](crate::Decision::Offload).
    ///
    /// ```
    /// use burn::backend::{Autodiff, NdArray};
    /// use burn::tensor::{Tensor, activation::relu};
    /// use burn_checkpoint::memory::OffloadedBytes;
    /// use burn_checkpoint::{Checkpointed, Region, checkpoint};
    ///
    /// type B = Checkpointed<Autodiff<NdArray>>;
    /// let device = Default::default();
    /// let w = Tensor::<B, 2>::ones([16, 16], &device).require_grad();
    /// let x = Tensor::<B, 2>::ones([8, 16], &device).require_grad();
    ///
    /// let h = checkpoint(|| relu(x.clone().matmul(w.clone())));
    /// // The second region keeps its input `h` (the first one's output) in host memory.
    /// let y = Region::new().offloaded().run(|| relu(h.matmul(w.clone())));
    /// assert!(OffloadedBytes::now().in_use >= 8 * 16 * 4);
    /// let grads = y.sum().backward();
    /// assert!(w.grad(&grads).is_some());
    /// ```
    pub fn offloaded(mut self) -> Self {
        self.offload = true;
        self
    }

    /// Opens this region on this thread until the returned guard is dropped (on every exit path,
    /// panics included): what the `#[checkpoint]` attribute expands to.
    ///
    /// ```
    /// use burn_checkpoint::Region;
    ///
    /// let region = Region::named("block").enter();
    /// assert_eq!(Region::depth(), 1);
    /// drop(region);
    /// assert_eq!(Region::depth(), 0);
    /// ```
    pub fn enter(&self) -> RegionGuard {
        open(None, self)
    }

    /// Runs `f` as this region and returns what it returns: a tensor, a tuple of tensors, a
    /// struct, anything.
    ///
    /// ```
    /// use burn::backend::{Autodiff, NdArray};
    /// use burn::tensor::{Tensor, activation::relu};
    /// use burn_checkpoint::{Checkpointed, Region};
    ///
    /// type B = Checkpointed<Autodiff<NdArray>>;
    /// let device = Default::default();
    /// let x = Tensor::<B, 2>::ones([8, 16], &device).require_grad();
    /// let w = Tensor::<B, 2>::ones([16, 16], &device).require_grad();
    ///
    /// let (y, z) = Region::named("pair").run(|| {
    ///     let h = relu(x.clone().matmul(w.clone()));
    ///     (h.clone().sum(), h.mean())
    /// });
    /// let grads = (y + z).backward();
    /// assert!(w.grad(&grads).is_some());
    /// ```
    pub fn run<R>(&self, f: impl FnOnce() -> R) -> R {
        let _region = self.enter();
        f()
    }

    /// The innermost open region on this thread: its name and index.
    ///
    /// ```
    /// use burn_checkpoint::Region;
    ///
    /// assert!(Region::current().is_none());
    /// Region::named("block").run(|| assert_eq!(Region::current().unwrap().to_string(), "block#0"));
    /// ```
    pub fn current() -> Option<RegionId> {
        STATE.with(|state| state.borrow().stack.last().map(|frame| frame.id.clone()))
    }

    /// How many regions are open on this thread.
    ///
    /// ```
    /// use burn_checkpoint::{Region, checkpoint};
    ///
    /// assert_eq!(Region::depth(), 0);
    /// checkpoint(|| assert_eq!(Region::depth(), 1));
    /// assert_eq!(Region::depth(), 0);
    /// ```
    pub fn depth() -> usize {
        STATE.with(|state| state.borrow().stack.len())
    }

    /// Whether the code calling this runs inside a region's body run again in backward: never
    /// here. This crate recomputes a region op by op from the graph (the recompute walk) and
    /// never runs user code twice, so a body's side effects (a metric pushed, a log line, a
    /// counter) happen once. The same word as the crate for Burn 0.22, whose regions do run
    /// their body again in backward and answer `true` there (torch_remat's `is_recomputing()`):
    /// code written for both can ask.
    ///
    /// ```
    /// use burn::backend::{Autodiff, NdArray};
    /// use burn::tensor::Tensor;
    /// use burn_checkpoint::{Checkpointed, Region};
    ///
    /// type B = Checkpointed<Autodiff<NdArray>>;
    /// let x = Tensor::<B, 2>::ones([2, 4], &Default::default()).require_grad();
    /// let mut forwards = 0;
    /// let y = Region::named("counted").run(|| {
    ///     if !Region::is_recomputing() {
    ///         forwards += 1;
    ///     }
    ///     x.clone().exp()
    /// });
    /// let grads = y.sum().backward(); // recomputes the exp, runs no user code
    /// assert!(x.grad(&grads).is_some());
    /// assert_eq!(forwards, 1);
    /// ```
    pub fn is_recomputing() -> bool {
        false
    }

    /// [`enter`](Region::enter) for code generic over the backend `B`, so that a region on a
    /// backend that is not `Checkpointed` can name it in its warning. Used by `#[checkpoint]`.
    #[doc(hidden)]
    pub fn enter_on<B: ?Sized>(&self) -> RegionGuard {
        open(Some(core::any::type_name::<B>()), self)
    }
}

/// Runs `f` as a checkpoint region and returns what it returns: `Region::new().run(f)`, the
/// region named after the place it is called from (see [`Region`] for names, policies and
/// offload).
///
/// ```
/// use burn::backend::{Autodiff, NdArray};
/// use burn::tensor::{Tensor, activation::relu};
/// use burn_checkpoint::{Checkpointed, checkpoint, Region};
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
    Region::new().run(f)
}

/// An open checkpoint region; dropping it closes the region, on every exit path (panics too).
///
/// Made by [`Region::enter`]; most code uses [`checkpoint`], [`Region::run`] or the
/// `#[checkpoint]` attribute instead.
///
/// ```
/// use burn_checkpoint::Region;
///
/// let guard = Region::new().enter();
/// assert_eq!(Region::depth(), 1);
/// drop(guard);
/// assert_eq!(Region::depth(), 0);
/// ```
#[must_use = "the region closes when the guard is dropped"]
pub struct RegionGuard {
    instance: u64,
    // Region state is per thread: the guard must be dropped on the thread that made it.
    _not_send: PhantomData<*const ()>,
}

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

/// How a region whose code asks for `coded` runs under a plan's `treatment`. Recomputing keeps
/// what the code keeps by name (`Policy::recompute_all_but`).
fn planned_run(treatment: Treatment, coded: &Policy) -> Run {
    let recompute_all = match coded {
        Policy::RecomputeAllBut(_) => coded.clone(),
        _ => Policy::RecomputeAll,
    };
    let region = |policy, offload| Run::Region { policy, offload };
    match treatment {
        Treatment::Keep => Run::Keep,
        Treatment::RecomputeAll => region(recompute_all, false),
        Treatment::SaveComputeBound => region(Policy::SaveComputeBound, false),
        Treatment::Offload => region(recompute_all, true),
        // `Treatment` is non-exhaustive: a plan from a newer crate is refused by name.
        other => panic!("burn-checkpoint cannot run a region under the treatment {other}"),
    }
}

pub(crate) fn open(backend: Option<&'static str>, region: &Region) -> RegionGuard {
    let id = RegionId::next(region.name.clone());
    STATE.with(|state| {
        let mut state = state.borrow_mut();
        state.next_instance += 1;
        let instance = state.next_instance;
        let top_level = state.stack.is_empty();
        // A plan decides for top-level regions only; nested ones run as the code says.
        let planned = top_level.then(|| planner::planned(&id)).flatten();
        let run = match planned {
            Some(treatment) => planned_run(treatment, &region.policy),
            None => Run::Region {
                policy: region.policy.clone(),
                offload: region.offload,
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
    root: u64,
    policy: Option<&'a Policy>,
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
