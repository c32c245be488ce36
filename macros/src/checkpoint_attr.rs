//! `#[checkpoint]`: wraps a function body in a region guard.

use proc_macro2::TokenStream;
use quote::quote;
use syn::parse::{Parse, ParseStream};
use syn::{Expr, FnArg, GenericArgument, ItemFn, PathArguments, Token, Type};

/// The attribute's arguments: nothing, or `policy = <expression>`.
struct Args {
    policy: Option<Expr>,
}

impl Parse for Args {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if input.is_empty() {
            return Ok(Args { policy: None });
        }
        let key: syn::Ident = input.parse()?;
        if key != "policy" {
            return Err(syn::Error::new_spanned(
                key,
                "expected `policy = <expression>`, e.g. #[checkpoint(policy = Policy::SaveComputeBound)]",
            ));
        }
        input.parse::<Token![=]>()?;
        let policy = input.parse()?;
        if !input.is_empty() {
            return Err(input.error("#[checkpoint] takes one argument: `policy = <expression>`"));
        }
        Ok(Args {
            policy: Some(policy),
        })
    }
}

pub fn expand(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let Args { policy } = syn::parse2(attr)?;
    let policy = match policy {
        Some(policy) => quote!(#policy),
        None => quote!(::burn_checkpoint::Policy::RecomputeAll),
    };
    let ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = syn::parse2::<ItemFn>(item)?;

    // Naming the backend lets a region on a backend that is not `Checkpointed` say which one.
    let guard = match backend_of(&sig) {
        Some(backend) => quote!(::burn_checkpoint::__private::enter_on::<#backend>(#policy)),
        None => quote!(::burn_checkpoint::enter_with(#policy)),
    };
    Ok(quote! {
        #(#attrs)*
        #vis #sig {
            let __burn_checkpoint_region = #guard;
            #block
        }
    })
}

/// The backend type `B` of the first argument typed `Tensor<B, ..>` (or a reference to one).
fn backend_of(sig: &syn::Signature) -> Option<Type> {
    sig.inputs.iter().find_map(|arg| match arg {
        FnArg::Typed(pat) => tensor_backend(&pat.ty),
        FnArg::Receiver(_) => None,
    })
}

fn tensor_backend(ty: &Type) -> Option<Type> {
    match ty {
        Type::Reference(r) => tensor_backend(&r.elem),
        Type::Path(path) => {
            let last = path.path.segments.last()?;
            if last.ident != "Tensor" {
                return None;
            }
            match &last.arguments {
                PathArguments::AngleBracketed(args) => match args.args.first()? {
                    GenericArgument::Type(backend) => Some(backend.clone()),
                    _ => None,
                },
                _ => None,
            }
        }
        _ => None,
    }
}
