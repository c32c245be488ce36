//! The names of the ways to train, one table for every app of both Burn crates: [`MethodName`],
//! and [`method_names!`](crate::method_names), which writes an app's own `Method` from the
//! table's variants, with its command line and JSON spellings.
//!
//! Each app keeps its own `Method` (its subset of the table, and what each way means for its
//! model: a cut, a policy, a backend); the spellings live here only, so that the trainer for
//! Burn 0.21 and `train22` take each other's words, and a report's JSON names a method as the
//! command line does.

use clap::builder::PossibleValue;

/// A way to train, by its name on every app's command line and in every report's JSON.
///
/// The name says the unit a region spans (`layer`, `block`, `bottleneck`, `whole`, `regions`
/// for "the model's unit": a dense layer, a GPT block), then what the regions keep (`save`:
/// compute-bound outputs; `reduce`: reductions' outputs; `keep-attention`), then where they
/// wait (`offload`: host memory). `aliases` are the spellings the other apps use for the same
/// way, and old ones.
///
/// ```
/// use app_kit::method::MethodName;
///
/// assert_eq!(MethodName::LayerSave.name(), "layer-save");
/// // The Burn 0.21 trainer's word for train22's `regions-save`, and the other way round.
/// let (layer_save, regions_save) = (MethodName::LayerSave, MethodName::RegionsSave);
/// assert_eq!(MethodName::parse("regions-save", &[layer_save]), Some(layer_save));
/// assert_eq!(MethodName::parse("layer-save", &[regions_save]), Some(regions_save));
/// assert_eq!(MethodName::parse("layer-save", &[MethodName::Plain]), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MethodName {
    /// Plain autodiff: every activation backward needs is held.
    Plain,
    /// Burn's own gradient checkpointing (Balanced): its memory-bound ops are recomputed.
    Balanced,
    /// A region per unit of the model (a dense layer, a GPT block), over Balanced.
    Regions,
    /// The same regions keeping their compute-bound outputs.
    RegionsSave,
    /// A region per DenseNet bottleneck (the reference's cut).
    Bottleneck,
    /// A region per dense layer.
    Layer,
    /// A region per dense layer, keeping its compute-bound outputs.
    LayerSave,
    /// A region per bottleneck, keeping reductions' outputs.
    BottleneckReduce,
    /// A region per dense layer, keeping reductions' outputs.
    LayerReduce,
    /// A region per dense layer, what it stores waiting in host memory.
    LayerOffload,
    /// A region per block (a dense block, a GPT block).
    Block,
    /// A region per GPT block over Balanced.
    BlockBalanced,
    /// A region per GPT block, keeping its compute-bound outputs.
    BlockSave,
    /// A region per GPT block, its attention's work kept by name.
    BlockKeepAttention,
    /// A region per GPT block, its input waiting in host memory.
    BlockOffload,
    /// `checkpoint_sequential` with √n segments.
    SeqSqrt,
    /// `checkpoint_sequential` with 2 segments.
    SeqTwo,
    /// The whole stack one region.
    Whole,
}

impl MethodName {
    /// Every name, in the order of the table below.
    pub const ALL: [MethodName; 18] = [
        MethodName::Plain,
        MethodName::Balanced,
        MethodName::Regions,
        MethodName::RegionsSave,
        MethodName::Bottleneck,
        MethodName::Layer,
        MethodName::LayerSave,
        MethodName::BottleneckReduce,
        MethodName::LayerReduce,
        MethodName::LayerOffload,
        MethodName::Block,
        MethodName::BlockBalanced,
        MethodName::BlockSave,
        MethodName::BlockKeepAttention,
        MethodName::BlockOffload,
        MethodName::SeqSqrt,
        MethodName::SeqTwo,
        MethodName::Whole,
    ];

    /// The name, then the other spellings it is taken by: the table.
    fn spellings(self) -> (&'static str, &'static [&'static str]) {
        match self {
            MethodName::Plain => ("plain", &["none"]),
            MethodName::Balanced => ("balanced", &[]),
            // A DenseNet's unit is its dense layer: train22's words and the 0.21 trainer's
            // name one way each.
            MethodName::Regions => ("regions", &["layer"]),
            MethodName::RegionsSave => ("regions-save", &["layer-save", "regions-save-compute"]),
            MethodName::Bottleneck => ("bottleneck", &[]),
            MethodName::Layer => ("layer", &["regions"]),
            MethodName::LayerSave => ("layer-save", &["regions-save", "regions-save-compute"]),
            MethodName::BottleneckReduce => ("bottleneck-reduce", &[]),
            MethodName::LayerReduce => ("layer-reduce", &[]),
            MethodName::LayerOffload => ("layer-offload", &[]),
            MethodName::Block => ("block", &[]),
            MethodName::BlockBalanced => ("block-balanced", &[]),
            MethodName::BlockSave => ("block-save", &[]),
            MethodName::BlockKeepAttention => ("block-keep-attention", &[]),
            MethodName::BlockOffload => ("block-offload", &[]),
            MethodName::SeqSqrt => ("seq-sqrt", &[]),
            MethodName::SeqTwo => ("seq-two", &[]),
            MethodName::Whole => ("whole", &[]),
        }
    }

    /// The name on the command line and in JSON.
    pub fn name(self) -> &'static str {
        self.spellings().0
    }

