//! `#[checkpoint]`: wraps a function body in a region guard.

use proc_macro2::TokenStream;
use quote::quote;
use syn::parse::{Parse, ParseStream};
use syn::{Expr, FnArg, GenericArgument, ItemFn, PathArguments, Token, Type};

/// The attribute's arguments, each optional, in any order: `name = "..."`,
/// `policy = <expression>`, `offload`.
struct Args {
    name: Option<syn::LitStr>,
    policy: Option<Expr>,
    offload: bool,
}

impl Parse for Args {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut args = Args {
            name: None,
            policy: None,
            offload: false,
        };
        while !input.is_empty() {
            let key: syn::Ident = input.parse()?;
            if key == "name" && args.name.is_none() {
                input.parse::<Token![=]>()?;
                args.name = Some(input.parse()?);
            } else if key == "policy" && args.policy.is_none() {
                input.parse::<Token![=]>()?;
                args.policy = Some(input.parse()?);
            } else if key == "offload" && !args.offload {
                args.offload = true;
            } else {
                return Err(syn::Error::new_spanned(
                    key,
                    "#[checkpoint] takes `name = \"...\"`, `policy = <expression>` and `offload`, \
                     each once, e.g. #[checkpoint(name = \"attention\", policy = \
                     Policy::SaveComputeBound, offload)]",
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
    let Args {
        name,
        policy,
        offload,
    } = syn::parse2(attr)?;
    let policy = policy.map(|policy| quote!(.policy(#policy)));
    let offload = offload.then(|| quote!(.offloaded()));
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
    if let Some(asyncness) = sig.asyncness {
        return Err(syn::Error::new_spanned(
            asyncness,
            "#[checkpoint] cannot go on an `async fn`: a region is open on one thread, and an \
             `.await` may move the task to another; open the region inside, around the tensor \
             work: `Region::new().run(|| ..)`",
        ));
    }
    let region = quote!(::burn_checkpoint::Region::named(#name) #policy #offload);
    // Naming the backend lets a region on a backend that is not `Checkpointed` say which one.
    let guard = match backend_of(&sig) {
        Some(backend) => quote!(#region.enter_on::<#backend>()),
        None => quote!(#region.enter()),
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
