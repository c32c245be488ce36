//! `forward_ops!`: the decorator's backend-trait methods, generated from their signatures.
//!
//! Input: one trait impl whose items are signatures (`fn name(args) -> Ret;`), each with at most
//! one routing attribute, or whole methods with a body:
//!
//! ```text
//! forward_ops! {
//!     impl<I: Backend, C: CheckpointStrategy> FloatTensorOps<Self>
//!         for Checkpointed<Autodiff<I, C>>
//!     {
//!         fn float_zeros(shape: Shape, device: &Device<Self>, dtype: FloatDType)
//!             -> FloatTensor<Self>;
//!         #[region(matmul, Matmul)]
//!         fn float_matmul(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self>;
//!         #[stored(Other, "why")] fn float_op(tensor: FloatTensor<Self>) -> FloatTensor<Self>;
//!         #[by_hand(Plain, Other, "what it does")] fn op(..) -> .. { body }
//!     }
//! }
//! ```
//!
//! The signature line is the op's one source of truth; the macro writes one call per method and
//! one `Op` entry, and the routing protocol itself is ordinary Rust in the crate (`route.rs`):
//! - no attribute: `<X as Trait<X>>::name(args)` (an op that builds no graph node; `X` is the
//!   type argument of `Checkpointed<X>`);
//! - `#[region(f, Kind)]`: `crate::route::region_op` with the region version
//!   `crate::recompute::f::<I>(args)` (`I`, the inner backend, is the impl's first type
//!   parameter) and Burn's own op; `Kind` is the op's `OpKind`;
//! - `#[stored(Kind, "reason")]`: `crate::route::stored_op` with Burn's own op;
//! - `#[by_hand(Routing, Kind, "what it does")]` on a method with a body: the body as it is; it
//!   sees `OP`, the method's `&'static Op`.
//!
//! Next to the impl the macro emits `pub(crate) const OPS: &[crate::op::Op]`, one entry per
//! method, so that the crate can report and test its coverage.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::parse::{Parse, ParseStream};
use syn::{
    FnArg, GenericArgument, GenericParam, Generics, Ident, LitStr, Pat, Path, PathArguments, Token,
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
    Stored {
        kind: Ident,
        reason: LitStr,
    },
    Region {
        function: Ident,
        kind: Ident,
    },
    ByHand {
        routing: Ident,
        kind: Ident,
        note: LitStr,
    },
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
        let forward = if sig.asyncness.is_some() {
            quote!(#target::#name(#(#arg_names),*).await)
        } else {
            quote!(#target::#name(#(#arg_names),*))
        };
        // The float operands and the other arguments, each as a tuple in the signature's order.
        let floats: Vec<_> = args
            .iter()
            .filter_map(|a| {
                let n = &a.name;
                match a.kind {
                    ArgKind::Float => Some(quote!(crate::route::Float(#n))),
                    ArgKind::OptionFloat => Some(quote!(crate::route::OptionalFloat(#n))),
                    ArgKind::VecFloat => Some(quote!(crate::route::Floats(#n))),
                    ArgKind::Other => None,
                }
            })
            .collect();
        let rest: Vec<_> = args
            .iter()
            .filter(|a| matches!(a.kind, ArgKind::Other))
            .map(|a| &a.name)
            .collect();
        let floats = quote!((#(#floats,)*));
        let rest = quote!((#(#rest,)*));

        let (entry_routing, kind, note) = match &routing {
            Routing::Plain => (quote!(Plain), quote!(Other), quote!("")),
            Routing::Stored { kind, reason } => (quote!(Stored), quote!(#kind), quote!(#reason)),
            Routing::Region { kind, .. } => (quote!(Region), quote!(#kind), quote!("")),
            Routing::ByHand {
                routing,
                kind,
                note,
            } => (quote!(#routing), quote!(#kind), quote!(#note)),
        };
        let entry = quote! {
            crate::op::Op::new(
                #trait_name,
                #name_str,
                crate::op::Routing::#entry_routing,
                crate::op::OpKind::#kind,
                #note,
            )
        };
        let body = match routing {
            Routing::Plain => quote!(#forward),
            Routing::ByHand { .. } => {
                let block = item.default.as_ref().expect("by-hand methods have a body");
                quote! {
                    #[allow(unused)]
                    const OP: &crate::op::Op = &#entry;
                    #block
                }
            }
            Routing::Stored { .. } => {
                if sig.asyncness.is_some() {
                    return Err(syn::Error::new_spanned(sig, "a routed op is not async"));
                }
                quote! {
                    const OP: &crate::op::Op = &#entry;
                    crate::route::stored_op::<#inner, _, _, _>(
                        OP, #floats, #rest, |#floats, #rest| #forward,
                    )
                }
            }
            Routing::Region { function, .. } => {
                if sig.asyncness.is_some() {
                    return Err(syn::Error::new_spanned(sig, "a routed op is not async"));
                }
                let route = if returns_pair(&sig.output) {
                    quote!(crate::route::region_op_with::<#inner, _, _, _>)
                } else {
                    quote!(crate::route::region_op::<#inner, _, _>)
                };
                quote! {
                    const OP: &crate::op::Op = &#entry;
                    #route(
                        OP,
                        #floats,
                        #rest,
                        |#floats, #rest| crate::recompute::#function::<#inner>(#(#arg_names),*),
                        |#floats, #rest| #forward,
                    )
                }
            }
        };
        methods.push(quote! {
            #(#attrs)*
            #sig {
                #body
            }
        });
        entries.push(entry);
    }

    let (impl_generics, _, where_clause) = generics.split_for_impl();
    let ops_const = format_ident!("OPS");
    Ok(quote! {
        impl #impl_generics #trait_path for #self_ty #where_clause {
            #(#methods)*
        }

        /// Every method this file lists, with how the decorator routes it inside a region.
        pub(crate) const #ops_const: &[crate::op::Op] = &[#(#entries),*];
    })
}

/// Whether an op returns a tuple (a float tensor and its indices) rather than a float tensor.
fn returns_pair(output: &syn::ReturnType) -> bool {
    matches!(output, syn::ReturnType::Type(_, ty) if matches!(**ty, Type::Tuple(_)))
}

/// `#[region(function, Kind)]`.
struct RegionArgs {
    function: Ident,
    kind: Ident,
}

impl Parse for RegionArgs {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let function = input.parse()?;
        input.parse::<Token![,]>()?;
        let kind = input.parse()?;
        Ok(RegionArgs { function, kind })
    }
}

/// `#[stored(Kind, "reason")]`.
struct StoredArgs {
    kind: Ident,
    reason: LitStr,
}

impl Parse for StoredArgs {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let kind = input.parse()?;
        input.parse::<Token![,]>()?;
        let reason = input.parse()?;
        Ok(StoredArgs { kind, reason })
    }
}

/// `#[by_hand(Routing, Kind, "what it does")]`.
struct ByHandArgs {
    routing: Ident,
    kind: Ident,
    note: LitStr,
}

impl Parse for ByHandArgs {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let routing = input.parse()?;
        input.parse::<Token![,]>()?;
        let kind = input.parse()?;
        input.parse::<Token![,]>()?;
        let note = input.parse()?;
        Ok(ByHandArgs {
            routing,
            kind,
            note,
        })
    }
}

fn take_routing(item: &mut TraitItemFn) -> syn::Result<Routing> {
    let mut routing = None;
    let mut kept = Vec::new();
    for attr in item.attrs.drain(..) {
        let r = if attr.path().is_ident("stored") {
            let StoredArgs { kind, reason } = attr.parse_args()?;
            Some(Routing::Stored { kind, reason })
        } else if attr.path().is_ident("region") {
            let RegionArgs { function, kind } = attr.parse_args()?;
            Some(Routing::Region { function, kind })
        } else if attr.path().is_ident("by_hand") {
            let ByHandArgs {
                routing,
                kind,
                note,
            } = attr.parse_args()?;
            Some(Routing::ByHand {
                routing,
                kind,
                note,
            })
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
        (Some(r @ Routing::ByHand { .. }), Some(_)) => Ok(r),
        (_, Some(block)) => Err(syn::Error::new_spanned(
            block,
            "a method with a body says what it does: `#[by_hand(Routing, Kind, \"what it does\")]`",
        )),
        (Some(Routing::ByHand { .. }), None) => Err(syn::Error::new_spanned(
            &item.sig,
            "`#[by_hand]` goes on a method with a body",
        )),
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
