//! What regions sit on: [`Base`], the autodiff a step keeps outside its regions, which the
//! planner chooses with the regions ([`Candidates::fastest`](super::Candidates::fastest)).

use std::fmt;

use serde::{Deserialize, Serialize};

/// The autodiff under a step's regions: what it keeps outside them.
///
/// Regions compose with Burn's own checkpointing in both Burn crates: outside regions, Burn's
/// Balanced strategy keeps only what it marks compute-bound and recomputes the rest. Where it
/// is faster than plain autodiff (DenseNet-BC on Flex), a plan over it is faster at every budget
/// it fits, so the planner profiles a step on each base and plans on the faster.
///
/// How a step gets its base is each Burn crate's: on Burn 0.21 the backend type
/// (`Checkpointed<Autodiff<I>>` or `Checkpointed<Autodiff<I, BalancedCheckpointing>>`), on
/// Burn 0.22 the device (`device.autodiff()` or `.gradient_checkpointing()`).
///
/// ```
/// use burn_checkpoint_core::planner::Base;
///
/// assert_eq!(Base::Balanced.to_string(), "Burn's Balanced checkpointing");
/// assert_eq!(Base::default(), Base::Plain);
/// let json = serde_json::to_string(&Base::Balanced).unwrap();
/// assert_eq!(json, format!("\"{}\"", Base::Balanced.name()));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Base {
    /// Plain autodiff: every activation outside regions is held.
    #[default]
    Plain,
    /// Burn's Balanced checkpointing: outside regions, memory-bound ops are recomputed.
    Balanced,
}

impl Base {
    /// Both bases, plain first.
    pub const ALL: [Base; 2] = [Base::Plain, Base::Balanced];

    /// The base's name in JSON and in tables: `plain`, `balanced`.
    pub fn name(self) -> &'static str {
        match self {
            Base::Plain => "plain",
            Base::Balanced => "balanced",
        }
    }

    /// Whether this is plain autodiff: a profile's or plan's JSON leaves the base out then, as
    /// those saved before bases have it.
    pub fn is_plain(&self) -> bool {
        *self == Base::Plain
    }
}

impl fmt::Display for Base {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Base::Plain => "plain autodiff",
            Base::Balanced => "Burn's Balanced checkpointing",
        })
    }
}
