//! [`OpKind::Other`](crate::OpKind::Other): the cross product, interpolation, losses, sorting
//! and device transfer.

mod cross;
mod interpolate;
mod loss;
mod sort;
mod transfer;

pub(crate) use cross::cross;
pub(crate) use interpolate::interpolate;
pub(crate) use loss::ctc_loss;
pub(crate) use sort::{sort, sort_with_indices};
pub(crate) use transfer::to_device;
