//! Checkpoint policies: which of the ops a region runs are recomputed during backward and which
//! keep their output.
//!
//! A policy is chosen per region ([`Region::policy`](crate::Region::policy),
//! `#[checkpoint(policy = ..)]`); in nested regions the innermost one's policy decides for the
//! ops it runs. The decision is made per op, after the op has run, from what [`OpInfo`] tells:
//! the op's name and [`OpKind`], and its output's shape and dtype.
//!
//! A kept output is stored the way Burn stores the output of any compute-bound op (an identity
//! node in the graph, no copy); the op itself is then never recomputed, since its backward reads
//! only its inputs.

use std::fmt;
use std::sync::Arc;

use burn_backend::{DType, Shape};
use burn_checkpoint_core::{KeptRegions, RegionName};

use crate::op::{Op, OpKind};

/// Which ops of a region are recomputed during backward.
///
/// ```
/// use burn::backend::{Autodiff, NdArray};
/// use burn::tensor::{Tensor, activation::relu};
/// use burn_checkpoint::{Checkpointed, Decision, OpKind, Policy, Region};
///
/// type B = Checkpointed<Autodiff<NdArray>>;
/// let device = Default::default();
/// let x = Tensor::<B, 2>::ones([8, 16], &device).require_grad();
/// let w = Tensor::<B, 2>::ones([16, 16], &device).require_grad();
///
/// // Keep the matmul output, recompute the ReLU (JAX's `dots_saveable`).
/// let region = Region::new().policy(Policy::SaveComputeBound);
/// let y = region.run(|| relu(x.clone().matmul(w.clone())));
///
/// // The same choice as a predicate, here also keeping any output under 1 KiB.
/// let keep_small_and_dots = Policy::custom(|op| match op.kind() {
///     OpKind::Matmul => Decision::Save,
///     _ if op.bytes() < 1024 => Decision::Save,
///     _ => Decision::Recompute,
/// });
/// let z = Region::new().policy(keep_small_and_dots).run(|| relu(x.clone().matmul(w.clone())));
///
/// let grads = (y + z).sum().backward();
/// assert!(w.grad(&grads).is_some());
/// ```
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum Policy {
    /// Everything computed inside the region is recomputed during backward; only what the region
    /// returns is stored. `torch.utils.checkpoint`'s semantics, and the default.
    #[default]
    RecomputeAll,
    /// Keep the outputs of the expensive ops, [`OpKind::Matmul`], [`OpKind::Conv`] and
    /// [`OpKind::Pool`]; recompute the cheap ones (elementwise arithmetic, activations,
    /// normalisation arithmetic and its reductions, reshapes, concatenation, indexing). The
    /// "memory-efficient DenseNet" trade: much less memory than storing everything, for little
    /// extra time.
    SaveComputeBound,
    /// Ask a predicate, op by op (see [`Policy::custom`]).
    Custom(SavePredicate),
    /// Everything the region itself runs is recomputed, as with [`Policy::RecomputeAll`], except
    /// the work of the regions nested in it whose names match (see
    /// [`Policy::recompute_all_but`]): the ops those run are Burn's own, held as plain autodiff
    /// holds them, so backward recomputes none of them.
    RecomputeAllBut(KeptRegions),
}

