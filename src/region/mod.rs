//! Checkpoint regions' public face: [`Region`], the guard that keeps one open, and
//! [`checkpoint`]. The per-thread state they open and close is `state.rs`; what an op sees of it,
//! and the stored version of a region output, `boundary.rs` (the same names as in the crate for
//! Burn 0.22, where `region.rs` is the face and `state.rs` the state).
//!
//! A region is open while its [`RegionGuard`] lives. Regions nest; each has an instance number,
//! and the outermost open one (the *root*) decides what is inside: a tensor made by a region op
//! is recorded with the root it was made under. When an op takes such a tensor while that root is
//! no longer open (outside any region, or inside another one), the tensor is a region *output*:
//! the decorator stores it (`boundary.rs`) before the op uses it, so that backward recomputes
//! one region at a time from stored boundaries.

// Bottom-up: the thread state, then the boundaries, which extend its per-op view.
mod state;

mod boundary;

use std::borrow::Cow;

use burn_checkpoint_core::{RegionId, RegionName, Schedule};

use crate::policy::Policy;

pub(crate) use boundary::forget_dropped_outputs;
pub use boundary::remembered_outputs;
pub(crate) use state::{OpContext, OpRegion};

/// The region state as the op the decorator is about to run sees it (read once per op).
pub(crate) fn op_context() -> OpContext {
    state::op_context(boundary::watching())
}

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
    schedule: Schedule,
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
            schedule: Schedule::EveryStep,
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
            schedule: Schedule::EveryStep,
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

    /// This region's [`scan`](Region::scan) with its steps cut into regions as `schedule` says
    /// ([`Schedule::EveryStep`], a region per step, unless set); other ways in ignore it.
    ///
    /// ```
    /// use burn::backend::{Autodiff, NdArray};
    /// use burn::prelude::*;
    /// use burn_checkpoint::{Checkpointed, Region, Schedule};
    ///
    /// type B = Checkpointed<Autodiff<NdArray>>;
    /// let device = Default::default();
    /// let xs = Tensor::<B, 2>::ones([100, 16], &device).require_grad();
    /// let h = Tensor::<B, 1>::zeros([16], &device);
    /// // Carries of 64 bytes, 10 of them in 640: 11 regions of 9 or 10 steps.
    /// let (ys, _) = Region::named("rnn")
    ///     .schedule(Schedule::Budget(640))
    ///     .scan(&(), h, xs.clone(), 0, |_, h, x: Tensor<B, 1>| {
    ///         let h = (h + x).tanh();
    ///         (h.clone(), h)
    ///     });
    /// let grads = ys.sum().backward();
    /// assert!(xs.grad(&grads).is_some());
    /// ```
    pub fn schedule(mut self, schedule: Schedule) -> Self {
        self.schedule = schedule;
        self
    }

    /// The schedule [`scan`](Region::scan) cuts its steps by.
    pub(crate) fn scan_schedule(&self) -> Schedule {
        self.schedule
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
        self.open(None)
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
    /// Region::named("block").run(|| {
    ///     assert_eq!(Region::current().unwrap().to_string(), "block#0")
    /// });
    /// ```
    pub fn current() -> Option<RegionId> {
        state::current()
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
        state::depth()
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
        self.open(Some(core::any::type_name::<B>()))
    }

    fn open(&self, backend: Option<&'static str>) -> RegionGuard {
        RegionGuard {
            _opened: state::open(backend, &self.name, &self.policy, self.offload),
        }
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
    // Closes the region when dropped (on the thread that opened it: it is not `Send`).
    _opened: state::Opened,
}
