//! [`OpKind::Index`](crate::OpKind::Index): gathers, scatters, selections, slices, masks and
//! the embedding op.

mod embedding;
mod gather;
mod mask;
mod scatter;
mod select;
mod slice;

pub(crate) use embedding::embedding;
pub(crate) use gather::{gather, gather_nd};
pub(crate) use mask::{mask_fill, mask_where};
pub(crate) use scatter::{scatter_add, scatter_nd};
pub(crate) use select::{select, select_add};
pub(crate) use slice::{slice, slice_assign};
