//! How a plan has one top-level region instance run.

use std::fmt;

use serde::{Deserialize, Serialize};

/// How a [`Plan`](crate::planner::Plan) has one top-level region instance run, whatever the code
/// says: the treatments the budget planner chooses from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Treatment {
    /// Not a region: its ops are Burn's own, and everything autodiff stores for them is held.
    Keep,
    /// A region recomputing every op (`Policy::RecomputeAll`): only its boundary is held.
    RecomputeAll,
    /// A region keeping its compute-bound outputs (`Policy::SaveComputeBound`): its boundary and
    /// its matmul, convolution and pooling outputs are held.
    SaveComputeBound,
}

impl Treatment {
    /// Every treatment, from the one that holds most to the one that holds least.
    pub const ALL: [Treatment; 3] = [
        Treatment::Keep,
        Treatment::SaveComputeBound,
        Treatment::RecomputeAll,
    ];

    /// Its name in reports and plans: `keep`, `recompute-all`, `save-compute-bound`.
    pub fn name(self) -> &'static str {
        match self {
            Treatment::Keep => "keep",
            Treatment::RecomputeAll => "recompute-all",
            Treatment::SaveComputeBound => "save-compute-bound",
        }
    }
}

impl fmt::Display for Treatment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
