//! The region node (its backward runs the body again and differentiates it), the output-gradient
//! node a recompute's nested backward starts from, the retro-forward of a memory-bound region
//! node, the picks of a region with several outputs, and the reseeding node of a kept seeded
//! region.

use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use burn::backend::autodiff::NodeId;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::retro_forward::RetroForward;
use burn::backend::autodiff::checkpoint::state::BackwardStates;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, NodeGuard, Ops, OpsKind};
use burn::backend::tensor::FloatTensor;
use burn::backend::{
    Autodiff, AutodiffBackend, Backend, DispatchKindConversion, DispatchTensor, TensorMetadata,
};
use burn::tensor::{DType, Shape};

use crate::convert::{from_dispatch, to_dispatch};
use crate::offload::Stored;
use crate::recompute::Recompute;
use crate::state::Rerun;

use super::join::{AnyParents, Parent, Slot, Stash, TensorMeta, hand_down_each, placeholder};
use super::objective::{bytes_of, leaf, nested_backward, recomputing_in};
use super::scan::{ScanBackward, ScanState};

/// The gradient a region's node consumed for its output of shape `expected`, or none where only
/// the one-element stand-ins of regions that ignored it came (a real gradient, with or without
/// stand-ins added, has the output's shape).
fn real_gradient<B: Backend>(grad: FloatTensor<B>, expected: &Shape) -> Option<FloatTensor<B>> {
    (grad.shape() == *expected).then_some(grad)
}

/// How a region node's backward replays its region (see [`Replay`](super::Replay)), with what
/// the replay needs while backward runs.
pub(super) enum NodeReplay<B: Backend> {
    /// The region's code run again. A memory-bound node's run, made by its retro-forward when
    /// Burn's Balanced checkpointing needs its output, waits here for its backward to
    /// differentiate it rather than run the body a third time.
    Recompute(Recompute, Arc<Mutex<Option<Rerun>>>),
    /// A region kept by name: the run its forward made, differentiated once.
    Kept(Arc<Mutex<Option<Rerun>>>),
    /// A scan's steps and stored carries.
    Scan(Arc<ScanState<B>>),
}

impl<B: Backend> Clone for NodeReplay<B> {
    fn clone(&self) -> Self {
        match self {
            NodeReplay::Recompute(recompute, run) => {
                NodeReplay::Recompute(recompute.clone(), run.clone())
            }
            NodeReplay::Kept(run) => NodeReplay::Kept(run.clone()),
            NodeReplay::Scan(scan) => NodeReplay::Scan(scan.clone()),
        }
    }
}

/// The region node's backward state.
pub(super) struct RegionState<B: Backend> {
    /// How its backward replays the region.
    pub(super) replay: NodeReplay<B>,
    /// What the tensors are (for the joins' stand-in gradients).
    pub(super) metas: Arc<Vec<TensorMeta>>,
    /// The inner primitives of the region's tensors (inputs, then parameters), or host copies
    /// of offloaded inputs.
    pub(super) tensors: Vec<Stored<B>>,
    /// Where its tensors live, and the placeholders' dtype.
    pub(super) device: B::Device,
    pub(super) dtype: DType,
    /// Its slot in the memory report being recorded, if any.
    pub(super) slot: Option<usize>,
    /// Which tensors want a gradient (tracked when the region ran).
    pub(super) wanted: Vec<bool>,
    /// Where the joins find the gradients of the tensors.
    pub(super) input_stash: Arc<Stash<B>>,
    /// What the region node's parents are: its tensors (which must get their gradients, not a
    /// join's placeholder), or, for a memory-bound node or one over more than 32 tensors, joins
    /// of them first.
    pub(super) parents: Vec<Slot>,
    /// The forward outputs' shapes and dtypes: the recompute must give the same.
    pub(super) outputs: Vec<(Shape, DType)>,
    /// With several outputs: where the picks leave the outputs' gradients.
    pub(super) output_stash: Option<Arc<Stash<B>>>,
    /// With one output: keeps the node marked as a region's output while it lives.
    pub(super) _produced: Option<Arc<()>>,
}

impl<B: Backend> Clone for RegionState<B> {
    fn clone(&self) -> Self {
        Self {
            replay: self.replay.clone(),
            metas: self.metas.clone(),
            tensors: self.tensors.clone(),
            device: self.device.clone(),
            dtype: self.dtype,
            slot: self.slot,
            wanted: self.wanted.clone(),
            input_stash: self.input_stash.clone(),
            parents: self.parents.clone(),
            outputs: self.outputs.clone(),
            output_stash: self.output_stash.clone(),
            _produced: self._produced.clone(),
        }
    }
}

impl<B: Backend> fmt::Debug for RegionState<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RegionState({} tensors)", self.tensors.len())
    }
}

/// The region node; `C` is the checkpoint strategy of the tensors it was given, which the
/// recompute uses too (Burn refuses ops mixing strategies).
#[derive(Debug)]
pub(super) struct RegionStep<C>(pub(super) PhantomData<C>);