    /// The other spellings the command line and JSON take for this way.
    pub fn aliases(self) -> &'static [&'static str] {
        self.spellings().1
    }

    /// Which of `among` (an app's names) `text` spells: its name first, then an alias.
    pub fn parse(text: &str, among: &[MethodName]) -> Option<MethodName> {
        let text = text.trim();
        among
            .iter()
            .find(|way| way.name().eq_ignore_ascii_case(text))
            .or_else(|| {
                among.iter().find(|way| {
                    way.aliases()
                        .iter()
                        .any(|alias| alias.eq_ignore_ascii_case(text))
                })
            })
            .copied()
    }

    /// The name and its aliases as clap's value.
    pub fn possible_value(self) -> PossibleValue {
        PossibleValue::new(self.name()).aliases(self.aliases().iter().copied())
    }
}

/// An app's `Method`, written once: the enum as the app documents it, its variants named as
/// [`MethodName`]'s (each app's subset of the table, in the order its tables list them). Gives it
/// `Clone, Copy, Debug, PartialEq, Eq`, `const ALL` (every variant, in order),
/// `word()` (its `MethodName`), `name()` and the spellings from the table: clap's `ValueEnum`
/// (the name, the aliases), serde's `Serialize` (the name) and `Deserialize` (the name or an
/// alias).
///
/// ```
/// app_kit::method_names! {
///     /// How a step trains.
///     pub enum Method {
///         /// Plain autodiff.
///         Plain,
///         /// A region per unit.
///         Regions,
///     }
/// }
///
/// use app_kit::method::MethodName;
/// use clap::ValueEnum;
/// assert_eq!(Method::ALL, [Method::Plain, Method::Regions]);
/// assert_eq!(Method::Regions.word(), MethodName::Regions);
/// assert_eq!(Method::from_str("layer", false), Ok(Method::Regions));
/// assert_eq!(serde_json::to_string(&Method::Regions).unwrap(), "\"regions\"");
/// assert_eq!(serde_json::from_str::<Method>("\"none\"").unwrap(), Method::Plain);
/// let refused = serde_json::from_str::<Method>("\"block\"").unwrap_err();
/// assert!(refused.to_string().contains("plain, regions"));
/// ```
#[macro_export]
macro_rules! method_names {
    (
        $(#[$meta:meta])*
        $vis:vis enum $method:ident {
            $($(#[$variant_meta:meta])* $variant:ident),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        $vis enum $method {
            $($(#[$variant_meta])* $variant),+
        }

        impl $method {
            /// Every method, in the order tables list them.
            pub const ALL: [$method; [$(stringify!($variant)),+].len()] = [$($method::$variant),+];

            /// The method's name in app-kit's one table of every app's names (`name()`: the
            /// command line's, the reports' and JSON's spelling).
            pub fn word(self) -> $crate::method::MethodName {
                match self {
                    $($method::$variant => $crate::method::MethodName::$variant),+
                }
            }

            /// The name on the command line, in reports and in JSON (app-kit's `MethodName`
            /// table).
            pub fn name(self) -> &'static str {
                self.word().name()
            }
        }

        impl $crate::method::reexport::clap::ValueEnum for $method {
            fn value_variants<'a>() -> &'a [Self] {
                &<$method>::ALL
            }

            fn to_possible_value(
                &self,
            ) -> Option<$crate::method::reexport::clap::builder::PossibleValue> {
                Some(self.word().possible_value())
            }
        }

        impl $crate::method::reexport::serde::Serialize for $method {
            fn serialize<S: $crate::method::reexport::serde::Serializer>(
                &self,
                serializer: S,
            ) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.name())
            }
        }

        impl<'de> $crate::method::reexport::serde::Deserialize<'de> for $method {
            fn deserialize<D: $crate::method::reexport::serde::Deserializer<'de>>(
                deserializer: D,
            ) -> Result<Self, D::Error> {
                let text = <String as $crate::method::reexport::serde::Deserialize>::deserialize(
                    deserializer,
                )?;
                let words = <$method>::ALL.map(<$method>::word);
                $crate::method::MethodName::parse(&text, &words)
                    .and_then(|word| <$method>::ALL.into_iter().find(|m| m.word() == word))
                    .ok_or_else(|| {
                        let names: Vec<&str> = words.iter().map(|w| w.name()).collect();
                        <D::Error as $crate::method::reexport::serde::de::Error>::custom(format!(
                            "`{text}` is not a method here: {}",
                            names.join(", ")
                        ))
                    })
            }
        }
    };
}

/// What [`method_names!`](crate::method_names) expands to, so that an app needs no `clap` or
/// `serde` of its own for it.
#[doc(hidden)]
pub mod reexport {
    pub use clap;
    pub use serde;
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn names_are_unique_and_aliases_name_the_same_way_both_ways() {
        let names: HashSet<&str> = MethodName::ALL.iter().map(|w| w.name()).collect();
        assert_eq!(names.len(), MethodName::ALL.len());
        for way in MethodName::ALL {
            assert!(!way.aliases().contains(&way.name()), "{way:?}");
            // An alias that is another way's name: that way takes this one's name back, so
            // each trainer takes the other's word.
            for alias in way.aliases() {
                if let Some(other) = MethodName::ALL.iter().find(|o| o.name() == *alias) {
                    assert!(other.aliases().contains(&way.name()), "{way:?} / {other:?}");
                }
            }
        }
    }

    #[test]
    fn parse_prefers_a_name_to_an_alias() {
        let both = [MethodName::Layer, MethodName::Regions];
        assert_eq!(
            MethodName::parse("regions", &both),
            Some(MethodName::Regions)
        );
        assert_eq!(MethodName::parse("LAYER", &both), Some(MethodName::Layer));
        assert_eq!(MethodName::parse("nothing", &both), None);
    }
}
