//! Ops that move or pick elements without arithmetic: reshapes, permutations, flips, expansions,
//! repeats, slices and selections. Backwards are burn-autodiff 0.21's, op for op.

use burn_backend::{Backend, Shape, Slice, TensorMetadata};

use super::{RegionOp, build};
use crate::types::{IntPrimitive, Primitive, Tracked};

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

/// `x.slice(slices)`: the gradient is scattered into zeros of the input's shape.
#[derive(Debug, Clone)]
struct SliceOp<I: Backend> {
    slices: Vec<Slice>,
    shape: Shape,
    device: I::Device,
}

impl<I: Backend> RegionOp<I, 1> for SliceOp<I> {
    fn name(&self) -> &'static str {
        "slice"
    }

    fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
        I::float_slice(x, &self.slices)
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
        let zeros = I::float_zeros(self.shape, &self.device, grad.dtype().into());
        [Some(I::float_slice_assign(zeros, &self.slices, grad))]
    }
}

/// `x.slice(slices)` in a region.
pub(crate) fn slice<I: Backend>(tensor: Tracked<I>, slices: &[Slice]) -> Tracked<I> {
    let op = SliceOp::<I> {
        slices: slices.to_vec(),
        shape: tensor.primitive.shape(),
        device: I::float_device(&tensor.primitive),
    };
    build::<I, _, 1>(op, [tensor])
}

/// `x.select(dim, indices)`: the gradient is added into zeros of the input's shape.
struct Select<I: Backend> {
    dim: usize,
    indices: IntPrimitive<I>,
    shape: Shape,
    device: I::Device,
}

// Hand-written: a derived Debug would print the indices.
impl<I: Backend> core::fmt::Debug for Select<I> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Select(dim {})", self.dim)
    }
}

impl<I: Backend> Clone for Select<I> {
    fn clone(&self) -> Self {
        Select {
            dim: self.dim,
            indices: self.indices.clone(),
            shape: self.shape.clone(),
            device: self.device.clone(),
        }
    }
}

impl<I: Backend> RegionOp<I, 1> for Select<I> {
    fn name(&self) -> &'static str {
        "select"
    }

    fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
        I::float_select(x, self.dim, self.indices.clone())
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
        let zeros = I::float_zeros(self.shape, &self.device, grad.dtype().into());
        [Some(I::float_select_add(
            zeros,
            self.dim,
            self.indices,
            grad,
        ))]
    }
}

/// `x.select(dim, indices)` in a region.
pub(crate) fn select<I: Backend>(
    tensor: Tracked<I>,
    dim: usize,
    indices: IntPrimitive<I>,
) -> Tracked<I> {
    let op = Select::<I> {
        dim,
        indices,
        shape: tensor.primitive.shape(),
        device: I::float_device(&tensor.primitive),
    };
    build::<I, _, 1>(op, [tensor])
}

/// `x.select_add(dim, indices, value)`.
struct SelectAdd<I: Backend> {
    dim: usize,
    indices: IntPrimitive<I>,
}

impl<I: Backend> core::fmt::Debug for SelectAdd<I> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "SelectAdd(dim {})", self.dim)
    }
}

impl<I: Backend> Clone for SelectAdd<I> {
    fn clone(&self) -> Self {
        SelectAdd {
            dim: self.dim,
            indices: self.indices.clone(),
        }
    }
}

impl<I: Backend> RegionOp<I, 2> for SelectAdd<I> {
    fn name(&self) -> &'static str {
        "select_add"
    }

    fn forward(&self, [x, value]: [Primitive<I>; 2]) -> Primitive<I> {
        I::float_select_add(x, self.dim, self.indices.clone(), value)
    }

    fn saved(&self, _: [bool; 2]) -> [bool; 2] {
        [false, false]
    }

    fn backward(
        self,
        _: [Option<Primitive<I>>; 2],
        grad: Primitive<I>,
        [x, value]: [bool; 2],
    ) -> [Option<Primitive<I>>; 2] {
        let for_value = value.then(|| grad.clone());
        [
            x.then_some(grad),
            for_value.map(|grad| I::float_select(grad, self.dim, self.indices)),
        ]
    }
}

/// `x.select_add(dim, indices, value)` in a region.
pub(crate) fn select_add<I: Backend>(
    tensor: Tracked<I>,
    dim: usize,
    indices: IntPrimitive<I>,
    value: Tracked<I>,
) -> Tracked<I> {
    build::<I, _, 2>(SelectAdd::<I> { dim, indices }, [tensor, value])
}
