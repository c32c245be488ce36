//! A region and its function forms: [`Region`], and [`checkpoint`] and [`checkpoint_fn`], the
//! one-liners made of it.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use burn::module::Module;
use burn::tensor::{Device, Distribution, Int, Tensor};
use burn_checkpoint_core::RegionName;

use crate::body::{Body, Pass};
use crate::dispatch;
use crate::graph::NodeSpec;
use crate::params;
use crate::region::{self, Run};
use crate::tensors::RegionTensors;

/// A checkpoint region: its name and whether its stored inputs wait for backward in host memory.
/// One value, three ways in: [`run`](Region::run) a module's forward, [`run_fn`](Region::run_fn)
/// a body without parameters, or [`sequential`](Region::sequential) a stack of layers;
/// [`checkpoint`] is `Region::new().run(..)`, [`checkpoint_fn`] is `Region::new().run_fn(..)`,
/// and `#[checkpoint(name = .., offload)]` expands to `Region::named(..).run(..)`. The same
/// words as the crate for Burn 0.21, whose regions also take a policy. A `Region` can run many
/// times.
///
/// A top-level region (not inside another) is one instance of its name, `name#index` counted
/// per thread, as the memory report and the budget planner call it; a [`Plan`](crate::planner::Plan)
/// in force may run it otherwise than the code says: kept (its body as plain autodiff ops),
/// recomputed, or offloaded.
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
    offload: bool,
}

impl Region {
    /// A region named after the place in the source this is called from (`src/model.rs:42:17`).
    #[track_caller]
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        Region {
            name: RegionName::caller(),
            offload: false,
        }
    }

    /// A region named `name`: the instances of one name are `name#0`, `name#1`, ... in a step.
    pub fn named(name: impl Into<Cow<'static, str>>) -> Self {
        Region {
            name: RegionName::new(name),
            offload: false,
        }
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
        let device = Tensor::<1>::from_dispatch(tensors[0].clone()).device();
        // Open before the seed is drawn: the regions its body opens are nested in it.
        let opened = region::open(self.name.clone(), self.offload);
        // Every treatment draws the region's seed: the masks dropout draws in a region do not
        // depend on how a plan runs it.
        let seed = region_seed(&device);
        let offload = match opened.run {
            Run::Keep => {
                device.seed(seed);
                let inputs = I::unflatten(&input_layout, &mut tensors.into_iter());
                return forward(module, inputs);
            }
            Run::Region { offload } => offload,
        };
        let input_count = tensors.len();
        let spec = NodeSpec {
            offloaded_inputs: if offload { input_count } else { 0 },
            slot: opened.slot,
        };
        tensors.extend(params::trainable(module));
        let template = module.clone();
        // The outputs' arrangement, known once the forward ran.
        let output_layout: Arc<Mutex<Option<O::Layout>>> = Arc::default();
        let layout_slot = output_layout.clone();
        let body = Body(Arc::new(move |mut tensors, pass| {
            let params = tensors.split_off(input_count);
            let module = match pass {
                Pass::Forward => template.clone(),
                // Running statistics of its own: the recompute's updates are dropped.
                Pass::Recompute => template.clone().train(),
            };
            let module = params::with_trainable(module, params);
            let inputs = I::unflatten(&input_layout, &mut tensors.into_iter());
            device.seed(seed);
            let outputs = forward(&module, inputs);
            if pass == Pass::Forward {
                *layout_slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(outputs.layout());
            }
            let mut flat = Vec::new();
            outputs.flatten(&mut flat);
            assert!(
                !flat.is_empty(),
                "a checkpoint region must give at least one tensor"
            );
            flat
        }));
        let outputs = dispatch::run(tensors, body, spec);
        drop(opened);
        let layout = output_layout
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .expect("the forward ran");
        O::unflatten(&layout, &mut outputs.into_iter())
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
/// with a panic, since it would silently get no gradient.
///
/// Inside the region, layers see a training device: dropout draws its masks (the recompute
/// draws the same ones, see [`region_seed`]) and batch norm uses and updates its batch
/// statistics, once: the recompute runs on a copy of the running statistics.
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

/// What a region does to the device's random generator before its body: it draws a seed (two
/// numbers) and seeds the device with it, in forward and again in the recompute, so that
/// dropout draws the same masks twice. Burn 0.22 has no way to read or restore a generator's
/// state, which is what PyTorch does instead.
///
/// Public so that a reference computation outside a region can draw the same numbers:
///
/// ```
/// use burn::tensor::Device;
///
/// let device = Device::flex();
/// device.seed(7);
/// let first = burn_checkpoint_22::region_seed(&device);
/// device.seed(7);
/// assert_eq!(burn_checkpoint_22::region_seed(&device), first);
/// ```
pub fn region_seed(device: &Device) -> u64 {
    // 30 bits a draw: Burn's default int is i32.
    let draw = Tensor::<1, Int>::random([2], Distribution::Uniform(0.0, 2f64.powi(30)), device);
    let values = draw.into_data().convert::<i64>();
    let values = values.as_slice::<i64>().expect("i64 values");
    ((values[0] as u64) << 30) | values[1] as u64
}
