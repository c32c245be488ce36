//! A region and its function forms: [`Region`], and [`checkpoint`] and [`checkpoint_fn`], the
//! one-liners made of it.

use std::borrow::Cow;
use std::fmt;

use burn::module::Module;
use burn_checkpoint_core::{RegionName, Schedule};

use crate::forward::{self, Settings};
use crate::policy::Policy;
use crate::state;
use crate::tensors::RegionTensors;

/// A checkpoint region: its name, what it keeps ([`policy`](Region::policy)), whether its stored
/// inputs wait for backward in host memory, and whether it gives its body a seed of its own.
/// One value, four ways in: [`run`](Region::run) a module's forward, [`run_fn`](Region::run_fn)
/// a body without parameters, [`sequential`](Region::sequential) a stack of layers, or
/// [`scan`](Region::scan) a recurrent loop — each entered the same way, so each keeps the
/// guarantees below (docs/conformance.md holds every way against every hazard);
/// [`checkpoint`] is `Region::new().run(..)`, [`checkpoint_fn`] is `Region::new().run_fn(..)`,
/// and `#[checkpoint(name = .., policy = .., offload)]` expands to `Region::named(..).run(..)`.
/// The same words as the crate for Burn 0.21. A `Region` can run many times.
///
/// A top-level region (not inside another) is one instance of its name, `name#index` counted per
/// thread, as the memory report and the budget planner call it; a [`Plan`](crate::planner::Plan) in
/// force may run it otherwise than the code says: kept (its body as plain autodiff ops), keeping
/// its compute-bound outputs, recomputed, or offloaded.
///
/// **A region changes nothing but memory and time**: the same seed gives the same parameters
/// (lazily initialised ones included), dropout masks and losses as the same code without it, and
/// every tensor the same gradient — with one exception Burn 0.22 leaves no way around: a body
/// that draws random numbers (see [`seeded`](Region::seeded)). `docs/burn-0.22.md`, "What a
/// region guarantees", lists each promise with the test that checks it.
///
/// ```
/// use burn::nn::{Linear, LinearConfig};
/// use burn::tensor::{Device, Tensor};
/// use burn_checkpoint_22::Region;
///
/// let device = Device::flex().autodiff();
/// let linear: Linear = LinearConfig::new(16, 16).init(&device);
/// let x = Tensor::<2>::ones([4, 16], &device).require_grad();
///
/// // Named "mlp"; its input waits in host memory until backward uploads it again.
/// let y = Region::named("mlp")
///     .offloaded()
///     .run(&linear, x.clone(), |linear, x| linear.forward(x).tanh());
/// let grads = y.sum().backward();
/// assert!(x.grad(&grads).is_some());
/// ```
#[derive(Clone)]
pub struct Region {
    settings: Settings,
}

impl fmt::Debug for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Settings {
            name,
            policy,
            offload,
            seeded,
            schedule,
        } = &self.settings;
        f.debug_struct("Region")
            .field("name", name)
            .field("policy", policy)
            .field("offload", offload)
            .field("seeded", seeded)
            .field("schedule", schedule)
            .finish()
    }
}

