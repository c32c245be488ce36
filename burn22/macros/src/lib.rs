//! The `#[checkpoint]` attribute of [`burn-checkpoint-22`]: use it through that crate, which
//! re-exports it.

use proc_macro::TokenStream;
use proc_macro2::{Ident, Span, TokenStream as TokenStream2, TokenTree};
use quote::{ToTokens, quote};
use syn::{FnArg, GenericArgument, ImplItemFn, PathArguments, ReturnType, Type};

/// Makes a module's method a checkpoint region: `self` is the region's module, the method's
/// float-tensor arguments (`Tensor<D>`, a `Vec` or a tuple of them) are its inputs, and what it
/// returns are its outputs. Other arguments are captured by value (they must be
/// `Clone + Send + Sync + 'static`) and cloned for each run.
///
/// The body is `burn_checkpoint_22::checkpoint(self, (inputs…), |self, (inputs…)| body)`: see
/// that function for what a region keeps and recomputes.
///
/// The region is named `Type::method` (the type without generic arguments), as the memory report
/// and plans call it; arguments, each optional: `name = "..."` names it otherwise, `offload`
/// keeps its inputs in host memory until backward (`Region::offloaded`):
/// `#[checkpoint(name = "attention", offload)]`.
///
/// ```ignore
/// #[derive(Module, Debug)]
/// struct Block { up: Linear, down: Linear }
///
/// impl Block {
///     #[checkpoint]
///     fn forward(&self, x: Tensor<2>) -> Tensor<2> {
///         self.down.forward(gelu(self.up.forward(x)))
///     }
/// }
/// ```
#[proc_macro_attribute]
pub fn checkpoint(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand(attr.into(), item.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// The attribute's arguments, each optional, in any order: `name = "..."`, `offload`.
#[derive(Default)]
struct Args {
    name: Option<syn::LitStr>,
    offload: bool,
}

impl syn::parse::Parse for Args {
    fn parse(input: syn::parse::ParseStream) -> syn::Result<Self> {
        let mut args = Args::default();
        while !input.is_empty() {
            let key: Ident = input.parse()?;
            if key == "name" && args.name.is_none() {
                input.parse::<syn::Token![=]>()?;
                args.name = Some(input.parse()?);
            } else if key == "offload" && !args.offload {
                args.offload = true;
            } else {
                return Err(syn::Error::new_spanned(
                    key,
                    "#[checkpoint] takes `name = \"...\"` and `offload`, each once, e.g. \
                     #[checkpoint(name = \"attention\", offload)]; on Burn 0.22 a region \
                     recomputes its whole body (no policy)",
                ));
            }
            if !input.is_empty() {
                input.parse::<syn::Token![,]>()?;
            }
        }
        Ok(args)
    }
}

fn expand(attr: TokenStream2, item: TokenStream2) -> syn::Result<TokenStream2> {
    let Args { name, offload } = syn::parse2(attr)?;
    let mut method: ImplItemFn = syn::parse2(item)?;
    let signature = &method.sig;
    match signature.inputs.first() {
        Some(FnArg::Receiver(receiver))
            if receiver.reference.is_some() && receiver.mutability.is_none() => {}
        _ => {
            return Err(syn::Error::new_spanned(
                signature,
                "#[checkpoint] goes on a method taking `&self`: `self` is the region's module",
            ));
        }
    }
    let output = match &signature.output {
        ReturnType::Type(_, ty) => ty.clone(),
        ReturnType::Default => {
            return Err(syn::Error::new_spanned(
                signature,
                "a checkpoint region must return tensors",
            ));
        }
    };
    // Each argument is bound to a generated name in the signature; the closure binds the user's
    // pattern (`x`, `mut x`, `(a, b)`) to it.
    let (mut inputs, mut input_patterns, mut input_types) = (Vec::new(), Vec::new(), Vec::new());
    let (mut captures, mut capture_patterns) = (Vec::new(), Vec::new());
    for (index, argument) in method.sig.inputs.iter_mut().skip(1).enumerate() {
        let FnArg::Typed(typed) = argument else {
            unreachable!("only the first argument can be a receiver")
        };
        let name = Ident::new(&format!("__checkpoint_arg{index}"), Span::call_site());
        let pattern = std::mem::replace(typed.pat.as_mut(), syn::parse_quote!(#name));
        if is_region_tensors(&typed.ty) {
            inputs.push(name);
            input_patterns.push(pattern);
            input_types.push(typed.ty.as_ref().clone());
        } else {
            captures.push(name);
            capture_patterns.push(pattern);
        }
    }
    if inputs.is_empty() {
        return Err(syn::Error::new_spanned(
            &method.sig,
            "a checkpoint region needs a float tensor argument (`Tensor<D>`, a `Vec` or a tuple of them)",
        ));
    }
    let body = rename_self(method.block.to_token_stream());
    let this = Ident::new("__checkpoint_self", Span::call_site());
    // Given, else `Type::method` (made once, kept in a static).
    let function = method.sig.ident.to_string();
    let name = match name {
        Some(name) => quote!(#name),
        None => quote! {{
            static NAME: ::std::sync::OnceLock<&'static str> = ::std::sync::OnceLock::new();
            *NAME.get_or_init(|| ::burn_checkpoint_22::__private::method_region_name::<Self>(#function))
        }},
    };
    method.block = syn::parse2(quote! {{
        ::burn_checkpoint_22::Region::named(#name).offloaded_if(#offload).run(
            self,
            (#(#inputs,)*),
            move |#this: &Self, (#(#input_patterns,)*): (#(#input_types,)*)| -> #output {
                #(let #capture_patterns = ::core::clone::Clone::clone(&#captures);)*
                #body
            },
        )
    }})?;
    Ok(method.into_token_stream())
}

/// Whether a type is a region's tensors: a float `Tensor<D>` (or `Tensor<D, Float>`), or a
/// `Vec` or tuple of such types.
fn is_region_tensors(ty: &Type) -> bool {
    match ty {
        Type::Paren(inner) => is_region_tensors(&inner.elem),
        Type::Tuple(tuple) => !tuple.elems.is_empty() && tuple.elems.iter().all(is_region_tensors),
        Type::Path(path) => {
            let Some(last) = path.path.segments.last() else {
                return false;
            };
            let PathArguments::AngleBracketed(arguments) = &last.arguments else {
                return false;
            };
            let arguments: Vec<_> = arguments.args.iter().collect();
            match (last.ident.to_string().as_str(), arguments.as_slice()) {
                ("Tensor", [_rank]) => true,
                ("Tensor", [_rank, GenericArgument::Type(Type::Path(kind))]) => {
                    kind.path.is_ident("Float")
                }
                ("Vec", [GenericArgument::Type(item)]) => is_region_tensors(item),
                _ => false,
            }
        }
        _ => false,
    }
}

/// The body with `self` (the value, not a `self::` path) renamed, for the closure.
fn rename_self(tokens: TokenStream2) -> TokenStream2 {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut out = Vec::with_capacity(tokens.len());
    for (index, token) in tokens.iter().enumerate() {
        match token {
            TokenTree::Ident(ident) if ident == "self" && !starts_path(&tokens[index + 1..]) => {
                out.push(TokenTree::Ident(Ident::new(
                    "__checkpoint_self",
                    ident.span(),
                )));
            }
            TokenTree::Group(group) => {
                let mut renamed =
                    proc_macro2::Group::new(group.delimiter(), rename_self(group.stream()));
                renamed.set_span(group.span());
                out.push(TokenTree::Group(renamed));
            }
            other => out.push(other.clone()),
        }
    }
    out.into_iter().collect()
}

fn starts_path(rest: &[TokenTree]) -> bool {
    matches!(rest, [TokenTree::Punct(a), TokenTree::Punct(b), ..] if a.as_char() == ':' && b.as_char() == ':')
}
