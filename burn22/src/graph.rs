//! A region in Burn's autodiff graph.
//!
//! The region's forward has run by the time its node is built (`region.rs`: the body on
//! untracked autodiff tensors: layers see a training device, nothing is recorded). The graph
//! gets:
//! - a *join* node whose parents are the region's tensors (inputs and parameters; beyond 32, a
//!   chain of joins), so that every tensor keeps its place in Burn's traversal order and its count
//!   of consumers (which Burn's data parallelism reads to know when a gradient is complete), and
//!   gets its gradient's terms in plain autodiff's order;
//! - the *region* node, child of the join (or, for a region over one tensor, of that tensor
//!   itself), holding the body and the inner primitives of its tensors (a parameter's primitive
//!   shares the parameter's buffer);
//! - with several outputs, one *pick* node per output, child of the region node.
//!
//! Backward: the picks leave their gradients in the region's output stash; the region node runs
//! the body again on fresh autodiff leaves, calls a nested backward that starts by giving each
//! output its gradient (an output-gradient node per output, the same bits as Σ⟨out, grad⟩), and
//! leaves each tensor's gradient in the input stash; each join hands its parents their gradients
//! (and a region node whose parent is its one tensor hands it its gradient itself). An output the loss
//! does not reach takes no part in the nested backward.
//!
//! Burn requires every parent a node lists to get a gradient registered (else the parent's own
//! step panics, and under data parallelism its all-reduce waits forever). A tensor the body left
//! without a gradient gets none when it is a plain leaf (as in plain autodiff), a one-element
//! stand-in when another region made it (that region's node reads it as "no gradient",
//! `produced.rs`), and zeros of its shape otherwise.

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
use crate::produced;
use crate::state::{self, KeptRun};

/// What the region node keeps besides its body: how many of its first tensors (its inputs) go
/// to host memory, its slot in the step's memory report, and the seeds its recompute replays.
#[derive(Debug, Clone)]
pub(crate) struct NodeSpec {
    /// The region's inputs, offloaded; 0 keeps every tensor on the device.
    pub(crate) offloaded_inputs: usize,
    /// The top-level region's slot in the memory report being recorded, if any.
    pub(crate) slot: Option<usize>,
    /// The seeds the regions nested in this one drew in its forward, in order.
    pub(crate) nested_seeds: Vec<u64>,
    /// Whether the node is a memory-bound op (a region nested in a `SaveComputeBound` one):
    /// Burn's Balanced checkpointing then recomputes its output where backward needs it.
    pub(crate) memory_bound: bool,
    /// The runs of the regions its forward kept by name, in order: its recompute takes them.
    pub(crate) kept: Vec<KeptRun>,
    /// For the node of a region kept by name: its run, which its backward differentiates (the
    /// body is not run again).
    pub(crate) run: Option<Rerun>,
}

/// What a join must know of one of the region's tensors to give it a stand-in gradient.
#[derive(Debug, Clone)]
struct TensorMeta {
    shape: Shape,
    dtype: DType,
    /// Whether another region's node made it (a pick, or a region node with one output).
    region_output: bool,
}

impl TensorMeta {
    /// What a parent that must get a gradient gets when the body gave it none: a one-element
    /// stand-in that its region node reads as "no gradient", or zeros of its shape for Burn's
    /// own nodes.
    fn no_gradient<B: Backend>(&self, device: &B::Device) -> FloatTensor<B> {
        let shape = if self.region_output {
            Shape::new_raw(vec![1; self.shape.num_dims()].into())
        } else {
            self.shape.clone()
        };
        B::float_zeros(shape, device, self.dtype.into())
    }
}

/// The gradient a region's node consumed for its output of shape `expected`, or none where only
/// the one-element stand-ins of regions that ignored it came (a real gradient, with or without
/// stand-ins added, has the output's shape).
fn real_gradient<B: Backend>(grad: FloatTensor<B>, expected: &Shape) -> Option<FloatTensor<B>> {
    (grad.shape() == *expected).then_some(grad)
}

/// Gradients handed from one graph node to others during one backward pass.
struct Stash<B: Backend>(Mutex<Vec<Option<FloatTensor<B>>>>);

