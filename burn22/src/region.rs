//! A region and its function forms: [`Region`], and [`checkpoint`] and [`checkpoint_fn`], the
//! one-liners made of it.

use std::any::Any;
use std::borrow::Cow;
use std::sync::Arc;

use burn::backend::{DispatchAutodiffContext, DispatchTensor, GradientCheckpointingStrategy};
use burn::module::{Module, ParamId};
use burn_checkpoint_core::RegionName;

use crate::body::Body;
use crate::check;
use crate::dispatch;
use crate::graph::NodeSpec;
use crate::params;
use crate::policy::Policy;
use crate::retag;
use crate::seed::after_recompute;
use crate::state::{self, Held, Hold, Run};
use crate::tensors::RegionTensors;

/// A checkpoint region: its name, what it keeps ([`policy`](Region::policy)), whether its stored
/// inputs wait for backward in host memory, and whether it gives its body a seed of its own.
/// One value, three ways in: [`run`](Region::run) a module's forward, [`run_fn`](Region::run_fn)
/// a body without parameters, or [`sequential`](Region::sequential) a stack of layers;
/// [`checkpoint`] is `Region::new().run(..)`, [`checkpoint_fn`] is `Region::new().run_fn(..)`,
/// and `#[checkpoint(name = .., policy = .., offload)]` expands to `Region::named(..).run(..)`.
/// The same words as the crate for Burn 0.21. A `Region` can run many times.
///
/// A top-level region (not inside another) is one instance of its name, `name#index` counted
/// per thread, as the memory report and the budget planner call it; a [`Plan`](crate::planner::Plan)
/// in force may run it otherwise than the code says: kept (its body as plain autodiff ops),
/// keeping its compute-bound outputs, recomputed, or offloaded.
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
#[derive(Clone, Debug)]
pub struct Region {
    name: RegionName,
    policy: Policy,
    offload: bool,
    seeded: bool,
}

