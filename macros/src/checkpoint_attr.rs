//! `#[checkpoint]`: wraps a function body in a region guard.

use proc_macro2::TokenStream;
use quote::quote;
use syn::{FnArg, GenericArgument, ItemFn, PathArguments, Type};

pub fn expand(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    if !attr.is_empty() {
        return Err(syn::Error::new_spanned(
            attr,
            "#[checkpoint] takes no arguments",
        ));
    }
    let ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = syn::parse2::<ItemFn>(item)?;

    // Naming the backend lets a region on a backend that is not `Checkpointed` say which one.
    let guard = match backend_of(&sig) {
        Some(backend) => quote!(::burn_checkpoint::__private::enter_on::<#backend>()),
        None => quote!(::burn_checkpoint::__private::enter()),
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
