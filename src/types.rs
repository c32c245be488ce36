//! The tensor types every layer of the crate speaks of: Burn's autodiff tensor and the inner
//! backend's tensors, under short names. A leaf: it imports nothing of the crate.

use burn_autodiff::Autodiff;
use burn_backend::backend::BackendTypes;

/// Plain autodiff over `I` (its tensors are the same type as every `Autodiff<I, _>`'s).
pub(crate) type Plain<I> = Autodiff<I>;
/// Burn's autodiff tensor over `I` (its type sits in a private module of burn-autodiff).
pub(crate) type Tracked<I> = <Plain<I> as BackendTypes>::FloatTensorPrimitive;
/// The inner backend's float tensor.
pub(crate) type Primitive<I> = <I as BackendTypes>::FloatTensorPrimitive;
/// The inner backend's int tensor.
pub(crate) type IntPrimitive<I> = <I as BackendTypes>::IntTensorPrimitive;
/// The inner backend's bool tensor.
pub(crate) type BoolPrimitive<I> = <I as BackendTypes>::BoolTensorPrimitive;
