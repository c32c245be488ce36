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
/// `#[checkpoint(policy = <expression>)]` chooses the region's `burn_checkpoint::Policy` (the
/// default is `Policy::RecomputeAll`); the expression is evaluated each time the function runs.
///
/// The region is named (`burn_checkpoint::RegionName`) after the method, `path::Type::method`
/// without generic arguments, or the function, `module::function`; `#[checkpoint(name = "..")]`
/// names it otherwise. Both arguments can be given, in any order.
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