impl<B: Backend, C: CheckpointStrategy, const N: usize> Backward<B, N> for RegionStep<C>
where
    DispatchTensor: DispatchKindConversion<Autodiff<B, C>>,
{
    type State = RegionState<B>;

    fn backward(self, ops: Ops<Self::State, N>, grads: &mut Gradients, _: &mut Checkpointer) {
        let state = ops.state;
        let node_grad = grads.consume::<B>(&ops.node);
        // An output the loss does not reach has no gradient: it takes no part in the nested
        // backward, as in plain autodiff (a zero gradient would not do: 0 × ∞ is NaN).
        let output_grads: Vec<Option<FloatTensor<B>>> = match &state.output_stash {
            None => vec![real_gradient::<B>(node_grad, &state.outputs[0].0)],
            Some(stash) => (0..state.outputs.len()).map(|k| stash.take(k)).collect(),
        };
        let tensor_grads = match &state.replay {
            NodeReplay::Scan(scan) => {
                let tensors = state.tensors.iter().map(Stored::load).collect();
                let shapes: Vec<Shape> = state.outputs.iter().map(|(s, _)| s.clone()).collect();
                let walk = ScanBackward::<B, C>::new(
                    scan,
                    tensors,
                    &state.wanted,
                    state.slot,
                    &shapes,
                    output_grads,
                );
                walk.run()
            }
            NodeReplay::Recompute(recompute, rematerialised) => {
                let run = taken(rematerialised).unwrap_or_else(|| rerun_timed(&state, recompute));
                differentiate::<B, C>(run, &state.wanted, output_grads)
            }
            NodeReplay::Kept(run) => {
                let run = taken(run).expect("a kept region's run is differentiated once");
                differentiate::<B, C>(run, &state.wanted, output_grads)
            }
        };
        for (index, grad) in tensor_grads.into_iter().enumerate() {
            if let Some(grad) = grad {
                state.input_stash.put(index, grad);
            }
        }
        let parents = ops
            .parents
            .map(|p| p.map(|p| Parent::new(p.id, p.order, p.distributed_params.is_some())));
        hand_down_each::<B>(
            grads,
            parents,
            &state.parents,
            &state.input_stash,
            &state.metas,
            &state.device,
            state.dtype,
        );
    }
}

impl<B: Backend, C: CheckpointStrategy> AnyParents<B, C> for RegionStep<C>
where
    DispatchTensor: DispatchKindConversion<Autodiff<B, C>>,
{
    type State = RegionState<B>;

    fn finish<const N: usize>(
        self,
        nodes: [NodeGuard; N],
        slots: [Slot; N],
        mut state: RegionState<B>,
        out: FloatTensor<B>,
    ) -> FloatTensor<Autodiff<B, C>> {
        state.parents = slots.into();
        match self.prepare::<C>(nodes).compute_bound().stateful() {
            OpsKind::Tracked(prep) => prep.finish(state, out),
            OpsKind::UnTracked(prep) => prep.finish(out),
        }
    }
}

/// The run a mutex holds, taken.
fn taken(run: &Mutex<Option<Rerun>>) -> Option<Rerun> {
    run.lock().unwrap_or_else(|e| e.into_inner()).take()
}

/// The gradient of each wanted leaf of `run` for the given output gradients (a nested backward,
/// which Burn 0.22 allows inside a step).
fn differentiate<B: Backend, C: CheckpointStrategy>(
    run: Rerun,
    wanted: &[bool],
    output_grads: Vec<Option<FloatTensor<B>>>,
) -> Vec<Option<FloatTensor<B>>>
where
    DispatchTensor: DispatchKindConversion<Autodiff<B, C>>,
{
    let Some(nested) = nested_backward::<B, C>(run.outputs, output_grads) else {
        return wanted.iter().map(|_| None).collect();
    };
    run.leaves
        .into_iter()
        .zip(wanted)
        .map(|(leaf, &wanted)| {
            let leaf = from_dispatch::<Autodiff<B, C>>(leaf);
            wanted
                .then(|| Autodiff::<B, C>::grad(&leaf, &nested))
                .flatten()
        })
        .collect()
}

/// [`rerun_tracked`], timed for the memory report as a recompute of the node's region while one
/// is recorded.
fn rerun_timed<B: Backend, C: CheckpointStrategy>(
    state: &RegionState<B>,
    recompute: &Recompute,
) -> Rerun
where
    DispatchTensor: DispatchKindConversion<Autodiff<B, C>>,
{
    let run = || rerun_tracked::<B, C>(state, recompute);
    recomputing_in(state.slot, run, |run: &Rerun| bytes_of(&run.outputs))
}

