//! A region's forward, the engine behind every way into a region. [`Entry`] is the first steps
//! of all of them (a region's call and a scan's alike): open the region, survey its module, tell
//! whether anything is tracked, decide whether it is seeded — its lazy parameters drawn before
//! any seed. Then [`Call`] runs a region as the plan or its code says: its body as plain ops
//! (kept by a plan), under Burn's Balanced checkpointing (`SaveComputeBound`, also a scan's:
//! [`saving_compute_bound`]), as a region kept by name inside another's node, or as a region
//! node: the body on stand-ins, the first instance's check, the node. One [`Call`] carries what
//! every step needs (the module, the inputs, the body, the seed).

use std::any::Any;
use std::marker::PhantomData;
use std::sync::Arc;

use burn::backend::{DispatchAutodiffContext, DispatchTensor, GradientCheckpointingStrategy};
use burn::module::{Module, ParamId};
use burn::tensor::Device;
use burn_checkpoint_core::{RegionName, Schedule};

use crate::ddp;
use crate::dispatch;
use crate::graph::{NodeSpec, Replay};
use crate::params::{self, Trainable, Used};
use crate::policy::Policy;
use crate::recompute::{Drawn, Recompute};
use crate::retag;
use crate::seed::Seed;
use crate::state::{self, KeptAction, KeptRun, Opened, Rerun, Run};
use crate::survey::Survey;
use crate::tensors::{self, Flat, RegionTensors, each_tensor};

/// What a region's code asks for: a [`Region`](crate::Region)'s builder settings.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) name: RegionName,
    pub(crate) policy: Policy,
    pub(crate) offload: bool,
    pub(crate) seeded: bool,
    /// How a scan keeps its carries ([`Region::scan`](crate::Region::scan)); other regions
    /// ignore it.
    pub(crate) schedule: Schedule,
}

impl Settings {
    /// Opens the region these settings describe (see [`state::open`]), after refusing what
    /// they cannot mean together.
    pub(crate) fn open(&self) -> Opened {
        assert!(
            !(self.offload && self.policy == Policy::SaveComputeBound),
            "checkpoint region {}: Policy::SaveComputeBound stores nothing for a recompute, so it has \
             no inputs to offload; drop `.offloaded()` (or use Policy::RecomputeAll)",
            self.name
        );
        state::open(self.name.clone(), &self.policy, self.offload)
    }
}

/// A region entered: the first steps of every way into one (a region's call, a scan), so that a
/// protection added here reaches them all.
pub(crate) struct Entry {
    /// The region, open.
    pub(crate) opened: Opened,
    /// Where its tensors live (its first tensor's device).
    pub(crate) device: Device,
    /// Whether its body (each of a scan's steps) runs with a seed of its own.
    seeded: bool,
}

/// A region opened by [`Entry::open`].
pub(crate) enum Entered {
    /// Something is tracked: the region runs as its plan or code says.
    Tracked(Entry),
    /// Nothing is tracked: nothing to keep or recompute, and no layer draws without autodiff —
    /// the code runs as written, inside the open region.
    Untracked(Opened),
}

impl Entry {
    /// Opens the region `settings` describe over `module` and `tensors` (a region's inputs; a
    /// scan's initial carry and sequence) and decides whether it is seeded (see [`Entered`]).
    ///
    /// Every treatment seeds a seeded region: the masks dropout draws in a region, and every draw
    /// after it, do not depend on how a plan runs it. A region whose code keeps its compute-bound
    /// outputs runs its body once, as the same code without it: its draws need no seed of its
    /// own, unless a plan runs it. A seeded region's lazy parameters are drawn here, before any
    /// seed, from the generator as it stands: the recompute, which finds them initialised, must
    /// draw what the forward's body drew after the seed.
    pub(crate) fn open<M: Module>(
        settings: &Settings,
        module: &M,
        tensors: &[DispatchTensor],
    ) -> Entered {
        // Open before any seed is drawn: the regions its body opens are nested in it.
        let opened = settings.open();
        let survey = Survey::of(module);
        let autodiff = tensors
            .iter()
            .any(|t| matches!(t.autodiff, DispatchAutodiffContext::Enabled(_)))
            || survey.on_autodiff;
        let Some(first) = tensors.first().filter(|_| autodiff) else {
            return Entered::Untracked(opened);
        };
        let device = tensors::device_of(first);
        let runs_once = opened.run == Run::SaveComputeBound && !opened.planned;
        let seeded = (settings.seeded || survey.stochastic(module)) && !runs_once;
        if seeded {
            params::initialise(module);
        }
        Entered::Tracked(Entry {
            opened,
            device,
            seeded,
        })
    }

