//! Region versions of Burn's float ops: every op that builds a graph node inside a region runs
//! as one of these, so that nothing it computes is held from forward to backward.
//!
//! An op is a small struct implementing [`RegionOp`] (one file per op family): its forward and
//! backward on the inner backend, and which inputs the backward reads. [`build`] (in `base`)
//! does the graph plumbing and the recompute walk, the same way for every op.

mod activation;
mod base;
mod cast;
mod check;
mod conv;
mod cross;
mod cumulative;
mod deform_conv;
mod elementwise;
mod indexing;
mod interpolate;
mod layout;
mod loss;
mod matmul;
mod pool;
mod reduce;
mod select;
mod slice;
mod sort;
mod transfer;
mod unary;
mod unfold;

pub(crate) use activation::{gelu, log_sigmoid, relu, sigmoid};
pub(crate) use cast::cast;
pub use check::verify_recomputes;
pub(crate) use conv::{
    conv_transpose1d, conv_transpose2d, conv_transpose3d, conv1d, conv2d, conv3d,
};
pub(crate) use cross::cross;
pub(crate) use cumulative::{cummax, cummin, cumprod, cumsum};
pub(crate) use deform_conv::deform_conv2d;
pub(crate) use elementwise::{add, atan2, div, mul, powf, remainder, sub};
pub(crate) use indexing::{embedding, gather_nd, scatter_add, scatter_nd};
pub(crate) use interpolate::interpolate;
pub(crate) use layout::{
    expand, flip, permute, repeat_dim, reshape, select, select_add, slice, swap_dims,
};
pub(crate) use loss::ctc_loss;
pub(crate) use matmul::{linear, matmul};
pub(crate) use pool::{
    adaptive_avg_pool1d, adaptive_avg_pool2d, avg_pool1d, avg_pool2d, max_pool1d,
    max_pool1d_with_indices, max_pool2d, max_pool2d_with_indices,
};
pub(crate) use reduce::{
    max_dim, max_dim_with_indices, mean, mean_dim, min_dim, min_dim_with_indices, sum, sum_dim,
};
pub(crate) use select::{cat, gather, mask_fill, mask_where};
pub(crate) use slice::slice_assign;
pub(crate) use sort::{sort, sort_with_indices};
pub(crate) use transfer::to_device;
pub(crate) use unary::{
    abs, acos, acosh, add_scalar, asin, asinh, atan, atanh, ceil, cos, cosh, div_scalar, erf, exp,
    floor, log, log1p, mul_scalar, neg, powf_scalar_impl, recip, remainder_scalar, round, sign,
    sin, sinh, sqrt, sub_scalar, tan, tanh, trunc,
};
pub(crate) use unfold::unfold;

pub(crate) use base::{RegionOp, build, build_with, materialize, unbroadcast};
