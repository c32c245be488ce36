//! How a plan has one top-level region instance run.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::schedule::Schedule;

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
    /// its matmul, convolution and pooling outputs are held (on Burn 0.22: what Burn's Balanced
    /// checkpointing keeps, inside the region only).
    SaveComputeBound,
    /// A region recomputing every op whose stored inputs are held in host memory between forward
    /// and backward (`Policy::RecomputeAll.offloaded()` on Burn 0.21): on a GPU it holds less
    /// device memory than [`Treatment::RecomputeAll`] and pays for the copies; on the CPU host
    /// and device memory are one, so it saves nothing there.
    Offload,
    /// A region as its code says: its policy, its offload, the regions it keeps by name. Not in
    /// [`Treatment::ALL`]: for regions written with a policy the other treatments cannot express
    /// (a custom one: keeping batch norm's statistics, say), give it to
    /// [`Profile::measure`](crate::planner::Profile::measure) and the planner chooses, per
    /// region, between that policy and the others; for regions written with a preset it is one
    /// of the others measured twice.
    ///
    /// It runs the region as a plan entry of `None` (a region the plan does not name) does, with
    /// one difference on Burn 0.22: a planned region draws its seed like every planned treatment
    /// (so that what a seeded region draws does not depend on the plan): a seeded region written
    /// `SaveComputeBound`, which runs its body once and draws no seed of its own where no plan
    /// names it, draws one planned as written.
    AsWritten,
    /// A scan (`Region::scan`, and on Burn 0.22 `checkpoint_sequential`'s segments) keeping its
    /// carries as this [`Schedule`] says, whatever its code's schedule; any other region
    /// recomputes every op, as under [`Treatment::RecomputeAll`]. On Burn 0.21, whose scans are
    /// regions already (each a step or a run of steps), it is [`Treatment::RecomputeAll`]. Not in
    /// [`Treatment::ALL`]: give [`Profile::measure`](crate::planner::Profile::measure) the
    /// schedules the planner may choose among (`Scan(Schedule::Snapshots(8))`, ...).
    Scan(Schedule),
}

impl Treatment {
    /// Every treatment, from the one that holds most to the one that holds least (on a device).
    /// Which of them a profile measures is its caller's choice (the treatments given to
    /// [`Profile::measure`](crate::planner::Profile::measure): both crates' regions run all four).
    pub const ALL: [Treatment; 4] = [
        Treatment::Keep,
        Treatment::SaveComputeBound,
        Treatment::RecomputeAll,
        Treatment::Offload,
    ];

    /// Its kind's name in reports and plans: `keep`, `save-compute-bound`, `recompute-all`,
    /// `offload`, `as-written`, `scan` (its [`Display`](fmt::Display) adds a scan's schedule:
    /// `scan-snapshots-8`).
    pub fn name(self) -> &'static str {
        match self {
            Treatment::AsWritten => "as-written",
            Treatment::Keep => "keep",
            Treatment::RecomputeAll => "recompute-all",
            Treatment::SaveComputeBound => "save-compute-bound",
            Treatment::Offload => "offload",
            Treatment::Scan(_) => "scan",
        }
    }

    /// How a top-level region runs under it, in the words both Burn crates map to their own
    /// run: one rule for both, so that a plan runs the same in each.
    ///
    /// ```
    /// use burn_checkpoint_core::{RunAs, Schedule, Treatment};
    ///
    /// assert_eq!(Treatment::Offload.run_as(), RunAs::RecomputeAll { offload: true });
    /// // Any region but a scan recomputes every op under a scan's treatment.
    /// let scan = Treatment::Scan(Schedule::Snapshots(4));
    /// assert_eq!(scan.run_as(), RunAs::RecomputeAll { offload: false });
    /// ```
    pub fn run_as(self) -> RunAs {
        match self {
            Treatment::Keep => RunAs::Keep,
            Treatment::SaveComputeBound => RunAs::SaveComputeBound,
            Treatment::RecomputeAll => RunAs::RecomputeAll { offload: false },
            Treatment::Offload => RunAs::RecomputeAll { offload: true },
            Treatment::AsWritten => RunAs::AsWritten,
            // A scan reads its schedule from the plan itself (on Burn 0.21 a scan is regions
            // already, each recomputing).
            Treatment::Scan(_) => RunAs::RecomputeAll { offload: false },
        }
    }
}

/// How a region runs under a [`Treatment`] ([`Treatment::run_as`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunAs {
    /// Not a region: Burn's own ops, everything autodiff stores for them held.
    Keep,
    /// A region keeping its compute-bound outputs.
    SaveComputeBound,
    /// A region recomputing every op (what its code keeps by name still kept), its stored
    /// inputs held in host memory where `offload`.
    RecomputeAll {
        /// Whether its stored inputs go to host memory until backward.
        offload: bool,
    },
    /// As its code says: its policy, its offload, the regions it keeps by name.
    AsWritten,
}

impl fmt::Display for Treatment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Padded as a `str` is (`{:<19}`): the memory report's columns.
        let name = self.name();
        match self {
            Treatment::Scan(Schedule::EveryStep) => f.pad(&format!("{name}-every-step")),
            Treatment::Scan(Schedule::Snapshots(count)) => {
                f.pad(&format!("{name}-snapshots-{count}"))
            }
            Treatment::Scan(Schedule::Budget(bytes)) => f.pad(&format!("{name}-budget-{bytes}")),
            _ => f.pad(name),
        }
    }
}
