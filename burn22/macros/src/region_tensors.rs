//! `#[derive(RegionTensors)]`: a struct whose fields are region tensors (tensors, `Option`s,
//! `Vec`s, tuples, other such structs) crosses a region as its fields do, in field order.

use proc_macro2::TokenStream as TokenStream2;
use quote::{format_ident, quote};
use syn::{Data, DeriveInput, Fields, Index};

/// The derive's expansion, or the error that says what to write instead.
pub(crate) fn expand(input: DeriveInput) -> syn::Result<TokenStream2> {
    let name = &input.ident;
    let refused = |what: &str| {
        syn::Error::new_spanned(
            &input.ident,
            format!(
                "RegionTensors is derived for a struct of tensors, not {what}: give the struct \
                 fields whose types are region tensors (`Tensor<D>`, an `Option`, a `Vec` or a \
                 tuple of them, or another struct deriving RegionTensors), e.g. \
                 `struct State {{ hidden: Tensor<2>, cell: Tensor<2> }}`"
            ),
        )
    };
    let fields = match &input.data {
        Data::Struct(data) => &data.fields,
        Data::Enum(_) => return Err(refused("an enum (its variants' tensors differ)")),
        Data::Union(_) => return Err(refused("a union")),
    };
    if fields.is_empty() {
        return Err(refused("a struct without fields (a region needs tensors)"));
    }
    let types: Vec<_> = fields.iter().map(|field| &field.ty).collect();
    // How each field is read (`self.hidden`, `self.0`) and bound when rebuilt.
    let members: Vec<TokenStream2> = match fields {
        Fields::Named(named) => named
            .named
            .iter()
            .map(|field| {
                let ident = field.ident.as_ref().expect("a named field");
                quote!(#ident)
            })
            .collect(),
        _ => (0..types.len())
            .map(|index| {
                let index = Index::from(index);
                quote!(#index)
            })
            .collect(),
    };
    let values: Vec<_> = (0..types.len())
        .map(|index| format_ident!("field_{index}"))
        .collect();
    // The layout: the fields' layouts nested in pairs, `(A, (B, (C, ())))`, which are `Clone`,
    // `Send`, `Sync` and `'static` at any length.
    let layout_type = types.iter().rev().fold(
        quote!(()),
        |rest, ty| quote!((<#ty as ::burn_checkpoint_22::RegionTensors>::Layout, #rest)),
    );
    let layout_value = members.iter().rev().fold(
        quote!(()),
        |rest, member| quote!((::burn_checkpoint_22::RegionTensors::layout(&self.#member), #rest)),
    );
    // Each field's layout out of the nested pairs: `layout.1.1.0` for the third.
    let layout_of = (0..types.len()).map(|index| {
        let path = std::iter::repeat_n(quote!(.1), index);
        quote!(layout #(#path)* .0)
    });
    let rebuilt = match fields {
        Fields::Named(_) => quote!(Self { #(#members: #values),* }),
        _ => quote!(Self(#(#values),*)),
    };
    let (impl_generics, type_generics, where_clause) = input.generics.split_for_impl();
    let mut bounds = where_clause
        .map(|clause| clause.predicates.iter().cloned().collect::<Vec<_>>())
        .unwrap_or_default();
    bounds.extend(
        types
            .iter()
            .map(|ty| syn::parse_quote!(#ty: ::burn_checkpoint_22::RegionTensors)),
    );
    Ok(quote! {
        impl #impl_generics ::burn_checkpoint_22::RegionTensors for #name #type_generics
        where
            #(#bounds,)*
        {
            type Layout = #layout_type;

            fn layout(&self) -> Self::Layout {
                #layout_value
            }

            fn flatten(
                self,
                out: &mut ::std::vec::Vec<::burn_checkpoint_22::__private::DispatchTensor>,
            ) {
                #(::burn_checkpoint_22::RegionTensors::flatten(self.#members, out);)*
            }

            fn unflatten(
                layout: &Self::Layout,
                tensors: &mut impl ::std::iter::Iterator<
                    Item = ::burn_checkpoint_22::__private::DispatchTensor,
                >,
            ) -> Self {
                #(
                    let #values = <#types as ::burn_checkpoint_22::RegionTensors>::unflatten(
                        &#layout_of,
                        tensors,
                    );
                )*
                #rebuilt
            }
        }
    })
}