impl Region {
    /// What the region's code asks for: for the engines built on regions (the scan).
    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }

    /// A region named after the place in the source this is called from (`src/model.rs:42:17`).
    #[track_caller]
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        Self::with_name(RegionName::caller())
    }

    /// A region named `name`: the instances of one name are `name#0`, `name#1`, ... in a step.
    pub fn named(name: impl Into<Cow<'static, str>>) -> Self {
        Self::with_name(RegionName::new(name))
    }

    fn with_name(name: RegionName) -> Self {
        Region {
            settings: Settings {
                name,
                policy: Policy::RecomputeAll,
                offload: false,
                seeded: false,
                schedule: Schedule::EveryStep,
            },
        }
    }

    /// This region keeping what `policy` says between forward and backward (by default
    /// [`Policy::RecomputeAll`]).
    ///
    /// ```
    /// use burn::nn::{Linear, LinearConfig};
    /// use burn::tensor::{Device, Tensor};
    /// use burn_checkpoint_22::{Policy, Region};
    ///
    /// let device = Device::flex().autodiff();
    /// let linear: Linear = LinearConfig::new(16, 16).init(&device);
    /// let x = Tensor::<2>::ones([4, 16], &device).require_grad();
    ///
    /// // The matmul's output is kept, the activations recomputed: no body run in backward.
    /// let y = Region::named("mlp")
    ///     .policy(Policy::SaveComputeBound)
    ///     .run(&linear, x.clone(), |linear, x| linear.forward(x).tanh().exp());
    /// let grads = y.sum().backward();
    /// assert!(x.grad(&grads).is_some());
    /// ```
    pub fn policy(mut self, policy: Policy) -> Self {
        self.settings.policy = policy;
        self
    }

    /// This region with its stored inputs held in host memory between forward and backward
    /// (PyTorch's `checkpoint_wrapper(offload_to_cpu=True)`): its backward uploads them before
    /// it recomputes. The same gradients, bit for bit; a read back in forward and an upload in
    /// backward per input. Counted by [`OffloadedBytes`](crate::memory::OffloadedBytes) and in
    /// the memory report. On the CPU host and device memory are one: it saves nothing
    /// there. A [`scan`](Region::scan) offloads the carries its forward stores, each uploaded
    /// when its backward restores it.
    pub fn offloaded(mut self) -> Self {
        self.settings.offload = true;
        self
    }

    /// This region with a seed of its own for its body, for a body that draws random numbers the
    /// region cannot see.
    ///
    /// Backward runs a region's body again, and random draws must give the same numbers then.
    /// PyTorch saves the generator's state and restores it; Burn 0.22 has no way to read a
    /// generator's state, so a seeded region draws a seed from the device's generator (see
    /// [`region_seed`](crate::region_seed)) and seeds the device with it before its body, in
    /// forward and in the recompute. Its masks are right, but they — and every draw after the
    /// region — differ from the same code without regions (the one case where a region changes
    /// the run; the same under every plan, and the same from run to run).
    ///
    /// A region seeds itself without being asked when its module holds a layer that draws in
    /// training (Burn's `Dropout`, `GaussianNoise`, `RRelu`: an enabled training flag of any
    /// module but `BatchNorm`; a dropout of probability 0 or a noise of deviation 0 draws
    /// nothing and seeds nothing). Ask for it when the body draws otherwise: a `Tensor::random` of
    /// its own, a dropout the closure captures. A region that should have been seeded is caught
    /// on its name's first instance on the thread, whose body runs a second time in forward (as
    /// its recompute will, [`is_recomputing`](Region::is_recomputing) true) and is compared with
    /// its first run: a panic
    /// that names it. A region that is not seeded never touches the generator.
    ///
    /// ```
    /// use burn::tensor::{Device, Distribution, Tensor};
    /// use burn_checkpoint_22::Region;
    ///
    /// let device = Device::flex().autodiff();
    /// let x = Tensor::<2>::ones([4, 8], &device).require_grad();
    /// // Noise drawn inside the body, not by a layer of a module: the region must be told.
    /// let y = Region::named("noisy").seeded().run_fn(x.clone(), |x| {
    ///     let noise = x.random_like(Distribution::Normal(0.0, 0.1));
    ///     (x + noise).tanh()
    /// });
    /// let grads = y.sum().backward();
    /// assert!(x.grad(&grads).is_some());
    /// ```
    pub fn seeded(mut self) -> Self {
        self.settings.seeded = true;
        self
    }

    /// How a scan of this region keeps the carries its backward starts steps from
    /// ([`scan`](Region::scan)): [`Schedule::EveryStep`] (the default), `Snapshots(c)` or
    /// `Budget(bytes)` (binomial checkpointing). Other regions ignore it.
    ///
    /// ```
    /// use burn::nn::{Linear, LinearConfig};
    /// use burn::tensor::{Device, Tensor};
    /// use burn_checkpoint_22::{Region, Schedule};
    ///
    /// let device = Device::flex().autodiff();
    /// let cell: Linear = LinearConfig::new(8, 8).init(&device);
    /// let xs = Tensor::<3>::ones([2, 100, 8], &device).require_grad();
    /// // 100 steps, at most 10 carries stored at once: backward runs 110 steps again without
    /// // autodiff besides differentiating each once (`ScanPlan` says which).
    /// let (ys, last) = Region::named("rnn").schedule(Schedule::Snapshots(10)).scan(
    ///     &cell,
    ///     Tensor::<2>::zeros([2, 8], &device),
    ///     xs.clone(),
    ///     1,
    ///     |cell, hidden, x| {
    ///         let hidden = (cell.forward(hidden) + x).tanh();
    ///         (hidden.clone(), hidden)
    ///     },
    /// );
    /// let grads = (ys.sum() + last.sum()).backward();
    /// assert!(xs.grad(&grads).is_some() && cell.weight.grad(&grads).is_some());
    /// ```
    pub fn schedule(mut self, schedule: Schedule) -> Self {
        self.settings.schedule = schedule;
        self
    }

    /// Whether the code calling this runs inside a region's body run again in backward (the
    /// recompute), where it should not do twice what it does once besides computing tensors:
    /// push a metric, write a log line, count. torch_remat's `is_recomputing()`. The crate for
    /// Burn 0.21 never runs a body twice (it replays ops): there it is always `false`.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use burn::tensor::{Device, Tensor};
    /// use burn_checkpoint_22::Region;
    ///
    /// static FORWARDS: AtomicUsize = AtomicUsize::new(0);
    ///
    /// let device = Device::flex().autodiff();
    /// let x = Tensor::<2>::ones([2, 4], &device).require_grad();
    /// let y = Region::named("counted").run_fn(x.clone(), |x| {
    ///     if !Region::is_recomputing() {
    ///         FORWARDS.fetch_add(1, Ordering::Relaxed);
    ///     }
    ///     x.exp()
    /// });
    /// let _ = y.sum().backward(); // runs the body again
    /// assert!(!Region::is_recomputing());
    /// assert_eq!(FORWARDS.load(Ordering::Relaxed), 1);
    /// ```
    pub fn is_recomputing() -> bool {
        state::is_recomputing()
    }

    /// Runs `forward(module, inputs)` as this region: see [`checkpoint`].
    ///
    /// ```
    /// use burn::nn::{Linear, LinearConfig};
    /// use burn::tensor::{Device, Tensor};
    /// use burn_checkpoint_22::Region;
    ///
    /// let device = Device::flex().autodiff();
    /// let blocks: Vec<Linear> = (0..3).map(|_| LinearConfig::new(8, 8).init(&device)).collect();
    /// let block_region = Region::named("block");
    /// let mut x = Tensor::<2>::ones([2, 8], &device);
    /// for block in &blocks {
    ///     // `block#0`, `block#1`, `block#2` in the memory report and plans.
    ///     x = block_region.run(block, x, |block, x| block.forward(x).tanh());
    /// }
    /// let grads = x.sum().backward();
    /// assert!(blocks[0].weight.val().grad(&grads).is_some());
    /// ```
    pub fn run<M, I, O, F>(&self, module: &M, inputs: I, forward: F) -> O
    where
        M: Module + Sync + 'static,
        I: RegionTensors,
        O: RegionTensors,
        F: Fn(&M, I) -> O + Send + Sync + 'static,
    {
        forward::Call::run(&self.settings, module, inputs, forward)
    }

    /// Runs `forward(inputs)` as this region: see [`checkpoint_fn`].
    ///
    /// ```
    /// use burn::tensor::{Device, Tensor};
    /// use burn_checkpoint_22::Region;
    ///
    /// let device = Device::flex().autodiff();
    /// let x = Tensor::<2>::ones([2, 8], &device).require_grad();
    /// let y = Region::named("activations").run_fn(x.clone(), |x| x.exp().tanh());
    /// let grads = y.sum().backward();
    /// assert!(x.grad(&grads).is_some());
    /// ```
    pub fn run_fn<I, O, F>(&self, inputs: I, forward: F) -> O
    where
        I: RegionTensors,
        O: RegionTensors,
        F: Fn(I) -> O + Send + Sync + 'static,
    {
        self.run(&NoParameters, inputs, move |_, inputs| forward(inputs))
    }
}

