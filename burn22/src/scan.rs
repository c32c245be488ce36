//! A checkpointed scan: a recurrent cell over a sequence as **one** region node
//! ([`Region::scan`], [`checkpoint_scan`]). A loop of regions is a node per step, and every
//! nested backward in Burn 0.22 sweeps every live node (docs/burn-0.22-internals.md, "Many
//! regions, and recurrent models"); a scan's steps are one node, its inputs and outputs stacked,
//! so each step's nested backward sweeps only the rest of the graph.

use std::collections::HashSet;
use std::sync::Arc;

use burn::backend::{DispatchAutodiffContext, DispatchTensor, TensorMetadata};
use burn::module::{Module, ParamId};
use burn::tensor::Device;
use burn_checkpoint_core::ScanPlan;

use crate::body::Body;
use crate::ddp;
use crate::dispatch;
use crate::forward::Settings;
use crate::graph::{NodeSpec, ScanSpec, Slicer, Stacker, StepBody};
use crate::params;
use crate::region::Region;
use crate::retag;
use crate::seed::Seed;
use crate::state::{self, Opened, Run};
use crate::survey::Survey;
use crate::tensors::{self, Flat, RegionTensors, Sequence, Stack};

impl Region {
    /// Runs `step` over the sequence `inputs` (time along `dim`) as one checkpoint region: step
    /// `t` takes the cell, the carry and the inputs' slice at `t`, and gives its output and the
    /// next carry. Returns the outputs stacked along `dim` and the last carry — what this loop
    /// gives, with the same values and gradients:
    ///
    /// ```text
    /// let mut carry = init;
    /// let mut outputs = Vec::new();
    /// for t in 0..inputs.dims()[dim] {
    ///     let input = inputs.clone().narrow(dim, t, 1).squeeze_dim(dim);
    ///     let (output, next) = step(cell, carry, input);
    ///     outputs.push(output);
    ///     carry = next;
    /// }
    /// (Tensor::stack(outputs, dim), carry)
    /// ```
    ///
    /// What the loop computes is not held between forward and backward: backward walks the
    /// steps last first, each from the carry it started from (its nested backward seeded with
    /// its output's gradient and its next carry's), and the region's
    /// [`schedule`](Region::schedule) says where those carries come from — stored every step
    /// (the default: one more forward of each step, `T` carries held), or binomial
    /// checkpointing's snapshots (fewer carries, some steps run again). The whole loop is one
    /// node of Burn's graph whatever its length.
    ///
    /// The carry is any [`RegionTensors`] (burn-nn's `LstmState`, a struct deriving it) whose
    /// arrangement every step keeps; the inputs a [`Sequence`] (a `Tensor<D>`, each step a
    /// `Tensor<D - 1>`, or a `Vec` of the steps' inputs, each arranged as the first); the output
    /// a [`Stack`] (a `Tensor<D>`, stacked into a `Tensor<D + 1>`).
    /// A cell that draws random numbers (dropout) gets a seed per step, drawn in forward and
    /// replayed in backward; [`Region::is_recomputing`] is true in backward's runs of a step.
    /// Under a plan that keeps the region, or [`Policy::SaveComputeBound`](crate::Policy), the
    /// loop runs as written; [`offloaded`](Region::offloaded), its stored carries wait in host
    /// memory.
    ///
    /// ```
    /// use burn::nn::{Linear, LinearConfig};
    /// use burn::tensor::{Device, Tensor};
    /// use burn_checkpoint_22::Region;
    ///
    /// let device = Device::flex().autodiff();
    /// let cell: Linear = LinearConfig::new(8, 8).init(&device);
    /// let xs = Tensor::<3>::ones([2, 50, 8], &device).require_grad(); // [batch, time, features]
    /// let hidden = Tensor::<2>::zeros([2, 8], &device);
    /// let (ys, last) = Region::named("rnn").scan(&cell, hidden, xs.clone(), 1, |cell, hidden, x| {
    ///     let hidden = (cell.forward(hidden) + x).tanh();
    ///     (hidden.clone(), hidden)
    /// });
    /// assert_eq!(ys.dims(), [2, 50, 8]);
    /// let grads = (ys.sum() + last.sum()).backward();
    /// assert!(xs.grad(&grads).is_some() && cell.weight.grad(&grads).is_some());
    /// ```
    pub fn scan<M, C, S, Y, F>(
        &self,
        cell: &M,
        init: C,
        inputs: S,
        dim: usize,
        step: F,
    ) -> (Y::Stacked, C)
    where
        M: Module + Sync + 'static,
        C: RegionTensors + 'static,
        S: Sequence + 'static,
        Y: Stack + 'static,
        F: Fn(&M, C, S::Step) -> (Y, C) + Send + Sync + 'static,
    {
        let steps = inputs.steps(dim);
        self.scan_indexed(cell, init, inputs, dim, steps, move |cell, carry, x, _| {
            step(cell, carry, x)
        })
    }

