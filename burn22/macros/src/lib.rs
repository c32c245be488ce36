//! The `#[checkpoint]` attribute and `#[derive(RegionTensors)]` of `burn-checkpoint-22`: use
//! them through that crate, which re-exports them.

use proc_macro::TokenStream;
use proc_macro2::{Ident, Span, TokenStream as TokenStream2, TokenTree};
use quote::{ToTokens, quote};
use syn::{FnArg, GenericArgument, ImplItemFn, PathArguments, ReturnType, Type};

mod region_tensors;

/// Makes a module's method a checkpoint region: `self` is the region's module, the method's
/// float-tensor arguments are its inputs, and what it returns are its outputs.
///
/// What the method may take:
/// - inputs, which get their gradients: `Tensor<D>` (or `Tensor<D, Float>`), `&Tensor<D>`,
///   burn-nn's `LstmState`, `RnnState` and `MhaOutput`, an `Option`, a `Vec` or a tuple of them
///   (an optional bias, a list of features), and an argument of a type deriving `RegionTensors`
///   that `inputs(..)` names (the attribute reads types by name: it cannot tell a struct of
///   tensors from a config otherwise);
/// - captures, for everything else: a value (a config, an `Int` or `Bool` tensor, a mask, a
///   `usize`) is cloned for each run of the body; a reference `&T` or `Option<&T>` (a shared
///   `&RotaryEncoding`, a `&[usize]`) is captured as an owned clone (`ToOwned`: a Burn module's
///   clone shares its parameters) and lent to the body again. Captured types must be
///   `Send + Sync + 'static` once owned; a captured float tensor that requires grad is refused
///   at run time (it would get no gradient);
/// - generic parameters, and any return of tensors (a tuple, a `Vec`, an `Option`).
///
/// Refused at compile time, with what to write instead: `&mut self` or `self` by value, a
/// `&mut` argument (backward runs the body twice), an `async fn`, and a method without a float
/// tensor input.
///
/// The body becomes `Region::named("Type::method").run(self, (inputs…), |self, (inputs…)| body)`
/// (with `.policy(..)`, `.offloaded()`, `.seeded()` as the arguments say): see `Region::run` for
/// what a region keeps and recomputes. Named after the method, not after the call site as the
/// function `checkpoint` names a region.
///
/// The region is named `Type::method` (the type without generic arguments), as the memory report
/// and plans call it; arguments, each optional: `name = "..."` names it otherwise, `policy =
/// <expression>` says what it keeps (`Region::policy`: `Policy::RecomputeAll`, the default, or
/// `Policy::SaveComputeBound`), `offload`
/// keeps its inputs in host memory until backward (`Region::offloaded`), `seeded` gives its body
/// a seed of its own for random draws the region cannot see (`Region::seeded`: a
/// `Tensor::random` in the body, a dropout captured by reference rather than held by `self`),
/// `inputs(state, ..)` makes those arguments inputs:
/// `#[checkpoint(name = "attention", offload, seeded)]`, `#[checkpoint(inputs(carry))]`.
///
/// ```ignore
/// #[derive(Module, Debug)]
/// struct Block { up: Linear, down: Linear }
///
/// impl Block {
///     #[checkpoint]
///     fn forward(&self, x: Tensor<2>, rope: &Rope, bias: Option<Tensor<1>>) -> Tensor<2> {
///         self.down.forward(gelu(self.up.forward(rope.apply(x))))
///     }
/// }
/// ```
///
/// (`ignore`: a proc-macro crate cannot run its own attribute; `burn_checkpoint_22`'s docs and
/// `tests/it/attribute.rs` run it.)
#[proc_macro_attribute]
pub fn checkpoint(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand(attr.into(), item.into())
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Implements `RegionTensors` for a struct whose fields are region tensors (a `Tensor<D>`, an
/// `Option`, a `Vec` or a tuple of them, or another struct deriving it), so that a state of the
/// user's own crosses a region and a `#[checkpoint]` method takes and returns it. Its tensors
/// are the fields', in field order; named and tuple fields, generic parameters.
///
/// Refused at compile time, with what to write instead: an enum, a union, a struct without
/// fields. A field whose type is not a region tensor is the compiler's usual unmet bound
/// (`Tensor<D, Int>`: capture it in the body instead).
///
/// ```ignore
/// #[derive(RegionTensors)]
/// struct State {
///     hidden: Tensor<2>,
///     cell: Tensor<2>,
///     attention: Option<Tensor<3>>,
/// }
/// ```
///
/// (`ignore`: a proc-macro crate cannot run its own derive; `burn_checkpoint_22`'s docs and
/// `tests/it/attribute.rs` run it.)
#[proc_macro_derive(RegionTensors)]
pub fn derive_region_tensors(item: TokenStream) -> TokenStream {
    syn::parse::<syn::DeriveInput>(item)
        .and_then(region_tensors::expand)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// The attribute's arguments, each optional, in any order: `name = "..."`, `policy = <expr>`,
/// `offload`, `seeded`.
#[derive(Default)]
struct Args {
    name: Option<syn::LitStr>,
    policy: Option<syn::Expr>,
    offload: bool,
    seeded: bool,
    /// Arguments of types the attribute cannot tell are tensors (a struct deriving
    /// `RegionTensors`): inputs.
    inputs: Vec<Ident>,
}

impl syn::parse::Parse for Args {
    fn parse(input: syn::parse::ParseStream) -> syn::Result<Self> {
        let mut args = Args::default();
        while !input.is_empty() {
            let key: Ident = input.parse()?;
            if key == "name" && args.name.is_none() {
                input.parse::<syn::Token![=]>()?;
                args.name = Some(input.parse()?);
            } else if key == "policy" && args.policy.is_none() {
                input.parse::<syn::Token![=]>()?;
                args.policy = Some(input.parse()?);
            } else if key == "offload" && !args.offload {
                args.offload = true;
            } else if key == "seeded" && !args.seeded {
                args.seeded = true;
            } else if key == "inputs" && args.inputs.is_empty() {
                let names;
                syn::parenthesized!(names in input);
                args.inputs = names
                    .parse_terminated(<Ident as syn::parse::Parse>::parse, syn::Token![,])?
                    .into_iter()
                    .collect();
            } else {
                return Err(syn::Error::new_spanned(
                    key,
                    "#[checkpoint] takes `name = \"...\"`, `policy = <expression>`, `offload`, \
                     `seeded` and `inputs(argument, ..)`, each once, e.g. #[checkpoint(name = \
                     \"attention\", policy = Policy::SaveComputeBound)] or #[checkpoint(offload)]",
                ));
            }
            if !input.is_empty() {
                input.parse::<syn::Token![,]>()?;
            }
        }
        Ok(args)
    }
}

/// How the attribute passes one argument of the method into the region.
enum Pass {
    /// Float tensors: an input of the region, which gets their gradient.
    Input,
    /// A shared reference to a float tensor: an input (a clone of the tensor, which shares its
    /// data), bound to a reference again inside.
    InputByRef,
    /// A shared reference, `&T` (or `Option<&T>`): captured as an owned clone (`ToOwned`),
    /// bound to a reference again inside.
    Ref,
    /// `Option<&T>`: captured as `Option<T::Owned>`.
    OptionRef,
    /// Anything else by value (a config, an int or bool tensor, a mask): captured, cloned for
    /// each run of the body.
    Value,
}

fn expand(attr: TokenStream2, item: TokenStream2) -> syn::Result<TokenStream2> {
    let Args {
        name,
        policy,
        offload,
        seeded,
        inputs: named_inputs,
    } = syn::parse2(attr)?;
    let mut method: ImplItemFn = syn::parse2(item)?;
    let signature = &method.sig;
    if let Some(asyncness) = signature.asyncness {
        return Err(syn::Error::new_spanned(
            asyncness,
            "#[checkpoint] cannot go on an `async fn`: checkpoint the tensor work inside it, \
             with `Region::new().run(..)` or `checkpoint(..)`",
        ));
    }
    match signature.inputs.first() {
        Some(FnArg::Receiver(receiver))
            if receiver.reference.is_some() && receiver.mutability.is_none() => {}
        Some(FnArg::Receiver(receiver)) if receiver.mutability.is_some() => {
            return Err(syn::Error::new_spanned(
                receiver,
                "#[checkpoint] needs `&self`, not `&mut self` or `mut self`: backward runs the \
                 region's body a second time, so it cannot change the module; move the change \
                 out of the region, or checkpoint the tensor work inside with \
                 `checkpoint_fn(inputs, |inputs| ..)`",
            ));
        }
        _ => {
            return Err(syn::Error::new_spanned(
                signature,
                "#[checkpoint] goes on a method taking `&self`: `self` is the region's module \
                 (its parameters get their gradients); for code without a module, use \
                 `checkpoint_fn(inputs, |inputs| ..)`",
            ));
        }
    }
    let output = match &signature.output {
        ReturnType::Type(_, ty) => ty.clone(),
        ReturnType::Default => {
            return Err(syn::Error::new_spanned(
                signature,
                "a checkpoint region must return tensors (a `Tensor<D>`, a `Vec`, an `Option` \
                 or a tuple of them)",
            ));
        }
    };
    // Each argument is bound to a generated name in the signature; the closure binds the user's
    // pattern (`x`, `mut x`, `(a, b)`) to it.
    let (mut inputs, mut input_patterns, mut input_types) = (Vec::new(), Vec::new(), Vec::new());
    let (mut before, mut inside) = (Vec::new(), Vec::new());
    let mut argument_names = Vec::new();
    for (index, argument) in method.sig.inputs.iter_mut().skip(1).enumerate() {
        let FnArg::Typed(typed) = argument else {
            unreachable!("only the first argument can be a receiver")
        };
        if let syn::Pat::Ident(binding) = typed.pat.as_ref() {
            argument_names.push(binding.ident.clone());
        }
        let name = Ident::new(&format!("__checkpoint_arg{index}"), Span::call_site());
        let named_input = match typed.pat.as_ref() {
            syn::Pat::Ident(binding) => named_inputs.contains(&binding.ident),
            _ => false,
        };
        let pattern = std::mem::replace(typed.pat.as_mut(), syn::parse_quote!(#name));
        let ty = typed.ty.as_ref();
        let pass = if named_input { Pass::Input } else { pass(ty)? };
        match pass {
            Pass::Input => {
                inputs.push(quote!(#name));
                input_patterns.push(quote!(#pattern));
                input_types.push(quote!(#ty));
            }
            Pass::InputByRef => {
                let Type::Reference(reference) = ty else {
                    unreachable!("a reference")
                };
                let tensor = &reference.elem;
                inputs.push(quote!(::core::clone::Clone::clone(#name)));
                input_patterns.push(quote!(#name));
                input_types.push(quote!(#tensor));
                inside.push(quote!(let #pattern = &#name;));
            }
            Pass::Ref => {
                let Type::Reference(reference) = ty else {
                    unreachable!("a reference")
                };
                let referent = &reference.elem;
                before.push(quote!(let #name = ::std::borrow::ToOwned::to_owned(#name);));
                inside.push(quote! {
                    let #pattern: &#referent = ::core::borrow::Borrow::borrow(&#name);
                });
            }
            Pass::OptionRef => {
                let referent = option_referent(ty).expect("an Option<&T>");
                before.push(quote! {
                    let #name = ::core::option::Option::map(#name, ::std::borrow::ToOwned::to_owned);
                });
                inside.push(quote! {
                    let #pattern: ::core::option::Option<&#referent> = ::core::option::Option::map(
                        ::core::option::Option::as_ref(&#name),
                        ::core::borrow::Borrow::borrow,
                    );
                });
            }
            Pass::Value => {
                inside.push(quote!(let #pattern = ::core::clone::Clone::clone(&#name);));
            }
        }
    }
    if let Some(unknown) = named_inputs
        .iter()
        .find(|name| !argument_names.contains(name))
    {
        return Err(syn::Error::new_spanned(
            unknown,
            format!(
                "#[checkpoint(inputs(..))] names the method's arguments that are region tensors \
                 of a type the attribute cannot tell by its name (a struct deriving \
                 RegionTensors); the method has no argument `{unknown}` bound to a plain name"
            ),
        ));
    }
    if inputs.is_empty() {
        return Err(syn::Error::new_spanned(
            &method.sig,
            "a checkpoint region needs a float tensor argument, its input: a `Tensor<D>` (or \
             `&Tensor<D>`), an `Option`, a `Vec` or a tuple of them; other arguments are \
             captured, and a region without tensor inputs has nothing to recompute from",
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
    let policy = policy.map(|policy| quote!(.policy(#policy)));
    let offload = offload.then(|| quote!(.offloaded()));
    let seeded = seeded.then(|| quote!(.seeded()));
    method.block = syn::parse2(quote! {{
        #(#before)*
        ::burn_checkpoint_22::Region::named(#name) #policy #offload #seeded .run(
            self,
            (#(#inputs,)*),
            move |#this: &Self, (#(#input_patterns,)*): (#(#input_types,)*)| -> #output {
                #(#inside)*
                #body
            },
        )
    }})?;
    Ok(method.into_token_stream())
}

/// How an argument of type `ty` goes into the region, or the compile error that says what to
/// write instead.
fn pass(ty: &Type) -> syn::Result<Pass> {
    if is_region_tensors(ty) {
        return Ok(Pass::Input);
    }
    match ty {
        Type::Reference(reference) if reference.mutability.is_some() => {
            Err(syn::Error::new_spanned(
                ty,
                "a checkpoint region cannot take a `&mut` argument: backward runs its body a \
                 second time, so a change would happen twice; pass the value (captured as a \
                 clone) or a `&` reference, and return what the region computes",
            ))
        }
        Type::Reference(reference) if is_float_tensor(&reference.elem) => Ok(Pass::InputByRef),
        Type::Reference(_) => Ok(Pass::Ref),
        _ if option_referent(ty).is_some() => Ok(Pass::OptionRef),
        _ => Ok(Pass::Value),
    }
}

/// `T` of an `Option<&T>`.
fn option_referent(ty: &Type) -> Option<&Type> {
    let Type::Path(path) = ty else { return None };
    let last = path.path.segments.last()?;
    let PathArguments::AngleBracketed(arguments) = &last.arguments else {
        return None;
    };
    match (last.ident == "Option", arguments.args.first()) {
        (true, Some(GenericArgument::Type(Type::Reference(reference))))
            if reference.mutability.is_none() =>
        {
            Some(&reference.elem)
        }
        _ => None,
    }
}

/// Whether `ty` is one float tensor: `Tensor<D>` or `Tensor<D, Float>`.
fn is_float_tensor(ty: &Type) -> bool {
    let Type::Path(path) = ty else { return false };
    let Some(last) = path.path.segments.last() else {
        return false;
    };
    let PathArguments::AngleBracketed(arguments) = &last.arguments else {
        return false;
    };
    let arguments: Vec<_> = arguments.args.iter().collect();
    match (last.ident.to_string().as_str(), arguments.as_slice()) {
        ("Tensor", [_rank]) => true,
        ("Tensor", [_rank, GenericArgument::Type(Type::Path(kind))]) => kind.path.is_ident("Float"),
        _ => false,
    }
}

/// Whether a type is a region's tensors by its name: a float `Tensor<D>` (or `Tensor<D,
/// Float>`), burn-nn's `LstmState`, `RnnState` or `MhaOutput`, or an `Option`, a `Vec` or a tuple
/// of such types. (A struct of the user's deriving `RegionTensors` is named in `inputs(..)`.)
fn is_region_tensors(ty: &Type) -> bool {
    match ty {
        Type::Paren(inner) => is_region_tensors(&inner.elem),
        Type::Tuple(tuple) => !tuple.elems.is_empty() && tuple.elems.iter().all(is_region_tensors),
        Type::Path(path) => {
            if is_float_tensor(ty) {
                return true;
            }
            let Some(last) = path.path.segments.last() else {
                return false;
            };
            // burn-nn's recurrent and attention states.
            if ["LstmState", "RnnState", "MhaOutput"].contains(&last.ident.to_string().as_str()) {
                return true;
            }
            let PathArguments::AngleBracketed(arguments) = &last.arguments else {
                return false;
            };
            match (last.ident.to_string().as_str(), arguments.args.first()) {
                ("Vec" | "Option", Some(GenericArgument::Type(item))) => is_region_tensors(item),
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
