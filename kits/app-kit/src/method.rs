//! The names of the ways to train, one table for every app of both Burn crates: [`MethodName`],
//! and [`method_names!`](crate::method_names), which gives an app's own `Method` its command
//! line and JSON spellings from the table.
//!
//! Each app keeps its own `Method` (what a way means for its model: a cut, a policy, a backend)
//! and maps each variant to a `MethodName`; the spellings live here only, so that the trainer
//! for Burn 0.21 and `train22` take each other's words, and a report's JSON names a method as
//! the command line does.

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
/// assert_eq!(MethodName::parse("regions-save", &[MethodName::LayerSave]), Some(MethodName::LayerSave));
/// assert_eq!(MethodName::parse("layer-save", &[MethodName::RegionsSave]), Some(MethodName::RegionsSave));
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

/// Gives an app's `Method` (a `Copy` enum with `const ALL: [Self; N]` and
/// `fn word(self) -> MethodName`) its spellings from [`MethodName`]'s table: `name()`, clap's
/// `ValueEnum` (the name, the aliases), and serde's `Serialize` (the name) and `Deserialize`
/// (the name or an alias).
///
/// ```
/// use app_kit::method::MethodName;
///
/// #[derive(Clone, Copy, Debug, PartialEq)]
/// enum Method {
///     Plain,
///     Regions,
/// }
///
/// impl Method {
///     const ALL: [Method; 2] = [Method::Plain, Method::Regions];
///
///     fn word(self) -> MethodName {
///         match self {
///             Method::Plain => MethodName::Plain,
///             Method::Regions => MethodName::Regions,
///         }
///     }
/// }
///
/// app_kit::method_names!(Method);
///
/// use clap::ValueEnum;
/// assert_eq!(Method::from_str("layer", false), Ok(Method::Regions));
/// assert_eq!(serde_json::to_string(&Method::Regions).unwrap(), "\"regions\"");
/// assert_eq!(serde_json::from_str::<Method>("\"none\"").unwrap(), Method::Plain);
/// assert!(serde_json::from_str::<Method>("\"block\"").unwrap_err().to_string().contains("plain, regions"));
/// ```
#[macro_export]
macro_rules! method_names {
    ($method:ty) => {
        impl $method {
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
