//! A region in Burn's autodiff graph.
//!
//! Forward runs the body on untracked autodiff tensors: layers see a training device, nothing is
//! recorded. The graph gets:
//! - a chain of *join* nodes whose parents are the region's tensors (inputs and parameters), so
//!   that every tensor keeps its place in Burn's traversal order and its count of consumers
//!   (which Burn's data parallelism reads to know when a gradient is complete);
//! - the *region* node, child of the last join (or, for a region over one tensor, of that tensor
//!   itself), holding the body and the inner primitives of its tensors (a parameter's primitive
//!   shares the parameter's buffer);
//! - with several outputs, one *pick* node per output, child of the region node.
//!
//! Backward: the picks leave their gradients in the region's output stash; the region node runs
//! the body again on fresh autodiff leaves, calls a nested backward on Σ⟨out, grad⟩, and leaves
//! each tensor's gradient in the input stash; each join hands its parents their gradients (and a
//! region node whose parent is its one tensor hands it its gradient itself). An output the loss
//! does not reach takes no part in the nested backward.

use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use burn::backend::autodiff::NodeId;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::ops::FloatTensorOps;
use burn::backend::tensor::FloatTensor;
use burn::backend::{
    Autodiff, AutodiffBackend, Backend, DispatchKindConversion, DispatchTensor, TensorMetadata,
};
use burn::tensor::{DType, Shape};

use burn_checkpoint_core::memory::recording;

use crate::body::{Body, Pass, from_dispatch, to_dispatch};
use crate::offload::Stored;
use crate::region;

/// What the region node keeps besides its body: how many of its first tensors (its inputs) go
/// to host memory, and its slot in the step's memory report.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct NodeSpec {
    /// The region's inputs, offloaded; 0 keeps every tensor on the device.
    pub(crate) offloaded_inputs: usize,
    /// The top-level region's slot in the memory report being recorded, if any.
    pub(crate) slot: Option<usize>,
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

impl<B: Backend> Backward<B, 2> for Join {
    type State = (Arc<Stash<B>>, [Slot; 2], B::Device, DType);

    fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (stash, slots, device, dtype) = ops.state;
        // A join's own gradient is a placeholder: the region put the real ones in the stash.
        let _ = grads.consume::<B>(&ops.node);
        for (parent, slot) in ops.parents.into_iter().zip(slots) {
            if let Some(parent) = parent {
                hand_down::<B>(grads, parent.id, slot, &stash, &device, dtype);
            }
        }
    }
}

/// Gives the parent in `slot` its gradient: a region tensor's from the stash (none if the
/// region gave it none), a join's a placeholder.
fn hand_down<B: Backend>(
    grads: &mut Gradients,
    parent: NodeId,
    slot: Slot,
    stash: &Stash<B>,
    device: &B::Device,
    dtype: DType,
) {
    let grad = match slot {
        Slot::Tensor(index) => stash.take(index),
        Slot::Join => Some(placeholder::<B>(device, dtype)),
    };
    if let Some(grad) = grad {
        grads.register::<B>(parent, grad);
    }
}

/// A one-element tensor standing for a gradient that is never read.
fn placeholder<B: Backend>(device: &B::Device, dtype: DType) -> FloatTensor<B> {
    B::float_zeros(Shape::new([1]), device, dtype.into())
}

/// The region node's backward state.
struct RegionState<B: Backend> {
    body: Body,
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
}

