//! A region in Burn's autodiff graph.
//!
//! The region's forward has run by the time its node is built (`forward.rs`: the body on
//! untracked autodiff tensors: layers see a training device, nothing is recorded). The graph
//! gets:
//! - the *region* node, whose parents are the region's tensors (inputs and parameters), so that
//!   every tensor keeps its place in Burn's traversal order and its count of consumers (which
//!   Burn's data parallelism reads to know when a gradient is complete), and gets its gradient's
//!   terms in plain autodiff's order. It holds how it replays the region ([`Replay`]) and the
//!   inner primitives of its tensors (a parameter's primitive shares the parameter's buffer).
//!   Over more than 32 tensors, *join*
//!   nodes stand between, each over up to 32 consecutive tensors; a memory-bound region node
//!   (which Burn's Balanced checkpointing may rematerialise) has one join as its one parent
//!   (over joins, beyond 32 tensors);
//! - with several outputs, one *pick* node per output, child of the region node.
//!
//! Backward: the picks leave their gradients in the region's output stash; the region node runs the
//! body again on fresh autodiff leaves (or differentiates a kept region's run, or walks a scan's
//! steps: `scan.rs`), calls a nested backward that starts by giving each output
//! its gradient (an output-gradient node per output, the same bits as Σ⟨out, grad⟩), and leaves
//! each tensor's gradient in the input stash, and hands its parents their gradients (a join
//! parent a placeholder: each join hands its own parents theirs). An output the loss
//! does not reach takes no part in the nested backward.
//!
//! Burn requires every parent a node lists to get a gradient registered (else the parent's own
//! step panics, and under data parallelism its all-reduce waits forever). A tensor the body left
//! without a gradient gets none when it is a plain leaf (as in plain autodiff), a one-element
//! stand-in when another region made it (that region's node reads it as "no gradient",
//! `produced.rs`), and zeros of its shape otherwise.

use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::ops::{Backward, OpsKind};
use burn::backend::tensor::FloatTensor;
use burn::backend::{
    Autodiff, AutodiffBackend, Backend, DispatchKindConversion, DispatchTensor, TensorMetadata,
};

use crate::offload::Stored;
use crate::produced;
use crate::recompute::Recompute;
use crate::state::Rerun;

mod join;
mod nodes;
mod objective;
mod scan;

use join::{JOIN_WIDTH, Slot, Stash, TensorMeta, finish_over, join_down, placeholder};
pub(crate) use nodes::reseed_in_backward;
use nodes::{NodeReplay, Pick, RegionState, RegionStep, Rematerialise};
use scan::ScanState;
pub(crate) use scan::{ScanSpec, Slicer, Stacker};

/// What a region node does in backward to give its tensors their gradients.
#[derive(Debug, Clone)]
pub(crate) enum Replay {
    /// Runs the region's code again on fresh leaves and differentiates that run.
    Recompute(Recompute),
    /// Differentiates the run its forward made (a region kept by name, whose node is built in
    /// the recompute of the node that kept it): the body does not run again.
    Kept(Rerun),
    /// Walks a scan's steps, last first.
    Scan(ScanSpec),
}

/// What the region node keeps besides its tensors: how many of its first tensors (its inputs)
/// go to host memory, its slot in the step's memory report, whether Burn may rematerialise it,
/// and how its backward replays the region.
#[derive(Debug, Clone)]
pub(crate) struct NodeSpec {
    /// The region's inputs, offloaded; 0 keeps every tensor on the device.
    pub(crate) offloaded_inputs: usize,
    /// The top-level region's slot in the memory report being recorded, if any.
    pub(crate) slot: Option<usize>,
    /// Whether the node is a memory-bound op (a region nested in a `SaveComputeBound` one):
    /// Burn's Balanced checkpointing then recomputes its output where backward needs it.
    pub(crate) memory_bound: bool,
    pub(crate) replay: Replay,
}

/// A region on `Autodiff<B, C>` whose forward gave `outputs`: puts the region's nodes in the
/// graph (see the module's documentation).
pub(crate) fn autodiff_region<B: Backend, C: CheckpointStrategy>(
    tensors: Vec<FloatTensor<Autodiff<B, C>>>,
    outputs: Vec<FloatTensor<B>>,
    spec: NodeSpec,
) -> Vec<FloatTensor<Autodiff<B, C>>>
where
    DispatchTensor: DispatchKindConversion<Autodiff<B, C>>,
{
    if !tensors.iter().any(|t| t.is_tracked()) {
        return outputs
            .into_iter()
            .map(Autodiff::<B, C>::from_inner)
            .collect();
    }
    let several = outputs.len() > 1;
    // A memory-bound node with several outputs would need its picks rematerialised too: it is
    // kept as a compute-bound one.
    let memory_bound = spec.memory_bound && !several;
    let mut state = region_state::<B, C>(&tensors, &outputs, spec);
    let (device, dtype) = (state.device.clone(), state.dtype);
    // A memory-bound node's parent is one join (see below); any other's are its tensors.
    let width = if memory_bound { 1 } else { JOIN_WIDTH };
    let parents = join_down::<B, C>(tensors, width, &state.input_stash, &state.metas);
    let node_output = if several {
        placeholder::<B>(&device, dtype)
    } else {
        outputs[0].clone()
    };
    // The mark (a region's output) lives as long as the node's state holds its token.
    let token = Arc::new(());
    state._produced = (!several).then(|| token.clone());
    let output_stash = state.output_stash.clone();
    let region = if memory_bound {
        memory_bound_node::<B, C>(parents, state, node_output)
    } else {
        let (nodes, slots) = parents
            .iter()
            .map(|(tensor, slot)| (tensor.node(), *slot))
            .unzip();
        let region = finish_over::<B, C, _>(
            RegionStep::<C>(PhantomData),
            nodes,
            slots,
            state,
            node_output,
        );
        drop(parents);
        region
    };
    match output_stash {
        Some(stash) => picks::<B, C>(&region, outputs, &stash, &device),
        None => {
            produced::mark(region.id(), &token);
            vec![region]
        }
    }
}

