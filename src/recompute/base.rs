//! The machinery every region op shares: how a region op becomes a node of Burn's autodiff
//! graph, and how backward gets back what the region did not keep.
//!
//! # Why our own recompute walk
//!
//! Burn 0.21 can recompute a node during backward (a memory-bound node with a `RetroForward`),
//! but its checkpointer finds what to recompute by walking every *path* from the node to its
//! stored ancestors without remembering the nodes it has walked. Inside a region everything is
//! recomputed, so a region whose ops share inputs (residual connections, attention's q, k and v,
//! DenseNet's concatenations) makes that walk exponential in the region's length.
//!
//! So region ops do not hand their recompute to Burn. Each one is a **compute-bound** node of
//! Burn's graph (Burn never recomputes it, and never walks through it), whose backward state says
//! how to get each input it reads:
//! - [`Operand::Recomputed`]: the input was made by an op of the same region. Its [`Recipe`] (the
//!   op and how to get *its* operands: no tensor data) recomputes it, at most once per backward,
//!   memoised in the recipe;
//! - [`Operand::Stored`]: the input is stored by Burn (a region input, a parameter, a region
//!   output stored at the boundary, an output a policy keeps, an op that fell back): registered
//!   with Burn's checkpointer at forward, retrieved in backward (a lookup);
//! - [`Operand::Const`]: an untracked operand (a constant, a dropout mask), held as it is.
//!
//! A recomputed value lives in its recipe while someone may still ask for it: every holder of a
//! [`Ticket`] (a backward step that reads the value, or the recipe of an op made from it that is
//! not recomputed yet) asks at most once, and the value is dropped when the last ticket is used
//! or dropped. The walk is iterative and visits each recipe once: linear in the ops recomputed.

use core::fmt;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use burn_autodiff::NodeId;
use burn_autodiff::checkpoint::base::Checkpointer;
use burn_autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn_autodiff::grads::Gradients;
use burn_autodiff::ops::{Backward, Ops, OpsKind};
use burn_backend::backend::AutodiffBackend;
use burn_backend::tensor::Device;
use burn_backend::{Backend, TensorData, TensorMetadata, try_read_sync};

use super::check;
use crate::memory::{offload, recording};
use crate::types::{Plain, Primitive, Tracked};

/// An op rebuilt to be recomputed on backward, written against the inner backend `I` only.
///
/// `N` is the number of float operands (Burn's `Backward` has a compile-time parent count).
/// Non-float operands (options, masks, indices) live in the struct itself.
pub(crate) trait RegionOp<I: Backend, const N: usize>:
    fmt::Debug + Clone + Send + Sync + 'static
{
    /// The op's name, for debug output and reports.
    fn name(&self) -> &'static str;

    /// The op's output from its float operands.
    fn forward(&self, inputs: [Primitive<I>; N]) -> Primitive<I>;

    /// Which operands the backward reads, given which operands need a gradient.
    fn saved(&self, needs_grad: [bool; N]) -> [bool; N];

    /// The gradient of each operand that needs one. `inputs[i]` is `Some` where `saved` said so.
    fn backward(
        self,
        inputs: [Option<Primitive<I>>; N],
        grad: Primitive<I>,
        needs_grad: [bool; N],
    ) -> [Option<Primitive<I>>; N];
}

/// Builds `op` over `inputs` as a node recomputed in backward.
pub(crate) fn build<I, Op, const N: usize>(op: Op, inputs: [Tracked<I>; N]) -> Tracked<I>
where
    I: Backend,
    Op: RegionOp<I, N>,
{
    build_with::<I, _, _, _>(op, inputs, |op, prims| (op.forward(prims), ())).0
}

