//! Regions and Burn's data parallelism: whether they take part in it on the Burn this crate is
//! built on ([`REGIONS_UNDER_DDP`]), and the refusal of a region over distributed tensors where
//! they do not. A leaf.

use burn::backend::{DispatchTensor, DispatchTensorKind};
use burn::tensor::Tensor;
use burn_checkpoint_core::RegionName;

/// Whether regions take part in Burn's data parallelism (burn-train's `ExecutionStrategy::ddp`,
/// which all-reduces each parameter's gradient during backward) on the Burn this crate is built
/// on. `false` on Burn 0.22: there every backward, a region's recompute too, ends with the
/// collective sync, which the sync server takes for a device finishing its step, so a region over
/// distributed parameters (or inputs) panics with what to do instead rather than hang the step.
/// `true` from Burn 0.23, which skips the sync of a backward that registered nothing: regions
/// then train under data parallelism as without (docs/burn-0.22-devices.md, "Data parallelism").
///
/// ```
/// // The strategy a trainer may offer for a model with regions.
/// let strategy = if burn_checkpoint_22::REGIONS_UNDER_DDP {
///     "ddp" // ExecutionStrategy::ddp: an all-reduce per parameter during backward
/// } else {
///     "multi" // ExecutionStrategy::multi: gradients summed on the first device after backward
/// };
/// assert!(matches!(strategy, "ddp" | "multi"));
/// ```
pub const REGIONS_UNDER_DDP: bool = !cfg!(burn_backward_always_syncs);

/// Whether `tensor` is marked for Burn's data parallelism: `ExecutionStrategy::ddp` marks every
/// parameter of a worker's model (`Tensor::set_distributed`) and all-reduces its gradient at its
/// last use in backward.
pub(crate) fn is_distributed(tensor: &DispatchTensor) -> bool {
    // Burn's `is_distributed` panics on a tensor without autodiff.
    matches!(tensor.kind, DispatchTensorKind::Autodiff(_))
        && Tensor::<1>::from_dispatch(tensor.clone()).is_distributed()
}

/// Refuses a region over distributed `inputs` or `params` where regions do not take part in data
/// parallelism. Burn 0.22.1 ends every backward, a recompute's nested one too, with the
/// collective sync; its sync server counts that as a device finishing its step and resets
/// mid-pass, and the step's final sync then waits forever (burn-autodiff-0.22.1 tensor.rs:326).
/// Burn 0.23 skips the sync of a backward that registered nothing (burn-autodiff-0.23.0-pre.1
/// tensor.rs:313-338).
pub(crate) fn refuse_distributed(
    name: &RegionName,
    inputs: &[DispatchTensor],
    params: &[DispatchTensor],
) {
    if REGIONS_UNDER_DDP || !inputs.iter().chain(params).any(is_distributed) {
        return;
    }
    panic!(
        "checkpoint region {name}: its parameters or inputs are distributed (Burn's data \
         parallelism, `ExecutionStrategy::ddp`, all-reduces their gradients), and on Burn 0.22.1 \
         a region's recompute would end its nested backward with the collective sync, which the \
         sync server takes for a device finishing its step: training would hang. Under \
         `ExecutionStrategy::ddp`, run this model without regions; Burn's multi-device strategy \
         without collectives, `ExecutionStrategy::multi`, takes them"
    );
}