impl Policy {
    /// A policy that asks `predicate` about each op a region runs.
    ///
    /// ```
    /// use burn_checkpoint::{Decision, OpKind, Policy, Region};
    ///
    /// // Keep only convolution outputs.
    /// let policy = Policy::custom(|op| match op.kind() {
    ///     OpKind::Conv => Decision::Save,
    ///     _ => Decision::Recompute,
    /// });
    /// ```
    pub fn custom(predicate: impl Fn(&OpInfo<'_>) -> Decision + Send + Sync + 'static) -> Self {
        Policy::Custom(SavePredicate(Arc::new(predicate)))
    }

    /// Recomputes everything but the nested regions whose names match one of `patterns` (`*`
    /// stands for any run of characters): what a region keeps is chosen by name, outside the
    /// code of what it nests (torch_remat's SAVE regions).
    ///
    /// ```
    /// use burn::backend::{Autodiff, NdArray};
    /// use burn::tensor::Tensor;
    /// use burn_checkpoint::{Checkpointed, Policy, Region};
    ///
    /// type B = Checkpointed<Autodiff<NdArray>>;
    /// let device = Default::default();
    /// let x = Tensor::<B, 2>::ones([8, 16], &device).require_grad();
    /// let w = Tensor::<B, 2>::ones([16, 16], &device).require_grad();
    ///
    /// let block = Region::named("block").policy(Policy::recompute_all_but(["attention.*"]));
    /// let y = block.run(|| {
    ///     // Kept from forward to backward: not recomputed.
    ///     let q = Region::named("attention.qkv").run(|| x.clone().matmul(w.clone()));
    ///     // Recomputed in backward, as the rest of the block.
    ///     Region::named("mlp").run(|| q.tanh().exp())
    /// });
    /// let grads = y.sum().backward();
    /// assert!(w.grad(&grads).is_some());
    /// ```
    pub fn recompute_all_but<S: Into<String>>(patterns: impl IntoIterator<Item = S>) -> Self {
        Policy::RecomputeAllBut(KeptRegions::new(patterns))
    }

    /// What this policy decides for `op`.
    ///
    /// ```
    /// use burn::tensor::{DType, Shape};
    /// use burn_checkpoint::{Decision, OpInfo, Policy, coverage, Region};
    ///
    /// let shape = Shape::new([32, 64]);
    /// let op = OpInfo::new(coverage::op("float_matmul").unwrap(), &shape, DType::F32);
    /// assert_eq!(Policy::SaveComputeBound.decide(&op), Decision::Save);
    /// assert_eq!(Policy::RecomputeAll.decide(&op), Decision::Recompute);
    /// ```
    pub fn decide(&self, op: &OpInfo<'_>) -> Decision {
        match self {
            Policy::RecomputeAll | Policy::RecomputeAllBut(_) => Decision::Recompute,
            Policy::SaveComputeBound => match op.kind() {
                OpKind::Matmul | OpKind::Conv | OpKind::Pool => Decision::Save,
                _ => Decision::Recompute,
            },
            Policy::Custom(predicate) => (predicate.0)(op),
        }
    }

    /// Whether the policy recomputes every op whatever it is (lets the decorator skip asking).
    pub(crate) fn recomputes_all(&self) -> bool {
        matches!(self, Policy::RecomputeAll | Policy::RecomputeAllBut(_))
    }

    /// Whether a region called `name`, nested in a region of this policy, keeps its work.
    pub(crate) fn keeps(&self, name: &RegionName) -> bool {
        matches!(self, Policy::RecomputeAllBut(kept) if kept.keeps(name))
    }
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::RecomputeAll => f.write_str("RecomputeAll"),
            Policy::SaveComputeBound => f.write_str("SaveComputeBound"),
            Policy::Custom(_) => f.write_str("Custom(..)"),
            Policy::RecomputeAllBut(kept) => write!(f, "RecomputeAllBut({kept:?})"),
        }
    }
}

/// The predicate of a [`Policy::Custom`]; made by [`Policy::custom`].
#[derive(Clone)]
pub struct SavePredicate(Arc<dyn Fn(&OpInfo<'_>) -> Decision + Send + Sync>);

/// What a policy decides for one op.
///
/// ```
/// use burn::backend::{Autodiff, NdArray};
/// use burn::tensor::{Tensor, activation::relu};
/// use burn_checkpoint::memory::OffloadedBytes;
/// use burn_checkpoint::{Checkpointed, Decision, OpKind, Policy, Region};
///
/// type B = Checkpointed<Autodiff<NdArray>>;
/// let device = Default::default();
/// let w = Tensor::<B, 2>::ones([16, 16], &device).require_grad();
/// let x = Tensor::<B, 2>::ones([8, 16], &device).require_grad();
///
/// // Keep the matmul output in host memory, recompute the ReLU from it.
/// let offload_dots = Policy::custom(|op| match op.kind() {
///     OpKind::Matmul => Decision::Offload,
///     _ => Decision::Recompute,
/// });
/// let y = Region::new().policy(offload_dots).run(|| relu(relu(x.clone().matmul(w.clone()))));
/// assert!(OffloadedBytes::now().in_use >= 8 * 16 * 4);
/// let grads = y.sum().backward();
/// assert!(w.grad(&grads).is_some());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Decision {
    /// Keep the op's output from forward to backward.
    Save,
    /// Drop it after forward and recompute it when backward needs it.
    Recompute,
    /// Keep it, in host memory (JAX's `save_and_offload_only_these_names`): copied to the host
    /// when an op of the region first stores it, copied back when backward reads it (see
    /// [`Region::offloaded`](crate::Region::offloaded) for a whole region).
    Offload,
}

/// The op a policy is asked about: what it is and what it produced.
#[derive(Clone, Copy, Debug)]
pub struct OpInfo<'a> {
    op: &'static Op,
    shape: &'a Shape,
    dtype: DType,
}

impl<'a> OpInfo<'a> {
    /// Describes a run of `op` (see [`coverage::op`](crate::coverage::op)) whose output has
    /// `shape` and `dtype`: how a policy can be tried out of a region.
    pub fn new(op: &'static Op, shape: &'a Shape, dtype: DType) -> Self {
        OpInfo { op, shape, dtype }
    }

    /// The op as Burn's backend traits name it: `float_matmul`, `conv2d`, `relu`, ...
    pub fn name(&self) -> &'static str {
        self.op.name()
    }

    /// The family the op belongs to.
    pub fn kind(&self) -> OpKind {
        self.op.kind()
    }

    /// The shape of the op's output.
    pub fn shape(&self) -> &'a Shape {
        self.shape
    }

    /// The dtype of the op's output.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The size of the op's output in bytes.
    pub fn bytes(&self) -> usize {
        self.shape.num_elements() * self.dtype.size()
    }
}