/// The region node's state over `tensors` (their inner primitives kept, the first
/// `spec.offloaded_inputs` in host memory) for the forward's `outputs`.
fn region_state<B: Backend, C: CheckpointStrategy>(
    tensors: &[FloatTensor<Autodiff<B, C>>],
    outputs: &[FloatTensor<B>],
    spec: NodeSpec,
) -> RegionState<B>
where
    DispatchTensor: DispatchKindConversion<Autodiff<B, C>>,
{
    let metas = tensors
        .iter()
        .map(|t| TensorMeta {
            shape: t.shape(),
            dtype: t.dtype(),
            region_output: produced::is_region_output(t.id()),
        })
        .collect();
    // The inputs' buffers leave the device (where nothing else holds them) once their copies
    // are in host memory; parameters stay: they are the module's own buffers.
    let stored = (tensors.iter().enumerate())
        .map(|(index, tensor)| {
            let tensor = tensor.primitive().clone();
            if index < spec.offloaded_inputs {
                Stored::to_host(tensor)
            } else {
                Stored::Device(tensor)
            }
        })
        .collect();
    let replay = match spec.replay {
        Replay::Recompute(recompute) => NodeReplay::Recompute(recompute, Arc::default()),
        Replay::Kept(run) => NodeReplay::Kept(Arc::new(Mutex::new(Some(run)))),
        Replay::Scan(scan) => NodeReplay::Scan(ScanState::new::<C>(scan)),
    };
    let first = tensors[0].primitive();
    RegionState {
        replay,
        metas: Arc::new(metas),
        tensors: stored,
        device: first.device(),
        dtype: first.dtype(),
        slot: spec.slot,
        wanted: tensors.iter().map(|t| t.is_tracked()).collect(),
        input_stash: Stash::<B>::new(tensors.len()),
        // Set as the node is built, over the parents it gets.
        parents: Vec::new(),
        outputs: outputs.iter().map(|o| (o.shape(), o.dtype())).collect(),
        output_stash: (outputs.len() > 1).then(|| Stash::<B>::new(outputs.len())),
        _produced: None,
    }
}

/// A region node's outputs, one pick each (a node with several outputs gives a placeholder),
/// each marked as a region's output.
fn picks<B: Backend, C: CheckpointStrategy>(
    region: &FloatTensor<Autodiff<B, C>>,
    outputs: Vec<FloatTensor<B>>,
    stash: &Arc<Stash<B>>,
    device: &B::Device,
) -> Vec<FloatTensor<Autodiff<B, C>>> {
    outputs
        .into_iter()
        .enumerate()
        .map(|(index, output)| {
            let token = Arc::new(());
            let state = (
                stash.clone(),
                index,
                output.shape(),
                device.clone(),
                output.dtype(),
                token.clone(),
            );
            let pick = match Pick
                .prepare::<C>([region.node()])
                .compute_bound()
                .stateful()
            {
                OpsKind::Tracked(prep) => prep.finish(state, output),
                OpsKind::UnTracked(prep) => prep.finish(output),
            };
            produced::mark(pick.id(), &token);
            pick
        })
        .collect()
}

/// A memory-bound region node over its one parent (a join of its tensors, or its one tensor),
/// which Burn's Balanced checkpointing may rematerialise.
fn memory_bound_node<B: Backend, C: CheckpointStrategy>(
    parents: Vec<(FloatTensor<Autodiff<B, C>>, Slot)>,
    mut state: RegionState<B>,
    node_output: FloatTensor<B>,
) -> FloatTensor<Autodiff<B, C>>
where
    DispatchTensor: DispatchKindConversion<Autodiff<B, C>>,
{
    let [(joined, slot)]: [_; 1] = parents.try_into().unwrap_or_else(|_| unreachable!());
    state.parents = vec![slot];
    let retro = Rematerialise::<B, C> {
        state: state.clone(),
        strategy: PhantomData,
    };
    // The parent is checkpointed (a join's one-element placeholder, or the one tensor's own
    // buffer, which the node holds anyway) so that Burn's recursion over what a
    // rematerialisation needs stops there: the node holds its tensors itself.
    let prepared = RegionStep::<C>(PhantomData)
        .prepare::<C>([joined.node()])
        .memory_bound()
        .retro_forward(retro)
        .parents([&joined]);
    match prepared.stateful() {
        OpsKind::Tracked(prep) => prep.finish(state, node_output),
        OpsKind::UnTracked(prep) => prep.finish(node_output),
    }
}