/// Like [`build`], with a forward that also yields something besides the output (the indices of
/// a max pool, say). `forward` must compute the same output as [`RegionOp::forward`].
pub(crate) fn build_with<I, Op, X, const N: usize>(
    op: Op,
    inputs: [Tracked<I>; N],
    forward: impl FnOnce(&Op, [Primitive<I>; N]) -> (Primitive<I>, X),
) -> (Tracked<I>, X)
where
    I: Backend,
    Op: RegionOp<I, N>,
{
    let needs_grad = inputs.each_ref().map(|t| t.is_tracked());
    if !needs_grad.contains(&true) {
        let (output, extra) = forward(&op, inputs.map(|t| t.primitive));
        return (Plain::<I>::from_inner(output), extra);
    }
    let saved = op.saved(needs_grad);
    let expected = check::Expected::new_if_verifying();
    let nodes = inputs.each_ref().map(|t| t.node.clone());
    // Compute-bound: Burn never recomputes this node nor walks through it; a Burn op that reads
    // it (an op without a region version) stores it, as it stores any compute-bound output.
    let prep = RegionBackward(op.clone())
        .prepare::<BalancedCheckpointing>(nodes)
        .compute_bound()
        .stateful();
    let OpsKind::Tracked(mut prep) = prep else {
        unreachable!("an op with a tracked operand is tracked")
    };
    let mut register = |tensor: &Tracked<I>| prep.checkpoint(tensor);
    let mut read = [const { None }; N];
    for (i, input) in inputs.iter().enumerate() {
        if saved[i] {
            read[i] = Some(Operand::of(input, &mut register));
        }
    }
    let operands = inputs
        .iter()
        .map(|input| Operand::of(input, &mut register))
        .collect();
    let recipe = Recipe::new(
        Box::new(Forward::<Op, N>(op.clone())),
        operands,
        expected.clone(),
        recording::current_region(),
    );
    let state = StepState::new(read, Arc::clone(&recipe));
    // Keep the operands' nodes referenced until this node is registered: burn-autodiff frees a
    // graph none of whose nodes is referenced, from any thread's backward, and an operand may
    // still be alone in its graph until `finish` links it to this node.
    let referenced = inputs.each_ref().map(|t| t.rc.clone());
    // Move the primitives in last: an input nothing else holds may then be reused in place.
    let (output, extra) = forward(&op, inputs.map(|t| t.primitive));
    if let Some(expected) = expected {
        expected.set::<I>(&output);
    }
    let output = prep.finish(state, output);
    remember(&output, &recipe);
    drop(referenced);
    (output, extra)
}

/// Identity node that is compute-bound: what it outputs is stored, not recomputed. The decorator
/// puts one between a region's output and a consumer outside the region, so that backward
/// recomputes one region at a time from stored boundaries. Shares the primitive: no copy.
pub(crate) fn materialize<I: Backend>(tensor: Tracked<I>) -> Tracked<I> {
    if !tensor.is_tracked() {
        return tensor;
    }
    Materialize
        .prepare::<BalancedCheckpointing>([tensor.node.clone()])
        .compute_bound()
        .stateless(tensor.primitive)
}

#[derive(Debug)]
struct Materialize;

impl<I: Backend> Backward<I, 1> for Materialize {
    type State = ();

    fn backward(self, ops: Ops<(), 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        burn_autodiff::ops::unary::<I, _>(ops.parents, ops.node, grads, |grad| grad);
    }
}

/// Gradient of a broadcast operand: summed over the dimensions it was broadcast along (Burn's
/// own rule, so that gradients stay bitwise equal).
pub(crate) fn unbroadcast<I: Backend>(
    grad: Primitive<I>,
    shape: &burn_backend::Shape,
) -> Primitive<I> {
    burn_autodiff::ops::broadcast_shape::<I>(grad, shape)
}

// ---------------------------------------------------------------------------------------------
// Operands

/// How a recompute or a backward step gets one operand of a region op back.
enum Operand<I: Backend> {
    /// Made by an op of the same region: recomputed (once) by its recipe.
    Recomputed(Ticket<I>),
    /// Stored by Burn, registered with its checkpointer when the op was built.
    Stored(NodeId),
    /// Untracked: held as it is (a handle clone, no copy).
    Const(Primitive<I>),
    /// Stored, in host memory: the region offloads (`Policy::offloaded`).
    Offloaded(Arc<HostCopy<I>>),
}

impl<I: Backend> Operand<I> {
    /// How the op being built will get `tensor` back; `register` registers a stored operand
    /// with Burn's checkpointer (the op's `prep.checkpoint`).
    fn of(tensor: &Tracked<I>, register: &mut impl FnMut(&Tracked<I>) -> NodeId) -> Self {
        if !tensor.is_tracked() {
            return Operand::Const(tensor.primitive.clone());
        }
        match recipe_of::<I>(tensor.node.id) {
            Some(recipe) => Operand::Recomputed(Ticket::new(recipe)),
            // A leaf (a parameter, an input) is held by its owner anyway: a host copy would
            // free nothing.
            None if (offload::active() || offload::marked(tensor.node.id.value))
                && !tensor.node.parents.is_empty() =>
            {
                Operand::Offloaded(HostCopy::of(tensor))
            }
            None => Operand::Stored(register(tensor)),
        }
    }

