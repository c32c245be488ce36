//! Reductions: sum and mean (whole tensor and per dimension), max and min per dimension.

use burn_backend::{Backend, IntDType, Shape, TensorMetadata, get_device_settings};

use crate::recompute::{RegionOp, build, build_with, scatter_grad};
use crate::types::{IntPrimitive, Primitive, Tracked};

/// Reshapes a reduced gradient to the rank of `shape` by adding leading unit dimensions.
fn unsqueeze_like<I: Backend>(tensor: Primitive<I>, shape: &Shape) -> Primitive<I> {
    let ndims_out = shape.num_dims();
    let shape = tensor.shape();
    let ndims_in = shape.num_dims();
    let mut dims = vec![1; ndims_out];
    let num_ones = ndims_out - ndims_in;
    dims[num_ones..(ndims_in + num_ones)].copy_from_slice(&shape[..ndims_in]);
    I::float_reshape(tensor, Shape::from(dims))
}

/// Which reduction, with the input's shape (all a sum or mean backward needs).
#[derive(Debug, Clone)]
enum Reduce {
    Sum(Shape),
    Mean(Shape),
    SumDim(Shape, usize),
    MeanDim(Shape, usize),
}

impl<I: Backend> RegionOp<I, 1> for Reduce {
    fn name(&self) -> &'static str {
        match self {
            Reduce::Sum(_) => "sum",
            Reduce::Mean(_) => "mean",
            Reduce::SumDim(..) => "sum_dim",
            Reduce::MeanDim(..) => "mean_dim",
        }
    }

    fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
        match self {
            Reduce::Sum(_) => I::float_sum(x),
            Reduce::Mean(_) => I::float_mean(x),
            Reduce::SumDim(_, dim) => I::float_sum_dim(x, *dim),
            Reduce::MeanDim(_, dim) => I::float_mean_dim(x, *dim),
        }
    }

    fn saved(&self, _: [bool; 1]) -> [bool; 1] {
        [false]
    }

    // The same arithmetic as burn-autodiff's, in the same order, so gradients are bitwise equal.
    fn backward(
        self,
        _: [Option<Primitive<I>>; 1],
        grad: Primitive<I>,
        _: [bool; 1],
    ) -> [Option<Primitive<I>>; 1] {
        let device = I::float_device(&grad);
        let dtype = grad.dtype().into();
        let grad = match self {
            Reduce::Sum(shape) => {
                let ones = I::float_ones(shape, &device, dtype);
                let grad = unsqueeze_like::<I>(grad, &ones.shape());
                I::float_mul(ones, grad)
            }
            Reduce::Mean(shape) => {
                let value = 1_f64 / shape.num_elements() as f64;
                let ones = I::float_ones(shape, &device, dtype);
                let value = I::float_mul_scalar(ones, value.into());
                let grad = unsqueeze_like::<I>(grad, &value.shape());
                I::float_mul(value, grad)
            }
            Reduce::SumDim(shape, dim) => {
                let ones = I::float_ones(shape, &device, dtype);
                let grad = I::float_sum_dim(grad, dim);
                I::float_mul(ones, grad)
            }
            Reduce::MeanDim(shape, dim) => {
                let value = 1_f64 / shape[dim] as f64;
                let ones = I::float_ones(shape, &device, dtype);
                let value = I::float_mul_scalar(ones, value.into());
                let grad = I::float_sum_dim(grad, dim);
                I::float_mul(value, grad)
            }
        };
        [Some(grad)]
    }
}

/// The sum of all elements, in a region.
pub(crate) fn sum<I: Backend>(tensor: Tracked<I>) -> Tracked<I> {
    build::<I, _, _>(Reduce::Sum(tensor.primitive.shape()), [tensor])
}

/// The mean of all elements, in a region.
pub(crate) fn mean<I: Backend>(tensor: Tracked<I>) -> Tracked<I> {
    build::<I, _, _>(Reduce::Mean(tensor.primitive.shape()), [tensor])
}

