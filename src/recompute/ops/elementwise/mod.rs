//! [`OpKind::Elementwise`](crate::OpKind::Elementwise): arithmetic of two tensors, functions of
//! one (and of one with a scalar), activations, casts.

mod activation;
mod binary;
mod cast;
mod unary;

pub(crate) use activation::{gelu, log_sigmoid, relu, sigmoid};
pub(crate) use binary::{add, atan2, div, mul, powf, remainder, sub};
pub(crate) use cast::cast;
pub(crate) use unary::{
    abs, acos, acosh, add_scalar, asin, asinh, atan, atanh, ceil, cos, cosh, div_scalar, erf, exp,
    floor, log, log1p, mul_scalar, neg, powf_scalar_impl, recip, remainder_scalar, round, sign,
    sin, sinh, sqrt, sub_scalar, tan, tanh, trunc,
};
