//! A checkpointed scan: a recurrent cell over a sequence, its steps cut into regions by a
//! [`Schedule`] ([`Region::scan`], [`checkpoint_scan`]): the same call as the crate for Burn
//! 0.22's, where the whole loop is one graph node.
//!
//! Here a region is a set of recorded ops whose recompute walk pays nothing per live region (Burn
//! 0.21's backward is one pass over the plain graph), so a scan is a loop of regions: each
//! [`Schedule`] says how many. `EveryStep` makes every step a region (every carry stored);
//! `Snapshots(c)` makes `c + 1` regions of consecutive steps (the `c` carries between them
//! stored), each recomputed once while backward runs through it; `Budget(bytes)` as many
//! carries as fit in `bytes`.

use burn::nn;
use burn::tensor::Tensor;
use burn::tensor::backend::Backend;
use burn_checkpoint_core::{Schedule, Segments};

use crate::region::Region;

/// The tensors a scan's carry holds (see [`Region::scan`]): what [`Schedule::Budget`] divides
/// its bytes by.
///
/// Burn's tensors, burn-nn's `LstmState` and `RnnState`, and tuples, `Vec`s and `Option`s of
/// them are carries as they are; a struct of your own sums its tensors' bytes:
///
/// ```
/// use burn::prelude::*;
/// use burn_checkpoint::Carry;
///
/// struct State<B: Backend> {
///     hidden: Tensor<B, 2>,
///     memory: Tensor<B, 2>,
/// }
///
/// impl<B: Backend> Carry<B> for State<B> {
///     fn bytes(&self) -> u64 {
///         self.hidden.bytes() + self.memory.bytes()
///     }
/// }
/// ```
pub trait Carry<B: Backend> {
    /// The bytes of its tensors' values.
    fn bytes(&self) -> u64;
}

impl<B: Backend, const D: usize> Carry<B> for Tensor<B, D> {
    fn bytes(&self) -> u64 {
        (self.shape().num_elements() * self.dtype().size()) as u64
    }
}

impl<B: Backend, T: Carry<B>> Carry<B> for Vec<T> {
    fn bytes(&self) -> u64 {
        self.iter().map(Carry::bytes).sum()
    }
}

impl<B: Backend, T: Carry<B>> Carry<B> for Option<T> {
    fn bytes(&self) -> u64 {
        self.as_ref().map_or(0, Carry::bytes)
    }
}

macro_rules! tuples {
    ($(($($name:ident $index:tt),+))+) => {$(
        impl<B: Backend, $($name: Carry<B>),+> Carry<B> for ($($name,)+) {
            fn bytes(&self) -> u64 {
                0 $(+ self.$index.bytes())+
            }
        }
    )+};
}

tuples! {
    (A 0)
    (A 0, C 1)
    (A 0, C 1, D 2)
    (A 0, C 1, D 2, E 3)
    (A 0, C 1, D 2, E 3, F 4)
    (A 0, C 1, D 2, E 3, F 4, G 5)
}

impl<B: Backend, const D: usize> Carry<B> for nn::LstmState<B, D> {
    fn bytes(&self) -> u64 {
        self.cell.bytes() + self.hidden.bytes()
    }
}

impl<B: Backend, const D: usize> Carry<B> for nn::RnnState<B, D> {
    fn bytes(&self) -> u64 {
        self.hidden.bytes()
    }
}

/// A sequence a checkpointed scan walks (see [`Region::scan`]): a float tensor whose dimension
/// `dim` is time, each step taking the tensor one rank lower, that dimension removed
/// (`Tensor<B, 3>` `[batch, time, features]` gives `Tensor<B, 2>` steps along 1); or a `Vec` of
/// the steps' inputs (`dim` unused).
pub trait Sequence<B: Backend>: Carry<B> {
    /// What one step takes.
    type Step;

    /// The number of steps along `dim`.
    fn steps(&self, dim: usize) -> usize;

