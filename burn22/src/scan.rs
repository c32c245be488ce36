//! A checkpointed scan: a recurrent cell over a sequence as **one** region node
//! ([`Region::scan`], [`checkpoint_scan`]). A loop of regions is a node per step, and every
//! nested backward in Burn 0.22 sweeps every live node (docs/burn-0.22-internals.md, "Many
//! regions, and recurrent models"); a scan's steps are one node, its inputs and outputs stacked,
//! so each step's nested backward sweeps only the rest of the graph.

use std::collections::HashSet;
use std::sync::Arc;

use burn::backend::{DispatchTensor, TensorMetadata};
use burn::module::{Module, ParamId};
use burn::tensor::Device;
use burn_checkpoint_core::ScanPlan;

use crate::ddp;
use crate::dispatch;
use crate::forward::{Entered, Entry, Settings, reseeded_in_backward, saving_compute_bound};
use crate::graph::{NodeSpec, Replay, ScanSpec, Slicer, Stacker};
use crate::params::{self, Used};
use crate::recompute::{Drawn, Recompute};
use crate::region::Region;
use crate::seed::Seed;
use crate::state::{self, Run};
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
    /// (the default: one more forward of each step, `T - 1` carries held), or binomial
    /// checkpointing's snapshots (fewer carries, some steps run again). The whole loop is one
    /// node of Burn's graph whatever its length.
    ///
    /// The carry is any [`RegionTensors`] (burn-nn's `LstmState`, a struct deriving it) whose
    /// arrangement every step keeps; the inputs a [`Sequence`] (a `Tensor<D>`, each step a
    /// `Tensor<D - 1>`, or a `Vec` of the steps' inputs, each arranged as the first); the output
    /// a [`Stack`] (a `Tensor<D>`, stacked into a `Tensor<D + 1>`).
    /// A scan is entered as every region is: a cell that draws random numbers (dropout) gets a
    /// seed per step, its lazy parameters drawn before the first, each seed drawn in forward and
    /// replayed in backward, under every plan; step 0 is run twice on the name's first instance
    /// on a thread and compared, so a cell drawing random numbers the region cannot see is
    /// stopped with a message; [`Region::is_recomputing`] is true in backward's runs of a step.
    /// Under a plan that keeps the region, or [`Policy::SaveComputeBound`](crate::Policy), the
    /// loop runs as written (each step seeded as here); [`offloaded`](Region::offloaded), its
    /// stored carries wait in host memory.
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
        let scan = Scan {
            settings: self.settings(),
            cell,
            init: Flat::new(init),
            inputs: Flat::new(inputs),
            dim,
            steps,
            step: Arc::new(step),
        };
        let tensors: Vec<DispatchTensor> = (scan.init.tensors.iter())
            .chain(&scan.inputs.tensors)
            .cloned()
            .collect();
        let mut entry = match Entry::open(scan.settings, cell, &tensors) {
            Entered::Tracked(entry) => entry,
            Entered::Untracked(_open) => return scan.run_as_written(None),
        };
        match entry.opened.run {
            Run::Region { offload } => scan.run_node(&mut entry, offload),
            Run::Keep => scan.run_as_written(Some(&entry)),
            Run::SaveComputeBound => scan.saving_compute_bound(&entry),
            Run::Kept => panic!(
                "checkpoint scan {}: a scan cannot be kept by name (Policy::recompute_all_but) in \
                 this release; name the region around it instead",
                scan.settings.name
            ),
        }
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

/// A scan on its way through the forward.
struct Scan<'a, M, C: RegionTensors, S: RegionTensors, F> {
    settings: &'a Settings,
    cell: &'a M,
    init: Flat<C>,
    inputs: Flat<S>,
    dim: usize,
    steps: usize,
    step: Arc<F>,
}

/// What a scan node's forward gives its node: the stacked outputs, the last carry, the carries
/// stored (by the step they start), what each step drew, how a step's input is arranged, and
/// which parameters the steps used.
struct Forward<Y: Stack, C: RegionTensors, X: RegionTensors> {
    outputs: Flat<Y::Stacked>,
    last: Flat<C>,
    stored: Vec<(usize, Vec<DispatchTensor>)>,
    drawn: Drawn,
    step_layout: X::Layout,
    used: Used,
}

