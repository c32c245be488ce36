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
use burn::backend::ops::FloatTensorOps;
use burn::backend::tensor::FloatTensor;
use burn::backend::{
    Autodiff, AutodiffBackend, Backend, DispatchKindConversion, DispatchTensor, TensorMetadata,
};
use burn::tensor::{DType, Shape};

use burn_checkpoint_core::memory::recording;

use crate::body::{Body, from_dispatch, to_dispatch};
use crate::offload::Stored;
use crate::state::{self, KeptRun, Rerun};

use super::join::{AnyParents, Parent, Slot, Stash, TensorMeta, hand_down_each, placeholder};
use super::objective::nested_backward;
use super::scan::{self, ScanState};

/// The gradient a region's node consumed for its output of shape `expected`, or none where only
/// the one-element stand-ins of regions that ignored it came (a real gradient, with or without
/// stand-ins added, has the output's shape).
fn real_gradient<B: Backend>(grad: FloatTensor<B>, expected: &Shape) -> Option<FloatTensor<B>> {
    (grad.shape() == *expected).then_some(grad)
}

/// The region node's backward state.
pub(super) struct RegionState<B: Backend> {
    pub(super) body: Body,
    /// The seeds the regions nested in this one drew in its forward: its recompute replays them.
    pub(super) nested_seeds: Arc<[u64]>,
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
    /// The body's run with autodiff (its leaves, then its outputs) for its backward to
    /// differentiate rather than run the body: a memory-bound node's, made by its retro-forward
    /// (else the body would run a third time), or a region kept by name's, made in forward.
    pub(super) rematerialised: Arc<Mutex<Option<Rerun>>>,
    /// The runs of the regions its forward kept by name: each recompute takes them.
    pub(super) kept: Arc<[KeptRun]>,
    /// A scan's node: its steps and stored carries (its backward walks the steps).
    pub(super) scan: Option<Arc<ScanState<B>>>,
}

impl<B: Backend> Clone for RegionState<B> {
    fn clone(&self) -> Self {
        Self {
            body: self.body.clone(),
            nested_seeds: self.nested_seeds.clone(),
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
            rematerialised: self.rematerialised.clone(),
            kept: self.kept.clone(),
            scan: self.scan.clone(),
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
        let tensor_grads = match &state.scan {
            Some(scan) => scan::differentiate::<B, C>(
                state.tensors.iter().map(Stored::load).collect(),
                &state.wanted,
                &state
                    .outputs
                    .iter()
                    .map(|(shape, _)| shape.clone())
                    .collect::<Vec<_>>(),
                scan,
                state.slot,
                output_grads,
            ),
            None => recompute_and_differentiate::<B, C>(&state, output_grads),
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

/// Runs the body again on fresh autodiff leaves (offloaded inputs uploaded first) and returns
/// the gradient of each wanted tensor for the given output gradients (a nested backward, which
/// Burn 0.22 allows inside a step). The memory report times the uploads and the body's run.
fn recompute_and_differentiate<B: Backend, C: CheckpointStrategy>(
    state: &RegionState<B>,
    output_grads: Vec<Option<FloatTensor<B>>>,
) -> Vec<Option<FloatTensor<B>>>
where
    DispatchTensor: DispatchKindConversion<Autodiff<B, C>>,
{
    type Ad<B, C> = Autodiff<B, C>;
    let wanted = &state.wanted;
    let rerun = state
        .rematerialised
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    let (leaves, outputs) = match rerun {
        Some(Rerun { leaves, outputs }) => (
            leaves.into_iter().map(from_dispatch::<Ad<B, C>>).collect(),
            outputs,
        ),
        None => {
            let size = |(_, outputs): &(_, Vec<DispatchTensor>)| {
                outputs
                    .iter()
                    .map(|o| (o.shape().num_elements() * o.dtype().size()) as u64)
                    .sum()
            };
            let recompute = || rerun_tracked::<B, C>(state);
            match state.slot {
                Some(slot) => recording::recompute(slot, recompute, size),
                None => recompute(),
            }
        }
    };
    let Some(nested) = nested_backward::<B, C>(outputs, output_grads) else {
        return state.tensors.iter().map(|_| None).collect();
    };
    leaves
        .iter()
        .zip(wanted)
        .map(|(leaf, &wanted)| {
            if wanted {
                Ad::<B, C>::grad(leaf, &nested)
            } else {
                None
            }
        })
        .collect()
}

/// The body run again on fresh autodiff leaves of the region's tensors (offloaded inputs
/// uploaded first; the wanted ones requiring a gradient), its nested regions' seeds replayed.
fn rerun_tracked<B: Backend, C: CheckpointStrategy>(
    state: &RegionState<B>,
) -> (Vec<FloatTensor<Autodiff<B, C>>>, Vec<DispatchTensor>)
where
    DispatchTensor: DispatchKindConversion<Autodiff<B, C>>,
{
    type Ad<B, C> = Autodiff<B, C>;
    let leaves: Vec<FloatTensor<Ad<B, C>>> = state
        .tensors
        .iter()
        .zip(&state.wanted)
        .map(|(tensor, &wanted)| {
            let leaf = Ad::<B, C>::from_inner(tensor.load());
            if wanted {
                Ad::<B, C>::float_set_require_grad(leaf, true)
            } else {
                leaf
            }
        })
        .collect();
    let inputs = leaves
        .iter()
        .cloned()
        .map(to_dispatch::<Ad<B, C>>)
        .collect();
    let outputs = state::recomputing(&state.nested_seeds, &state.kept, || (state.body.0)(inputs));
    check_recompute(&state.outputs, &outputs);
    (leaves, outputs)
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
        let (leaves, outputs) = rerun_tracked::<B, C>(state);
        let output = from_dispatch::<Autodiff<B, C>>(outputs[0].clone());
        states.save(out_node, output.into_primitive());
        // The node's backward, next to come (it is the op that made this output), differentiates
        // this run rather than running the body again.
        let leaves = leaves
            .into_iter()
            .map(to_dispatch::<Autodiff<B, C>>)
            .collect();
        *state
            .rematerialised
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(Rerun { leaves, outputs });
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
