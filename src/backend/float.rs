//! Float tensor ops: the family where regions act. Inside a region every op that builds a graph
//! node runs as its `crate::recompute` version; the others build no node.

use super::*;

forward_ops! {
    impl<I: Backend, C: CheckpointStrategy> FloatTensorOps<Self> for Checkpointed<Autodiff<I, C>> {
    fn float_from_data(data: TensorData, device: &Device<Self>) -> FloatTensor<Self>;
    fn float_random(shape: Shape, distribution: Distribution, device: &Device<Self>, dtype: FloatDType) -> FloatTensor<Self>;
    fn float_zeros(shape: Shape, device: &Device<Self>, dtype: FloatDType) -> FloatTensor<Self>;
    fn float_ones(shape: Shape, device: &Device<Self>, dtype: FloatDType) -> FloatTensor<Self>;
    fn float_into_data(tensor: FloatTensor<Self>) -> impl Future<Output = Result<TensorData, ExecutionError>> + Send;
    fn float_device(tensor: &FloatTensor<Self>) -> Device<Self>;
    #[region(crate::recompute::to_device)]
    fn float_to_device(tensor: FloatTensor<Self>, device: &Device<Self>) -> FloatTensor<Self>;
    fn float_into_int(tensor: FloatTensor<Self>, out_dtype: IntDType) -> IntTensor<Self>;
    fn float_empty(shape: Shape, device: &Device<Self>, dtype: FloatDType) -> FloatTensor<Self>;
    #[region(crate::recompute::repeat_dim)]
    fn float_repeat_dim(tensor: FloatTensor<Self>, dim: usize, times: usize) -> FloatTensor<Self>;
    #[region(crate::recompute::add)]
    fn float_add(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::add_scalar)]
    fn float_add_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self>;
    #[region(crate::recompute::sub)]
    fn float_sub(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::sub_scalar)]
    fn float_sub_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self>;
    #[region(crate::recompute::mul)]
    fn float_mul(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::mul_scalar)]
    fn float_mul_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self>;
    #[region(crate::recompute::div)]
    fn float_div(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::div_scalar)]
    fn float_div_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self>;
    #[region(crate::recompute::remainder)]
    fn float_remainder(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::remainder_scalar)]
    fn float_remainder_scalar(lhs: FloatTensor<Self>, rhs: Scalar) -> FloatTensor<Self>;
    #[region(crate::recompute::matmul)]
    fn float_matmul(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::cross)]
    fn float_cross(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
    #[region(crate::recompute::neg)]
    fn float_neg(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::recip)]
    fn float_recip(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::swap_dims)]
    fn float_swap_dims(tensor: FloatTensor<Self>, dim1: usize, dim2: usize) -> FloatTensor<Self>;
    #[region(crate::recompute::permute)]
    fn float_permute(tensor: FloatTensor<Self>, axes: &[usize]) -> FloatTensor<Self>;
    #[region(crate::recompute::flip)]
    fn float_flip(tensor: FloatTensor<Self>, axes: &[usize]) -> FloatTensor<Self>;
    #[region(crate::recompute::reshape)]
    fn float_reshape(tensor: FloatTensor<Self>, shape: Shape) -> FloatTensor<Self>;
    #[region(crate::recompute::gather)]
    fn float_gather(dim: usize, tensor: FloatTensor<Self>, indices: IntTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::scatter_add)]
    fn float_scatter_add(dim: usize, tensor: FloatTensor<Self>, indices: IntTensor<Self>, value: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::scatter_nd)]
    fn float_scatter_nd(_data: FloatTensor<Self>, _indices: IntTensor<Self>, _values: FloatTensor<Self>, _reduction: IndexingUpdateOp) -> FloatTensor<Self>;
    #[region(crate::recompute::gather_nd)]
    fn float_gather_nd(_data: FloatTensor<Self>, _indices: IntTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::select)]
    fn float_select(tensor: FloatTensor<Self>, dim: usize, indices: IntTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::select_add)]
    fn float_select_add(tensor: FloatTensor<Self>, dim: usize, indices: IntTensor<Self>, value: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::slice)]
    fn float_slice(tensor: FloatTensor<Self>, slices: &[Slice]) -> FloatTensor<Self>;
    #[region(crate::recompute::slice_assign)]
    fn float_slice_assign(tensor: FloatTensor<Self>, slices: &[Slice], value: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::mask_where)]
    fn float_mask_where(tensor: FloatTensor<Self>, mask: BoolTensor<Self>, value: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::mask_fill)]
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
    #[region(crate::recompute::sum)]
    fn float_sum(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::sum_dim)]
    fn float_sum_dim(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
    #[region(crate::recompute::mean)]
    fn float_mean(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::mean_dim)]
    fn float_mean_dim(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
    #[region(crate::recompute::cumsum)]
    fn float_cumsum(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
    #[region(crate::recompute::cumprod)]
    fn float_cumprod(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
    #[region(crate::recompute::cummin)]
    fn float_cummin(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
    #[region(crate::recompute::cummax)]
    fn float_cummax(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
    #[region(crate::recompute::cast)]
    fn float_cast(tensor: FloatTensor<Self>, dtype: FloatDType) -> FloatTensor<Self>;
    #[region(crate::recompute::exp)]
    fn float_exp(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::log)]
    fn float_log(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::log1p)]
    fn float_log1p(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::powf)]
    fn float_powf(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::powf_scalar_impl)]
    fn float_powf_scalar_impl(tensor: FloatTensor<Self>, value: Scalar) -> FloatTensor<Self>;
    #[region(crate::recompute::sqrt)]
    fn float_sqrt(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::abs)]
    fn float_abs(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::cos)]
    fn float_cos(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::sin)]
    fn float_sin(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::tan)]
    fn float_tan(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::cosh)]
    fn float_cosh(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::sinh)]
    fn float_sinh(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::tanh)]
    fn float_tanh(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::acos)]
    fn float_acos(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::acosh)]
    fn float_acosh(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::asin)]
    fn float_asin(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::asinh)]
    fn float_asinh(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::atan)]
    fn float_atan(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::atanh)]
    fn float_atanh(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::atan2)]
    fn float_atan2(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::round)]
    fn float_round(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::floor)]
    fn float_floor(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::ceil)]
    fn float_ceil(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::trunc)]
    fn float_trunc(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::erf)]
    fn float_erf(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::cat)]
    fn float_cat(tensors: Vec<FloatTensor<Self>>, dim: usize) -> FloatTensor<Self>;
    fn float_argmax(tensor: FloatTensor<Self>, dim: usize, out_dtype: IntDType) -> IntTensor<Self>;
    fn float_argtopk(tensor: FloatTensor<Self>, dim: usize, k: usize, out_dtype: IntDType) -> IntTensor<Self>;
    fn float_topk(tensor: FloatTensor<Self>, dim: usize, k: usize) -> FloatTensor<Self>;
    fn float_argmin(tensor: FloatTensor<Self>, dim: usize, out_dtype: IntDType) -> IntTensor<Self>;
    #[region(crate::recompute::max_dim)]
    fn float_max_dim(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
    #[region(crate::recompute::max_dim_with_indices)]
    fn float_max_dim_with_indices(tensor: FloatTensor<Self>, dim: usize, indices_dtype: IntDType) -> (FloatTensor<Self>, IntTensor<Self>);
    #[region(crate::recompute::min_dim)]
    fn float_min_dim(tensor: FloatTensor<Self>, dim: usize) -> FloatTensor<Self>;
    #[region(crate::recompute::min_dim_with_indices)]
    fn float_min_dim_with_indices(tensor: FloatTensor<Self>, dim: usize, indices_dtype: IntDType) -> (FloatTensor<Self>, IntTensor<Self>);
    #[region(crate::recompute::sign)]
    fn float_sign(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
    #[region(crate::recompute::expand)]
    fn float_expand(tensor: FloatTensor<Self>, shape: Shape) -> FloatTensor<Self>;
    #[region(crate::recompute::sort)]
    fn float_sort(tensor: FloatTensor<Self>, dim: usize, descending: bool) -> FloatTensor<Self>;
    #[region(crate::recompute::sort_with_indices)]
    fn float_sort_with_indices(tensor: FloatTensor<Self>, dim: usize, descending: bool, indices_dtype: IntDType) -> (FloatTensor<Self>, IntTensor<Self>);
    fn float_argsort(tensor: FloatTensor<Self>, dim: usize, descending: bool, out_dtype: IntDType) -> IntTensor<Self>;
    #[region(crate::recompute::unfold)]
    fn float_unfold(tensor: FloatTensor<Self>, dim: usize, size: usize, step: usize) -> FloatTensor<Self>;
    fn float_is_nan(tensor: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
    fn float_is_inf(tensor: FloatTensor<Self>, out_dtype: BoolDType) -> BoolTensor<Self>;
    }
}