/// Runs `forward(module, inputs)` as a checkpoint region: what it computes is not held between
/// forward and backward; backward runs it again from `inputs` and computes its gradients then.
///
/// `module` must hold every parameter the region uses (as fairscale's `checkpoint_wrapper`
/// wraps a module): the region's gradient flows to `inputs` and to `module`'s trainable
/// parameters, and to nothing else. A tracked tensor the closure captures instead is refused
/// with a panic, since it would silently get no gradient. So is a region over tensors Burn's data
/// parallelism (`ExecutionStrategy::ddp`) all-reduces: on Burn 0.22.1 its recompute would hang the
/// step (docs/burn-0.22-devices.md, "Data parallelism").
///
/// Inside the region, layers see a training device: dropout draws its masks (the recompute
/// draws the same ones: a module holding a dropout makes the region [seeded](Region::seeded))
/// and batch norm uses and updates its batch statistics, once: the recompute runs on a copy of
/// the running statistics. Parameters Burn initialises lazily are drawn where the body first
/// uses them, as without the region; the parameters the body does not use are not the region's.
///
/// On tensors without autodiff, a region is just `forward(module, inputs)`.
///
/// The region is named after the place it is called from; [`Region::named`] gives it a name,
/// [`Region::offloaded`] offloads.
///
/// ```
/// use burn::module::Module;
/// use burn::nn::{Linear, LinearConfig};
/// use burn::tensor::{Device, Tensor};
/// use burn_checkpoint_22::checkpoint;
///
/// #[derive(Module, Debug)]
/// struct Block {
///     up: Linear,
///     down: Linear,
/// }
///
/// let device = Device::flex().autodiff();
/// let block = Block {
///     up: LinearConfig::new(16, 64).init(&device),
///     down: LinearConfig::new(64, 16).init(&device),
/// };
/// let x = Tensor::<2>::ones([4, 16], &device);
///
/// let y = checkpoint(&block, x, |block, x| {
///     block.down.forward(burn::tensor::activation::gelu(block.up.forward(x)))
/// });
/// let grads = y.sum().backward();
/// assert!(block.up.weight.val().grad(&grads).is_some());
/// ```
#[track_caller]
pub fn checkpoint<M, I, O, F>(module: &M, inputs: I, forward: F) -> O
where
    M: Module + Sync + 'static,
    I: RegionTensors,
    O: RegionTensors,
    F: Fn(&M, I) -> O + Send + Sync + 'static,
{
    Region::new().run(module, inputs, forward)
}

