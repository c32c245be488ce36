//! Scatters: `scatter_add` and `scatter_nd` (every reduction). The indices are not computed by
//! the region's float ops, so each op holds them (a handle), as Burn does.

use core::fmt;

use burn_backend::tensor::IndexingUpdateOp;
use burn_backend::{Backend, Shape, TensorMetadata, get_device_settings};

use crate::recompute::{RegionOp, build};
use crate::types::{IntPrimitive, Primitive, Tracked};

/// `scatter_add(dim, tensor, indices, value)`: operands `[tensor, value]`.
#[derive(Clone)]
struct ScatterAdd<I: Backend> {
    dim: usize,
    indices: IntPrimitive<I>,
}

impl<I: Backend> fmt::Debug for ScatterAdd<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ScatterAdd(dim {})", self.dim)
    }
}

impl<I: Backend> RegionOp<I, 2> for ScatterAdd<I> {
    fn name(&self) -> &'static str {
        "scatter_add"
    }

    fn forward(&self, [tensor, value]: [Primitive<I>; 2]) -> Primitive<I> {
        I::float_scatter_add(self.dim, tensor, self.indices.clone(), value)
    }

    fn saved(&self, _: [bool; 2]) -> [bool; 2] {
        [false, false]
    }

    fn backward(
        self,
        _: [Option<Primitive<I>>; 2],
        grad: Primitive<I>,
        [tensor, value]: [bool; 2],
    ) -> [Option<Primitive<I>>; 2] {
        let for_value = value.then(|| grad.clone());
        [
            tensor.then_some(grad),
            for_value.map(|grad| I::float_gather(self.dim, grad, self.indices)),
        ]
    }
}

/// `scatter_add` in a region.
pub(crate) fn scatter_add<I: Backend>(
    dim: usize,
    tensor: Tracked<I>,
    indices: IntPrimitive<I>,
    value: Tracked<I>,
) -> Tracked<I> {
    build::<I, _, _>(ScatterAdd::<I> { dim, indices }, [tensor, value])
}

/// `scatter_nd(data, indices, values, reduction)`: operands `[data, values]`. Burn's backward of
/// the `Mul`, `Min` and `Max` reductions holds `data` and `values` from forward; here they are
/// read back through the checkpointer (recomputed, or stored region inputs).
#[derive(Clone)]
struct ScatterNd<I: Backend> {
    indices: IntPrimitive<I>,
    reduction: IndexingUpdateOp,
    values: Shape,
}

impl<I: Backend> fmt::Debug for ScatterNd<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ScatterNd({:?})", self.reduction)
    }
}

impl<I: Backend> RegionOp<I, 2> for ScatterNd<I> {
    fn name(&self) -> &'static str {
        "scatter_nd"
    }

    fn forward(&self, [data, values]: [Primitive<I>; 2]) -> Primitive<I> {
        I::float_scatter_nd(data, self.indices.clone(), values, self.reduction)
    }

    fn saved(&self, [data, values]: [bool; 2]) -> [bool; 2] {
        match self.reduction {
            IndexingUpdateOp::Add | IndexingUpdateOp::Assign => [false, false],
            // Each gradient reads the other operand.
            IndexingUpdateOp::Mul => [values, data],
            // Both gradients read both operands (Burn computes both winner masks).
            IndexingUpdateOp::Min | IndexingUpdateOp::Max => [true, true],
        }
    }

    // The same arithmetic as burn-autodiff's, in the same order, so gradients are bitwise equal.
    fn backward(
        self,
        [data_value, values_value]: [Option<Primitive<I>>; 2],
        grad: Primitive<I>,
        [data, values]: [bool; 2],
    ) -> [Option<Primitive<I>>; 2] {
        let indices = self.indices;
        match self.reduction {
            IndexingUpdateOp::Add => {
                let for_values = values.then(|| grad.clone());
                [
                    data.then_some(grad),
                    for_values.map(|grad| I::float_gather_nd(grad, indices)),
                ]
            }
            IndexingUpdateOp::Assign => {
                let for_values = values.then(|| (grad.clone(), indices.clone()));
                let data_grad = data.then(|| {
                    let device = I::float_device(&grad);
                    let zeros = I::float_zeros(self.values, &device, grad.dtype().into());
                    I::float_scatter_nd(grad, indices, zeros, IndexingUpdateOp::Assign)
                });
                let values_grad =
                    for_values.map(|(grad, indices)| I::float_gather_nd(grad, indices));
                [data_grad, values_grad]
            }
            IndexingUpdateOp::Mul => {
                let for_values = values.then(|| (grad.clone(), indices.clone()));
                let data_grad = data.then(|| {
                    let device = I::float_device(&grad);
                    let ones = I::float_ones(grad.shape(), &device, grad.dtype().into());
                    let mult = I::float_scatter_nd(
                        ones,
                        indices,
                        values_value.unwrap(),
                        IndexingUpdateOp::Assign,
                    );
                    I::float_mul(grad, mult)
                });
                let values_grad = for_values.map(|(grad, indices)| {
                    let g_idx = I::float_gather_nd(grad, indices.clone());
                    let d_idx = I::float_gather_nd(data_value.unwrap(), indices);
                    I::float_mul(g_idx, d_idx)
                });
                [data_grad, values_grad]
            }
            IndexingUpdateOp::Min | IndexingUpdateOp::Max => {
                let is_max = matches!(self.reduction, IndexingUpdateOp::Max);
                let data_value = data_value.unwrap();
                let values_value = values_value.unwrap();
                let device = I::float_device(&data_value);
                let data_dtype = data_value.dtype();
                let data_shape = data_value.shape();
                let bool_dtype = get_device_settings::<I>(&device).bool_dtype;
                let data_at_idx = I::float_gather_nd(data_value, indices.clone());
                let (data_won, values_won) = if is_max {
                    (
                        I::float_greater_equal(
                            data_at_idx.clone(),
                            values_value.clone(),
                            bool_dtype,
                        ),
                        I::float_greater_equal(values_value, data_at_idx, bool_dtype),
                    )
                } else {
                    (
                        I::float_lower_equal(data_at_idx.clone(), values_value.clone(), bool_dtype),
                        I::float_lower_equal(values_value, data_at_idx, bool_dtype),
                    )
                };
                let data_won = I::bool_into_float(data_won, data_dtype.into());
                let values_won = I::bool_into_float(values_won, data_dtype.into());
                let ones = I::float_ones(data_shape, &device, data_dtype.into());
                let data_mask =
                    I::float_scatter_nd(ones, indices.clone(), data_won, IndexingUpdateOp::Assign);
                let for_values = values.then(|| grad.clone());
                [
                    data.then(|| I::float_mul(grad, data_mask)),
                    for_values.map(|grad| {
                        let g_idx = I::float_gather_nd(grad, indices);
                        I::float_mul(g_idx, values_won)
                    }),
                ]
            }
        }
    }
}

/// `scatter_nd` in a region.
pub(crate) fn scatter_nd<I: Backend>(
    data: Tracked<I>,
    indices: IntPrimitive<I>,
    values: Tracked<I>,
    reduction: IndexingUpdateOp,
) -> Tracked<I> {
    let op = ScatterNd::<I> {
        indices,
        reduction,
        values: values.primitive.shape(),
    };
    build::<I, _, _>(op, [data, values])
}
