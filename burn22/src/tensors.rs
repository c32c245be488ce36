//! What a region takes and gives: float tensors, alone, in a `Vec`, in tuples, in burn-nn's
//! state structs and in the user's own (`#[derive(RegionTensors)]`); such a value flattened
//! ([`Flat`]), and what the engine does to one tensor (untracked, a leaf, its device).

use burn::backend::DispatchTensor;
use burn::nn::attention::MhaOutput;
use burn::nn::{LstmState, RnnState};
use burn::tensor::{Device, Tensor};

/// Tensors a checkpoint region takes as inputs or gives as outputs: a float [`Tensor`], an
/// `Option` or a `Vec` of them, a tuple of up to four of these, burn-nn's recurrent and attention
/// states ([`LstmState`], [`RnnState`], [`MhaOutput`]), and a struct of the user's whose fields
/// are all of these (`#[derive(RegionTensors)]`).
///
/// A region's inputs are what its gradient flows back to besides its module's parameters; its
/// outputs are what the rest of the graph sees.
///
/// ```
/// use burn::nn::{Linear, LinearConfig, LstmState};
/// use burn::tensor::{Device, Tensor};
/// use burn_checkpoint_22::{Region, RegionTensors};
///
/// /// A state of the model's own: crosses a region as its fields do.
/// #[derive(RegionTensors)]
/// struct Carry {
///     state: LstmState<2>,
///     memory: Option<Tensor<2>>,
/// }
///
/// let device = Device::flex().autodiff();
/// let cell: Linear = LinearConfig::new(8, 8).init(&device);
/// let hidden = Tensor::<2>::ones([2, 8], &device).require_grad();
/// let carry = Carry {
///     state: LstmState::new(Tensor::zeros([2, 8], &device), hidden.clone()),
///     memory: None,
/// };
/// let next = Region::named("step").run(&cell, carry, |cell, carry| {
///     let hidden = cell.forward(carry.state.hidden).tanh();
///     Carry {
///         state: LstmState::new(carry.state.cell + hidden.clone(), hidden),
///         memory: carry.memory,
///     }
/// });
/// let grads = next.state.cell.sum().backward();
/// assert!(hidden.grad(&grads).is_some());
/// ```
pub trait RegionTensors: Sized {
    /// How many tensors and in which arrangement, to rebuild the value from a flat list.
    type Layout: Clone + Send + Sync + 'static;

    /// This value's arrangement.
    fn layout(&self) -> Self::Layout;

    /// Appends the tensors to `out`, in order.
    fn flatten(self, out: &mut Vec<DispatchTensor>);

    /// Rebuilds a value of arrangement `layout` from the next tensors of `tensors`.
    fn unflatten(layout: &Self::Layout, tensors: &mut impl Iterator<Item = DispatchTensor>)
    -> Self;
}

impl<const D: usize> RegionTensors for Tensor<D> {
    type Layout = ();

    fn layout(&self) -> Self::Layout {}

    fn flatten(self, out: &mut Vec<DispatchTensor>) {
        out.push(self.into_dispatch());
    }

    fn unflatten(_: &(), tensors: &mut impl Iterator<Item = DispatchTensor>) -> Self {
        Tensor::from_dispatch(tensors.next().expect("a tensor for each place"))
    }
}

impl<T: RegionTensors> RegionTensors for Vec<T> {
    type Layout = Vec<T::Layout>;

    fn layout(&self) -> Self::Layout {
        self.iter().map(RegionTensors::layout).collect()
    }

    fn flatten(self, out: &mut Vec<DispatchTensor>) {
        for item in self {
            item.flatten(out);
        }
    }

    fn unflatten(
        layout: &Self::Layout,
        tensors: &mut impl Iterator<Item = DispatchTensor>,
    ) -> Self {
        layout
            .iter()
            .map(|item| T::unflatten(item, tensors))
            .collect()
    }
}

/// An optional input (a bias, a residual): `None` adds no tensor to the region.
impl<T: RegionTensors> RegionTensors for Option<T> {
    type Layout = Option<T::Layout>;

    fn layout(&self) -> Self::Layout {
        self.as_ref().map(RegionTensors::layout)
    }

