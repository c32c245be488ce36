//! A region's forward, the engine behind [`Region::run`](crate::Region::run): open the region, decide its seed,
//! then run it as the plan or its code says — its body as plain ops (kept by a plan), under
//! Burn's Balanced checkpointing (`SaveComputeBound`), as a region kept by name inside another's
//! node, or as a region node: the body on stand-ins, the first instance's check, the node.

use std::any::Any;
use std::sync::Arc;

use burn::backend::{DispatchAutodiffContext, DispatchTensor, GradientCheckpointingStrategy};
use burn::module::{Module, ParamId};
use burn::tensor::Device;
use burn_checkpoint_core::RegionName;

use crate::body::Body;
use crate::check;
use crate::dispatch;
use crate::graph::{NodeSpec, Rerun};
use crate::params::{self, Used};
use crate::policy::Policy;
use crate::retag;
use crate::seed::after_recompute;
use crate::state::{self, KeptAction, KeptRun, Opened, Run};
use crate::tensors::RegionTensors;

/// What a region's code asks for (a [`Region`](crate::Region)'s builder settings).
pub(crate) struct Settings<'a> {
    pub(crate) name: &'a RegionName,
    pub(crate) policy: &'a Policy,
    pub(crate) offload: bool,
    pub(crate) seeded: bool,
}

/// A region's inputs, flattened: the tensors, their arrangement, the device of the first.
struct Inputs<I: RegionTensors> {
    tensors: Vec<DispatchTensor>,
    layout: I::Layout,
    device: Device,
}

impl<I: RegionTensors> Inputs<I> {
    fn new(inputs: I) -> Self {
        let layout = inputs.layout();
        let mut tensors = Vec::new();
        inputs.flatten(&mut tensors);
        assert!(
            !tensors.is_empty(),
            "a checkpoint region needs at least one input tensor"
        );
        let device = params::device_of(&tensors[0]);
        Self {
            tensors,
            layout,
            device,
        }
    }

    /// The inputs again, each tensor through `f`.
    fn rebuilt(&self, f: impl FnMut(DispatchTensor) -> DispatchTensor) -> I {
        I::unflatten(&self.layout, &mut self.tensors.iter().cloned().map(f))
    }

    fn into_value(self) -> I {
        self.into_mapped(|t| t)
    }

    /// The inputs, each tensor through `f`, consumed (a tensor the body holds alone may be
    /// updated in place).
    fn into_mapped(self, f: impl FnMut(DispatchTensor) -> DispatchTensor) -> I {
        I::unflatten(&self.layout, &mut self.tensors.into_iter().map(f))
    }
}

/// Runs `forward(module, inputs)` as the region `region` describes: see
/// [`Region::run`](crate::Region::run).
pub(crate) fn run<M, I, O, F>(region: &Settings, module: &M, inputs: I, forward: F) -> O
where
    M: Module + Sync + 'static,
    I: RegionTensors,
    O: RegionTensors,
    F: Fn(&M, I) -> O + Send + Sync + 'static,
{
    let inputs = Inputs::new(inputs);
    assert!(
        !(region.offload && *region.policy == Policy::SaveComputeBound),
        "checkpoint region {}: Policy::SaveComputeBound stores nothing for a recompute, so it has \
         no inputs to offload; drop `.offloaded()` (or use Policy::RecomputeAll)",
        region.name
    );
    // Open before the seed is drawn: the regions its body opens are nested in it.
    let mut opened = state::open(region.name.clone(), region.policy, region.offload);
    let autodiff = inputs
        .tensors
        .iter()
        .any(|t| matches!(t.autodiff, DispatchAutodiffContext::Enabled(_)))
        || params::on_autodiff(module);
    if !autodiff {
        // Nothing to keep or recompute, and no layer draws without autodiff: the body.
        return forward(module, inputs.into_value());
    }
    let seed = decide_seed(region, module, &opened, &inputs.device);
    match opened.run {
        Run::Keep => run_kept_by_plan(module, inputs, &forward, seed),
        Run::SaveComputeBound => {
            if let Some(seed) = seed {
                inputs.device.seed(seed);
            }
            let outputs = run_saving_compute_bound(region.name, module, inputs, &forward);
            match seed {
                Some(seed) => reseeded_in_backward(outputs, seed),
                None => outputs,
            }
        }
        Run::Kept => {
            let action = opened.kept.take().expect("a kept region's action");
            run_kept_by_name(region.name, module, inputs, forward, seed, opened, action)
        }
        Run::Region { offload } => {
            run_region_node(region, module, inputs, forward, seed, opened, offload)
        }
    }
}