/// The region's code run again on fresh autodiff leaves of its tensors (offloaded inputs
/// uploaded first; the wanted ones requiring a gradient), checked against its forward.
fn rerun_tracked<B: Backend, C: CheckpointStrategy>(
    state: &RegionState<B>,
    recompute: &Recompute,
) -> Rerun
where
    DispatchTensor: DispatchKindConversion<Autodiff<B, C>>,
{
    let leaves: Vec<DispatchTensor> = state
        .tensors
        .iter()
        .zip(&state.wanted)
        .map(|(tensor, &wanted)| to_dispatch::<Autodiff<B, C>>(leaf::<B, C>(tensor.load(), wanted)))
        .collect();
    let outputs = recompute.in_backward(0, leaves.clone());
    check_recompute(&state.outputs, &outputs);
    Rerun { leaves, outputs }
}

/// The recompute check: a region whose recompute gives outputs of other shapes or dtypes than
/// its forward (a body that depends on something outside its inputs and module) is stopped with
/// a message, rather than giving wrong gradients or a shape error deep in Burn.
fn check_recompute(expected: &[(Shape, DType)], outputs: &[DispatchTensor]) {
    assert_eq!(
        expected.len(),
        outputs.len(),
        "a checkpoint region's recompute gave {} outputs, its forward {}: the body must depend \
         on its inputs and module only",
        outputs.len(),
        expected.len()
    );
    for (index, ((shape, dtype), output)) in expected.iter().zip(outputs).enumerate() {
        let (got_shape, got_dtype) = (output.shape(), output.dtype());
        assert!(
            &got_shape == shape && got_dtype == *dtype,
            "a checkpoint region's recompute gave output {index} as {got_shape:?} {got_dtype:?}, \
             its forward {shape:?} {dtype:?}: the body must depend on its inputs and module only"
        );
    }
}

/// A memory-bound region node's retro-forward, run by Burn's Balanced checkpointing when backward
/// needs the region's output and nothing kept it (the output of a region nested in a
/// `SaveComputeBound` one): its body again, with autodiff, held for the region node's own
/// backward to differentiate rather than run the body a third time.
pub(super) struct Rematerialise<B: Backend, C> {
    pub(super) state: RegionState<B>,
    pub(super) strategy: PhantomData<fn() -> C>,
}

impl<B: Backend, C> fmt::Debug for Rematerialise<B, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Rematerialise({:?})", self.state)
    }
}

impl<B: Backend, C: CheckpointStrategy> RetroForward for Rematerialise<B, C>
where
    DispatchTensor: DispatchKindConversion<Autodiff<B, C>>,
{
    fn forward(&self, states: &mut BackwardStates, out_node: NodeId) {
        let state = &self.state;
        let NodeReplay::Recompute(recompute, rematerialised) = &state.replay else {
            unreachable!("only a region's recompute is memory-bound")
        };
        let run = rerun_tracked::<B, C>(state, recompute);
        let output = from_dispatch::<Autodiff<B, C>>(run.outputs[0].clone());
        states.save(out_node, output.into_primitive());
        // The node's backward, next to come (it is the op that made this output), differentiates
        // this run rather than running the body again.
        *rematerialised.lock().unwrap_or_else(|e| e.into_inner()) = Some(run);
    }
}

#[derive(Debug)]
pub(super) struct Pick;

/// A pick's backward state: where its gradient goes, which output it is and that output's shape,
/// the placeholder's device and dtype, and the token that keeps it marked as a region's output.
type PickState<B> = (
    Arc<Stash<B>>,
    usize,
    Shape,
    <B as burn::backend::BackendTypes>::Device,
    DType,
    Arc<()>,
);

impl<B: Backend> Backward<B, 1> for Pick {
    type State = PickState<B>;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (stash, index, shape, device, dtype, _produced) = ops.state;
        if let Some(grad) = real_gradient::<B>(grads.consume::<B>(&ops.node), &shape) {
            stash.put(index, grad);
        }
        if let [Some(parent)] = ops.parents {
            grads.register::<B>(parent.id, placeholder::<B>(&device, dtype));
        }
    }
}

/// The node a kept seeded region's outputs pass through (the identity): its backward seeds the
/// device's generator as a recomputed region's recompute leaves it, so that the stream after
/// backward does not depend on whether a plan keeps the region.
#[derive(Debug)]
struct Reseed;

impl<B: Backend> Backward<B, 1> for Reseed {
    type State = (<B as burn::backend::BackendTypes>::Device, u64);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (device, seed) = ops.state;
        let grad = grads.consume::<B>(&ops.node);
        B::seed(&device, seed);
        if let [Some(parent)] = ops.parents {
            grads.register::<B>(parent.id, grad);
        }
    }
}

/// `tensor` through a [`Reseed`] node leaving the generator seeded with `seed` in backward (or as
/// it is, untracked).
pub(crate) fn reseed_in_backward<B: Backend, C: CheckpointStrategy>(
    tensor: FloatTensor<Autodiff<B, C>>,
    seed: u64,
) -> FloatTensor<Autodiff<B, C>> {
    if !tensor.is_tracked() {
        return tensor;
    }
    let (device, output) = (tensor.primitive().device(), tensor.primitive().clone());
    match Reseed
        .prepare::<C>([tensor.node()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish((device, seed), output),
        OpsKind::UnTracked(prep) => prep.finish(output),
    }
}