    /// [`scan`](Region::scan) over `steps` steps whose step also takes its index (what
    /// [`sequential`](Region::sequential) runs its segments with, over a sequence of no tensors).
    pub(crate) fn scan_indexed<M, C, S, Y, F>(
        &self,
        cell: &M,
        init: C,
        inputs: S,
        dim: usize,
        steps: usize,
        step: F,
    ) -> (Y::Stacked, C)
    where
        M: Module + Sync + 'static,
        C: RegionTensors + 'static,
        S: Sequence + 'static,
        Y: Stack + 'static,
        F: Fn(&M, C, S::Step, usize) -> (Y, C) + Send + Sync + 'static,
    {
        assert!(steps > 0, "a checkpoint scan needs at least one step");
        let settings = self.settings();
        let opened = settings.open();
        let survey = Survey::of(cell);
        let init = Flat::new(init);
        let inputs = Flat::new(inputs);
        let autodiff = init
            .tensors
            .iter()
            .chain(&inputs.tensors)
            .any(|t| matches!(t.autodiff, DispatchAutodiffContext::Enabled(_)))
            || survey.on_autodiff;
        assert!(
            opened.run != Run::Kept,
            "checkpoint scan {}: a scan cannot be kept by name (Policy::recompute_all_but) in \
             this release; name the region around it instead",
            settings.name
        );
        if !autodiff || !matches!(opened.run, Run::Region { .. }) {
            return plain_loop(
                cell,
                init.into_value(),
                &inputs.into_value(),
                dim,
                steps,
                &step,
            );
        }
        let seeded = settings.seeded || survey.stochastic(cell);
        Scan {
            settings,
            cell,
            init,
            inputs,
            dim,
            steps,
            seeded,
            step: Arc::new(step),
        }
        .run_node(opened)
    }
}

/// [`Region::scan`] on an unnamed region (named by its place in the source).
///
/// ```
/// use burn::nn::{Lstm, LstmConfig, LstmState};
/// use burn::tensor::{Device, Tensor};
/// use burn_checkpoint_22::checkpoint_scan;
///
/// let device = Device::flex().autodiff();
/// // burn-nn's LSTM over one step at a time: its state is the carry.
/// let lstm: Lstm = LstmConfig::new(4, 8, true).init(&device);
/// let xs = Tensor::<3>::ones([2, 30, 4], &device).require_grad();
/// let state = LstmState::new(Tensor::zeros([2, 8], &device), Tensor::zeros([2, 8], &device));
/// let (hidden, last) = checkpoint_scan(&lstm, state, xs.clone(), 1, |lstm, state, x: Tensor<2>| {
///     let (_, state) = lstm.forward(x.unsqueeze_dim(1), Some(state));
///     (state.hidden.clone(), state)
/// });
/// assert_eq!(hidden.dims(), [2, 30, 8]);
/// let grads = (hidden.sum() + last.cell.sum()).backward();
/// assert!(xs.grad(&grads).is_some());
/// ```
#[track_caller]
pub fn checkpoint_scan<M, C, S, Y, F>(
    cell: &M,
    init: C,
    inputs: S,
    dim: usize,
    step: F,
) -> (Y::Stacked, C)
where
    M: Module + Sync + 'static,
    C: RegionTensors + 'static,
    S: Sequence + 'static,
    Y: Stack + 'static,
    F: Fn(&M, C, S::Step) -> (Y, C) + Send + Sync + 'static,
{
    Region::new().scan(cell, init, inputs, dim, step)
}