impl<B: Backend> Stash<B> {
    fn new(len: usize) -> Arc<Self> {
        Arc::new(Self(Mutex::new((0..len).map(|_| None).collect())))
    }

    fn put(&self, index: usize, grad: FloatTensor<B>) {
        self.0.lock().unwrap_or_else(|e| e.into_inner())[index] = Some(grad);
    }

    fn take(&self, index: usize) -> Option<FloatTensor<B>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())[index].take()
    }
}

impl<B: Backend> fmt::Debug for Stash<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Stash")
    }
}

/// What a join's parent is: one of the region's tensors, or the previous join.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Tensor(usize),
    Join,
}

#[derive(Debug)]
struct Join;

/// A join's backward state: where the gradients are, which tensor (or join) each parent is, and
/// what the tensors are.
type JoinState<B, const N: usize> = (
    Arc<Stash<B>>,
    [Slot; N],
    Arc<Vec<TensorMeta>>,
    <B as burn::backend::BackendTypes>::Device,
    DType,
);

impl<B: Backend, const N: usize> Backward<B, N> for Join {
    type State = JoinState<B, N>;

    fn backward(self, ops: Ops<Self::State, N>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (stash, slots, metas, device, dtype) = ops.state;
        // A join's own gradient is a placeholder: the region put the real ones in the stash.
        let _ = grads.consume::<B>(&ops.node);
        for (parent, slot) in ops.parents.into_iter().zip(slots) {
            if let Some(parent) = parent {
                let owed = owes_a_gradient(parent.order, parent.distributed_params.is_some());
                let to = Parent {
                    id: parent.id,
                    owed,
                };
                hand_down::<B>(grads, to, slot, &stash, &metas, &device, dtype);
            }
        }
    }
}

/// A parent of one of the region's nodes, as backward sees it.
#[derive(Debug, Clone, Copy)]
struct Parent {
    id: NodeId,
    /// Whether Burn needs a gradient registered for it whatever the body gave.
    owed: bool,
}

/// Whether a parent must get a gradient registered even when the body gave it none: a tensor
/// computed by another node (its step consumes its gradient unconditionally), or a parameter
/// under Burn's data parallelism (its all-reduce waits for it). A plain leaf need not: it has no
/// gradient, as in plain autodiff.
fn owes_a_gradient(order: usize, distributed: bool) -> bool {
    order != 0 || distributed
}

/// Gives the parent in `slot` its gradient: a region tensor's from the stash (or, if the region
/// gave it none and Burn needs one, a stand-in), a join's a placeholder.
fn hand_down<B: Backend>(
    grads: &mut Gradients,
    parent: Parent,
    slot: Slot,
    stash: &Stash<B>,
    metas: &[TensorMeta],
    device: &B::Device,
    dtype: DType,
) {
    let grad = match slot {
        Slot::Tensor(index) => stash
            .take(index)
            .or_else(|| parent.owed.then(|| metas[index].no_gradient::<B>(device))),
        Slot::Join => Some(placeholder::<B>(device, dtype)),
    };
    if let Some(grad) = grad {
        grads.register::<B>(parent.id, grad);
    }
}

/// A one-element tensor standing for a gradient that is never read.
fn placeholder<B: Backend>(device: &B::Device, dtype: DType) -> FloatTensor<B> {
    B::float_zeros(Shape::new([1]), device, dtype.into())
}

/// The region node's backward state.
struct RegionState<B: Backend> {
    body: Body,
    /// The seeds the regions nested in this one drew in its forward: its recompute replays them.
    nested_seeds: Arc<[u64]>,
    /// What the tensors are (for the joins' stand-in gradients).
    metas: Arc<Vec<TensorMeta>>,
    /// The inner primitives of the region's tensors (inputs, then parameters), or host copies
    /// of offloaded inputs.
    tensors: Vec<Stored<B>>,
    /// Where its tensors live, and the placeholders' dtype.
    device: B::Device,
    dtype: DType,
    /// Its slot in the memory report being recorded, if any.
    slot: Option<usize>,
    /// Which tensors want a gradient (tracked when the region ran).
    wanted: Vec<bool>,
    /// Where the joins find the gradients of the tensors.
    input_stash: Arc<Stash<B>>,
    /// What the region node's parent is: the last join, or, for a region over one tensor, that
    /// tensor itself (which must get its gradient, not a join's placeholder).
    parent: Slot,
    /// The forward outputs' shapes and dtypes: the recompute must give the same.
    outputs: Vec<(Shape, DType)>,
    /// With several outputs: where the picks leave the outputs' gradients.
    output_stash: Option<Arc<Stash<B>>>,
    /// With one output: keeps the node marked as a region's output while it lives.
    _produced: Option<Arc<()>>,
    /// The body's run with autodiff (its leaves, then its outputs) for its backward to
    /// differentiate rather than run the body: a memory-bound node's, made by its retro-forward
    /// (else the body would run a third time), or a region kept by name's, made in forward.
    rematerialised: Arc<Mutex<Option<Rerun>>>,
    /// The runs of the regions its forward kept by name: each recompute takes them.
    kept: Arc<[KeptRun]>,
}

