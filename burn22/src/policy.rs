//! What a region keeps between forward and backward: [`Policy`], the same word as the crate for
//! Burn 0.21's, with the policies Burn 0.22 lets a crate run.

use burn_checkpoint_core::KeptRegions;

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
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
    /// Everything the region itself runs is recomputed, as with [`Policy::RecomputeAll`], except
    /// the work of the regions opened in its body (at any depth) whose names match (see
    /// [`Policy::recompute_all_but`]): such a region runs its body once, in forward, with
    /// autodiff, and that run is held until backward differentiates it; the recompute takes its
    /// outputs from it rather than running it again.
    RecomputeAllBut(KeptRegions),
}

impl Policy {
    /// Recomputes everything but the regions opened in the body whose names match one of
    /// `patterns` (`*` stands for any run of characters): what a region keeps is chosen by name,
    /// outside the code of what it nests (torch_remat's SAVE regions, torchtitan's
    /// `save_regions`).
    ///
    /// A kept region's own nested regions run as their code says (tracked, so a recomputed one
    /// among them is a region node of its own). A kept region that draws random numbers (it is
    /// seeded) leaves the device's generator seeded after its body, in forward and where the
    /// recompute takes its outputs, so that what the enclosing body draws next is the same in
    /// both.
    ///
    /// ```
    /// use burn::tensor::{Device, Tensor};
    /// use burn_checkpoint_22::{Policy, Region};
    ///
    /// let device = Device::flex().autodiff();
    /// let x = Tensor::<2>::ones([8, 16], &device).require_grad();
    /// let w = Tensor::<2>::ones([16, 16], &device).require_grad();
    ///
    /// let block = Region::named("block").policy(Policy::recompute_all_but(["attention.*"]));
    /// let y = block.run_fn((x.clone(), w.clone()), |(x, w)| {
    ///     // Held from forward to backward: not run again.
    ///     let q = Region::named("attention.qkv").run_fn((x, w), |(x, w)| x.matmul(w));
    ///     // Recomputed in backward, as the rest of the block.
    ///     q.tanh().exp()
    /// });
    /// let grads = y.sum().backward();
    /// assert!(w.grad(&grads).is_some());
    /// ```
    pub fn recompute_all_but<S: Into<String>>(patterns: impl IntoIterator<Item = S>) -> Self {
        Policy::RecomputeAllBut(KeptRegions::new(patterns))
    }

    /// The names this policy keeps, if it keeps any.
    pub(crate) fn kept(&self) -> Option<&KeptRegions> {
        match self {
            Policy::RecomputeAllBut(kept) => Some(kept),
            _ => None,
        }
    }
}