    /// The seed for the region's body (or a scan's next step): drawn now, or replayed in a
    /// recompute, where the region is seeded.
    pub(crate) fn seed(&self) -> Seed {
        Seed(self.seeded.then(|| self.opened.seed(&self.device)))
    }
}

/// One region call on its way through the forward: the region's settings, its module, its
/// inputs flattened and their device, its body and the seed the body runs with.
pub(crate) struct Call<'a, M, I: RegionTensors, O, F> {
    region: &'a Settings,
    module: &'a M,
    inputs: Flat<I>,
    device: Device,
    forward: Arc<F>,
    seed: Seed,
    output: PhantomData<fn() -> O>,
}

impl<'a, M, I, O, F> Call<'a, M, I, O, F>
where
    M: Module + Sync + 'static,
    I: RegionTensors,
    O: RegionTensors,
    F: Fn(&M, I) -> O + Send + Sync + 'static,
{
    /// Runs `forward(module, inputs)` as the region `region` describes: see
    /// [`Region::run`](crate::Region::run).
    pub(crate) fn run(region: &'a Settings, module: &'a M, inputs: I, forward: F) -> O {
        let inputs = Flat::new(inputs);
        assert!(
            !inputs.tensors.is_empty(),
            "a checkpoint region needs at least one input tensor"
        );
        let entry = match Entry::open(region, module, &inputs.tensors) {
            Entered::Tracked(entry) => entry,
            Entered::Untracked(_open) => return forward(module, inputs.into_value()),
        };
        let seed = entry.seed();
        let Entry {
            mut opened, device, ..
        } = entry;
        let call = Call {
            region,
            module,
            inputs,
            device,
            forward: Arc::new(forward),
            seed,
            output: PhantomData,
        };
        let (seed, device, named_kept) = (call.seed, call.device.clone(), opened.named_kept);
        let outputs = match opened.run {
            Run::Keep => call.run_kept_by_plan(),
            Run::SaveComputeBound => call.run_saving_compute_bound(),
            Run::Kept => {
                let action = opened.kept.take().expect("a kept region's action");
                return call.run_kept_by_name(opened, action);
            }
            Run::Region { offload } => call.run_region_node(opened, offload),
        };
        // Where a region kept by name leaves the generator (see `run_kept_by_name`), however
        // the region that keeps it runs.
        if named_kept {
            seed.apply_after_recompute(&device);
        }
        outputs
    }

    /// A region a plan keeps: its body as plain autodiff ops (a seeded one reseeds in backward
    /// as its recompute would).
    fn run_kept_by_plan(self) -> O {
        self.seed.apply(&self.device);
        let outputs = (self.forward)(self.module, self.inputs.into_value());
        reseeded_in_backward(outputs, self.seed)
    }

    /// The body of a [`Policy::SaveComputeBound`] region, run once as Burn's own ops under
    /// Burn's Balanced checkpointing.
    fn run_saving_compute_bound(self) -> O {
        self.seed.apply(&self.device);
        let outputs =
            saving_compute_bound(&self.region.name, self.module, self.inputs, &*self.forward);
        reseeded_in_backward(outputs, self.seed)
    }

    /// A region node: the forward on untracked stand-ins, the distributed-tensor refusal, the
    /// first instance's check, the node.
    fn run_region_node(self, mut opened: Opened, offload: bool) -> O {
        let (outputs, kept, used) = self.forward_on_stand_ins();
        let outputs = Flat::new(outputs);
        assert!(
            !outputs.tensors.is_empty(),
            "a checkpoint region must give at least one tensor"
        );
        let trainable = used.trainable();
        // The stand-ins go inside the region: the memory report counts them there.
        drop(used);
        ddp::refuse_distributed(&self.region.name, &self.inputs.tensors, &trainable.values);
        let drawn = Drawn {
            seeds: vec![self.seed],
            nested_seeds: vec![opened.nested_seeds()],
            kept,
        };
        let recompute = self.recompute(trainable.ids.clone(), drawn);
        if state::check_first(&self.region.name) {
            let tensors: Vec<_> = self
                .inputs
                .tensors
                .iter()
                .chain(&trainable.values)
                .collect();
            recompute.check(&self.region.name, 0, tensors, &outputs.tensors);
        }
        let spec = NodeSpec {
            offloaded_inputs: if offload {
                self.inputs.tensors.len()
            } else {
                0
            },
            slot: opened.slot,
            memory_bound: opened.memory_bound,
            replay: Replay::Recompute(recompute),
        };
        let layout = outputs.layout;
        let tensors = self.build_node(trainable, outputs.tensors, spec);
        drop(opened);
        O::unflatten(&layout, &mut tensors.into_iter())
    }

    /// The forward of a region node, on untracked stand-ins: layers see a training device
    /// (dropout, batch statistics) but nothing inside the region is recorded; parameters Burn
    /// initialises lazily are drawn at their first use in the body, as without the region.
    /// Returns the outputs, the runs of the regions its policy kept by name, and which
    /// parameters the body used.
    fn forward_on_stand_ins(&self) -> (O, Vec<KeptRun>, Used) {
        let (stand_in, used) = params::for_forward(self.module);
        let untracked = self.inputs.rebuilt(tensors::untracked);
        self.seed.apply(&self.device);
        let keeps = self.region.policy.kept().cloned();
        let (outputs, kept) =
            state::recording_kept(keeps, used.ids(), || (self.forward)(&stand_in, untracked));
        // Freed inside the region: the memory report counts the forward's temporaries there.
        drop(stand_in);
        (outputs, kept, used)
    }

    /// What backward runs again of this region (see [`Recompute`]): its body, on its inputs then
    /// the leaves of the parameters `param_ids`, replaying what `drawn` says.
    fn recompute(&self, param_ids: Vec<ParamId>, drawn: Drawn) -> Recompute {
        let (forward, layout) = (self.forward.clone(), self.inputs.layout.clone());
        Recompute::new(
            self.module,
            param_ids,
            drawn,
            self.device.clone(),
            move |module, inputs, _| {
                let inputs = I::unflatten(&layout, &mut inputs.into_iter());
                Flat::new(forward(module, inputs)).tensors
            },
        )
    }

    /// The region's nodes in Burn's graph, over its inputs then `params` (the parameters its body
    /// used; for a region kept by name, those its kept run used).
    fn build_node(
        self,
        params: Trainable,
        outputs: Vec<DispatchTensor>,
        spec: NodeSpec,
    ) -> Vec<DispatchTensor> {
        let mut tensors = self.inputs.tensors;
        tensors.extend(params.values);
        dispatch::run(tensors, outputs, spec)
    }

    /// A region kept by name by the region node it is nested in (see
    /// [`Policy::recompute_all_but`](crate::Policy::recompute_all_but)): in that node's forward,
    /// its body runs once with autodiff on leaves of its tensors and the run is kept for the
    /// node; in the node's recompute, its node is built from that run, and the body does not run.
    fn run_kept_by_name(self, mut opened: Opened, action: KeptAction) -> O {
        let (run, node_params) = match action {
            KeptAction::Run => (self.kept_run(&mut opened), None),
            KeptAction::Pass(run) => {
                // Its parameters count as used by the node whose forward this is (their
                // stand-ins read): that node's recompute gives them their leaves.
                drop(taking(self.module, &mut opened, &run));
                (run, None)
            }
            KeptAction::Node(run) => {
                let values = taking(self.module, &mut opened, &run);
                (run, Some(values))
            }
        };
        // Where the kept region's run left it, wherever the run is taken.
        self.seed.apply_after_recompute(&self.device);
        if let Some(values) = node_params {
            return self.kept_node(values, run);
        }
        state::add_kept_run(run.clone());
        let layout = run.layout::<O::Layout>();
        O::unflatten(
            &layout,
            &mut run.rerun.outputs.into_iter().map(tensors::untracked),
        )
    }

    /// The body of a region kept by name, run once with autodiff on leaves of its inputs and of
    /// the parameters it uses, inside the forward of the node that keeps it.
    fn kept_run(&self, opened: &mut Opened) -> KeptRun {
        let leaves: Vec<_> = self
            .inputs
            .tensors
            .iter()
            .cloned()
            .map(tensors::leaf)
            .collect();
        let (module, params) = params::with_leaves(self.module, &state::stand_ins());
        self.seed.apply(&self.device);
        let outputs = state::in_kept_run(|| {
            let inputs = I::unflatten(&self.inputs.layout, &mut leaves.iter().cloned());
            (self.forward)(&module, inputs)
        });
        let layout: Arc<dyn Any + Send + Sync> = Arc::new(outputs.layout());
        let outputs = Flat::new(outputs).tensors;
        let params = params.taken();
        let mut leaves = leaves;
        leaves.extend(params.values);
        KeptRun {
            name: self.region.name.clone(),
            rerun: Rerun { leaves, outputs },
            params: params.ids,
            nested_seeds: opened.nested_seeds(),
            layout,
        }
    }

    /// The node of a region kept by name, in the recompute of the node that kept its run: over
    /// the recompute's tensors (its inputs, then the parameters the run used, whose values are
    /// `values`), its backward differentiating the run.
    fn kept_node(self, values: Vec<DispatchTensor>, run: KeptRun) -> O {
        let layout = run.layout::<O::Layout>();
        let outputs = run
            .rerun
            .outputs
            .iter()
            .cloned()
            .map(tensors::untracked)
            .collect();
        let spec = NodeSpec {
            offloaded_inputs: 0,
            slot: None,
            memory_bound: false,
            replay: Replay::Kept(run.rerun),
        };
        let params = Trainable {
            ids: run.params,
            values,
        };
        let tensors = self.build_node(params, outputs, spec);
        O::unflatten(&layout, &mut tensors.into_iter())
    }
}

