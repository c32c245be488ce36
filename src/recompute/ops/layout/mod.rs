//! [`OpKind::Layout`](crate::OpKind::Layout): reshapes and moves of the same values.

mod reshape;
mod unfold;

pub(crate) use reshape::{expand, flip, permute, repeat_dim, reshape, swap_dims};
pub(crate) use unfold::unfold;
