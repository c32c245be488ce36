//! Procedural macros of [`burn-checkpoint`](https://docs.rs/burn-checkpoint).
//!
//! Use them through `burn_checkpoint`, which re-exports [`macro@checkpoint`]; this crate is an
//! implementation detail.

use proc_macro::TokenStream;

mod checkpoint_attr;
mod forward_ops;

/// Makes a function or method a checkpoint region.
///
/// Every tensor operation the body runs on a `burn_checkpoint::Checkpointed` backend is recomputed
/// during backward instead of being held between forward and backward. The body is wrapped in an
/// RAII guard, so the region ends on every exit path (`return`, `?`, a panic).
///
/// ```ignore
/// use burn::prelude::*;
/// use burn_checkpoint::checkpoint;
///
/// impl<B: Backend> Block<B> {
///     #[checkpoint]
///     pub fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
///         self.linear2.forward(burn::tensor::activation::relu(self.linear1.forward(x)))
///     }
/// }
/// ```
///
/// The body runs inside `Region::named(name).policy(policy).offloaded().enter()` (see
/// `burn_checkpoint::Region`), each part given by an argument, all optional, in any order:
///
/// - `name = ".."`: the region's name; by default the method's, `path::Type::method` without
///   generic arguments, or the function's, `module::function`.
/// - `policy = <expression>`: the region's `burn_checkpoint::Policy` (`Policy::RecomputeAll`
///   unless given), evaluated each time the function runs.
/// - `offload`: what the region stores for backward waits in host memory
///   (`Region::offloaded`).
///
/// `#[checkpoint(name = "attention", policy = Policy::SaveComputeBound, offload)]`. An
/// `async fn` is refused: a region is open on one thread, and an `.await` may move the task.
#[proc_macro_attribute]
pub fn checkpoint(attr: TokenStream, item: TokenStream) -> TokenStream {
    checkpoint_attr::expand(attr.into(), item.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Internal: generates the decorator's forwarding and routing methods from signature lists.
#[doc(hidden)]
#[proc_macro]
pub fn forward_ops(input: TokenStream) -> TokenStream {
    forward_ops::expand(input.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