impl Region {
    /// A region named after the place in the source this is called from (`src/model.rs:42:17`).
    #[track_caller]
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        Region {
            name: RegionName::caller(),
            policy: Policy::RecomputeAll,
            offload: false,
            seeded: false,
        }
    }

    /// A region named `name`: the instances of one name are `name#0`, `name#1`, ... in a step.
    pub fn named(name: impl Into<Cow<'static, str>>) -> Self {
        Region {
            name: RegionName::new(name),
            policy: Policy::RecomputeAll,
            offload: false,
            seeded: false,
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
        self.policy = policy;
        self
    }

    /// This region with its stored inputs held in host memory between forward and backward
    /// (PyTorch's `checkpoint_wrapper(offload_to_cpu=True)`): its backward uploads them before
    /// it recomputes. The same gradients, bit for bit; a read back in forward and an upload in
    /// backward per input. Counted by [`OffloadedBytes`](crate::memory::OffloadedBytes) and in
    /// the memory report. On the CPU host and device memory are one: it saves nothing
    /// there.
    pub fn offloaded(mut self) -> Self {
        self.offload = true;
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
        self.seeded = true;
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
        let mut tensors = Vec::new();
        let input_layout = inputs.layout();
        inputs.flatten(&mut tensors);
        assert!(
            !tensors.is_empty(),
            "a checkpoint region needs at least one input tensor"
        );
        let device = params::device_of(&tensors[0]);
        // Open before the seed is drawn: the regions its body opens are nested in it.
        assert!(
            !(self.offload && self.policy == Policy::SaveComputeBound),
            "checkpoint region {}: Policy::SaveComputeBound stores nothing for a recompute, so \
             it has no inputs to offload; drop `.offloaded()` (or use Policy::RecomputeAll)",
            self.name
        );
        let mut opened = state::open(self.name.clone(), &self.policy, self.offload);
        let autodiff = tensors
            .iter()
            .any(|t| matches!(t.autodiff, DispatchAutodiffContext::Enabled(_)))
            || params::on_autodiff(module);
        if !autodiff {
            // Nothing to keep or recompute, and no layer draws without autodiff: the body.
            return forward(
                module,
                I::unflatten(&input_layout, &mut tensors.into_iter()),
            );
        }
        // Every treatment draws a seeded region's seed: the masks dropout draws in a region, and
        // every draw after it, do not depend on how a plan runs it.
        // A region whose code keeps its compute-bound outputs runs its body once, as the same
        // code without it: its draws need no seed of their own, unless a plan runs it.
        let runs_once = opened.run == Run::SaveComputeBound && !opened.planned;
        let seeded = (self.seeded || params::stochastic(module)) && !runs_once;
        if seeded {
            // Parameters Burn initialises lazily are drawn now, from the generator as it stands,
            // not from the region's seed: the recompute, which finds them initialised, must draw
            // what the forward's body drew after the seed.
            params::initialise(module);
        }
        let seed = seeded.then(|| opened.seed(&device));
        let offload = match opened.run {
            Run::Keep => {
                let inputs = I::unflatten(&input_layout, &mut tensors.into_iter());
                let Some(seed) = seed else {
                    return forward(module, inputs);
                };
                device.seed(seed);
                let outputs = forward(module, inputs);
                return reseeded_in_backward(outputs, seed);
            }
            Run::SaveComputeBound => {
                if let Some(seed) = seed {
                    device.seed(seed);
                }
                let outputs = self.run_balanced(module, tensors, &input_layout, &forward);
                return match seed {
                    Some(seed) => reseeded_in_backward(outputs, seed),
                    None => outputs,
                };
            }
            Run::Held => {
                let hold = opened.hold.take().expect("a held region's hold");
                return self.run_held(module, tensors, &input_layout, forward, seed, opened, hold);
            }
            Run::Region { offload } => offload,
        };
        // Forward on untracked stand-ins: layers see a training device (dropout, batch
        // statistics) but nothing inside the region is recorded; parameters Burn initialises
        // lazily are drawn at their first use in the body, as without the region.
        let (stand_in, used) = params::for_forward(module);
        let untracked = tensors
            .iter()
            .cloned()
            .map(params::untracked)
            .collect::<Vec<_>>();
        if let Some(seed) = seed {
            device.seed(seed);
        }
        let (outputs, held) =
            state::recording_held(self.policy.kept().cloned(), used.ids(), || {
                forward(
                    &stand_in,
                    I::unflatten(&input_layout, &mut untracked.into_iter()),
                )
            });
        // Freed inside the region: the memory report counts the forward's temporaries there.
        drop(stand_in);
        let output_layout = outputs.layout();
        let mut flat = Vec::new();
        outputs.flatten(&mut flat);
        assert!(
            !flat.is_empty(),
            "a checkpoint region must give at least one tensor"
        );
        let input_count = tensors.len();
        let spec = NodeSpec {
            offloaded_inputs: if offload { input_count } else { 0 },
            slot: opened.slot,
            nested_seeds: opened.nested_seeds(),
            memory_bound: opened.memory_bound,
            held,
            run: None,
        };
        let (param_ids, param_values) = used.trainable();
        if !crate::REGIONS_UNDER_DDP
            && tensors
                .iter()
                .chain(&param_values)
                .any(params::is_distributed)
        {
            // Burn 0.22.1 ends every backward, a recompute's nested one too, with the
            // collective sync; its sync server counts that as a device finishing its step and
            // resets mid-pass, and the step's final sync then waits forever
            // (burn-autodiff-0.22.1 tensor.rs:326). Burn 0.23 skips the sync of a backward that
            // registered nothing (burn-autodiff-0.23.0-pre.1 tensor.rs:313-338).
            panic!(
                "checkpoint region {}: its parameters or inputs are distributed (Burn's data \
                 parallelism, `ExecutionStrategy::ddp`, all-reduces their gradients), and on Burn \
                 0.22.1 a region's recompute would end its nested backward with the collective \
                 sync, which the sync server takes for a device finishing its step: training \
                 would hang. Under `ExecutionStrategy::ddp`, run this model without regions; \
                 Burn's multi-device strategy without collectives, `ExecutionStrategy::multi`, \
                 takes them",
                self.name
            );
        }
        if state::check_first(&self.name) {
            // The body again, as its recompute will run it (replayed seeds, fresh running
            // statistics), compared with its forward: once per name and thread.
            let module = params::for_recompute(
                module.clone(),
                &param_ids,
                param_values
                    .iter()
                    .cloned()
                    .map(params::untracked)
                    .collect(),
            );
            let module = retag::all_tagged(module, retag::strategy_of(&tensors));
            let inputs = I::unflatten(
                &input_layout,
                &mut tensors.iter().cloned().map(params::untracked),
            );
            let again = state::recomputing(&spec.nested_seeds, &spec.held, || {
                if let Some(seed) = seed {
                    device.seed(seed);
                }
                let mut again = Vec::new();
                forward(&module, inputs).flatten(&mut again);
                again
            });
            check::same_values(&self.name, &flat, &again);
        }
        tensors.extend(param_values);
        let body = recompute_body(module, param_ids, input_layout, input_count, forward, seed);
        let outputs = dispatch::run(tensors, flat, body, spec);
        drop(opened);
        O::unflatten(&output_layout, &mut outputs.into_iter())
    }

    /// A region kept by name by the region node it is nested in (see
    /// [`Policy::recompute_all_but`]): in that node's forward, its body runs once with autodiff
    /// on leaves of its tensors and the run is held for the node; in the node's recompute, its
    /// node is built from that run, and the body does not run.
    #[allow(clippy::too_many_arguments)]
    fn run_held<M, I, O, F>(
        &self,
        module: &M,
        tensors: Vec<DispatchTensor>,
        input_layout: &I::Layout,
        forward: F,
        seed: Option<u64>,
        mut opened: state::Opened,
        hold: Hold,
    ) -> O
    where
        M: Module + Sync + 'static,
        I: RegionTensors,
        O: RegionTensors,
        F: Fn(&M, I) -> O + Send + Sync + 'static,
    {
        let device = params::device_of(&tensors[0]);
        let (held, node_params) = match hold {
            Hold::Run => {
                let leaves: Vec<_> = tensors.iter().cloned().map(params::leaf).collect();
                let (module, params) = params::with_leaves(module, &state::stand_ins());
                if let Some(seed) = seed {
                    device.seed(seed);
                }
                let outputs = state::held_run(|| {
                    forward(
                        &module,
                        I::unflatten(input_layout, &mut leaves.iter().cloned()),
                    )
                });
                let layout: Arc<dyn Any + Send + Sync> = Arc::new(outputs.layout());
                let mut flat = Vec::new();
                outputs.flatten(&mut flat);
                let (params, param_leaves) = params.taken();
                let mut leaves = leaves;
                leaves.extend(param_leaves);
                let held = Held {
                    name: self.name.clone(),
                    leaves,
                    params,
                    outputs: flat,
                    nested_seeds: opened.nested_seeds(),
                    layout,
                };
                (held, None)
            }
            Hold::Pass(held) => {
                // Its parameters count as used by the node whose forward this is (their
                // stand-ins read): that node's recompute gives them their leaves.
                drop(taking(module, &mut opened, &held));
                (held, None)
            }
            Hold::Node(held) => {
                let values = taking(module, &mut opened, &held);
                (held, Some(values))
            }
        };
        if let Some(seed) = seed {
            // Where the kept region's run left it, wherever the run is taken.
            device.seed(after_recompute(seed));
        }
        if let Some(values) = node_params {
            return self.held_node(module, tensors, values, input_layout, forward, seed, held);
        }
        state::add_held(held.clone());
        let layout = held.layout::<O::Layout>();
        O::unflatten(
            &layout,
            &mut held.outputs.into_iter().map(params::untracked),
        )
    }

    /// The node of a region kept by name, in the recompute of the node that held its run:
    /// over the recompute's tensors (its inputs, then the parameters the run used), its backward
    /// differentiating the run.
    #[allow(clippy::too_many_arguments)]
    fn held_node<M, I, O, F>(
        &self,
        module: &M,
        mut tensors: Vec<DispatchTensor>,
        param_values: Vec<DispatchTensor>,
        input_layout: &I::Layout,
        forward: F,
        seed: Option<u64>,
        held: Held,
    ) -> O
    where
        M: Module + Sync + 'static,
        I: RegionTensors,
        O: RegionTensors,
        F: Fn(&M, I) -> O + Send + Sync + 'static,
    {
        let layout = held.layout::<O::Layout>();
        let input_count = tensors.len();
        tensors.extend(param_values);
        let outputs = held
            .outputs
            .iter()
            .cloned()
            .map(params::untracked)
            .collect();
        let body = recompute_body(
            module,
            held.params.clone(),
            input_layout.clone(),
            input_count,
            forward,
            seed,
        );
        let spec = NodeSpec {
            offloaded_inputs: 0,
            slot: None,
            nested_seeds: held.nested_seeds,
            memory_bound: false,
            held: Vec::new(),
            run: Some((held.leaves, held.outputs)),
        };
        let outputs = dispatch::run(tensors, outputs, body, spec);
        O::unflatten(&layout, &mut outputs.into_iter())
    }

    /// The body of a [`Policy::SaveComputeBound`] region, run once as Burn's own ops under
    /// Burn's Balanced checkpointing (its inputs and module tagged Balanced, its outputs tagged
    /// back to the caller's strategy).
    fn run_balanced<M, I, O, F>(
        &self,
        module: &M,
        tensors: Vec<DispatchTensor>,
        input_layout: &I::Layout,
        forward: &F,
    ) -> O
    where
        M: Module,
        I: RegionTensors,
        O: RegionTensors,
        F: Fn(&M, I) -> O,
    {
        use GradientCheckpointingStrategy::{Balanced, Disabled};
        // Under Burn's own `gradient_checkpointing()` everything is Balanced already.
        if retag::caller_strategy(&tensors, module) != Some(Disabled) {
            return forward(module, I::unflatten(input_layout, &mut tensors.into_iter()));
        }
        let (balanced, restore) = retag::balanced(module, Disabled);
        let inputs = tensors.into_iter().map(|t| retag::tagged(t, Balanced));
        let outputs = retag::explaining_mismatch(&self.name, || {
            forward(
                &balanced,
                I::unflatten(input_layout, &mut inputs.into_iter()),
            )
        });
        drop(restore);
        each_tensor(outputs, |t| retag::tagged(t, Disabled))
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
/// step (docs/burn-0.22.md, "Not yet here").
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

/// Where a kept region's run is taken (passed on or made a node): the seeds its nested regions
/// drew skipped, and the values of the parameters the run used, read from `module`.
fn taking<M: Module>(module: &M, opened: &mut state::Opened, held: &Held) -> Vec<DispatchTensor> {
    state::skip_nested_seeds(held.nested_seeds.len());
    let _ = opened.nested_seeds();
    params::values_of(module, &held.params)
}

/// What a region node's backward runs again: `forward` on `module` with the parameters
/// `param_ids` replaced by the leaves after the first `input_count` tensors, the inputs those
/// before, seeded with `seed`.
fn recompute_body<M, I, O, F>(
    module: &M,
    param_ids: Vec<ParamId>,
    input_layout: I::Layout,
    input_count: usize,
    forward: F,
    seed: Option<u64>,
) -> Body
where
    M: Module + Sync + 'static,
    I: RegionTensors,
    O: RegionTensors,
    F: Fn(&M, I) -> O + Send + Sync + 'static,
{
    let template = module.clone();
    Body(Arc::new(move |mut tensors| {
        let device = params::device_of(&tensors[0]);
        let strategy = retag::strategy_of(&tensors);
        let leaves = tensors.split_off(input_count);
        // Its caller's frozen parameters and running statistics carry the caller's strategy:
        // a region nested in a `SaveComputeBound` one recomputes under Balanced.
        let module = retag::all_tagged(
            params::for_recompute(template.clone(), &param_ids, leaves),
            strategy,
        );
        let inputs = I::unflatten(&input_layout, &mut tensors.into_iter());
        if let Some(seed) = seed {
            device.seed(seed);
        }
        let mut flat = Vec::new();
        forward(&module, inputs).flatten(&mut flat);
        if let Some(seed) = seed {
            // Not where the forward left it (unknowable), but where a kept region's backward
            // leaves it too: the stream after backward does not depend on the plan.
            device.seed(after_recompute(seed));
        }
        flat
    }))
}

/// A kept seeded region's outputs: in backward, the generator is left as a recompute would
/// leave it.
fn reseeded_in_backward<O: RegionTensors>(outputs: O, seed: u64) -> O {
    let after = after_recompute(seed);
    each_tensor(outputs, |t| dispatch::reseed_in_backward(t, after))
}

/// `value` with `f` applied to each of its tensors, in the same arrangement.
fn each_tensor<O: RegionTensors>(value: O, f: impl FnMut(DispatchTensor) -> DispatchTensor) -> O {
    let layout = value.layout();
    let mut flat = Vec::new();
    value.flatten(&mut flat);
    O::unflatten(&layout, &mut flat.into_iter().map(f))
}

/// The module of a region without parameters.
#[derive(Module, Debug)]
struct NoParameters;