impl<M, C, S, Y, F> Scan<'_, M, C, S, F>
where
    M: Module + Sync + 'static,
    C: RegionTensors + 'static,
    S: Sequence + 'static,
    Y: Stack + 'static,
    F: Fn(&M, C, S::Step, usize) -> (Y, C) + Send + Sync + 'static,
{
    /// The loop as written, on the cell and tensors as they are: what a scan a plan keeps runs,
    /// and what it stands for. Each step of a seeded scan (`entry` says) is seeded as the node's
    /// forward seeds it, and its outputs leave the generator in backward where backward's run of
    /// the step leaves it: the masks and the stream do not depend on the plan.
    fn run_as_written(self, entry: Option<&Entry>) -> (Y::Stacked, C) {
        let (init, inputs) = (self.init.into_value(), self.inputs.into_value());
        steps_as_written(
            self.cell,
            init,
            &inputs,
            self.dim,
            self.steps,
            &*self.step,
            entry,
        )
    }

    /// The loop as written under Burn's Balanced checkpointing
    /// ([`Policy::SaveComputeBound`](crate::Policy::SaveComputeBound), or a plan's
    /// `SaveComputeBound`), as a region's body is.
    fn saving_compute_bound(self, entry: &Entry) -> (Y::Stacked, C) {
        let (dim, steps, step) = (self.dim, self.steps, &*self.step);
        let tensors = Flat::new((self.init.into_value(), self.inputs.into_value()));
        saving_compute_bound(
            &self.settings.name,
            self.cell,
            tensors,
            |cell, (init, inputs)| {
                steps_as_written(cell, init, &inputs, dim, steps, step, Some(entry))
            },
        )
    }

    /// The scan as one region node: the forward on untracked stand-ins storing the carries the
    /// plan says, then the node.
    fn run_node(self, entry: &mut Entry, offload: bool) -> (Y::Stacked, C) {
        let carry_bytes = self.init.tensors.iter().map(bytes).sum();
        let schedule = entry.opened.schedule.unwrap_or(self.settings.schedule);
        let plan = ScanPlan::new(schedule, self.steps, carry_bytes);
        let forward =
            self.forward_steps(entry, &plan.stored_in_forward().iter().copied().collect());
        let trainable = forward.used.trainable();
        // The stand-ins go inside the region: the memory report counts them there.
        drop(forward.used);
        let tensors: Vec<DispatchTensor> = (self.init.tensors.iter())
            .chain(&self.inputs.tensors)
            .cloned()
            .collect();
        ddp::refuse_distributed(&self.settings.name, &tensors, &trainable.values);
        let spec = ScanSpec {
            plan,
            stored: forward.stored,
            offload,
            carry_len: self.init.tensors.len(),
            input_len: self.inputs.tensors.len(),
            output_len: forward.outputs.tensors.len(),
            step: self.recompute(
                trainable.ids.clone(),
                forward.drawn,
                forward.step_layout.clone(),
                entry.device.clone(),
            ),
            inputs: slicer::<S>(self.inputs.layout.clone(), self.dim),
            outputs: slicer::<Y::Stacked>(forward.outputs.layout.clone(), self.dim),
            stack_inputs: stacker::<S>(forward.step_layout, self.dim),
        };
        let node = NodeSpec {
            offloaded_inputs: 0,
            slot: entry.opened.slot,
            memory_bound: false,
            replay: Replay::Scan(spec),
        };
        let output_count = forward.outputs.tensors.len();
        let mut node_outputs = forward.outputs.tensors;
        node_outputs.extend(forward.last.tensors);
        let mut tensors = tensors;
        tensors.extend(trainable.values);
        let mut given = dispatch::run(tensors, node_outputs, node);
        let carry = given.split_off(output_count);
        (
            <Y::Stacked>::unflatten(&forward.outputs.layout, &mut given.into_iter()),
            C::unflatten(&forward.last.layout, &mut carry.into_iter()),
        )
    }

    /// The steps on untracked stand-ins, each seeded as the region is (its seed and its nested
    /// regions' recorded for backward), storing the carries that start the steps in `stores`;
    /// step 0 checked on the region name's first instance on the thread.
    fn forward_steps(&self, entry: &mut Entry, stores: &HashSet<usize>) -> Forward<Y, C, S::Step> {
        let (stand_in, used) = params::for_forward(self.cell);
        let inputs = self.inputs.rebuilt(tensors::untracked);
        let mut carry = Flat::<C>::new(self.init.rebuilt(tensors::untracked));
        let (mut stored, mut outputs, mut step_layout) = (Vec::new(), Vec::new(), None);
        let mut drawn = Drawn {
            seeds: Vec::with_capacity(self.steps),
            nested_seeds: Vec::with_capacity(self.steps),
            kept: Vec::new(),
        };
        for t in 0..self.steps {
            if stores.contains(&t) {
                stored.push((t, carry.tensors.clone()));
            }
            let x = self.step_input(&inputs, t, &mut step_layout);
            let carry_in = carry.tensors.clone();
            let seed = entry.seed();
            seed.apply(&entry.device);
            let (output, next) = (self.step)(&stand_in, carry.into_value(), x.rebuilt(|t| t), t);
            drawn.seeds.push(seed);
            // What the step's seeded regions drew: backward's runs of the step replay it.
            drawn.nested_seeds.push(entry.opened.nested_seeds_so_far());
            let (output, next) = (Flat::new(output), self.checked_carry(t, next));
            if t == 0 && state::check_first(&self.settings.name) {
                let given: Vec<_> = carry_in.into_iter().chain(x.tensors).collect();
                let gave: Vec<_> = output
                    .tensors
                    .iter()
                    .chain(&next.tensors)
                    .cloned()
                    .collect();
                let layout = step_layout.as_ref().map(|(layout, _)| layout.clone());
                let layout = layout.expect("step 0's input arrangement");
                self.check_step_0(entry, &used, (&drawn, layout), given, &gave);
            }
            outputs.push(output.into_value());
            carry = next;
        }
        drop(stand_in);
        Forward {
            outputs: Flat::new(Y::stack(outputs, self.dim)),
            last: carry,
            stored,
            drawn,
            step_layout: step_layout.expect("a scan has a step").0,
            used,
        }
    }

    /// Step `t`'s input, arranged as step 0's (whose arrangement and tensor count `first`
    /// keeps).
    fn step_input(
        &self,
        inputs: &S,
        t: usize,
        first: &mut Option<(<S::Step as RegionTensors>::Layout, usize)>,
    ) -> Flat<S::Step> {
        let x = Flat::new(inputs.step(self.dim, t));
        let (_, first_len) = *first.get_or_insert_with(|| (x.layout.clone(), x.tensors.len()));
        assert_eq!(
            x.tensors.len(),
            first_len,
            "checkpoint scan {}: step {t}'s input has {} tensors, step 0's {first_len}: every \
             step's input must be arranged as the first's",
            self.settings.name,
            x.tensors.len()
        );
        x
    }

    /// Step `t`'s next carry, which must hold as many tensors as the initial one.
    fn checked_carry(&self, t: usize, next: C) -> Flat<C> {
        let next = Flat::new(next);
        let carry_len = self.init.tensors.len();
        assert_eq!(
            next.tensors.len(),
            carry_len,
            "checkpoint scan {}: step {t} gave a carry of {} tensors, the initial one has \
             {carry_len}: every step must keep the carry's arrangement",
            self.settings.name,
            next.tensors.len()
        );
        next
    }

    /// The first instance's check of step 0 (see [`Recompute::check`]): run again, as backward
    /// will run it, on `given` (its carry and input) and the parameters used so far, compared with
    /// what it `gave`.
    fn check_step_0(
        &self,
        entry: &mut Entry,
        used: &Used,
        (drawn, x_layout): (&Drawn, <S::Step as RegionTensors>::Layout),
        given: Vec<DispatchTensor>,
        gave: &[DispatchTensor],
    ) {
        let trainable = used.trainable();
        let step_0 = Drawn {
            seeds: drawn.seeds[..1].to_vec(),
            nested_seeds: drawn.nested_seeds[..1].to_vec(),
            kept: Vec::new(),
        };
        let recompute = self.recompute(trainable.ids, step_0, x_layout, entry.device.clone());
        let tensors = given.iter().chain(&trainable.values);
        recompute.check(&self.settings.name, 0, tensors, gave);
        // Its nested regions recorded the seeds they replayed in the scan's recording: not step
        // 1's.
        let _ = entry.opened.nested_seeds_so_far();
    }

    /// Step `t` as backward runs it (see [`Recompute`]): the carry and the step's input rebuilt
    /// from its tensors, its output's tensors out, then its carry's.
    fn recompute(
        &self,
        param_ids: Vec<ParamId>,
        drawn: Drawn,
        step_layout: <S::Step as RegionTensors>::Layout,
        device: Device,
    ) -> Recompute {
        let (carry_layout, carry_len) = (self.init.layout.clone(), self.init.tensors.len());
        let step = self.step.clone();
        Recompute::new(
            self.cell,
            param_ids,
            drawn,
            device,
            move |cell, mut tensors, t| {
                let x = tensors.split_off(carry_len);
                let carry = C::unflatten(&carry_layout, &mut tensors.into_iter());
                let x = <S::Step>::unflatten(&step_layout, &mut x.into_iter());
                let (output, next) = step(cell, carry, x, t);
                let mut out = Flat::new(output).tensors;
                out.extend(Flat::new(next).tensors);
                out
            },
        )
    }
}

/// The steps as written on `cell` (see [`Scan::run_as_written`]).
fn steps_as_written<M, C, S, Y, F>(
    cell: &M,
    init: C,
    inputs: &S,
    dim: usize,
    steps: usize,
    step: &F,
    entry: Option<&Entry>,
) -> (Y::Stacked, C)
where
    C: RegionTensors,
    S: Sequence,
    Y: Stack,
    F: Fn(&M, C, S::Step, usize) -> (Y, C),
{
    let mut carry = init;
    let mut outputs = Vec::with_capacity(steps);
    for t in 0..steps {
        let seed = entry.map_or(Seed(None), Entry::seed);
        if let Some(entry) = entry {
            seed.apply(&entry.device);
        }
        let (output, next) = step(cell, carry, inputs.step(dim, t), t);
        outputs.push(reseeded_in_backward(output, seed));
        carry = reseeded_in_backward(next, seed);
    }
    (Y::stack(outputs, dim), carry)
}

/// The bytes of a tensor's values.
fn bytes(tensor: &DispatchTensor) -> u64 {
    (tensor.shape().num_elements() * tensor.dtype().size()) as u64
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