/// The loop as written: what a scan a plan keeps runs, and what it stands for.
fn plain_loop<M, C, S, Y, F>(
    cell: &M,
    init: C,
    inputs: &S,
    dim: usize,
    steps: usize,
    step: &F,
) -> (Y::Stacked, C)
where
    S: Sequence,
    Y: Stack,
    F: Fn(&M, C, S::Step, usize) -> (Y, C),
{
    let mut carry = init;
    let mut outputs = Vec::with_capacity(steps);
    for t in 0..steps {
        let (output, next) = step(cell, carry, inputs.step(dim, t), t);
        outputs.push(output);
        carry = next;
    }
    (Y::stack(outputs, dim), carry)
}

/// A scan on its way to its node.
struct Scan<'a, M, C: RegionTensors, S: RegionTensors, F> {
    settings: &'a Settings,
    cell: &'a M,
    init: Flat<C>,
    inputs: Flat<S>,
    dim: usize,
    steps: usize,
    seeded: bool,
    step: Arc<F>,
}

impl<M, C, S, Y, F> Scan<'_, M, C, S, F>
where
    M: Module + Sync + 'static,
    C: RegionTensors + 'static,
    S: Sequence + 'static,
    Y: Stack + 'static,
    F: Fn(&M, C, S::Step, usize) -> (Y, C) + Send + Sync + 'static,
{
    /// The forward on untracked stand-ins, storing the carries the plan says, then the node.
    fn run_node(self, mut opened: Opened) -> (Y::Stacked, C) {
        let device = tensors::device_of(
            self.init
                .tensors
                .iter()
                .chain(&self.inputs.tensors)
                .next()
                .expect("a checkpoint scan has a tensor in its carry or its sequence"),
        );
        let carry_len = self.init.tensors.len();
        let carry_bytes = self
            .init
            .tensors
            .iter()
            .map(|t| (t.shape().num_elements() * t.dtype().size()) as u64)
            .sum();
        let schedule = opened.schedule.unwrap_or(self.settings.schedule);
        let plan = ScanPlan::new(schedule, self.steps, carry_bytes);
        let stores: HashSet<usize> = plan.stored_in_forward().iter().copied().collect();

        let (stand_in, used) = params::for_forward(self.cell);
        let inputs = self.inputs.rebuilt(tensors::untracked);
        let mut carry: C = self.init.rebuilt(tensors::untracked);
        let mut stored = Vec::with_capacity(stores.len());
        let mut seeds = Vec::new();
        let mut nested_seeds = Vec::with_capacity(self.steps);
        let mut outputs = Vec::with_capacity(self.steps);
        let (mut step_layout, mut output_layout, mut step_len) = (None, None, None);
        for t in 0..self.steps {
            if stores.contains(&t) {
                let flat = Flat::new(carry);
                stored.push((t, flat.tensors.clone()));
                carry = flat.into_value();
            }
            if self.seeded {
                let seed = opened.seed(&device);
                Seed(Some(seed)).apply(&device);
                seeds.push(seed);
            }
            let x = Flat::new(inputs.step(self.dim, t));
            let first = *step_len.get_or_insert(x.tensors.len());
            assert_eq!(
                x.tensors.len(),
                first,
                "checkpoint scan {}: step {t}'s input has {} tensors, step 0's {first}: every \
                 step's input must be arranged as the first's",
                self.settings.name,
                x.tensors.len()
            );
            step_layout.get_or_insert_with(|| x.layout.clone());
            let x = x.into_value();
            let (output, next) = (self.step)(&stand_in, carry, x, t);
            // What the step's seeded regions drew: backward's runs of the step replay it.
            nested_seeds.push(opened.nested_seeds_so_far());
            output_layout.get_or_insert_with(|| output.layout());
            outputs.push(output);
            let next = Flat::new(next);
            assert_eq!(
                next.tensors.len(),
                carry_len,
                "checkpoint scan {}: step {t} gave a carry of {} tensors, the initial one has \
                 {carry_len}: every step must keep the carry's arrangement",
                self.settings.name,
                next.tensors.len()
            );
            carry = next.into_value();
        }
        drop(stand_in);
        let outputs = Flat::new(Y::stack(outputs, self.dim));
        let last = Flat::new(carry);

        let trainable = used.trainable();
        let region_tensors: Vec<DispatchTensor> = self
            .init
            .tensors
            .iter()
            .chain(&self.inputs.tensors)
            .cloned()
            .collect();
        ddp::refuse_distributed(&self.settings.name, &region_tensors, &trainable.values);

        let step_layout = step_layout.expect("a scan has a step");
        let spec = ScanSpec {
            plan,
            stored,
            offload: matches!(opened.run, Run::Region { offload: true }),
            carry_len,
            input_len: self.inputs.tensors.len(),
            output_len: outputs.tensors.len(),
            step: self.step_body(
                trainable.ids.clone(),
                self.init.layout.clone(),
                step_layout.clone(),
                seeds,
                nested_seeds,
                device,
            ),
            inputs: slicer::<S>(self.inputs.layout.clone(), self.dim),
            outputs: slicer::<Y::Stacked>(outputs.layout.clone(), self.dim),
            stack_inputs: stacker::<S>(step_layout.clone(), self.dim),
        };
        let node_spec = NodeSpec {
            offloaded_inputs: 0,
            slot: opened.slot,
            nested_seeds: opened.nested_seeds(),
            memory_bound: false,
            kept: Vec::new(),
            run: None,
            scan: Some(spec),
        };
        let output_count = outputs.tensors.len();
        let mut node_outputs = outputs.tensors;
        node_outputs.extend(last.tensors);
        let mut tensors = region_tensors;
        tensors.extend(trainable.values);
        // The node's body is never run: its backward walks the steps.
        let body = Body(Arc::new(|_| unreachable!("a scan's node runs its steps")));
        let mut given = dispatch::run(tensors, node_outputs, body, node_spec);
        drop(opened);
        let carry = given.split_off(output_count);
        (
            <Y::Stacked>::unflatten(&outputs.layout, &mut given.into_iter()),
            C::unflatten(&last.layout, &mut carry.into_iter()),
        )
    }

    /// Step `t` as backward runs it: the cell with its parameters replaced by the given leaves,
    /// the carry and the step's inputs rebuilt, the step's seed applied, as a recompute (the
    /// seeds its nested regions drew in forward replayed to them).
    fn step_body(
        &self,
        param_ids: Vec<ParamId>,
        carry_layout: C::Layout,
        step_layout: <S::Step as RegionTensors>::Layout,
        seeds: Vec<u64>,
        nested_seeds: Vec<Vec<u64>>,
        device: Device,
    ) -> StepBody {
        let template = self.cell.clone();
        let (carry_len, step) = (self.init.tensors.len(), self.step.clone());
        StepBody(Arc::new(move |t, mut flat| {
            let strategy = retag::strategy_of(&flat);
            let step_len = flat.len() - carry_len - param_ids.len();
            let leaves = flat.split_off(carry_len + step_len);
            let module = retag::all_tagged(
                params::for_recompute(template.clone(), &param_ids, leaves),
                strategy,
            );
            let x = flat.split_off(carry_len);
            let carry = C::unflatten(&carry_layout, &mut flat.into_iter());
            let x = <S::Step>::unflatten(&step_layout, &mut x.into_iter());
            let (output, next) = state::recomputing(&nested_seeds[t], &[], || {
                Seed(seeds.get(t).copied()).apply(&device);
                step(&module, carry, x, t)
            });
            let mut out = Flat::new(output).tensors;
            out.extend(Flat::new(next).tensors);
            out
        }))
    }
}

/// Step `t` of a sequence of type `S` (arranged as `layout`) along `dim`, on dispatch tensors.
fn slicer<S: Sequence + 'static>(layout: S::Layout, dim: usize) -> Slicer {
    Slicer(Arc::new(move |flat, t| {
        let sequence = S::unflatten(&layout, &mut flat.into_iter());
        Flat::new(sequence.step(dim, t)).tensors
    }))
}

/// The steps' tensors of a sequence of type `S` (each step arranged as `layout`) stacked along
/// `dim`, on dispatch tensors.
fn stacker<S>(layout: <S::Step as RegionTensors>::Layout, dim: usize) -> Stacker
where
    S: Sequence + 'static,
{
    Stacker(Arc::new(move |steps| {
        let steps = steps
            .into_iter()
            .map(|flat| <S::Step>::unflatten(&layout, &mut flat.into_iter()))
            .collect();
        Flat::new(S::from_steps(steps, dim)).tensors
    }))
}
