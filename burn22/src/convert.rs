//! The conversions between dispatch tensors and a backend's float tensors. A leaf:
//! `dispatch.rs` (which backend a region runs on) and `graph/` (the region's nodes) both use it.

use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, BackendTensor, DispatchKindConversion, DispatchTensor};

/// A float tensor of backend `X` as a dispatch tensor (with `X = Autodiff<B, C>`: carrying
/// strategy `C`).
pub(crate) fn to_dispatch<X: Backend>(tensor: FloatTensor<X>) -> DispatchTensor
where
    DispatchTensor: DispatchKindConversion<X>,
{
    <DispatchTensor as DispatchKindConversion<X>>::from_backend(BackendTensor::Float(tensor))
}

/// A dispatch tensor as a float tensor of backend `X` (`B`, or `Autodiff<B, C>` for a tensor
/// with autodiff).
pub(crate) fn from_dispatch<X: Backend>(tensor: DispatchTensor) -> FloatTensor<X>
where
    DispatchTensor: DispatchKindConversion<X>,
{
    match <DispatchTensor as DispatchKindConversion<X>>::try_into_backend(tensor) {
        Ok(BackendTensor::Float(t)) => t,
        Ok(_) => panic!("a checkpoint region takes and gives float tensors only"),
        Err(e) => panic!("a checkpoint region's tensor is not on the region's backend: {e}"),
    }
}