/// The seed of a region that gets one, drawn now (or replayed in a recompute).
///
/// Every treatment draws a seeded region's seed: the masks dropout draws in a region, and every
/// draw after it, do not depend on how a plan runs it. A region whose code keeps its
/// compute-bound outputs runs its body once, as the same code without it: its draws need no seed
/// of its own, unless a plan runs it.
fn decide_seed<M: Module>(
    region: &Settings,
    module: &M,
    opened: &Opened,
    device: &Device,
) -> Option<u64> {
    let runs_once = opened.run == Run::SaveComputeBound && !opened.planned;
    let seeded = (region.seeded || params::stochastic(module)) && !runs_once;
    if !seeded {
        return None;
    }
    // Parameters Burn initialises lazily are drawn now, from the generator as it stands, not
    // from the region's seed: the recompute, which finds them initialised, must draw what the
    // forward's body drew after the seed.
    params::initialise(module);
    Some(opened.seed(device))
}

/// A region a plan keeps: its body as plain autodiff ops (a seeded one reseeds in backward as
/// its recompute would).
fn run_kept_by_plan<M, I: RegionTensors, O: RegionTensors>(
    module: &M,
    inputs: Inputs<I>,
    forward: impl Fn(&M, I) -> O,
    seed: Option<u64>,
) -> O {
    let Some(seed) = seed else {
        return forward(module, inputs.into_value());
    };
    inputs.device.seed(seed);
    let outputs = forward(module, inputs.into_value());
    reseeded_in_backward(outputs, seed)
}

/// The body of a [`Policy::SaveComputeBound`] region, run once as Burn's own ops under Burn's
/// Balanced checkpointing (its inputs and module tagged Balanced, its outputs tagged back to the
/// caller's strategy).
fn run_saving_compute_bound<M: Module, I: RegionTensors, O: RegionTensors>(
    name: &RegionName,
    module: &M,
    inputs: Inputs<I>,
    forward: impl Fn(&M, I) -> O,
) -> O {
    use GradientCheckpointingStrategy::{Balanced, Disabled};
    // Under Burn's own `gradient_checkpointing()` everything is Balanced already.
    if retag::caller_strategy(&inputs.tensors, module) != Some(Disabled) {
        return forward(module, inputs.into_value());
    }
    let (balanced, restore) = retag::balanced(module, Disabled);
    let outputs = retag::explaining_mismatch(name, || {
        forward(
            &balanced,
            inputs.into_mapped(|t| retag::tagged(t, Balanced)),
        )
    });
    drop(restore);
    each_tensor(outputs, |t| retag::tagged(t, Disabled))
}

/// A region node: the forward on untracked stand-ins, the distributed-tensor refusal, the first
/// instance's check, the node.
fn run_region_node<M, I, O, F>(
    region: &Settings,
    module: &M,
    inputs: Inputs<I>,
    forward: F,
    seed: Option<u64>,
    mut opened: Opened,
    offload: bool,
) -> O
where
    M: Module + Sync + 'static,
    I: RegionTensors,
    O: RegionTensors,
    F: Fn(&M, I) -> O + Send + Sync + 'static,
{
    let (outputs, kept, used) = forward_on_stand_ins(region, module, &inputs, &forward, seed);
    let output_layout = outputs.layout();
    let mut flat = Vec::new();
    outputs.flatten(&mut flat);
    assert!(
        !flat.is_empty(),
        "a checkpoint region must give at least one tensor"
    );
    let spec = NodeSpec {
        offloaded_inputs: if offload { inputs.tensors.len() } else { 0 },
        slot: opened.slot,
        nested_seeds: opened.nested_seeds(),
        memory_bound: opened.memory_bound,
        kept,
        run: None,
    };
    let (param_ids, param_values) = used.trainable();
    refuse_distributed(region.name, &inputs.tensors, &param_values);
    if state::check_first(region.name) {
        check_first_instance(
            region.name,
            module,
            &inputs,
            &forward,
            seed,
            (&param_ids, &param_values),
            (&spec, &flat),
        );
    }
    let outputs = build_node(
        module,
        inputs,
        param_ids,
        param_values,
        flat,
        forward,
        seed,
        spec,
    );
    drop(opened);
    O::unflatten(&output_layout, &mut outputs.into_iter())
}