/// The sum along `dim`, in a region.
pub(crate) fn sum_dim<I: Backend>(tensor: Tracked<I>, dim: usize) -> Tracked<I> {
    build::<I, _, _>(Reduce::SumDim(tensor.primitive.shape(), dim), [tensor])
}

/// The mean along `dim`, in a region.
pub(crate) fn mean_dim<I: Backend>(tensor: Tracked<I>, dim: usize) -> Tracked<I> {
    build::<I, _, _>(Reduce::MeanDim(tensor.primitive.shape(), dim), [tensor])
}

/// Max or min along a dimension. Burn holds the arg indices from forward to backward; here the
/// backward recomputes them from the input instead.
#[derive(Debug, Clone)]
struct Extremum {
    max: bool,
    dim: usize,
    indices_dtype: IntDType,
}

impl Extremum {
    fn with_indices<I: Backend>(&self, x: Primitive<I>) -> (Primitive<I>, IntPrimitive<I>) {
        if self.max {
            I::float_max_dim_with_indices(x, self.dim, self.indices_dtype)
        } else {
            I::float_min_dim_with_indices(x, self.dim, self.indices_dtype)
        }
    }

    fn for_tensor<I: Backend>(tensor: &Tracked<I>, max: bool, dim: usize) -> Self {
        let device = I::float_device(&tensor.primitive);
        Extremum {
            max,
            dim,
            indices_dtype: get_device_settings::<I>(&device).int_dtype,
        }
    }
}

impl<I: Backend> RegionOp<I, 1> for Extremum {
    fn name(&self) -> &'static str {
        if self.max { "max_dim" } else { "min_dim" }
    }

    fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
        if self.max {
            I::float_max_dim(x, self.dim)
        } else {
            I::float_min_dim(x, self.dim)
        }
    }

    fn saved(&self, _: [bool; 1]) -> [bool; 1] {
        [true]
    }

    fn backward(
        self,
        [x]: [Option<Primitive<I>>; 1],
        grad: Primitive<I>,
        _: [bool; 1],
    ) -> [Option<Primitive<I>>; 1] {
        let x = x.unwrap();
        let shape = x.shape();
        let (_, indices) = self.with_indices::<I>(x);
        [Some(scatter_grad::<I>(self.dim, shape, indices, grad))]
    }
}

/// The max along `dim`, in a region.
pub(crate) fn max_dim<I: Backend>(tensor: Tracked<I>, dim: usize) -> Tracked<I> {
    build::<I, _, _>(Extremum::for_tensor::<I>(&tensor, true, dim), [tensor])
}

/// The min along `dim`, in a region.
pub(crate) fn min_dim<I: Backend>(tensor: Tracked<I>, dim: usize) -> Tracked<I> {
    build::<I, _, _>(Extremum::for_tensor::<I>(&tensor, false, dim), [tensor])
}

fn extremum_with_indices<I: Backend>(
    tensor: Tracked<I>,
    max: bool,
    dim: usize,
    indices_dtype: IntDType,
) -> (Tracked<I>, IntPrimitive<I>) {
    let op = Extremum {
        max,
        dim,
        indices_dtype,
    };
    build_with::<I, _, _, _>(op, [tensor], |op, [x]| op.with_indices::<I>(x))
}

/// The max along `dim` and where it is, in a region.
pub(crate) fn max_dim_with_indices<I: Backend>(
    tensor: Tracked<I>,
    dim: usize,
    indices_dtype: IntDType,
) -> (Tracked<I>, IntPrimitive<I>) {
    extremum_with_indices::<I>(tensor, true, dim, indices_dtype)
}

/// The min along `dim` and where it is, in a region.
pub(crate) fn min_dim_with_indices<I: Backend>(
    tensor: Tracked<I>,
    dim: usize,
    indices_dtype: IntDType,
) -> (Tracked<I>, IntPrimitive<I>) {
    extremum_with_indices::<I>(tensor, false, dim, indices_dtype)
}