    fn flatten(self, out: &mut Vec<DispatchTensor>) {
        if let Some(item) = self {
            item.flatten(out);
        }
    }

    fn unflatten(
        layout: &Self::Layout,
        tensors: &mut impl Iterator<Item = DispatchTensor>,
    ) -> Self {
        layout.as_ref().map(|item| T::unflatten(item, tensors))
    }
}

macro_rules! tuples {
    ($(($($name:ident $index:tt),+))+) => {$(
        impl<$($name: RegionTensors),+> RegionTensors for ($($name,)+) {
            type Layout = ($($name::Layout,)+);

            fn layout(&self) -> Self::Layout {
                ($(self.$index.layout(),)+)
            }

            fn flatten(self, out: &mut Vec<DispatchTensor>) {
                $(self.$index.flatten(out);)+
            }

            fn unflatten(
                layout: &Self::Layout,
                tensors: &mut impl Iterator<Item = DispatchTensor>,
            ) -> Self {
                ($($name::unflatten(&layout.$index, tensors),)+)
            }
        }
    )+};
}

tuples! {
    (A 0)
    (A 0, B 1)
    (A 0, B 1, C 2)
    (A 0, B 1, C 2, D 3)
}

/// burn-nn's state structs: their tensor fields, in declaration order.
macro_rules! state_structs {
    ($($state:ident $(<$dims:ident>)? { $($field:ident),+ })+) => {$(
        impl$(<const $dims: usize>)? RegionTensors for $state$(<$dims>)? {
            type Layout = ();

            fn layout(&self) -> Self::Layout {}

            fn flatten(self, out: &mut Vec<DispatchTensor>) {
                $(RegionTensors::flatten(self.$field, out);)+
            }

            fn unflatten(_: &(), tensors: &mut impl Iterator<Item = DispatchTensor>) -> Self {
                $state {
                    $($field: RegionTensors::unflatten(&(), tensors),)+
                }
            }
        }
    )+};
}

state_structs! {
    LstmState<D> { cell, hidden }
    RnnState<D> { hidden }
    MhaOutput { weights, context }
}

/// A sequence a checkpointed scan walks (see [`Region::scan`](crate::Region::scan)): a float
/// tensor whose dimension `dim` is time, each step taking the tensor one rank lower, that
/// dimension removed (`Tensor<3>` `[batch, time, features]` gives `Tensor<2>` steps along 1); or
/// a `Vec` of the steps' inputs (any [`RegionTensors`], `dim` unused).
pub trait Sequence: RegionTensors {
    /// What one step takes.
    type Step: RegionTensors;

    /// The number of steps along `dim`.
    fn steps(&self, dim: usize) -> usize;

    /// Step `t`: the slice at `t` along `dim`, that dimension removed.
    fn step(&self, dim: usize, t: usize) -> Self::Step;

    /// The sequence of `steps` along `dim` (how the steps' input gradients come back together).
    fn from_steps(steps: Vec<Self::Step>, dim: usize) -> Self;
}

/// A `Vec` of the steps' inputs: step `t` takes the `t`-th. Backward finds a step's inputs by
/// rebuilding the `Vec` (its tensors are shared, not copied): a few microseconds a step for a
/// thousand steps, more as the `Vec` grows; stack a long sequence into one tensor instead.
impl<T: RegionTensors + Clone> Sequence for Vec<T> {
    type Step = T;

    fn steps(&self, _: usize) -> usize {
        self.len()
    }

    fn step(&self, _: usize, t: usize) -> T {
        self[t].clone()
    }

    fn from_steps(steps: Vec<T>, _: usize) -> Self {
        steps
    }
}

/// What a checkpointed scan's step gives besides its carry, stacked over the steps (see
/// [`Region::scan`](crate::Region::scan)): a float tensor, stacked one rank higher along the
/// scan's dimension, as `Tensor::stack` stacks.
pub trait Stack: RegionTensors {
    /// The steps' values stacked.
    type Stacked: Sequence<Step = Self>;

    /// `steps` stacked along `dim`.
    fn stack(steps: Vec<Self>, dim: usize) -> Self::Stacked;
}

