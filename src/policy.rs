//! Checkpoint policies: which of the ops a region runs are recomputed during backward and which
//! keep their output.
//!
//! A policy is chosen per region ([`checkpoint_with`](crate::checkpoint_with),
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

/// Which ops of a region are recomputed during backward.
///
/// ```
/// use burn::backend::{Autodiff, NdArray};
/// use burn::tensor::{Tensor, activation::relu};
/// use burn_checkpoint::{Checkpointed, Decision, OpKind, Policy, checkpoint_with};
///
/// type B = Checkpointed<Autodiff<NdArray>>;
/// let device = Default::default();
/// let x = Tensor::<B, 2>::ones([8, 16], &device).require_grad();
/// let w = Tensor::<B, 2>::ones([16, 16], &device).require_grad();
///
/// // Keep the matmul output, recompute the ReLU (JAX's `dots_saveable`).
/// let y = checkpoint_with(Policy::SaveComputeBound, || relu(x.clone().matmul(w.clone())));
///
/// // The same choice as a predicate, here also keeping any output under 1 KiB.
/// let keep_small_and_dots = Policy::custom(|op| match op.kind() {
///     OpKind::Matmul => Decision::Save,
///     _ if op.bytes() < 1024 => Decision::Save,
///     _ => Decision::Recompute,
/// });
/// let z = checkpoint_with(keep_small_and_dots, || relu(x.clone().matmul(w.clone())));
///
/// let grads = (y + z).sum().backward();
/// assert!(w.grad(&grads).is_some());
/// ```
#[derive(Clone, Default)]
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
}

impl Policy {
    /// A policy that asks `predicate` about each op a region runs.
    ///
    /// ```
    /// use burn_checkpoint::{Decision, OpKind, Policy};
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

    /// What this policy decides for `op`.
    ///
    /// ```
    /// use burn::tensor::{DType, Shape};
    /// use burn_checkpoint::{Decision, OpInfo, Policy};
    ///
    /// let shape = Shape::new([32, 64]);
    /// let op = OpInfo::new("float_matmul", &shape, DType::F32);
    /// assert_eq!(Policy::SaveComputeBound.decide(&op), Decision::Save);
    /// assert_eq!(Policy::RecomputeAll.decide(&op), Decision::Recompute);
    /// ```
    pub fn decide(&self, op: &OpInfo<'_>) -> Decision {
        match self {
            Policy::RecomputeAll => Decision::Recompute,
            Policy::SaveComputeBound => match op.kind() {
                OpKind::Matmul | OpKind::Conv | OpKind::Pool => Decision::Save,
                _ => Decision::Recompute,
            },
            Policy::Custom(predicate) => (predicate.0)(op),
        }
    }

    /// Whether the policy recomputes every op whatever it is (lets the decorator skip asking).
    pub(crate) fn recomputes_all(&self) -> bool {
        matches!(self, Policy::RecomputeAll)
    }
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::RecomputeAll => f.write_str("RecomputeAll"),
            Policy::SaveComputeBound => f.write_str("SaveComputeBound"),
            Policy::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// The predicate of a [`Policy::Custom`]; made by [`Policy::custom`].
#[derive(Clone)]
pub struct SavePredicate(Arc<dyn Fn(&OpInfo<'_>) -> Decision + Send + Sync>);

/// What a policy decides for one op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Decision {
    /// Keep the op's output from forward to backward.
    Save,
    /// Drop it after forward and recompute it when backward needs it.
    Recompute,
}

/// The op a policy is asked about: what it is and what it produced.
#[derive(Clone, Copy, Debug)]
pub struct OpInfo<'a> {
    name: &'static str,
    shape: &'a Shape,
    dtype: DType,
}

impl<'a> OpInfo<'a> {
    /// Describes the op Burn names `name` (a method of its backend traits, as listed by
    /// [`coverage::ops`](crate::coverage::ops)) whose output has `shape` and `dtype`.
    pub fn new(name: &'static str, shape: &'a Shape, dtype: DType) -> Self {
        OpInfo { name, shape, dtype }
    }

    /// The op as Burn's backend traits name it: `float_matmul`, `conv2d`, `relu`, ...
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The family the op belongs to.
    pub fn kind(&self) -> OpKind {
        OpKind::of(self.name)
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

/// Families of ops, for policies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OpKind {
    /// Matrix products: `float_matmul`, `linear`.
    Matmul,
    /// Convolutions of every dimension, their transposes, deformable convolution.
    Conv,
    /// Pooling of every kind.
    Pool,
    /// Reductions over all or one dimension: sum, mean, max, min (with or without indices).
    Reduce,
    /// Cumulative ops: cumsum, cumprod, cummin, cummax.
    Scan,
    /// Indexing: gather, scatter, select, slice and their assigns, masks, embedding.
    Index,
    /// Concatenation (`float_cat`).
    Concat,
    /// Reshapes and moves of the same values: reshape, permute, swap dims, flip, expand, repeat,
    /// unfold.
    Layout,
    /// Elementwise arithmetic and functions, activations, casts.
    Elementwise,
    /// Anything else: sort, cross product, interpolation, losses, device transfer.
    Other,
}

impl OpKind {
    /// The family of the op Burn names `name`.
    ///
    /// ```
    /// use burn_checkpoint::OpKind;
    ///
    /// assert_eq!(OpKind::of("conv2d"), OpKind::Conv);
    /// assert_eq!(OpKind::of("float_exp"), OpKind::Elementwise);
    /// ```
    pub fn of(name: &str) -> OpKind {
        let op = name.strip_prefix("float_").unwrap_or(name);
        match op {
            "matmul" | "linear" => OpKind::Matmul,
            _ if op.starts_with("conv") || op.starts_with("deform_conv") => OpKind::Conv,
            _ if op.contains("pool") => OpKind::Pool,
            "sum"
            | "sum_dim"
            | "mean"
            | "mean_dim"
            | "prod"
            | "prod_dim"
            | "max"
            | "max_dim"
            | "max_dim_with_indices"
            | "min"
            | "min_dim"
            | "min_dim_with_indices"
            | "max_abs"
            | "max_abs_dim" => OpKind::Reduce,
            "cumsum" | "cumprod" | "cummin" | "cummax" => OpKind::Scan,
            "gather" | "scatter_add" | "scatter_nd" | "gather_nd" | "select" | "select_add"
            | "slice" | "slice_assign" | "mask_where" | "mask_fill" | "embedding" => OpKind::Index,
            "cat" => OpKind::Concat,
            "reshape" | "permute" | "swap_dims" | "flip" | "expand" | "repeat_dim" | "unfold" => {
                OpKind::Layout
            }
            "add" | "add_scalar" | "sub" | "sub_scalar" | "mul" | "mul_scalar" | "div"
            | "div_scalar" | "remainder" | "remainder_scalar" | "neg" | "recip" | "exp" | "log"
            | "log1p" | "powf" | "powf_scalar_impl" | "sqrt" | "abs" | "cos" | "sin" | "tan"
            | "cosh" | "sinh" | "tanh" | "acos" | "acosh" | "asin" | "asinh" | "atan" | "atanh"
            | "atan2" | "round" | "floor" | "ceil" | "trunc" | "erf" | "sign" | "cast" | "relu"
            | "gelu" | "sigmoid" | "log_sigmoid" => OpKind::Elementwise,
            _ => OpKind::Other,
        }
    }
}