/// The forward of a region node, on untracked stand-ins: layers see a training device (dropout,
/// batch statistics) but nothing inside the region is recorded; parameters Burn initialises
/// lazily are drawn at their first use in the body, as without the region. Returns the outputs,
/// the runs of the regions its policy kept by name, and which parameters the body used.
fn forward_on_stand_ins<M: Module, I: RegionTensors, O: RegionTensors>(
    region: &Settings,
    module: &M,
    inputs: &Inputs<I>,
    forward: impl Fn(&M, I) -> O,
    seed: Option<u64>,
) -> (O, Vec<KeptRun>, Used) {
    let (stand_in, used) = params::for_forward(module);
    let untracked = inputs.rebuilt(params::untracked);
    if let Some(seed) = seed {
        inputs.device.seed(seed);
    }
    let (outputs, kept) = state::recording_kept(region.policy.kept().cloned(), used.ids(), || {
        forward(&stand_in, untracked)
    });
    // Freed inside the region: the memory report counts the forward's temporaries there.
    drop(stand_in);
    (outputs, kept, used)
}

/// Burn 0.22.1 ends every backward, a recompute's nested one too, with the collective sync; its
/// sync server counts that as a device finishing its step and resets mid-pass, and the step's
/// final sync then waits forever (burn-autodiff-0.22.1 tensor.rs:326). Burn 0.23 skips the sync
/// of a backward that registered nothing (burn-autodiff-0.23.0-pre.1 tensor.rs:313-338).
fn refuse_distributed(name: &RegionName, inputs: &[DispatchTensor], params: &[DispatchTensor]) {
    if crate::REGIONS_UNDER_DDP || !inputs.iter().chain(params).any(params::is_distributed) {
        return;
    }
    panic!(
        "checkpoint region {name}: its parameters or inputs are distributed (Burn's data \
         parallelism, `ExecutionStrategy::ddp`, all-reduces their gradients), and on Burn 0.22.1 \
         a region's recompute would end its nested backward with the collective sync, which the \
         sync server takes for a device finishing its step: training would hang. Under \
         `ExecutionStrategy::ddp`, run this model without regions; Burn's multi-device strategy \
         without collectives, `ExecutionStrategy::multi`, takes them"
    );
}

/// The body again, as its recompute will run it (replayed seeds, fresh running statistics),
/// compared with its forward: once per name and thread.
fn check_first_instance<M: Module, I: RegionTensors, O: RegionTensors>(
    name: &RegionName,
    module: &M,
    inputs: &Inputs<I>,
    forward: impl Fn(&M, I) -> O,
    seed: Option<u64>,
    (param_ids, param_values): (&[ParamId], &[DispatchTensor]),
    (spec, outputs): (&NodeSpec, &[DispatchTensor]),
) {
    let untracked_params = param_values.iter().cloned().map(params::untracked);
    let module = params::for_recompute(module.clone(), param_ids, untracked_params.collect());
    let module = retag::all_tagged(module, retag::strategy_of(&inputs.tensors));
    let again_inputs = inputs.rebuilt(params::untracked);
    let again = state::recomputing(&spec.nested_seeds, &spec.kept, || {
        if let Some(seed) = seed {
            inputs.device.seed(seed);
        }
        let mut again = Vec::new();
        forward(&module, again_inputs).flatten(&mut again);
        again
    });
    check::same_values(name, outputs, &again);
}

/// The region's nodes in Burn's graph, over its inputs then the parameters its body used (for a
/// region kept by name, those its kept run used).
#[allow(clippy::too_many_arguments)]
fn build_node<M, I, O, F>(
    module: &M,
    inputs: Inputs<I>,
    param_ids: Vec<ParamId>,
    param_values: Vec<DispatchTensor>,
    outputs: Vec<DispatchTensor>,
    forward: F,
    seed: Option<u64>,
    spec: NodeSpec,
) -> Vec<DispatchTensor>
where
    M: Module + Sync + 'static,
    I: RegionTensors,
    O: RegionTensors,
    F: Fn(&M, I) -> O + Send + Sync + 'static,
{
    let input_count = inputs.tensors.len();
    let mut tensors = inputs.tensors;
    tensors.extend(param_values);
    let body = recompute_body(module, param_ids, inputs.layout, input_count, forward, seed);
    dispatch::run(tensors, outputs, body, spec)
}

