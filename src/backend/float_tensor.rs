//! Float tensor ops: the family where regions act. Inside a region every op that builds a graph
//! node runs as its `crate::recompute` version; the others build no node.

use super::*;

forward_ops! {
    impl<I: Backend, C: CheckpointStrategy> FloatTensorOps<Self> for Checkpointed<Autodiff<I, C>> {
    fn float_from_data(data: TensorData, device: &Device<Self>) -> FloatTensor<Self>;
    fn float_random(shape: Shape, distribution: Distribution, device: &Device<Self>, dtype: FloatDType) -> FloatTensor<Self>;
    fn float_zeros(shape: Shape, device: &Device<Self>, dtype: FloatDType) -> FloatTensor<Self>;
    fn float_ones(shape: Shape, device: &Device<Self>, dtype: FloatDType) -> FloatTensor<Self>;
    #[by_hand(Plain, Other, "forwarded (reads data: no graph node), counted in Counters::device_reads")]
    fn float_into_data(tensor: FloatTensor<Self>) -> impl Future<Output = Result<TensorData, ExecutionError>> + Send {
        crate::counters::note_device_read();
        <Autodiff<I, C> as FloatTensorOps<Autodiff<I, C>>>::float_into_data(tensor)
    }
    fn float_device(tensor: &FloatTensor<Self>) -> Device<Self>;
    #[region(to_device, Other)]
    fn float_to_device(tensor: FloatTensor<Self>, device: &Device<Self>) -> FloatTensor<Self>;
    fn float_into_int(tensor: FloatTensor<Self>, out_dtype: IntDType) -> IntTensor<Self>;
    fn float_empty(shape: Shape, device: &Device<Self>, dtype: FloatDType) -> FloatTensor<Self>;
    #[region(repeat_dim, Layout)]
    fn float_repeat_dim(tensor: FloatTensor<Self>, dim: usize, times: usize) -> FloatTensor<Self>;
    #[region(add, Elementwise)]
    fn float_add(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(add_scalar, Elementwise)]
    fn float_add_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self>;
    #[region(sub, Elementwise)]
    fn float_sub(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(sub_scalar, Elementwise)]
    fn float_sub_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self>;
    #[region(mul, Elementwise)]
    fn float_mul(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(mul_scalar, Elementwise)]
    fn float_mul_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self>;
    #[region(div, Elementwise)]
    fn float_div(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(div_scalar, Elementwise)]
    fn float_div_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self>;
    #[region(remainder, Elementwise)]
    fn float_remainder(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(remainder_scalar, Elementwise)]
    fn float_remainder_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self>;
    #[region(matmul, Matmul)]
    fn float_matmul(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(cross, Other)]
    fn float_cross(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
    #[region(neg, Elementwise)]
    fn float_neg(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(recip, Elementwise)]
    fn float_recip(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(swap_dims, Layout)]
    fn float_swap_dims(tensor: FloatTensor<Self>, dim1: usize, dim2: usize) -> FloatTensor<Self>;
    #[region(permute, Layout)]
    fn float_permute(tensor: FloatTensor<Self>, axes: &[usize]) -> FloatTensor<Self>;
    #[region(flip, Layout)]
    fn float_flip(tensor: FloatTensor<Self>, axes: &[usize]) -> FloatTensor<Self>;
    #[region(reshape, Layout)]
    fn float_reshape(tensor: FloatTensor<Self>, shape: Shape) -> FloatTensor<Self>;
    #[region(gather, Index)]
    fn float_gather(dim: usize, tensor: FloatTensor<Self>, indices: IntTensor<Self>) -> FloatTensor<Self>;
    #[region(scatter_add, Index)]
    fn float_scatter_add(dim: usize, tensor: FloatTensor<Self>, indices: IntTensor<Self>, value: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(scatter_nd, Index)]
    fn float_scatter_nd(_data: FloatTensor<Self>, _indices: IntTensor<Self>, _values: FloatTensor<Self>, _reduction: IndexingUpdateOp) -> FloatTensor<Self>;
    #[region(gather_nd, Index)]
    fn float_gather_nd(_data: FloatTensor<Self>, _indices: IntTensor<Self>) -> FloatTensor<Self>;
    #[region(select, Index)]
    fn float_select(tensor: FloatTensor<Self>, dim: usize, indices: IntTensor<Self>) -> FloatTensor<Self>;
    #[region(select_add, Index)]
    fn float_select_add(tensor: FloatTensor<Self>, dim: usize, indices: IntTensor<Self>, value: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(slice, Index)]
    fn float_slice(tensor: FloatTensor<Self>, slices: &[Slice]) -> FloatTensor<Self>;
    #[region(slice_assign, Index)]
    fn float_slice_assign(tensor: FloatTensor<Self>, slices: &[Slice], value: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(mask_where, Index)]
    fn float_mask_where(tensor: FloatTensor<Self>, mask: BoolTensor<Self>, value: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(mask_fill, Index)]
    fn float_mask_fill(tensor: FloatTensor<Self>, mask: BoolTensor<Self>, value: Scalar) -> FloatTensor<Self>;
    fn float_equal(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
    fn float_equal_elem(lhs: FloatTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
    fn float_greater(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
    fn float_greater_elem(lhs: FloatTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
    fn float_greater_equal(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
    fn float_greater_equal_elem(lhs: FloatTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
    fn float_lower(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
    fn float_lower_elem(lhs: FloatTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
    fn float_lower_equal(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
    fn float_lower_equal_elem(lhs: FloatTensor<Self>, rhs: Scalar, out_dtype: BoolDType) -> BoolTensor<Self>;
    fn float_detach(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    fn float_set_require_grad(tensor: FloatTensor<Self>, _require_grad: bool) -> FloatTensor<Self>;
    fn float_is_require_grad(_tensor: &FloatTensor<Self>) -> bool;
    #[region(sum, Reduce)]
    fn float_sum(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(sum_dim, Reduce)]
    fn float_sum_dim(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
    #[region(mean, Reduce)]
    fn float_mean(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(mean_dim, Reduce)]
    fn float_mean_dim(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
    #[region(cumsum, Cumulative)]
    fn float_cumsum(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
    #[region(cumprod, Cumulative)]
    fn float_cumprod(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
    #[region(cummin, Cumulative)]
    fn float_cummin(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
    #[region(cummax, Cumulative)]
    fn float_cummax(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
    #[region(cast, Elementwise)]
    fn float_cast(tensor: FloatTensor<Self>, dtype: FloatDType) -> FloatTensor<Self>;
    #[region(exp, Elementwise)]
    fn float_exp(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(log, Elementwise)]
    fn float_log(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(log1p, Elementwise)]
    fn float_log1p(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(powf, Elementwise)]
    fn float_powf(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(powf_scalar_impl, Elementwise)]
    fn float_powf_scalar_impl(tensor: FloatTensor<Self>, value: Scalar) -> FloatTensor<Self>;
    #[region(sqrt, Elementwise)]
    fn float_sqrt(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(abs, Elementwise)]
    fn float_abs(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(cos, Elementwise)]
    fn float_cos(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(sin, Elementwise)]
    fn float_sin(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(tan, Elementwise)]
    fn float_tan(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(cosh, Elementwise)]
    fn float_cosh(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(sinh, Elementwise)]
    fn float_sinh(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(tanh, Elementwise)]
    fn float_tanh(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(acos, Elementwise)]
    fn float_acos(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(acosh, Elementwise)]
    fn float_acosh(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(asin, Elementwise)]
    fn float_asin(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(asinh, Elementwise)]
    fn float_asinh(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(atan, Elementwise)]
    fn float_atan(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(atanh, Elementwise)]
    fn float_atanh(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(atan2, Elementwise)]
    fn float_atan2(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(round, Elementwise)]
    fn float_round(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(floor, Elementwise)]
    fn float_floor(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(ceil, Elementwise)]
    fn float_ceil(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(trunc, Elementwise)]
    fn float_trunc(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(erf, Elementwise)]
    fn float_erf(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(cat, Concat)]
    fn float_cat(tensors: Vec<FloatTensor<Self>>, dim: usize) -> FloatTensor<Self>;
    fn float_argmax(tensor: FloatTensor<Self>, dim: usize, out_dtype: IntDType) -> IntTensor<Self>;
    fn float_argtopk(tensor: FloatTensor<Self>, dim: usize, k: usize, out_dtype: IntDType) -> IntTensor<Self>;
    fn float_topk(tensor: FloatTensor<Self>, dim: usize, k: usize) -> FloatTensor<Self>;
    fn float_argmin(tensor: FloatTensor<Self>, dim: usize, out_dtype: IntDType) -> IntTensor<Self>;
    #[region(max_dim, Reduce)]
    fn float_max_dim(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
    #[region(max_dim_with_indices, Reduce)]
    fn float_max_dim_with_indices(tensor: FloatTensor<Self>, dim: usize, indices_dtype: IntDType) -> (FloatTensor<Self>, IntTensor<Self>);
    #[region(min_dim, Reduce)]
    fn float_min_dim(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
    #[region(min_dim_with_indices, Reduce)]
    fn float_min_dim_with_indices(tensor: FloatTensor<Self>, dim: usize, indices_dtype: IntDType) -> (FloatTensor<Self>, IntTensor<Self>);
    #[region(sign, Elementwise)]
    fn float_sign(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(expand, Layout)]
    fn float_expand(tensor: FloatTensor<Self>, shape: Shape) -> FloatTensor<Self>;
    #[region(sort, Other)]
    fn float_sort(tensor: FloatTensor<Self>, dim: usize, descending: bool) -> FloatTensor<Self>;
    #[region(sort_with_indices, Other)]
    fn float_sort_with_indices(tensor: FloatTensor<Self>, dim: usize, descending: bool, indices_dtype: IntDType) -> (FloatTensor<Self>, IntTensor<Self>);
    fn float_argsort(tensor: FloatTensor<Self>, dim: usize, descending: bool, out_dtype: IntDType) -> IntTensor<Self>;
    #[region(unfold, Layout)]
    fn float_unfold(tensor: FloatTensor<Self>, dim: usize, size: usize, step: usize) -> FloatTensor<Self>;
    fn float_is_nan(tensor: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
    fn float_is_inf(tensor: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
    }
}
