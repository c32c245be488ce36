//! Cumulative ops along a dimension: cumsum, cumprod, cummin and cummax.
//!
//! Burn's cumprod, cummin and cummax hold their input from forward to backward and recompute
//! their output there; here the input is read back through the checkpointer instead (recomputed,
//! or a stored region input), and the output recomputed the same way.

use burn_backend::{Backend, Shape, Slice, TensorMetadata, get_device_settings};

use crate::recompute::{RegionOp, build, scatter_grad};
use crate::types::{Primitive, Tracked};

#[derive(Debug, Clone, Copy)]
enum Kind {
    Sum,
    Prod,
    Min,
    Max,
}

/// A cumulative op along `dim`.
#[derive(Debug, Clone)]
struct Cumulative {
    kind: Kind,
    dim: usize,
}

impl Cumulative {
    fn run<I: Backend>(&self, x: Primitive<I>) -> Primitive<I> {
        match self.kind {
            Kind::Sum => I::float_cumsum(x, self.dim),
            Kind::Prod => I::float_cumprod(x, self.dim),
            Kind::Min => I::float_cummin(x, self.dim),
            Kind::Max => I::float_cummax(x, self.dim),
        }
    }
}

impl<I: Backend> RegionOp<I, 1> for Cumulative {
    fn name(&self) -> &'static str {
        match self.kind {
            Kind::Sum => "cumsum",
            Kind::Prod => "cumprod",
            Kind::Min => "cummin",
            Kind::Max => "cummax",
        }
    }

    fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
        self.run::<I>(x)
    }

    fn saved(&self, _: [bool; 1]) -> [bool; 1] {
        [!matches!(self.kind, Kind::Sum)]
    }

    // The same arithmetic as burn-autodiff's, in the same order, so gradients are bitwise equal.
    fn backward(
        self,
        [x]: [Option<Primitive<I>>; 1],
        grad: Primitive<I>,
        _: [bool; 1],
    ) -> [Option<Primitive<I>>; 1] {
        let dim = self.dim;
        let grad = match self.kind {
            Kind::Sum => {
                let grad_reversed = I::float_flip(grad.clone(), &[dim]);
                let grad_cumsum = I::float_cumsum(grad_reversed, dim);
                I::float_flip(grad_cumsum, &[dim])
            }
            Kind::Prod => {
                // (1 / input) * reverse_cumsum(grad * output): NaN where the input is zero, as
                // in Burn.
                let input = x.unwrap();
                let output = I::float_cumprod(input.clone(), dim);
                let grad_times_output = I::float_mul(grad, output);
                let shape = grad_times_output.shape();
                let mut slices = vec![Slice::full(); shape.num_dims()];
                slices[dim] = Slice::with_step(0, None, -1);
                let grad_reversed = I::float_slice(grad_times_output, &slices);
                let grad_cumsum = I::float_cumsum(grad_reversed, dim);
                let grad_result = I::float_slice(grad_cumsum, &slices);
                I::float_div(grad_result, input)
            }
            Kind::Min | Kind::Max => {
                // The gradient flows to the input position each output came from.
                let input = x.unwrap();
                let output = self.run::<I>(input.clone());
                let shape = input.shape();
                let device = I::float_device(&input);
                let settings = get_device_settings::<I>(&device);
                let dim_size = shape[dim] as i64;
                let arange = I::int_arange(0..dim_size, &device, settings.int_dtype);
                let mut arange_shape = vec![1; shape.num_dims()];
                arange_shape[dim] = dim_size as usize;
                let arange = I::int_reshape(arange, Shape::from(arange_shape));
                let arange = I::int_expand(arange, shape.clone());
                let is_source = I::float_equal(output, input, settings.bool_dtype);
                let is_source = I::bool_into_int(is_source, settings.int_dtype);
                let masked_indices = I::int_mul(arange, is_source);
                let source_indices = I::int_cummax(masked_indices, dim);
                scatter_grad::<I>(dim, shape, source_indices, grad)
            }
        };
        [Some(grad)]
    }
}

fn cumulative<I: Backend>(kind: Kind, tensor: Tracked<I>, dim: usize) -> Tracked<I> {
    build::<I, _, _>(Cumulative { kind, dim }, [tensor])
}

/// `cumsum` in a region.
pub(crate) fn cumsum<I: Backend>(tensor: Tracked<I>, dim: usize) -> Tracked<I> {
    cumulative::<I>(Kind::Sum, tensor, dim)
}

/// `cumprod` in a region.
pub(crate) fn cumprod<I: Backend>(tensor: Tracked<I>, dim: usize) -> Tracked<I> {
    cumulative::<I>(Kind::Prod, tensor, dim)
}

/// `cummin` in a region.
pub(crate) fn cummin<I: Backend>(tensor: Tracked<I>, dim: usize) -> Tracked<I> {
    cumulative::<I>(Kind::Min, tensor, dim)
}

/// `cummax` in a region.
pub(crate) fn cummax<I: Backend>(tensor: Tracked<I>, dim: usize) -> Tracked<I> {
    cumulative::<I>(Kind::Max, tensor, dim)
}
