//! What a region keeps between forward and backward: [`Policy`], the same word as the crate for
//! Burn 0.21's, with the two policies Burn 0.22 lets a crate run.

/// What a region keeps between forward and backward.
///
/// A crate cannot see the ops of a region's body on Burn 0.22 (its dispatch is a closed enum), so
/// there is no per-op predicate here (the crate for Burn 0.21 has `Policy::Custom`). What makes
/// [`SaveComputeBound`](Policy::SaveComputeBound) possible is Burn's own checkpointing strategy:
/// a tag each autodiff tensor carries, which says what autodiff keeps for the ops it takes part
/// in.
///
/// ```
/// use burn::nn::{Linear, LinearConfig};
/// use burn::tensor::{Device, Tensor, activation::relu};
/// use burn_checkpoint_22::{Policy, Region};
///
/// let device = Device::flex().autodiff();
/// let linear: Linear = LinearConfig::new(16, 16).init(&device);
/// let x = Tensor::<2>::ones([8, 16], &device).require_grad();
///
/// // The matmul's output is kept; the activations after it are recomputed in backward.
/// let y = Region::named("mlp")
///     .policy(Policy::SaveComputeBound)
///     .run(&linear, x.clone(), |linear, x| relu(linear.forward(x)).tanh());
/// let grads = y.sum().backward();
/// assert!(linear.weight.val().grad(&grads).is_some());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Policy {
    /// Everything the body computes is recomputed during backward; only the region's inputs are
    /// held (its output is held while what uses it needs it). `torch.utils.checkpoint`'s
    /// semantics, and the default.
    #[default]
    RecomputeAll,
    /// The body runs as Burn's own ops under Burn's Balanced checkpointing (what
    /// `gradient_checkpointing()` turns on for a whole model), inside this region only: what Burn
    /// marks compute-bound (matmul, convolution, pooling, batch norm's fused op, attention) is
    /// kept, what it marks memory-bound (elementwise ops, activations) is recomputed from it
    /// when backward needs it. A region nested in it with [`Policy::RecomputeAll`] counts as one
    /// memory-bound op: its output too is recomputed where backward needs it, not kept. The
    /// body runs once in forward and is not run again: it draws its random numbers as the same
    /// code without the region does.
    ///
    /// Its inputs and its module's tensors (running statistics included) carry Burn's Balanced
    /// tag while the body runs; a tracked tensor the body captures instead still carries the
    /// caller's, which Burn refuses ("strategy mismatch"): the region then stops with a message
    /// naming it. Not with [`Region::offloaded`](crate::Region::offloaded): nothing of its is
    /// stored for a recompute.
    SaveComputeBound,
}
