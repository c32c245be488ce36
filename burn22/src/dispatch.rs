//! Routing a region to the backend its tensors live on.
//!
//! Burn 0.22's tensors are dispatch tensors: a closed enum over the backends built in, with an
//! autodiff context. A region on tensors without autodiff is its body; on autodiff tensors it
//! becomes a graph node of `Autodiff<B, C>` (`graph.rs`) for the backend `B` and the checkpoint
//! strategy `C` the tensors carry. Burn's `#[backend_extension]` macro would generate this
//! routing, but it takes no `Vec` of tensors, and a region has any number.

use burn::backend::autodiff::checkpoint::strategy::{
    BalancedCheckpointing, CheckpointStrategy, NoCheckpointing,
};
use burn::backend::{
    Autodiff, AutodiffBackend, Backend, DispatchAutodiffContext, DispatchKindConversion,
    DispatchTensor, DispatchTensorKind, GradientCheckpointingStrategy,
};

use crate::body::{Body, Pass, from_dispatch, to_dispatch};
use crate::graph::{self, NodeSpec};

/// The backends a region runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Flex,
    #[cfg(any(feature = "cuda", feature = "wgpu"))]
    Cube,
}

fn kind_of(kind: &DispatchTensorKind) -> Kind {
    match kind {
        DispatchTensorKind::Autodiff(inner) => kind_of(inner),
        DispatchTensorKind::Flex(_) => Kind::Flex,
        #[cfg(any(feature = "cuda", feature = "wgpu"))]
        DispatchTensorKind::Cube(_) => Kind::Cube,
        #[allow(unreachable_patterns)]
        other => panic!(
            "checkpoint regions run on the Flex backend{}; this tensor is on {other:?}",
            if cfg!(any(feature = "cuda", feature = "wgpu")) {
                " and CubeCL"
            } else {
                ""
            }
        ),
    }
}

/// Runs a region: `tensors` are its inputs, then its parameters.
pub(crate) fn run(tensors: Vec<DispatchTensor>, body: Body, spec: NodeSpec) -> Vec<DispatchTensor> {
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
        (Kind::Flex, Disabled) => on::<burn::backend::Flex, NoCheckpointing>(tensors, body, spec),
        (Kind::Flex, Balanced) => {
            on::<burn::backend::Flex, BalancedCheckpointing>(tensors, body, spec)
        }
        #[cfg(any(feature = "cuda", feature = "wgpu"))]
        (Kind::Cube, Disabled) => on::<burn::backend::Cube, NoCheckpointing>(tensors, body, spec),
        #[cfg(any(feature = "cuda", feature = "wgpu"))]
        (Kind::Cube, Balanced) => {
            on::<burn::backend::Cube, BalancedCheckpointing>(tensors, body, spec)
        }
    }
}

/// A region on `Autodiff<B, C>`: tensors without autodiff join it as constants.
fn on<B: Backend, C: CheckpointStrategy>(
    tensors: Vec<DispatchTensor>,
    body: Body,
    spec: NodeSpec,
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
    graph::autodiff_region::<B, C>(tensors, body, spec)
        .into_iter()
        .map(to_dispatch::<Autodiff<B, C>>)
        .collect()
}