/// A region kept by name by the region node it is nested in (see
/// [`Policy::recompute_all_but`](crate::Policy::recompute_all_but)): in that node's forward, its
/// body runs once with autodiff on leaves of its tensors and the run is kept for the node; in the
/// node's recompute, its node is built from that run, and the body does not run.
fn run_kept_by_name<M, I, O, F>(
    name: &RegionName,
    module: &M,
    inputs: Inputs<I>,
    forward: F,
    seed: Option<u64>,
    mut opened: Opened,
    action: KeptAction,
) -> O
where
    M: Module + Sync + 'static,
    I: RegionTensors,
    O: RegionTensors,
    F: Fn(&M, I) -> O + Send + Sync + 'static,
{
    let device = inputs.device.clone();
    let (run, node_params) = match action {
        KeptAction::Run => {
            let leaves: Vec<_> = inputs.tensors.iter().cloned().map(params::leaf).collect();
            let (module, params) = params::with_leaves(module, &state::stand_ins());
            if let Some(seed) = seed {
                device.seed(seed);
            }
            let outputs = state::in_kept_run(|| {
                forward(
                    &module,
                    I::unflatten(&inputs.layout, &mut leaves.iter().cloned()),
                )
            });
            let layout: Arc<dyn Any + Send + Sync> = Arc::new(outputs.layout());
            let mut flat = Vec::new();
            outputs.flatten(&mut flat);
            let (params, param_leaves) = params.taken();
            let mut leaves = leaves;
            leaves.extend(param_leaves);
            let run = KeptRun {
                name: name.clone(),
                leaves,
                params,
                outputs: flat,
                nested_seeds: opened.nested_seeds(),
                layout,
            };
            (run, None)
        }
        KeptAction::Pass(run) => {
            // Its parameters count as used by the node whose forward this is (their stand-ins
            // read): that node's recompute gives them their leaves.
            drop(taking(module, &mut opened, &run));
            (run, None)
        }
        KeptAction::Node(run) => {
            let values = taking(module, &mut opened, &run);
            (run, Some(values))
        }
    };
    if let Some(seed) = seed {
        // Where the kept region's run left it, wherever the run is taken.
        device.seed(after_recompute(seed));
    }
    if let Some(values) = node_params {
        return kept_node(module, inputs, values, forward, seed, run);
    }
    state::add_kept_run(run.clone());
    let layout = run.layout::<O::Layout>();
    O::unflatten(&layout, &mut run.outputs.into_iter().map(params::untracked))
}

/// The node of a region kept by name, in the recompute of the node that kept its run: over the
/// recompute's tensors (its inputs, then the parameters the run used), its backward
/// differentiating the run.
fn kept_node<M, I, O, F>(
    module: &M,
    inputs: Inputs<I>,
    param_values: Vec<DispatchTensor>,
    forward: F,
    seed: Option<u64>,
    run: KeptRun,
) -> O
where
    M: Module + Sync + 'static,
    I: RegionTensors,
    O: RegionTensors,
    F: Fn(&M, I) -> O + Send + Sync + 'static,
{
    let layout = run.layout::<O::Layout>();
    let outputs = run.outputs.iter().cloned().map(params::untracked).collect();
    let spec = NodeSpec {
        offloaded_inputs: 0,
        slot: None,
        nested_seeds: run.nested_seeds,
        memory_bound: false,
        kept: Vec::new(),
        run: Some(Rerun {
            leaves: run.leaves,
            outputs: run.outputs,
        }),
    };
    let outputs = build_node(
        module,
        inputs,
        run.params,
        param_values,
        outputs,
        forward,
        seed,
        spec,
    );
    O::unflatten(&layout, &mut outputs.into_iter())
}

/// Where a kept region's run is taken (passed on or made a node): the seeds its nested regions
/// drew skipped, and the values of the parameters the run used, read from `module`.
fn taking<M: Module>(module: &M, opened: &mut Opened, run: &KeptRun) -> Vec<DispatchTensor> {
    opened.skip_nested_seeds(run.nested_seeds.len());
    params::values_of(module, &run.params)
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