/// `forward(module, inputs)` run once as Burn's own ops under Burn's Balanced checkpointing (a
/// [`Policy::SaveComputeBound`] region's body, or a scan's loop): its inputs and module tagged
/// Balanced, its outputs tagged back to the caller's strategy.
pub(crate) fn saving_compute_bound<M: Module, I: RegionTensors, O: RegionTensors>(
    name: &RegionName,
    module: &M,
    inputs: Flat<I>,
    forward: impl FnOnce(&M, I) -> O,
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

/// Where a kept region's run is taken (passed on or made a node): the seeds its nested regions
/// drew skipped, and the values of the parameters the run used, read from `module`.
fn taking<M: Module>(module: &M, opened: &mut Opened, run: &KeptRun) -> Vec<DispatchTensor> {
    opened.skip_nested_seeds(run.nested_seeds.len());
    params::values_of(module, &run.params)
}

/// A kept seeded region's outputs (a kept scan's step's): in backward, the generator is left as
/// a recompute would leave it (unseeded ones unchanged).
pub(crate) fn reseeded_in_backward<O: RegionTensors>(outputs: O, seed: Seed) -> O {
    match seed {
        Seed(Some(seed)) => {
            let after = crate::seed::after_recompute(seed);
            each_tensor(outputs, |t| dispatch::reseed_in_backward(t, after))
        }
        Seed(None) => outputs,
    }
}