    /// The operand's value. A recomputed operand must have been computed ([`compute`]).
    fn get(self, checkpointer: &mut Checkpointer) -> Primitive<I> {
        match self {
            Operand::Recomputed(ticket) => ticket.take(checkpointer),
            Operand::Stored(id) => checkpointer.retrieve_node_output::<Primitive<I>>(id),
            Operand::Const(primitive) => primitive,
            Operand::Offloaded(copy) => copy.upload(),
        }
    }
}

impl<I: Backend> fmt::Debug for Operand<I> {
    // Hand-written: a derived Debug would print the held tensor.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::Recomputed(ticket) => write!(f, "Recomputed({})", ticket.recipe().name()),
            Operand::Stored(id) => write!(f, "Stored({id})"),
            Operand::Const(_) => f.write_str("Const"),
            Operand::Offloaded(copy) => write!(f, "Offloaded({} bytes)", copy.bytes),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Host copies

/// A stored operand held in host memory: one copy per tensor, shared by every operand that reads
/// it (a DenseNet feature read by each later layer is copied once), dropped with its last reader.
pub(crate) struct HostCopy<I: Backend> {
    /// Taken by the last reader's upload.
    data: Option<TensorData>,
    device: Device<I>,
    bytes: usize,
}

thread_local! {
    /// The live host copy of each offloaded node on this thread, by node id.
    static HOST_COPIES: RefCell<HashMap<u64, Box<dyn std::any::Any>>> = RefCell::new(HashMap::new());
}

impl<I: Backend> HostCopy<I> {
    /// The host copy of `tensor`, made now (a read back from the device) unless one is alive.
    fn of(tensor: &Tracked<I>) -> Arc<Self> {
        let id = tensor.node.id.value;
        let live = HOST_COPIES.with(|copies| {
            let copies = copies.borrow();
            let weak = copies.get(&id)?.downcast_ref::<Weak<HostCopy<I>>>()?;
            weak.upgrade()
        });
        if let Some(copy) = live {
            return copy;
        }
        let data = try_read_sync(I::float_into_data(tensor.primitive.clone()))
            .expect(
                "burn-checkpoint: offloading needs a backend that reads data back synchronously",
            )
            .expect("burn-checkpoint: reading an offloaded operand back from the device failed");
        let bytes = data.bytes.len();
        offload::copied(bytes);
        let copy = Arc::new(HostCopy {
            data: Some(data),
            device: I::float_device(&tensor.primitive),
            bytes,
        });
        HOST_COPIES.with(|copies| {
            let mut copies = copies.borrow_mut();
            // Dead entries go when the map would otherwise grow.
            if copies.len() >= MIN_PRUNE_AT {
                copies.retain(|_, weak| {
                    weak.downcast_ref::<Weak<HostCopy<I>>>()
                        .is_none_or(|weak| weak.strong_count() > 0)
                });
            }
            copies.insert(id, Box::new(Arc::downgrade(&copy)));
        });
        copy
    }

    /// The value on its device again: the last reader takes the host data, the others copy it.
    fn upload(self: Arc<Self>) -> Primitive<I> {
        const HELD: &str = "a host copy holds its data until its last reader";
        match Arc::try_unwrap(self) {
            Ok(mut copy) => {
                let data = copy.data.take().expect(HELD);
                I::float_from_data(data, &copy.device)
            }
            Err(shared) => I::float_from_data(shared.data.clone().expect(HELD), &shared.device),
        }
    }
}

impl<I: Backend> Drop for HostCopy<I> {
    fn drop(&mut self) {
        offload::released(self.bytes);
    }
}

// ---------------------------------------------------------------------------------------------
// Recipes

/// A region op's forward, with its operand count erased so that recipes of all ops share a type.
trait ErasedForward<I: Backend>: Send + Sync {
    fn name(&self) -> &'static str;
    fn forward(&self, inputs: Vec<Primitive<I>>) -> Primitive<I>;
}

struct Forward<Op, const N: usize>(Op);

impl<I: Backend, Op: RegionOp<I, N>, const N: usize> ErasedForward<I> for Forward<Op, N> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn forward(&self, inputs: Vec<Primitive<I>>) -> Primitive<I> {
        let Ok(inputs) = <[Primitive<I>; N]>::try_from(inputs) else {
            unreachable!("a recipe holds one operand per input of its op")
        };
        self.0.forward(inputs)
    }
}

/// How to recompute one region op's output: the op, and how to get each of its operands.
/// Holds no tensor data but untracked operands; holds the recomputed value while tickets for it
/// are out.
struct Recipe<I: Backend> {
    op: Box<dyn ErasedForward<I>>,
    expected: Option<check::Expected>,
    /// The profiled step's top-level region this op ran in, while a step is recorded.
    recorded_in: Option<usize>,
    slot: Mutex<Slot<I>>,
}

