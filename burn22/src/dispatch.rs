//! Routing a region to the backend its tensors live on.
//!
//! Burn 0.22's tensors are dispatch tensors: a closed enum over the backends built in, with an
//! autodiff context. A region on tensors without autodiff is its body; on autodiff tensors it
//! becomes a graph node of `Autodiff<B, C>` (`graph/`) for the backend `B` and the checkpoint
//! strategy `C` the tensors carry. Burn's `#[backend_extension]` macro would generate this
//! routing, but it takes no `Vec` of tensors, and a region has any number.

use burn::backend::autodiff::checkpoint::strategy::{
    BalancedCheckpointing, CheckpointStrategy, NoCheckpointing,
};
use burn::backend::{
    Autodiff, AutodiffBackend, Backend, DispatchAutodiffContext, DispatchKindConversion,
    DispatchTensor, DispatchTensorKind, GradientCheckpointingStrategy,
};

use crate::convert::{from_dispatch, to_dispatch};
use crate::graph::{self, NodeSpec};

/// The backends a region runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Flex,
    #[cfg(feature = "cubecl")]
    Cube,
}

fn kind_of(kind: &DispatchTensorKind) -> Kind {
    match kind {
        DispatchTensorKind::Autodiff(inner) => kind_of(inner),
        DispatchTensorKind::Flex(_) => Kind::Flex,
        #[cfg(feature = "cubecl")]
        DispatchTensorKind::Cube(_) => Kind::Cube,
        #[allow(unreachable_patterns)]
        other => panic!(
            "checkpoint regions run on the Flex backend{}; this tensor is on {other:?}",
            if cfg!(feature = "cubecl") {
                " and CubeCL"
            } else {
                " (for CubeCL's, turn on burn-checkpoint-22's `wgpu` or `cuda` feature, or \
                 `cubecl` beside Burn features of your own)"
            }
        ),
    }
}

/// Work to do on `Autodiff<B, C>`, once the backend `B` and strategy `C` are known.
trait OnBackend {
    type Output;

    fn on<B: Backend, C: CheckpointStrategy>(self) -> Self::Output
    where
        DispatchTensor: DispatchKindConversion<B> + DispatchKindConversion<Autodiff<B, C>>;
}

/// Runs `task` on the backend of a tensor of `kind` and the checkpointing `strategy` it carries.
fn route<T: OnBackend>(
    kind: &DispatchTensorKind,
    strategy: GradientCheckpointingStrategy,
    task: T,
) -> T::Output {
    use GradientCheckpointingStrategy::{Balanced, Disabled};
    match (kind_of(kind), strategy) {
        (Kind::Flex, Disabled) => task.on::<burn::backend::Flex, NoCheckpointing>(),
        (Kind::Flex, Balanced) => task.on::<burn::backend::Flex, BalancedCheckpointing>(),
        #[cfg(feature = "cubecl")]
        (Kind::Cube, Disabled) => task.on::<burn::backend::Cube, NoCheckpointing>(),
        #[cfg(feature = "cubecl")]
        (Kind::Cube, Balanced) => task.on::<burn::backend::Cube, BalancedCheckpointing>(),
    }
}

/// Puts a region in the graph: `tensors` are its inputs, then its parameters; `outputs` what its
/// forward gave (untracked); `spec` how its backward replays it.
pub(crate) fn run(
    tensors: Vec<DispatchTensor>,
    outputs: Vec<DispatchTensor>,
    spec: NodeSpec,
) -> Vec<DispatchTensor> {
    let mut strategies = tensors.iter().filter_map(|t| match t.autodiff {
        DispatchAutodiffContext::Enabled(strategy) => Some(strategy),
        DispatchAutodiffContext::Disabled => None,
    });
    let Some(strategy) = strategies.next() else {
        // No autodiff: nothing to keep or recompute.
        return outputs;
    };
    assert!(
        strategies.all(|s| s == strategy),
        "a checkpoint region's tensors carry different gradient-checkpointing strategies"
    );
    let kind = tensors[0].kind.clone();
    route(
        &kind,
        strategy,
        Region {
            tensors,
            outputs,
            spec,
        },
    )
}

/// A region's node, to be built.
struct Region {
    tensors: Vec<DispatchTensor>,
    outputs: Vec<DispatchTensor>,
    spec: NodeSpec,
}

impl OnBackend for Region {
    type Output = Vec<DispatchTensor>;

    /// Tensors without autodiff join the region as constants.
    fn on<B: Backend, C: CheckpointStrategy>(self) -> Self::Output
    where
        DispatchTensor: DispatchKindConversion<B> + DispatchKindConversion<Autodiff<B, C>>,
    {
        let tensors = self
            .tensors
            .into_iter()
            .map(|t| match t.autodiff {
                DispatchAutodiffContext::Enabled(_) => from_dispatch::<Autodiff<B, C>>(t),
                DispatchAutodiffContext::Disabled => {
                    Autodiff::<B, C>::from_inner(from_dispatch::<B>(t))
                }
            })
            .collect();
        let outputs = self
            .outputs
            .into_iter()
            .map(|t| match t.autodiff {
                DispatchAutodiffContext::Enabled(_) => {
                    let t = from_dispatch::<Autodiff<B, C>>(t);
                    assert!(
                        !t.is_tracked(),
                        "a checkpoint region used a tracked tensor it was not given (a captured \
                         activation or a parameter outside its module): it would get no \
                         gradient; pass it as an input or put it in the region's module"
                    );
                    t.into_primitive()
                }
                DispatchAutodiffContext::Disabled => from_dispatch::<B>(t),
            })
            .collect();
        graph::autodiff_region::<B, C>(tensors, outputs, self.spec)
            .into_iter()
            .map(to_dispatch::<Autodiff<B, C>>)
            .collect()
    }
}

/// `tensor`, which a kept seeded region gave, through a node that in backward leaves the device's
/// generator seeded with `seed`, as that region's recompute would have (`graph::Reseed`).
pub(crate) fn reseed_in_backward(tensor: DispatchTensor, seed: u64) -> DispatchTensor {
    let DispatchAutodiffContext::Enabled(strategy) = tensor.autodiff else {
        return tensor;
    };
    let kind = tensor.kind.clone();
    route(&kind, strategy, Reseed { tensor, seed })
}

struct Reseed {
    tensor: DispatchTensor,
    seed: u64,
}

impl OnBackend for Reseed {
    type Output = DispatchTensor;

    fn on<B: Backend, C: CheckpointStrategy>(self) -> Self::Output
    where
        DispatchTensor: DispatchKindConversion<B> + DispatchKindConversion<Autodiff<B, C>>,
    {
        let tensor = from_dispatch::<Autodiff<B, C>>(self.tensor);
        to_dispatch::<Autodiff<B, C>>(graph::reseed_in_backward::<B, C>(tensor, self.seed))
    }
}
