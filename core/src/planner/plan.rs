//! A plan: how each top-level region instance of a step runs, and the one place a plan is put in
//! force on a thread (the region machinery of each Burn crate asks [`planned`]).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::base::Base;
use crate::memory::{mib, shorten};
use crate::names::RegionId;
use crate::treatment::Treatment;

/// How each top-level region instance of a training step runs: made by the planner
/// ([`Profile::plan`](super::Profile::plan), [`Profile::fit`](super::Profile::fit)) or by hand,
/// saved and loaded as JSON (serde), applied to a step with [`Plan::run`] without changing the
/// model's code.
///
/// ```
/// use burn_checkpoint_core::engine::planned;
/// use burn_checkpoint_core::planner::Plan;
/// use burn_checkpoint_core::{RegionId, RegionName, Treatment};
///
/// // The first block kept (as if it were no region), the second recomputed.
/// let plan = Plan::new()
///     .with("block", 0, Treatment::Keep)
///     .with("block", 1, Treatment::RecomputeAll);
/// let json = serde_json::to_string(&plan).unwrap();
/// let plan: Plan = serde_json::from_str(&json).unwrap();
///
/// for _step in 0..2 {
///     plan.run(|| {
///         // What the region machinery asks when a top-level region opens:
///         let first = RegionId::next(RegionName::new("block"));
///         let second = RegionId::next(RegionName::new("block"));
///         assert_eq!(planned(&first), Some(Treatment::Keep));
///         assert_eq!(planned(&second), Some(Treatment::RecomputeAll));
///     });
/// }
/// ```
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[non_exhaustive]
pub struct Plan {
    /// The treatment of each instance, by region name and index. An instance not listed (or
    /// `None`) runs as the code says.
    pub regions: BTreeMap<String, Vec<Option<Treatment>>>,
    /// The budget the plan was made for, in bytes (0 for a plan made by hand).
    pub budget_bytes: u64,
    /// The peak the planner predicted, in bytes.
    pub predicted_peak_bytes: u64,
    /// What the planner predicted the plan's treatments add to the step with every region kept,
    /// in seconds: their recomputes and what else they change (negative where recomputing made
    /// the step faster than holding, as a region replacing Burn's Balanced recomputes can).
    pub predicted_recompute_seconds: f64,
    /// The step time the planner predicted, in seconds: the profiled step with every region
    /// kept on [`base`](Plan::base), plus what its treatments add (0, and left out of the
    /// JSON, for a plan made by hand or saved before bases).
    #[serde(default, skip_serializing_if = "no_seconds")]
    pub predicted_step_seconds: f64,
    /// What the regions sit on: run the plan's steps on this base (Burn 0.21: the backend type;
    /// Burn 0.22: the device). Plain for a plan made by hand, or saved before bases; left out of
    /// the JSON when plain.
    #[serde(default, skip_serializing_if = "Base::is_plain")]
    pub base: Base,
}

impl Plan {
    /// A plan that changes nothing.
    pub fn new() -> Self {
        Plan::default()
    }

    /// This plan with instance `index` of region `name` under `treatment`.
    pub fn with(mut self, name: impl Into<String>, index: u64, treatment: Treatment) -> Self {
        let treatments = self.regions.entry(name.into()).or_default();
        let index = index as usize;
        if treatments.len() <= index {
            treatments.resize(index + 1, None);
        }
        treatments[index] = Some(treatment);
        self
    }

    /// The treatment the plan gives `region`, if any.
    pub fn treatment(&self, region: &RegionId) -> Option<Treatment> {
        treatment_of(&self.regions, &region.name.to_string(), region.index)
    }

    /// Runs `step` (one training step) on this thread with each top-level region the plan lists
    /// run under its treatment; region indices count from 0 for the step.
    pub fn run<R>(&self, step: impl FnOnce() -> R) -> R {
        let regions = Arc::new(self.regions.clone());
        let lookup: Lookup =
            Arc::new(move |id| treatment_of(&regions, &id.name.to_string(), id.index));
        with_lookup(lookup, step)
    }

    /// How many instances each treatment has, per region name.
    pub fn counts(&self) -> BTreeMap<&str, BTreeMap<Treatment, usize>> {
        self.regions
            .iter()
            .map(|(name, treatments)| {
                let mut counts = BTreeMap::new();
                for treatment in treatments.iter().flatten() {
                    *counts.entry(*treatment).or_default() += 1;
                }
                (name.as_str(), counts)
            })
            .collect()
    }
}

/// Whether a plan predicted no step time (made by hand, or saved before it did).
fn no_seconds(seconds: &f64) -> bool {
    *seconds == 0.0
}

fn treatment_of(
    regions: &BTreeMap<String, Vec<Option<Treatment>>>,
    name: &str,
    index: u64,
) -> Option<Treatment> {
    *regions.get(name)?.get(usize::try_from(index).ok()?)?
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "plan for {:.1} MiB: predicted peak {:.1} MiB, {:+.3} s/step over keeping every region",
            mib(self.budget_bytes as usize),
            mib(self.predicted_peak_bytes as usize),
            self.predicted_recompute_seconds
        )?;
        if self.predicted_step_seconds > 0.0 {
            write!(f, " (a step {:.3} s)", self.predicted_step_seconds)?;
        }
        f.write_str(";")?;
        if !self.base.is_plain() {
            write!(f, " on {};", self.base)?;
        }
        for (name, counts) in self.counts() {
            write!(f, " {}:", shorten(name, 40))?;
            for (treatment, count) in counts {
                write!(f, " {count} {treatment}")?;
            }
        }
        Ok(())
    }
}

/// A plan as the region machinery asks it: the treatment of a top-level region, if it has one.
pub(crate) type Lookup = Arc<dyn Fn(&RegionId) -> Option<Treatment> + Send + Sync>;

thread_local! {
    /// The plan in force on this thread, while one runs a step.
    static PLAN: RefCell<Option<Lookup>> = const { RefCell::new(None) };
}

/// Runs `f` (a training step) with `lookup` deciding how its top-level regions run, their indices
/// counted from 0 (so that a plan's `name#index` names the same region every step). The previous
/// plan is back when `f` returns or panics.
pub(crate) fn with_lookup<R>(lookup: Lookup, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Lookup>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            let _ = PLAN.try_with(|plan| *plan.borrow_mut() = previous);
        }
    }
    RegionId::restart_indices();
    let _restore = Restore(PLAN.with(|current| current.borrow_mut().replace(lookup)));
    f()
}

/// The treatment the plan in force on this thread gives the top-level region `id`, if any (for
/// the Burn crates' region machinery, when a top-level region opens).
pub fn planned(id: &RegionId) -> Option<Treatment> {
    PLAN.with(|plan| plan.borrow().as_ref().and_then(|lookup| lookup(id)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_by_hand_lists_what_it_names() {
        let plan = Plan::new()
            .with("b", 2, Treatment::RecomputeAll)
            .with("b", 0, Treatment::Keep);
        assert_eq!(
            plan.regions["b"],
            vec![Some(Treatment::Keep), None, Some(Treatment::RecomputeAll)]
        );
        assert_eq!(
            treatment_of(&plan.regions, "b", 1),
            None,
            "as the code says"
        );
        assert_eq!(treatment_of(&plan.regions, "b", 3), None);
        assert_eq!(treatment_of(&plan.regions, "a", 0), None);
    }
}