/// A body run on fresh autodiff leaves: the leaves and the outputs, as dispatch tensors.
pub(crate) type Rerun = (Vec<DispatchTensor>, Vec<DispatchTensor>);

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
            parent: self.parent,
            outputs: self.outputs.clone(),
            output_stash: self.output_stash.clone(),
            _produced: self._produced.clone(),
            rematerialised: self.rematerialised.clone(),
            kept: self.kept.clone(),
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
struct RegionStep<C>(PhantomData<C>);

impl<B: Backend, C: CheckpointStrategy> Backward<B, 1> for RegionStep<C>
where
    DispatchTensor: DispatchKindConversion<Autodiff<B, C>>,
{
    type State = RegionState<B>;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let state = ops.state;
        let node_grad = grads.consume::<B>(&ops.node);
        // An output the loss does not reach has no gradient: it takes no part in the nested
        // backward, as in plain autodiff (a zero gradient would not do: 0 × ∞ is NaN).
        let output_grads: Vec<Option<FloatTensor<B>>> = match &state.output_stash {
            None => vec![real_gradient::<B>(node_grad, &state.outputs[0].0)],
            Some(stash) => (0..state.outputs.len()).map(|k| stash.take(k)).collect(),
        };
        let tensor_grads = recompute_and_differentiate::<B, C>(&state, output_grads);
        for (index, grad) in tensor_grads.into_iter().enumerate() {
            if let Some(grad) = grad {
                state.input_stash.put(index, grad);
            }
        }
        if let [Some(parent)] = ops.parents {
            let owed = owes_a_gradient(parent.order, parent.distributed_params.is_some());
            let to = Parent {
                id: parent.id,
                owed,
            };
            hand_down::<B>(
                grads,
                to,
                state.parent,
                &state.input_stash,
                &state.metas,
                &state.device,
                state.dtype,
            );
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
        Some((leaves, outputs)) => (
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
    let mut objective: Option<FloatTensor<Ad<B, C>>> = None;
    for (output, grad) in outputs.into_iter().zip(output_grads) {
        let output = from_dispatch::<Ad<B, C>>(output);
        // An output that depends on no tracked tensor has no gradient to give.
        let Some(grad) = grad.filter(|_| output.is_tracked()) else {
            continue;
        };
        let term = giving_gradient::<B, C>(output, grad);
        objective = Some(match objective {
            None => term,
            Some(sum) => Ad::<B, C>::float_add(sum, term),
        });
    }
    let Some(objective) = objective else {
        return state.tensors.iter().map(|_| None).collect();
    };
    let nested = Ad::<B, C>::backward(objective);
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

/// The node a recompute's nested backward starts from, one per output: its own gradient (a
/// one-element placeholder, as is its value) is dropped and the output gets `grad`, the gradient
/// backward brought to the region, as it is. The objective Σ⟨output, grad⟩ gives the same bits
/// for three more passes over every output (its product, its sum, their backward).
#[derive(Debug)]
struct OutputGradient;

impl<B: Backend> Backward<B, 1> for OutputGradient {
    type State = FloatTensor<B>;

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let _ = grads.consume::<B>(&ops.node);
        if let [Some(parent)] = ops.parents {
            grads.register::<B>(parent.id, ops.state);
        }
    }
}

/// A one-element placeholder whose backward gives `output` the gradient `grad` (see
/// [`OutputGradient`]).
fn giving_gradient<B: Backend, C: CheckpointStrategy>(
    output: FloatTensor<Autodiff<B, C>>,
    grad: FloatTensor<B>,
) -> FloatTensor<Autodiff<B, C>> {
    let (device, dtype) = (output.primitive().device(), output.primitive().dtype());
    let value = placeholder::<B>(&device, dtype);
    match OutputGradient
        .prepare::<C>([output.node()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish(grad, value),
        OpsKind::UnTracked(prep) => prep.finish(value),
    }
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
struct Rematerialise<B: Backend, C> {
    state: RegionState<B>,
    strategy: PhantomData<fn() -> C>,
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
            .unwrap_or_else(|e| e.into_inner()) = Some((leaves, outputs));
    }
}

#[derive(Debug)]
struct Pick;

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

/// A region on `Autodiff<B, C>` whose forward gave `outputs`: puts the region's nodes in the
/// graph (see the module's documentation).
pub(crate) fn autodiff_region<B: Backend, C: CheckpointStrategy>(
    tensors: Vec<FloatTensor<Autodiff<B, C>>>,
    outputs: Vec<FloatTensor<B>>,
    body: Body,
    spec: NodeSpec,
) -> Vec<FloatTensor<Autodiff<B, C>>>
where
    DispatchTensor: DispatchKindConversion<Autodiff<B, C>>,
{
    let wanted: Vec<bool> = tensors.iter().map(|t| t.is_tracked()).collect();
    let inner: Vec<FloatTensor<B>> = tensors.iter().map(|t| t.primitive().clone()).collect();
    if !wanted.iter().any(|&w| w) {
        return outputs
            .into_iter()
            .map(Autodiff::<B, C>::from_inner)
            .collect();
    }
    let (device, dtype) = (inner[0].device(), inner[0].dtype());
    let metas: Arc<Vec<TensorMeta>> = Arc::new(
        tensors
            .iter()
            .map(|t| TensorMeta {
                shape: t.shape(),
                dtype: t.dtype(),
                region_output: produced::is_region_output(t.id()),
            })
            .collect(),
    );
    let input_stash = Stash::<B>::new(tensors.len());
    let (joined, parent) = join_all::<B, C>(tensors, &input_stash, &metas);
    let several = outputs.len() > 1;
    let output_stash = several.then(|| Stash::<B>::new(outputs.len()));
    // The inputs' buffers leave the device (where nothing else holds them) once their copies
    // are in host memory; parameters stay: they are the module's own buffers.
    let stored = inner
        .into_iter()
        .enumerate()
        .map(|(index, tensor)| {
            if index < spec.offloaded_inputs {
                Stored::to_host(tensor)
            } else {
                Stored::Device(tensor)
            }
        })
        .collect();
    let state = RegionState {
        body,
        nested_seeds: spec.nested_seeds.into(),
        metas,
        tensors: stored,
        device: device.clone(),
        dtype,
        slot: spec.slot,
        wanted,
        input_stash,
        parent,
        outputs: outputs.iter().map(|o| (o.shape(), o.dtype())).collect(),
        output_stash: output_stash.clone(),
        _produced: None,
        rematerialised: Arc::new(Mutex::new(spec.run)),
        kept: spec.kept.into(),
    };
    let guard = joined.node();
    let node_output = if several {
        placeholder::<B>(&device, dtype)
    } else {
        outputs[0].clone()
    };
    // The mark (a region's output) lives as long as the node's state holds its token.
    let token = Arc::new(());
    let mut state = state;
    state._produced = (!several).then(|| token.clone());
    let prepared = RegionStep::<C>(PhantomData).prepare::<C>([guard]);
    // A memory-bound node with several outputs would need its picks rematerialised too: it is
    // kept as a compute-bound one.
    let prepared = if spec.memory_bound && !several {
        let retro = Rematerialise::<B, C> {
            state: state.clone(),
            strategy: PhantomData,
        };
        // The parent is checkpointed (a join's one-element placeholder, or the one tensor's own
        // buffer, which the node holds anyway) so that Burn's recursion over what a
        // rematerialisation needs stops there: the node holds its tensors itself.
        prepared
            .memory_bound()
            .retro_forward(retro)
            .parents([&joined])
    } else {
        prepared.compute_bound()
    };
    let region = match prepared.stateful() {
        OpsKind::Tracked(prep) => prep.finish(state, node_output),
        OpsKind::UnTracked(prep) => prep.finish(node_output),
    };
    drop(joined);
    let Some(stash) = output_stash else {
        produced::mark(region.id(), &token);
        return vec![region];
    };
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

/// The most parents one join has: a region over more tensors chains joins of this many.
const JOIN_WIDTH: usize = 32;

/// Joins the region's tensors into one node (or, over more than [`JOIN_WIDTH`] tensors, a chain
/// of joins); returns the last join (or the only tensor) and which of the two it is.
///
/// One node over all of them, as the op of plain autodiff that reads them all (a `cat`): Burn runs
/// a backward depth by depth, a node one deeper than its deepest parent, and within one depth in
/// the order of its graph walk. A chain of two-parent joins put the first joins at the depth of
/// other consumers of their tensors, which then got their gradient's terms in another order than
/// in plain autodiff, and a sum differing in its last bits (DenseNet-BC, where each layer's output
/// goes to every later layer of its block).
fn join_all<B: Backend, C: CheckpointStrategy>(
    tensors: Vec<FloatTensor<Autodiff<B, C>>>,
    stash: &Arc<Stash<B>>,
    metas: &Arc<Vec<TensorMeta>>,
) -> (FloatTensor<Autodiff<B, C>>, Slot) {
    let mut tensors = tensors.into_iter().enumerate();
    let (_, first) = tensors.next().expect("at least one tensor");
    let mut acc = first;
    let mut acc_slot = Slot::Tensor(0);
    loop {
        let group: Vec<_> = tensors.by_ref().take(JOIN_WIDTH - 1).collect();
        if group.is_empty() {
            return (acc, acc_slot);
        }
        let (device, dtype) = (acc.primitive().device(), acc.primitive().dtype());
        let slots: Vec<Slot> = std::iter::once(acc_slot)
            .chain(group.iter().map(|(index, _)| Slot::Tensor(*index)))
            .collect();
        let nodes: Vec<NodeGuard> = std::iter::once(acc.node())
            .chain(group.iter().map(|(_, tensor)| tensor.node()))
            .collect();
        let out = placeholder::<B>(&device, dtype);
        acc = join::<B, C>(
            nodes,
            slots,
            (stash.clone(), metas.clone(), device, dtype),
            out,
        );
        acc_slot = Slot::Join;
    }
}

/// What every join of a region shares: where the gradients are, what the tensors are, and where
/// they live.
type JoinShared<B> = (
    Arc<Stash<B>>,
    Arc<Vec<TensorMeta>>,
    <B as burn::backend::BackendTypes>::Device,
    DType,
);

/// One join node over `nodes` (2 to [`JOIN_WIDTH`]): Burn's ops take their parents as an array
/// of a size known when compiling, so each size is its own instance.
fn join<B: Backend, C: CheckpointStrategy>(
    nodes: Vec<NodeGuard>,
    slots: Vec<Slot>,
    (stash, metas, device, dtype): JoinShared<B>,
    out: FloatTensor<B>,
) -> FloatTensor<Autodiff<B, C>> {
    fn sized<B: Backend, C: CheckpointStrategy, const N: usize>(
        nodes: Vec<NodeGuard>,
        slots: Vec<Slot>,
        (stash, metas, device, dtype): JoinShared<B>,
        out: FloatTensor<B>,
    ) -> FloatTensor<Autodiff<B, C>> {
        let nodes: [NodeGuard; N] = nodes.try_into().unwrap_or_else(|_| unreachable!());
        let slots: [Slot; N] = slots.try_into().unwrap_or_else(|_| unreachable!());
        match Join.prepare::<C>(nodes).compute_bound().stateful() {
            OpsKind::Tracked(prep) => prep.finish((stash, slots, metas, device, dtype), out),
            OpsKind::UnTracked(prep) => prep.finish(out),
        }
    }
    macro_rules! by_size {
        ($($n:literal)*) => {
            match nodes.len() {
                $($n => sized::<B, C, $n>(nodes, slots, (stash, metas, device, dtype), out),)*
                n => unreachable!("a join over {n} nodes (2 to {JOIN_WIDTH})"),
            }
        };
    }
    by_size!(2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32)
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