    /// Step `t`: the slice at `t` along `dim`, that dimension removed.
    fn step(&self, dim: usize, t: usize) -> Self::Step;
}

/// A `Vec` of the steps' inputs: step `t` takes the `t`-th.
impl<B: Backend, T: Carry<B> + Clone> Sequence<B> for Vec<T> {
    type Step = T;

    fn steps(&self, _: usize) -> usize {
        self.len()
    }

    fn step(&self, _: usize, t: usize) -> T {
        self[t].clone()
    }
}

/// What a checkpointed scan's step gives besides its carry, stacked over the steps (see
/// [`Region::scan`]): a float tensor, stacked one rank higher along the scan's dimension, as
/// `Tensor::stack` stacks.
pub trait Stack<B: Backend>: Carry<B> + Sized {
    /// The steps' values stacked.
    type Stacked: Sequence<B, Step = Self>;

    /// `steps` stacked along `dim`.
    fn stack(steps: Vec<Self>, dim: usize) -> Self::Stacked;
}

macro_rules! sequences {
    ($(($high:literal, $low:literal))+) => {$(
        impl<B: Backend> Sequence<B> for Tensor<B, $high> {
            type Step = Tensor<B, $low>;

            fn steps(&self, dim: usize) -> usize {
                self.dims()[dim]
            }

            fn step(&self, dim: usize, t: usize) -> Tensor<B, $low> {
                self.clone().narrow(dim, t, 1).squeeze_dim::<$low>(dim)
            }
        }

        impl<B: Backend> Stack<B> for Tensor<B, $low> {
            type Stacked = Tensor<B, $high>;

            fn stack(steps: Vec<Self>, dim: usize) -> Tensor<B, $high> {
                Tensor::stack(steps, dim)
            }
        }
    )+};
}

sequences! {
    (2, 1)
    (3, 2)
    (4, 3)
    (5, 4)
    (6, 5)
}

