//! Unfold: the windows of size `size`, every `step`, along a dimension, as a new last dimension.

use burn_backend::ops::unfold::calculate_unfold_windows;
use burn_backend::{Backend, Shape, Slice, TensorMetadata};

use crate::recompute::{RegionOp, build};
use crate::types::{Primitive, Tracked};

#[derive(Debug, Clone)]
struct Unfold {
    shape: Shape,
    dim: usize,
    size: usize,
    step: usize,
}

impl<I: Backend> RegionOp<I, 1> for Unfold {
    fn name(&self) -> &'static str {
        "unfold"
    }

    fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
        I::float_unfold(x, self.dim, self.size, self.step)
    }

    fn saved(&self, _: [bool; 1]) -> [bool; 1] {
        [false]
    }

    // The same arithmetic as burn-autodiff's, in the same order, so gradients are bitwise equal:
    // each window's gradient is added into its slice of a zero input gradient, window by window.
    fn backward(
        self,
        _: [Option<Primitive<I>>; 1],
        grad: Primitive<I>,
        _: [bool; 1],
    ) -> [Option<Primitive<I>>; 1] {
        let Unfold {
            shape,
            dim,
            size,
            step,
        } = self;
        let windows = calculate_unfold_windows(shape[dim], size, step);
        let device = I::float_device(&grad);
        let mut grad_input = I::float_zeros(shape.clone(), &device, grad.dtype().into());
        if windows == 0 {
            return [Some(grad_input)];
        }
        let ndims_in = shape.num_dims();
        let ndims_out = grad.shape().num_dims();
        let mut target_shape = shape.clone();
        target_shape[dim] = size;
        for window_idx in 0..windows {
            let mut slices_out = vec![Slice::new(0, None, 1); ndims_out];
            let start = window_idx * step;
            let end = start + size;
            slices_out[dim] = Slice::new(window_idx as isize, Some((window_idx + 1) as isize), 1);
            let window_grad = I::float_slice(grad.clone(), &slices_out);

            let last_axis = ndims_out - 1;
            let mut permutation: Vec<usize> = (0..dim).collect();
            permutation.push(last_axis);
            permutation.extend(dim + 1..last_axis);
            permutation.push(dim);
            let window_grad = I::float_permute(window_grad, &permutation);
            let window_grad = I::float_reshape(window_grad, target_shape.clone());

            let mut slices_in = vec![Slice::new(0, None, 1); ndims_in];
            slices_in[dim] = Slice::new(start as isize, Some(end as isize), 1);
            let current = I::float_slice(grad_input.clone(), &slices_in);
            let updated = I::float_add(current, window_grad);
            grad_input = I::float_slice_assign(grad_input, &slices_in, updated);
        }
        [Some(grad_input)]
    }
}

/// `unfold` in a region.
pub(crate) fn unfold<I: Backend>(
    tensor: Tracked<I>,
    dim: usize,
    size: usize,
    step: usize,
) -> Tracked<I> {
    let op = Unfold {
        shape: tensor.primitive.shape(),
        dim,
        size,
        step,
    };
    build::<I, _, _>(op, [tensor])
}
