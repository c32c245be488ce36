//! `#[checkpoint]`: wraps a function body in a region guard.

use proc_macro2::TokenStream;
use quote::quote;
use syn::parse::{Parse, ParseStream};
use syn::{Expr, FnArg, GenericArgument, ItemFn, PathArguments, Token, Type};

/// The attribute's arguments, each optional, in any order: `name = "..."`, `policy = <expression>`.
struct Args {
    name: Option<syn::LitStr>,
    policy: Option<Expr>,
}

impl Parse for Args {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut args = Args {
            name: None,
            policy: None,
        };
        while !input.is_empty() {
            let key: syn::Ident = input.parse()?;
            input.parse::<Token![=]>()?;
            if key == "name" && args.name.is_none() {
                args.name = Some(input.parse()?);
            } else if key == "policy" && args.policy.is_none() {
                args.policy = Some(input.parse()?);
            } else {
                return Err(syn::Error::new_spanned(
                    key,
                    "#[checkpoint] takes `name = \"...\"` and `policy = <expression>`, each once, \
                     e.g. #[checkpoint(name = \"attention\", policy = Policy::SaveComputeBound)]",
                ));
            }
            if !input.is_empty() {
                input.parse::<Token![,]>()?;
            }
        }
        Ok(args)
    }
}

pub fn expand(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let Args { name, policy } = syn::parse2(attr)?;
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

    // The region's name: given, else `Type::method` for a method (made once, kept in a static),
    // else `module::function`.
    let function = sig.ident.to_string();
    let name = match name {
        Some(name) => quote!(#name),
        None if matches!(sig.inputs.first(), Some(FnArg::Receiver(_))) => quote! {{
            static NAME: ::std::sync::OnceLock<&'static str> = ::std::sync::OnceLock::new();
            *NAME.get_or_init(|| ::burn_checkpoint::__private::method_region_name::<Self>(#function))
        }},
        None => quote!(::core::concat!(::core::module_path!(), "::", #function)),
    };
    // Naming the backend lets a region on a backend that is not `Checkpointed` say which one.
    let guard = match backend_of(&sig) {
        Some(backend) => {
            quote!(::burn_checkpoint::__private::enter_on::<#backend>(#policy, #name))
        }
        None => quote!(::burn_checkpoint::enter_named(#name, #policy)),
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