impl Region {
    /// Runs `step` over the sequence `inputs` (time along `dim`), its steps cut into instances
    /// of this region as its [`schedule`](Region::schedule) says: step `t` takes the cell, the
    /// carry and the inputs' slice at `t`, and gives its output and the next carry. Returns the
    /// outputs stacked along `dim` and the last carry — what this loop gives, with the same
    /// values and gradients, bit for bit:
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
    /// What the loop computes inside its regions is not held between forward and backward; what
    /// crosses from one region to the next (the carry) and every step's output are stored.
    /// [`Schedule::EveryStep`] (the default) makes each step a region: every carry stored, each
    /// step recomputed once while backward runs through it.
    /// [`Snapshots`](Schedule::Snapshots)`(c)` makes `c + 1` regions of consecutive steps (as
    /// even as they go), `c` carries stored and one region's internals held at a time in
    /// backward; [`Budget`](Schedule::Budget)`(bytes)` stores as many carries as fit in `bytes`
    /// (each [`Carry::bytes`] of the initial carry).
    /// Unlike the crate for Burn 0.22 (one graph node; `Snapshots` places its carries by
    /// binomial checkpointing and runs some steps forward again), no step runs more than once
    /// more. The regions are `name#0`, `name#1`, ... as any region's instances.
    ///
    /// ```
    /// use burn::backend::{Autodiff, NdArray};
    /// use burn::nn::{Linear, LinearConfig};
    /// use burn::prelude::*;
    /// use burn_checkpoint::{Checkpointed, Region, Schedule};
    ///
    /// type B = Checkpointed<Autodiff<NdArray>>;
    /// let device = Default::default();
    /// let cell: Linear<B> = LinearConfig::new(8, 8).init(&device);
    /// // [batch, time, features]
    /// let xs = Tensor::<B, 3>::ones([2, 50, 8], &device).require_grad();
    /// let hidden = Tensor::<B, 2>::zeros([2, 8], &device);
    /// // 8 regions of 6 or 7 steps: 7 carries stored.
    /// let (ys, last) = Region::named("rnn").schedule(Schedule::Snapshots(7)).scan(
    ///     &cell,
    ///     hidden,
    ///     xs.clone(),
    ///     1,
    ///     |cell, hidden, x: Tensor<B, 2>| {
    ///         let hidden = (cell.forward(hidden) + x).tanh();
    ///         (hidden.clone(), hidden)
    ///     },
    /// );
    /// assert_eq!(ys.dims(), [2, 50, 8]);
    /// let grads = (ys.sum() + last.sum()).backward();
    /// assert!(xs.grad(&grads).is_some() && cell.weight.grad(&grads).is_some());
    /// ```
    ///
    /// # Panics
    ///
    /// If `inputs` has no step along `dim`.
    pub fn scan<B, M, C, S, Y, F>(
        &self,
        cell: &M,
        init: C,
        inputs: S,
        dim: usize,
        step: F,
    ) -> (Y::Stacked, C)
    where
        B: Backend,
        C: Carry<B>,
        S: Sequence<B>,
        Y: Stack<B>,
        F: Fn(&M, C, S::Step) -> (Y, C),
    {
        let steps = inputs.steps(dim);
        assert!(steps > 0, "a checkpoint scan needs at least one step");
        let stored = Schedule::carries(self.scan_schedule(), steps, init.bytes());
        let regions = stored + 1;
        let mut carry = init;
        let mut outputs = Vec::with_capacity(steps);
        for range in Segments::Count(regions).ranges(steps) {
            let (segment, next) = self.run(|| {
                let mut carry = carry;
                let mut segment = Vec::with_capacity(range.len());
                for t in range {
                    let (output, next) = step(cell, carry, inputs.step(dim, t));
                    segment.push(output);
                    carry = next;
                }
                (segment, carry)
            });
            outputs.extend(segment);
            carry = next;
        }
        (Y::stack(outputs, dim), carry)
    }
}

/// [`Region::scan`] on an unnamed region (named by its place in the source): `step` over
/// `inputs` along `dim`, every step a region. The same call as the crate for Burn 0.22's.
///
/// ```
/// use burn::backend::{Autodiff, NdArray};
/// use burn::nn::{Lstm, LstmConfig, LstmState};
/// use burn::prelude::*;
/// use burn_checkpoint::{Checkpointed, checkpoint_scan};
///
/// type B = Checkpointed<Autodiff<NdArray>>;
/// let device = Default::default();
/// // burn-nn's LSTM over one step at a time: its state is the carry.
/// let lstm: Lstm<B> = LstmConfig::new(4, 8, true).init(&device);
/// let xs = Tensor::<B, 3>::ones([2, 30, 4], &device).require_grad();
/// let state = LstmState::new(Tensor::zeros([2, 8], &device), Tensor::zeros([2, 8], &device));
/// let step = |lstm: &Lstm<B>, state, x: Tensor<B, 2>| {
///     let (_, state) = lstm.forward(x.unsqueeze_dim(1), Some(state));
///     (state.hidden.clone(), state)
/// };
/// let (hidden, last) = checkpoint_scan(&lstm, state, xs.clone(), 1, step);
/// assert_eq!(hidden.dims(), [2, 30, 8]);
/// let grads = (hidden.sum() + last.cell.sum()).backward();
/// assert!(xs.grad(&grads).is_some());
/// ```
#[track_caller]
pub fn checkpoint_scan<B, M, C, S, Y, F>(
    cell: &M,
    init: C,
    inputs: S,
    dim: usize,
    step: F,
) -> (Y::Stacked, C)
where
    B: Backend,
    C: Carry<B>,
    S: Sequence<B>,
    Y: Stack<B>,
    F: Fn(&M, C, S::Step) -> (Y, C),
{
    Region::new().scan(cell, init, inputs, dim, step)
}
