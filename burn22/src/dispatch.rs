//! Routing a region to the backend its tensors live on.
//!
//! Burn 0.22's tensors are dispatch tensors: a closed enum over the backends built in, with an
//! autodiff context. A region on tensors without autodiff is its body; on autodiff tensors it
//! becomes a graph node of `Autodiff<B, C>` (region.rs) for the backend `B` and the checkpoint
//! strategy `C` the tensors carry. Burn's `#[backend_extension]` macro would generate this
//! routing, but it takes no `Vec` of tensors, and a region has any number.

use std::fmt;
use std::sync::Arc;

use burn::backend::autodiff::checkpoint::strategy::{
    BalancedCheckpointing, CheckpointStrategy, NoCheckpointing,
};
use burn::backend::tensor::FloatTensor;
use burn::backend::{
    Autodiff, AutodiffBackend, Backend, BackendTensor, DispatchAutodiffContext,
    DispatchKindConversion, DispatchTensor, DispatchTensorKind, GradientCheckpointingStrategy,
};

use crate::graph;

/// Which run of a region's body this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// The forward pass: the body's side effects (running statistics) take place.
    Forward,
    /// The recompute in backward: same values, no side effect may happen twice.
    Recompute,
}

/// A region's body on dispatch tensors: the region's inputs, then its parameters, in, its
/// outputs out. Type-erased so that one graph node type serves every region.
#[derive(Clone)]
pub struct Body(pub Arc<dyn Fn(Vec<DispatchTensor>, Pass) -> Vec<DispatchTensor> + Send + Sync>);

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Body")
    }
}

/// The backends a region runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Flex,
    #[cfg(feature = "cuda")]
    Cube,
}

fn kind_of(kind: &DispatchTensorKind) -> Kind {
    match kind {
        DispatchTensorKind::Autodiff(inner) => kind_of(inner),
        DispatchTensorKind::Flex(_) => Kind::Flex,
        #[cfg(feature = "cuda")]
        DispatchTensorKind::Cube(_) => Kind::Cube,
        #[allow(unreachable_patterns)]
        other => panic!(
            "checkpoint regions run on the Flex backend{}; this tensor is on {other:?}",
            if cfg!(feature = "cuda") {
                " and CubeCL"
            } else {
                ""
            }
        ),
    }
}

/// Runs a region: `tensors` are its inputs, then its parameters.
pub(crate) fn run(tensors: Vec<DispatchTensor>, body: Body) -> Vec<DispatchTensor> {
    let mut strategies = tensors.iter().filter_map(|t| match t.autodiff {
        DispatchAutodiffContext::Enabled(strategy) => Some(strategy),
        DispatchAutodiffContext::Disabled => None,
    });
    let Some(strategy) = strategies.next() else {
        // No autodiff: nothing to keep or recompute.
        return (body.0)(tensors, Pass::Forward);
    };
    assert!(
        strategies.all(|s| s == strategy),
        "a checkpoint region's tensors carry different gradient-checkpointing strategies"
    );
    let kind = kind_of(&tensors[0].kind);
    use GradientCheckpointingStrategy::{Balanced, Disabled};
    match (kind, strategy) {
        (Kind::Flex, Disabled) => on::<burn::backend::Flex, NoCheckpointing>(tensors, body),
        (Kind::Flex, Balanced) => on::<burn::backend::Flex, BalancedCheckpointing>(tensors, body),
        #[cfg(feature = "cuda")]
        (Kind::Cube, Disabled) => on::<burn::backend::Cube, NoCheckpointing>(tensors, body),
        #[cfg(feature = "cuda")]
        (Kind::Cube, Balanced) => on::<burn::backend::Cube, BalancedCheckpointing>(tensors, body),
    }
}

/// A region on `Autodiff<B, C>`: tensors without autodiff join it as constants.
fn on<B: Backend, C: CheckpointStrategy>(
    tensors: Vec<DispatchTensor>,
    body: Body,
) -> Vec<DispatchTensor>
where
    DispatchTensor: DispatchKindConversion<B> + DispatchKindConversion<Autodiff<B, C>>,
{
    let tensors = tensors
        .into_iter()
        .map(|t| match t.autodiff {
            DispatchAutodiffContext::Enabled(_) => from_dispatch::<Autodiff<B, C>>(t),
            DispatchAutodiffContext::Disabled => {
                Autodiff::<B, C>::from_inner(from_dispatch::<B>(t))
            }
        })
        .collect();
    graph::autodiff_region::<B, C>(tensors, body)
        .into_iter()
        .map(to_dispatch::<Autodiff<B, C>>)
        .collect()
}

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
