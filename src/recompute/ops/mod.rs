//! The op families, one folder or file per [`OpKind`](crate::OpKind): each op a small struct
//! implementing [`RegionOp`](super::RegionOp), built with [`build`](super::build()).

mod concat;
mod conv;
mod cumulative;
mod elementwise;
mod index;
mod layout;
mod matmul;
mod other;
mod pool;
mod reduce;

pub(crate) use concat::cat;
pub(crate) use conv::{
    conv_transpose1d, conv_transpose2d, conv_transpose3d, conv1d, conv2d, conv3d, deform_conv2d,
};
pub(crate) use cumulative::{cummax, cummin, cumprod, cumsum};
pub(crate) use elementwise::{
    abs, acos, acosh, add, add_scalar, asin, asinh, atan, atan2, atanh, cast, ceil, cos, cosh, div,
    div_scalar, erf, exp, floor, gelu, log, log_sigmoid, log1p, mul, mul_scalar, neg, powf,
    powf_scalar_impl, recip, relu, remainder, remainder_scalar, round, sigmoid, sign, sin, sinh,
    sqrt, sub, sub_scalar, tan, tanh, trunc,
};
pub(crate) use index::{
    embedding, gather, gather_nd, mask_fill, mask_where, scatter_add, scatter_nd, select,
    select_add, slice, slice_assign,
};
pub(crate) use layout::{expand, flip, permute, repeat_dim, reshape, swap_dims, unfold};
pub(crate) use matmul::{linear, matmul};
pub(crate) use other::{cross, ctc_loss, interpolate, sort, sort_with_indices, to_device};
pub(crate) use pool::{
    adaptive_avg_pool1d, adaptive_avg_pool2d, avg_pool1d, avg_pool2d, max_pool1d,
    max_pool1d_with_indices, max_pool2d, max_pool2d_with_indices,
};
pub(crate) use reduce::{
    max_dim, max_dim_with_indices, mean, mean_dim, min_dim, min_dim_with_indices, sum, sum_dim,
};
