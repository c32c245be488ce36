//! Ops that move elements without arithmetic: reshapes, permutations, flips, expansions and
//! repeats. Backwards are burn-autodiff 0.21's, op for op.

use burn_backend::{Backend, Shape, TensorMetadata};

use crate::recompute::{RegionOp, build};
use crate::types::{Primitive, Tracked};

/// A layout op of one tensor.
#[derive(Debug, Clone)]
enum Layout {
    Reshape { input: Shape, output: Shape },
    SwapDims { dim1: usize, dim2: usize },
    Permute { axes: Vec<usize> },
    Flip { axes: Vec<usize> },
    Expand { input: Shape, output: Shape },
    RepeatDim { dim: usize, times: usize },
}

impl<I: Backend> RegionOp<I, 1> for Layout {
    fn name(&self) -> &'static str {
        match self {
            Layout::Reshape { .. } => "reshape",
            Layout::SwapDims { .. } => "swap_dims",
            Layout::Permute { .. } => "permute",
            Layout::Flip { .. } => "flip",
            Layout::Expand { .. } => "expand",
            Layout::RepeatDim { .. } => "repeat_dim",
        }
    }

    fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
        match self {
            Layout::Reshape { output, .. } => I::float_reshape(x, output.clone()),
            Layout::SwapDims { dim1, dim2 } => I::float_swap_dims(x, *dim1, *dim2),
            Layout::Permute { axes } => I::float_permute(x, axes),
            Layout::Flip { axes } => I::float_flip(x, axes),
            Layout::Expand { output, .. } => I::float_expand(x, output.clone()),
            Layout::RepeatDim { dim, times } => I::float_repeat_dim(x, *dim, *times),
        }
    }

    fn saved(&self, _: [bool; 1]) -> [bool; 1] {
        [false]
    }

    fn backward(
        self,
        _: [Option<Primitive<I>>; 1],
        grad: Primitive<I>,
        _: [bool; 1],
    ) -> [Option<Primitive<I>>; 1] {
        let grad = match self {
            Layout::Reshape { input, output } => {
                let shape_grad = grad.shape();
                let mut grad = grad;
                for i in 0..output.num_dims() {
                    if output[i] == 1 && shape_grad[i] != 1 {
                        grad = I::float_sum_dim(grad, i);
                    }
                }
                I::float_reshape(grad, input)
            }
            Layout::SwapDims { dim1, dim2 } => I::float_swap_dims(grad, dim2, dim1),
            Layout::Permute { axes } => {
                let mut inverse = vec![0usize; axes.len()];
                axes.iter()
                    .enumerate()
                    .for_each(|(i, &axis)| inverse[axis] = i);
                I::float_permute(grad, &inverse)
            }
            Layout::Flip { axes } => I::float_flip(grad, &axes),
            Layout::Expand { input, output } => {
                let (ndims_in, ndims_out) = (input.num_dims(), output.num_dims());
                let mut expanded = vec![1; ndims_out];
                for i in 0..ndims_in {
                    expanded[i + (ndims_out - ndims_in)] = input[i];
                }
                let shape_grad = grad.shape();
                let mut grad = grad;
                for (i, &size) in expanded.iter().enumerate() {
                    if size == 1 && shape_grad[i] != 1 {
                        grad = I::float_sum_dim(grad, i);
                    }
                }
                I::float_reshape(grad, input)
            }
            Layout::RepeatDim { dim, times } => {
                let mut dims = grad.shape();
                let orig_dim_size = dims[dim] / times;
                if orig_dim_size > 1 {
                    dims[dim] = orig_dim_size;
                    let orig_dims = dims.clone();
                    dims.insert(dim + 1, times);
                    let grad = I::float_reshape(grad, dims);
                    let grad = I::float_sum_dim(grad, dim + 1);
                    I::float_reshape(grad, orig_dims)
                } else {
                    I::float_sum_dim(grad, dim)
                }
            }
        };
        [Some(grad)]
    }
}

/// `x.reshape(shape)` in a region.
pub(crate) fn reshape<I: Backend>(tensor: Tracked<I>, shape: Shape) -> Tracked<I> {
    let input = tensor.primitive.shape();
    build::<I, _, 1>(
        Layout::Reshape {
            input,
            output: shape,
        },
        [tensor],
    )
}

/// `x.swap_dims(dim1, dim2)` in a region.
pub(crate) fn swap_dims<I: Backend>(tensor: Tracked<I>, dim1: usize, dim2: usize) -> Tracked<I> {
    build::<I, _, 1>(Layout::SwapDims { dim1, dim2 }, [tensor])
}

/// `x.permute(axes)` in a region.
pub(crate) fn permute<I: Backend>(tensor: Tracked<I>, axes: &[usize]) -> Tracked<I> {
    let axes = axes.to_vec();
    build::<I, _, 1>(Layout::Permute { axes }, [tensor])
}

/// `x.flip(axes)` in a region.
pub(crate) fn flip<I: Backend>(tensor: Tracked<I>, axes: &[usize]) -> Tracked<I> {
    let axes = axes.to_vec();
    build::<I, _, 1>(Layout::Flip { axes }, [tensor])
}

/// `x.expand(shape)` in a region.
pub(crate) fn expand<I: Backend>(tensor: Tracked<I>, shape: Shape) -> Tracked<I> {
    let input = tensor.primitive.shape();
    build::<I, _, 1>(
        Layout::Expand {
            input,
            output: shape,
        },
        [tensor],
    )
}

/// `x.repeat_dim(dim, times)` in a region.
pub(crate) fn repeat_dim<I: Backend>(tensor: Tracked<I>, dim: usize, times: usize) -> Tracked<I> {
    build::<I, _, 1>(Layout::RepeatDim { dim, times }, [tensor])
}