macro_rules! sequences {
    ($(($high:literal, $low:literal))+) => {$(
        impl Sequence for Tensor<$high> {
            type Step = Tensor<$low>;

            fn steps(&self, dim: usize) -> usize {
                self.dims()[dim]
            }

            fn step(&self, dim: usize, t: usize) -> Tensor<$low> {
                self.clone().narrow(dim, t, 1).squeeze_dim::<$low>(dim)
            }

            fn from_steps(steps: Vec<Tensor<$low>>, dim: usize) -> Self {
                Tensor::stack(steps, dim)
            }
        }

        impl Stack for Tensor<$low> {
            type Stacked = Tensor<$high>;

            fn stack(steps: Vec<Self>, dim: usize) -> Tensor<$high> {
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

/// A sequence whose steps take no tensors, standing for how many steps it has: the sequence of
/// a scan whose step reads only its index (`checkpoint_sequential`'s segments), and what each of
/// its steps gives.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NoTensors(pub(crate) usize);

impl RegionTensors for NoTensors {
    type Layout = usize;

    fn layout(&self) -> usize {
        self.0
    }

    fn flatten(self, _: &mut Vec<DispatchTensor>) {}

    fn unflatten(steps: &usize, _: &mut impl Iterator<Item = DispatchTensor>) -> Self {
        NoTensors(*steps)
    }
}

impl Sequence for NoTensors {
    type Step = NoTensors;

    fn steps(&self, _: usize) -> usize {
        self.0
    }

    fn step(&self, _: usize, _: usize) -> NoTensors {
        NoTensors(1)
    }

    fn from_steps(steps: Vec<NoTensors>, _: usize) -> NoTensors {
        NoTensors(steps.len())
    }
}

impl Stack for NoTensors {
    type Stacked = NoTensors;

    fn stack(steps: Vec<Self>, _: usize) -> NoTensors {
        NoTensors(steps.len())
    }
}

/// A region's inputs or outputs flattened: the tensors in order and their arrangement.
pub(crate) struct Flat<T: RegionTensors> {
    pub(crate) tensors: Vec<DispatchTensor>,
    pub(crate) layout: T::Layout,
}

impl<T: RegionTensors> Flat<T> {
    pub(crate) fn new(value: T) -> Self {
        let layout = value.layout();
        let mut tensors = Vec::new();
        value.flatten(&mut tensors);
        Flat { tensors, layout }
    }

    /// The value again, from copies of its tensors each through `f`.
    pub(crate) fn rebuilt(&self, f: impl FnMut(DispatchTensor) -> DispatchTensor) -> T {
        T::unflatten(&self.layout, &mut self.tensors.iter().cloned().map(f))
    }

    /// The value, consumed (a tensor the body holds alone may be updated in place).
    pub(crate) fn into_value(self) -> T {
        self.into_mapped(|t| t)
    }

    /// The value, each tensor through `f`, consumed.
    pub(crate) fn into_mapped(self, f: impl FnMut(DispatchTensor) -> DispatchTensor) -> T {
        T::unflatten(&self.layout, &mut self.tensors.into_iter().map(f))
    }
}

/// `value` with `f` applied to each of its tensors, in the same arrangement.
pub(crate) fn each_tensor<T: RegionTensors>(
    value: T,
    f: impl FnMut(DispatchTensor) -> DispatchTensor,
) -> T {
    Flat::new(value).into_mapped(f)
}

/// A device's tensor `t` without autodiff tracking (same device, same checkpointing strategy):
/// what the forward gives the body.
pub(crate) fn untracked(t: DispatchTensor) -> DispatchTensor {
    Tensor::<1>::from_dispatch(t)
        .set_require_grad(false)
        .into_dispatch()
}

/// A leaf of `t`'s value, wanting a gradient.
pub(crate) fn leaf(t: DispatchTensor) -> DispatchTensor {
    Tensor::<1>::from_dispatch(t).require_grad().into_dispatch()
}

/// The device a dispatch tensor lives on.
pub(crate) fn device_of(t: &DispatchTensor) -> Device {
    Tensor::<1>::from_dispatch(t.clone()).device()
}
