//! What a region takes and gives: float tensors, alone, in a `Vec` or in tuples.

use burn::backend::DispatchTensor;
use burn::tensor::Tensor;

/// Tensors a checkpoint region takes as inputs or gives as outputs: a float [`Tensor`], an
/// `Option` or a `Vec` of them, or a tuple of up to four of these.
///
/// A region's inputs are what its gradient flows back to besides its module's parameters; its
/// outputs are what the rest of the graph sees.
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