struct Slot<I: Backend> {
    /// Taken when the value is computed, or when the recipe is drained unused.
    operands: Option<Vec<Operand<I>>>,
    /// The recomputed output, while tickets for it are out.
    value: Option<Primitive<I>>,
    /// Tickets out: readers that may still ask for the value.
    tickets: usize,
    /// Whether the value was computed (a second computation would be a bookkeeping bug).
    computed: bool,
}

impl<I: Backend> Recipe<I> {
    fn new(
        op: Box<dyn ErasedForward<I>>,
        operands: Vec<Operand<I>>,
        expected: Option<check::Expected>,
        recorded_in: Option<usize>,
    ) -> Arc<Self> {
        Arc::new(Recipe {
            op,
            expected,
            recorded_in,
            slot: Mutex::new(Slot {
                operands: Some(operands),
                value: None,
                tickets: 0,
                computed: false,
            }),
        })
    }

    fn name(&self) -> &'static str {
        self.op.name()
    }

    fn slot(&self) -> MutexGuard<'_, Slot<I>> {
        // A panic during a recompute (a failed recompute check) leaves nothing half-written.
        self.slot
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Called by the op's own backward step, after every reader has run: a recipe nobody asked
    /// for still holds Burn's registrations of its stored operands; retrieving them lets Burn
    /// free what only this recipe would have read.
    fn drain(&self, checkpointer: &mut Checkpointer) {
        let operands = self.slot().operands.take();
        for operand in operands.into_iter().flatten() {
            if let Operand::Stored(id) = operand {
                drop(checkpointer.retrieve_node_output::<Primitive<I>>(id));
            }
        }
    }
}

/// Computes `root`'s value and, first, every recipe it needs that has no value: an iterative
/// post-order walk that visits each recipe once.
fn compute<I: Backend>(root: &Arc<Recipe<I>>, checkpointer: &mut Checkpointer) {
    let mut stack = vec![(Arc::clone(root), false)];
    while let Some((recipe, operands_ready)) = stack.pop() {
        let mut slot = recipe.slot();
        if slot.value.is_some() {
            continue;
        }
        if !operands_ready {
            crate::counters::note_walk_step();
            let pending: Vec<_> = slot
                .operands
                .iter()
                .flatten()
                .filter_map(|operand| match operand {
                    Operand::Recomputed(ticket) => Some(Arc::clone(ticket.recipe())),
                    _ => None,
                })
                .collect();
            drop(slot);
            stack.push((recipe, true));
            stack.extend(pending.into_iter().map(|r| (r, false)));
            continue;
        }
        let Some(operands) = slot.operands.take() else {
            panic!(
                "burn-checkpoint: `{}` was asked for again after its last reader ran (a \
                 bookkeeping bug; please report it)",
                recipe.name()
            );
        };
        assert!(
            !slot.computed,
            "burn-checkpoint: `{}` would be recomputed twice in one backward (a bookkeeping bug)",
            recipe.name()
        );
        drop(slot);
        let inputs = operands
            .into_iter()
            .map(|operand| operand.get(checkpointer))
            .collect();
        crate::counters::note_recompute(recipe.name());
        let output = match recipe.recorded_in {
            Some(region) => recording::recompute(
                region,
                || recipe.op.forward(inputs),
                |output| (output.shape().num_elements() * output.dtype().size()) as u64,
            ),
            None => recipe.op.forward(inputs),
        };
        if let Some(expected) = &recipe.expected {
            expected.verify::<I>(recipe.name(), &output);
        }
        let mut slot = recipe.slot();
        slot.computed = true;
        slot.value = Some(output);
    }
}

/// A claim on a recipe's value: one read, at most. Dropping it unused gives the claim up.
struct Ticket<I: Backend>(Option<Arc<Recipe<I>>>);

impl<I: Backend> Ticket<I> {
    fn new(recipe: Arc<Recipe<I>>) -> Self {
        recipe.slot().tickets += 1;
        Ticket(Some(recipe))
    }

    fn recipe(&self) -> &Arc<Recipe<I>> {
        self.0
            .as_ref()
            .expect("a ticket holds its recipe until used")
    }

    /// The value, computed if needed; the last ticket takes it out of the recipe.
    fn take(mut self, checkpointer: &mut Checkpointer) -> Primitive<I> {
        let recipe = self.0.take().expect("a ticket is used once");
        compute(&recipe, checkpointer);
        let mut slot = recipe.slot();
        slot.tickets -= 1;
        let value = if slot.tickets == 0 {
            slot.value.take()
        } else {
            slot.value.clone()
        };
        value.expect("computed above")
    }
}