/// [`checkpoint`] for a body that uses no parameters (an attention core, a chain of activations):
/// its gradient flows to `inputs` only. A tracked tensor the closure captures is refused as in
/// [`checkpoint`].
///
/// ```
/// use burn::tensor::{Device, Tensor, activation::softmax};
/// use burn_checkpoint_22::checkpoint_fn;
///
/// let device = Device::flex().autodiff();
/// let q = Tensor::<3>::ones([2, 8, 16], &device).require_grad();
/// let k = Tensor::<3>::ones([2, 8, 16], &device).require_grad();
/// let v = Tensor::<3>::ones([2, 8, 16], &device).require_grad();
///
/// // The 8×8 attention weights are not kept: backward recomputes them.
/// let out = checkpoint_fn((q.clone(), k, v), |(q, k, v)| {
///     softmax(q.matmul(k.swap_dims(1, 2)).div_scalar(4.0), 2).matmul(v)
/// });
/// let grads = out.sum().backward();
/// assert!(q.grad(&grads).is_some());
/// ```
#[track_caller]
pub fn checkpoint_fn<I, O, F>(inputs: I, forward: F) -> O
where
    I: RegionTensors,
    O: RegionTensors,
    F: Fn(I) -> O + Send + Sync + 'static,
{
    Region::new().run_fn(inputs, forward)
}

/// The module of a region without parameters.
#[derive(Module, Debug)]
struct NoParameters;
