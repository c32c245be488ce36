//! `forward_ops!`: the bodies of the decorator's backend-trait methods, generated from their
//! signatures.
//!
//! Input: one trait impl whose items are signatures (`fn name(args) -> Ret;`), each with at most
//! one routing attribute, or whole methods with a body (copied as they are):
//!
//! ```text
//! forward_ops! {
//!     impl<I: Backend, C: CheckpointStrategy> FloatTensorOps<Self> for Checkpointed<Autodiff<I, C>> {
//!         fn float_zeros(shape: Shape, device: &Device<Self>, dtype: FloatDType) -> FloatTensor<Self>;
//!         #[region(crate::recompute::matmul)] fn float_matmul(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
//!         #[stored] fn ctc_loss(log_probs: FloatTensor<Self>, targets: IntTensor<Self>, input_lengths: IntTensor<Self>, target_lengths: IntTensor<Self>, blank: usize) -> FloatTensor<Self>;
//!     }
//! }
//! ```
//!
//! Routing (the decorated backend `X` is the type argument of `Checkpointed<X>`, the inner backend
//! `I` the first type parameter of the impl):
//! - no attribute: `<X as Trait<X>>::name(args)`, nothing else (ops that build no graph node);
//! - `#[stored]`: region outputs among the float operands are materialised first; inside a region
//!   with a tracked operand the op is counted as a fallback (Burn stores its output);
//! - `#[region(path)]`: inside a region, `path(args)` builds the op as a recomputed node.
//!
//! Next to the impl the macro emits `pub(crate) const OPS: &[crate::coverage::OpEntry]`, one entry
//! per listed method, so that the crate can report and test its coverage.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::parse::{Parse, ParseStream};
use syn::{
    FnArg, GenericArgument, GenericParam, Generics, Ident, Pat, Path, PathArguments, Token,
    TraitItemFn, Type, braced,
};

struct Input {
    generics: Generics,
    trait_path: Path,
    self_ty: Type,
    items: Vec<TraitItemFn>,
}

impl Parse for Input {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        input.parse::<Token![impl]>()?;
        let generics: Generics = input.parse()?;
        let trait_path: Path = input.parse()?;
        input.parse::<Token![for]>()?;
        let self_ty: Type = input.parse()?;
        let content;
        braced!(content in input);
        let mut items = Vec::new();
        while !content.is_empty() {
            items.push(content.parse()?);
        }
        Ok(Input {
            generics,
            trait_path,
            self_ty,
            items,
        })
    }
}

enum Routing {
    Plain,
    Stored,
    Region(Path),
    Custom,
}

enum ArgKind {
    Float,
    OptionFloat,
    VecFloat,
    Other,
}

struct Arg {
    name: Ident,
    kind: ArgKind,
}