impl<I: Backend> Drop for Ticket<I> {
    fn drop(&mut self) {
        if let Some(recipe) = self.0.take() {
            let mut slot = recipe.slot();
            slot.tickets -= 1;
            if slot.tickets == 0 {
                slot.value = None;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Which tensors have recipes

thread_local! {
    /// The recipe of each region op output made on this thread, by node id. Weak: the recipe
    /// lives as long as its node's backward step (or a reader) holds it.
    static RECIPES: RefCell<Recipes> = RefCell::new(Recipes::default());
}

#[derive(Default)]
struct Recipes {
    by_node: HashMap<u64, Box<dyn std::any::Any>>,
    prune_at: usize,
}

/// Fewest entries before dead recipes are pruned.
const MIN_PRUNE_AT: usize = 4096;

fn remember<I: Backend>(output: &Tracked<I>, recipe: &Arc<Recipe<I>>) {
    RECIPES.with(|recipes| {
        let mut recipes = recipes.borrow_mut();
        let weak: Weak<Recipe<I>> = Arc::downgrade(recipe);
        recipes.by_node.insert(output.node.id.value, Box::new(weak));
        if recipes.by_node.len() >= recipes.prune_at.max(MIN_PRUNE_AT) {
            recipes.by_node.retain(|_, weak| {
                weak.downcast_ref::<Weak<Recipe<I>>>()
                    .is_none_or(|weak| weak.strong_count() > 0)
            });
            recipes.prune_at = 2 * recipes.by_node.len();
        }
    });
}

/// The live recipe of the node `id`, if a region op on this thread made it.
fn recipe_of<I: Backend>(id: NodeId) -> Option<Arc<Recipe<I>>> {
    RECIPES.with(|recipes| {
        recipes
            .borrow()
            .by_node
            .get(&id.value)?
            .downcast_ref::<Weak<Recipe<I>>>()?
            .upgrade()
    })
}

// ---------------------------------------------------------------------------------------------
// The backward step

/// What a region op's backward step holds from forward to backward: how to get the inputs it
/// reads, and its own recipe (kept alive for the ops built from its output, drained after).
struct StepState<I: Backend, const N: usize>(Arc<Mutex<Option<StepInputs<I, N>>>>);

struct StepInputs<I: Backend, const N: usize> {
    read: [Option<Operand<I>>; N],
    recipe: Arc<Recipe<I>>,
}

impl<I: Backend, const N: usize> StepState<I, N> {
    fn new(read: [Option<Operand<I>>; N], recipe: Arc<Recipe<I>>) -> Self {
        StepState(Arc::new(Mutex::new(Some(StepInputs { read, recipe }))))
    }

    fn take(&self) -> StepInputs<I, N> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
            .expect("a backward step runs once")
    }
}

// Burn asks a backward state to be `Clone`; clones share the one state.
impl<I: Backend, const N: usize> Clone for StepState<I, N> {
    fn clone(&self) -> Self {
        StepState(Arc::clone(&self.0))
    }
}

impl<I: Backend, const N: usize> fmt::Debug for StepState<I, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.0.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(inputs) => write!(f, "StepState({}, {:?})", inputs.recipe.name(), inputs.read),
            None => f.write_str("StepState(done)"),
        }
    }
}

/// The backward step of a region op.
#[derive(Debug)]
struct RegionBackward<Op>(Op);

impl<I: Backend, Op: RegionOp<I, N>, const N: usize> Backward<I, N> for RegionBackward<Op> {
    type State = StepState<I, N>;

    fn backward(
        self,
        ops: Ops<Self::State, N>,
        grads: &mut Gradients,
        checkpointer: &mut Checkpointer,
    ) {
        let StepInputs { read, recipe } = ops.state.take();
        let grad = grads.consume::<I>(&ops.node);
        for operand in read.iter().flatten() {
            if let Operand::Recomputed(ticket) = operand {
                compute(ticket.recipe(), checkpointer);
            }
        }
        let inputs = read.map(|operand| operand.map(|operand| operand.get(checkpointer)));
        let needs_grad = ops.parents.each_ref().map(Option::is_some);
        let input_grads = self.0.backward(inputs, grad, needs_grad);
        for (parent, input_grad) in ops.parents.into_iter().zip(input_grads) {
            if let (Some(parent), Some(input_grad)) = (parent, input_grad) {
                grads.register::<I>(parent.id, input_grad);
            }
        }
        recipe.drain(checkpointer);
    }
}