impl<B: Backend> Clone for RegionState<B> {
    fn clone(&self) -> Self {
        Self {
            body: self.body.clone(),
            tensors: self.tensors.clone(),
            device: self.device.clone(),
            dtype: self.dtype,
            slot: self.slot,
            wanted: self.wanted.clone(),
            input_stash: self.input_stash.clone(),
            parent: self.parent,
            outputs: self.outputs.clone(),
            output_stash: self.output_stash.clone(),
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
            None => vec![Some(node_grad)],
            Some(stash) => (0..state.outputs.len()).map(|k| stash.take(k)).collect(),
        };
        let tensor_grads = recompute_and_differentiate::<B, C>(&state, output_grads);
        for (index, grad) in tensor_grads.into_iter().enumerate() {
            if let Some(grad) = grad {
                state.input_stash.put(index, grad);
            }
        }
        if let [Some(parent)] = ops.parents {
            hand_down::<B>(
                grads,
                parent.id,
                state.parent,
                &state.input_stash,
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
    let recompute = || {
        let leaves: Vec<FloatTensor<Ad<B, C>>> = state
            .tensors
            .iter()
            .zip(wanted)
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
        let outputs = region::recomputing(|| (state.body.0)(inputs, Pass::Recompute));
        (leaves, outputs)
    };
    let size = |(_, outputs): &(_, Vec<DispatchTensor>)| {
        outputs
            .iter()
            .map(|o| (o.shape().num_elements() * o.dtype().size()) as u64)
            .sum()
    };
    let (leaves, outputs) = match state.slot {
        Some(slot) => recording::recompute(slot, recompute, size),
        None => recompute(),
    };
    check_recompute(&state.outputs, &outputs);
    let mut objective: Option<FloatTensor<Ad<B, C>>> = None;
    for (output, grad) in outputs.into_iter().zip(output_grads) {
        let output = from_dispatch::<Ad<B, C>>(output);
        // An output that depends on no tracked tensor has no gradient to give.
        let Some(grad) = grad.filter(|_| output.is_tracked()) else {
            continue;
        };
        let term =
            Ad::<B, C>::float_sum(Ad::<B, C>::float_mul(output, Ad::<B, C>::from_inner(grad)));
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

#[derive(Debug)]
struct Pick;

impl<B: Backend> Backward<B, 1> for Pick {
    type State = (Arc<Stash<B>>, usize, B::Device, DType);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (stash, index, device, dtype) = ops.state;
        stash.put(index, grads.consume::<B>(&ops.node));
        if let [Some(parent)] = ops.parents {
            grads.register::<B>(parent.id, placeholder::<B>(&device, dtype));
        }
    }
}

/// A region on `Autodiff<B, C>`: runs the body without recording, and puts the region's nodes
/// in the graph (see the module's documentation).
pub(crate) fn autodiff_region<B: Backend, C: CheckpointStrategy>(
    tensors: Vec<FloatTensor<Autodiff<B, C>>>,
    body: Body,
    spec: NodeSpec,
) -> Vec<FloatTensor<Autodiff<B, C>>>
where
    DispatchTensor: DispatchKindConversion<Autodiff<B, C>>,
{
    let wanted: Vec<bool> = tensors.iter().map(|t| t.is_tracked()).collect();
    let inner: Vec<FloatTensor<B>> = tensors.iter().map(|t| t.primitive().clone()).collect();
    // Forward on untracked autodiff tensors: layers still see a training device (dropout,
    // batch statistics), but nothing inside the region is recorded.
    let outputs = run_untracked::<B, C>(&inner, &body);
    if !wanted.iter().any(|&w| w) {
        return outputs
            .into_iter()
            .map(Autodiff::<B, C>::from_inner)
            .collect();
    }
    let (device, dtype) = (inner[0].device(), inner[0].dtype());
    let input_stash = Stash::<B>::new(tensors.len());
    let (joined, parent) = join_all::<B, C>(tensors, &input_stash);
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
        tensors: stored,
        device: device.clone(),
        dtype,
        slot: spec.slot,
        wanted,
        input_stash,
        parent,
        outputs: outputs.iter().map(|o| (o.shape(), o.dtype())).collect(),
        output_stash: output_stash.clone(),
    };
    let guard = joined.node();
    let node_output = if several {
        placeholder::<B>(&device, dtype)
    } else {
        outputs[0].clone()
    };
    let region = match RegionStep::<C>(PhantomData)
        .prepare::<C>([guard])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish(state, node_output),
        OpsKind::UnTracked(prep) => prep.finish(node_output),
    };
    drop(joined);
    let Some(stash) = output_stash else {
        return vec![region];
    };
    outputs
        .into_iter()
        .enumerate()
        .map(|(index, output)| {
            let state = (stash.clone(), index, device.clone(), output.dtype());
            match Pick
                .prepare::<C>([region.node()])
                .compute_bound()
                .stateful()
            {
                OpsKind::Tracked(prep) => prep.finish(state, output),
                OpsKind::UnTracked(prep) => prep.finish(output),
            }
        })
        .collect()
}

/// The forward pass of a region's body on untracked autodiff tensors; returns the outputs'
/// inner primitives.
fn run_untracked<B: Backend, C: CheckpointStrategy>(
    tensors: &[FloatTensor<B>],
    body: &Body,
) -> Vec<FloatTensor<B>>
where
    DispatchTensor: DispatchKindConversion<Autodiff<B, C>>,
{
    let inputs = tensors
        .iter()
        .map(|t| to_dispatch::<Autodiff<B, C>>(Autodiff::<B, C>::from_inner(t.clone())))
        .collect();
    (body.0)(inputs, Pass::Forward)
        .into_iter()
        .map(|out| {
            let out = from_dispatch::<Autodiff<B, C>>(out);
            assert!(
                !out.is_tracked(),
                "a checkpoint region used a tracked tensor it was not given (a captured \
                 activation or a parameter outside its module): it would get no gradient; pass \
                 it as an input or put it in the region's module"
            );
            out.into_primitive()
        })
        .collect()
}

/// Chains the region's tensors into join nodes; returns the last join (or the only tensor) and
/// which of the two it is.
fn join_all<B: Backend, C: CheckpointStrategy>(
    tensors: Vec<FloatTensor<Autodiff<B, C>>>,
    stash: &Arc<Stash<B>>,
) -> (FloatTensor<Autodiff<B, C>>, Slot) {
    let mut tensors = tensors.into_iter().enumerate();
    let (_, first) = tensors.next().expect("at least one tensor");
    let mut acc = first;
    let mut acc_slot = Slot::Tensor(0);
    for (index, tensor) in tensors {
        let (device, dtype) = (acc.primitive().device(), acc.primitive().dtype());
        let out = placeholder::<B>(&device, dtype);
        let state = (
            stash.clone(),
            [acc_slot, Slot::Tensor(index)],
            device,
            dtype,
        );
        acc = match Join
            .prepare::<C>([acc.node(), tensor.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish(state, out),
            OpsKind::UnTracked(prep) => prep.finish(out),
        };
        acc_slot = Slot::Join;
    }
    (acc, acc_slot)
}