pub fn expand(input: TokenStream) -> syn::Result<TokenStream> {
    let Input {
        generics,
        trait_path,
        self_ty,
        items,
    } = syn::parse2(input)?;

    let decorated = first_type_arg(&self_ty).ok_or_else(|| {
        syn::Error::new_spanned(&self_ty, "expected `Checkpointed<DecoratedBackend>`")
    })?;
    let inner = generics
        .params
        .iter()
        .find_map(|p| match p {
            GenericParam::Type(t) => Some(t.ident.clone()),
            _ => None,
        })
        .ok_or_else(|| {
            syn::Error::new_spanned(&generics, "expected the inner backend parameter")
        })?;
    let trait_ident = &trait_path
        .segments
        .last()
        .ok_or_else(|| syn::Error::new_spanned(&trait_path, "expected a trait"))?
        .ident;
    let target = quote!(<#decorated as #trait_ident<#decorated>>);
    let trait_name = trait_ident.to_string();

    let mut methods = Vec::new();
    let mut entries = Vec::new();
    for mut item in items {
        let routing = take_routing(&mut item)?;
        let sig = &item.sig;
        let name = &sig.ident;
        let name_str = name.to_string();
        let attrs = &item.attrs;
        let args = args_of(sig)?;
        let arg_names: Vec<_> = args.iter().map(|a| &a.name).collect();
        let call_args = quote!(#(#arg_names),*);
        let forward = if sig.asyncness.is_some() {
            quote!(#target::#name(#call_args).await)
        } else {
            quote!(#target::#name(#call_args))
        };

        let boundaries = args.iter().map(|a| {
            let n = &a.name;
            match a.kind {
                ArgKind::Float => quote!(let #n = __route.boundary::<#inner>(#n);),
                ArgKind::OptionFloat => quote!(let #n = #n.map(|t| __route.boundary::<#inner>(t));),
                ArgKind::VecFloat => quote! {
                    let #n = #n.into_iter().map(|t| __route.boundary::<#inner>(t)).collect::<::std::vec::Vec<_>>();
                },
                ArgKind::Other => quote!(),
            }
        });
        let boundaries = quote!(let __route = crate::region::route(); #(#boundaries)*);
        let tracked: Vec<_> = args
            .iter()
            .filter_map(|a| {
                let n = &a.name;
                match a.kind {
                    ArgKind::Float => Some(quote!(#n.is_tracked())),
                    ArgKind::OptionFloat => {
                        Some(quote!(#n.as_ref().is_some_and(|t| t.is_tracked())))
                    }
                    ArgKind::VecFloat => Some(quote!(#n.iter().any(|t| t.is_tracked()))),
                    ArgKind::Other => None,
                }
            })
            .collect();
        let any_tracked = if tracked.is_empty() {
            quote!(false)
        } else {
            quote!(#(#tracked)||*)
        };

        let (body, kind) = match routing {
            Routing::Plain => (quote!(#forward), quote!(Plain)),
            Routing::Custom => {
                let block = item.default.as_ref().expect("custom methods have a body");
                (quote!(#block), quote!(Custom))
            }
            Routing::Stored => (
                quote! {
                    #boundaries
                    if __route.in_region() && (#any_tracked) {
                        crate::coverage::note_fallback(#name_str);
                    }
                    #forward
                },
                quote!(Stored),
            ),
            Routing::Region(path) => {
                let record = record_output(
                    &sig.output,
                    &inner,
                    &name_str,
                    quote!(#path::<#inner>(#call_args)),
                )?;
                (
                    quote! {
                        #boundaries
                        if let Some(__region) = __route.region() {
                            if #any_tracked {
                                return #record;
                            }
                        }
                        #forward
                    },
                    quote!(Region),
                )
            }
        };
        methods.push(quote! {
            #(#attrs)*
            #sig {
                #body
            }
        });
        entries.push(quote! {
            crate::coverage::OpEntry {
                family: #trait_name,
                name: #name_str,
                routing: crate::coverage::Routing::#kind,
            }
        });
    }

    let (impl_generics, _, where_clause) = generics.split_for_impl();
    let ops_const = format_ident!("OPS");
    Ok(quote! {
        impl #impl_generics #trait_path for #self_ty #where_clause {
            #(#methods)*
        }

        /// Every method this file lists, with how the decorator routes it inside a region.
        pub(crate) const #ops_const: &[crate::coverage::OpEntry] = &[#(#entries),*];
    })
}

/// Records the float output(s) of `call` as produced by the current region.
fn record_output(
    output: &syn::ReturnType,
    inner: &Ident,
    name: &str,
    call: TokenStream,
) -> syn::Result<TokenStream> {
    let ty = match output {
        syn::ReturnType::Type(_, ty) => &**ty,
        syn::ReturnType::Default => return Ok(call),
    };
    match ty {
        Type::Tuple(tuple) if matches!(tuple.elems.first().map(kind_of), Some(ArgKind::Float)) => {
            Ok(quote! {{
                let (__output, __rest) = #call;
                (__region.record::<#inner>(#name, __output), __rest)
            }})
        }
        _ => match kind_of(ty) {
            ArgKind::Float => Ok(quote!(__region.record::<#inner>(#name, #call))),
            _ => Err(syn::Error::new_spanned(
                ty,
                "a routed op returns a float tensor, or a tuple that starts with one",
            )),
        },
    }
}

fn take_routing(item: &mut TraitItemFn) -> syn::Result<Routing> {
    let mut routing = None;
    let mut kept = Vec::new();
    for attr in item.attrs.drain(..) {
        let r = if attr.path().is_ident("stored") {
            Some(Routing::Stored)
        } else if attr.path().is_ident("region") {
            Some(Routing::Region(attr.parse_args::<Path>()?))
        } else {
            None
        };
        match r {
            Some(_) if routing.is_some() => {
                return Err(syn::Error::new_spanned(
                    attr,
                    "one routing attribute per method",
                ));
            }
            Some(r) => routing = Some(r),
            None => kept.push(attr),
        }
    }
    item.attrs = kept;
    match (routing, &item.default) {
        (Some(_), Some(block)) => Err(syn::Error::new_spanned(
            block,
            "a method with a body is copied as it is: drop the routing attribute",
        )),
        (None, Some(_)) => Ok(Routing::Custom),
        (r, None) => Ok(r.unwrap_or(Routing::Plain)),
    }
}

fn args_of(sig: &syn::Signature) -> syn::Result<Vec<Arg>> {
    sig.inputs
        .iter()
        .map(|arg| match arg {
            FnArg::Typed(pat) => {
                let name = match &*pat.pat {
                    Pat::Ident(ident) => ident.ident.clone(),
                    other => {
                        return Err(syn::Error::new_spanned(
                            other,
                            "expected a plain argument name",
                        ));
                    }
                };
                Ok(Arg {
                    name,
                    kind: kind_of(&pat.ty),
                })
            }
            FnArg::Receiver(r) => Err(syn::Error::new_spanned(r, "backend ops take no receiver")),
        })
        .collect()
}

fn kind_of(ty: &Type) -> ArgKind {
    let Some(last) = last_segment(ty) else {
        return ArgKind::Other;
    };
    if last.ident == "FloatTensor" {
        return ArgKind::Float;
    }
    let wrapped_float = || {
        first_type_arg(ty)
            .and_then(|inner| last_segment(&inner).map(|s| s.ident == "FloatTensor"))
            .unwrap_or(false)
    };
    if last.ident == "Option" && wrapped_float() {
        ArgKind::OptionFloat
    } else if last.ident == "Vec" && wrapped_float() {
        ArgKind::VecFloat
    } else {
        ArgKind::Other
    }
}

fn last_segment(ty: &Type) -> Option<syn::PathSegment> {
    match ty {
        Type::Path(p) => p.path.segments.last().cloned(),
        _ => None,
    }
}

fn first_type_arg(ty: &Type) -> Option<Type> {
    match &last_segment(ty)?.arguments {
        PathArguments::AngleBracketed(args) => args.args.iter().find_map(|a| match a {
            GenericArgument::Type(t) => Some(t.clone()),
            _ => None,
        }),
        _ => None,
    }
}
