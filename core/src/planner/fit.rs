//! Fitting a plan to a budget on real steps: [`Profile::fit`], and [`Profile::extrapolate`] for
//! a batch too large to profile.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::plan::Plan;
use super::profile::{Profile, ProfileError, Step};
use super::solver::PlanError;
use crate::memory::{MemoryMeter, StepReport};

/// What [`Profile::fit`] did: the plan, the steps it measured and what they cost.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Fitted {
    /// The plan, checked on a real step.
    pub plan: Plan,
    /// The profile it was planned from.
    pub profile: Profile,
    /// The peak of the last checked step under the plan, in bytes: what the budget was checked
    /// against (on a device, the bytes its memory manager reserved; see [`Profile::fit`]).
    pub measured_peak_bytes: u64,
    /// That step's time, in seconds.
    pub measured_seconds: f64,
    /// Steps run to check plans (each a real training step; profiling took three more).
    pub steps: usize,
    /// Time spent solving, in seconds.
    pub solve_seconds: f64,
}

/// Why [`Profile::fit`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FitError<E> {
    /// A checked step failed.
    #[error(transparent)]
    Profile(#[from] ProfileError<E>),
    /// No plan fits the budget.
    #[error(transparent)]
    Budget(#[from] PlanError),
}

/// Tries the planner makes after the first when a checked step is over the budget.
const RETRIES: usize = 3;

impl Profile {
    /// Plans for `budget_bytes` and checks the plan on a step of `step` measured with `meter`; if
    /// the measured peak is over the budget, plans again for the failed plan's predicted peak less
    /// the overshoot, so each retry is a plan that holds less; the last of three more steps runs
    /// the plan whose peak was least when profiled (on a device, predicted). Every
    /// step trains the model. The profile is usually [`Profile::try_measure`] of the same step
    /// (three steps more), or an [`extrapolated`](Profile::extrapolate) one for a batch too large
    /// to profile.
    ///
    /// A budget at or above the peak with every region kept gives a plan that keeps them all.
    ///
    /// **On a device** (a meter that reports [`reserved`](MemoryMeter::reserved) bytes: cubecl's
    /// CUDA and wgpu meters), the budget is what the memory manager may hold during the step —
    /// its pages, used or not, the model's included: what `nvidia-smi` shows, and what decides
    /// whether a step fits, since a page that cannot be allocated is an out-of-memory error
    /// however much of the other pages is free. The solver plans bytes in use; the first plan
    /// is for the budget less the least gap between reserved and in-use seen in the profile,
    /// each check asks for a plan predicting the failed one's prediction less the overshoot in
    /// reserved bytes, and the least-memory plan is the last one tried (the gap changes with the
    /// plan, so it may fit where the target says not).
    pub fn fit<M: MemoryMeter + Clone, S: Step>(
        &self,
        meter: M,
        budget_bytes: u64,
        mut step: S,
    ) -> Result<Fitted, FitError<S::Error>> {
        let mut solve_seconds = 0.0;
        // 0 on the host.
        let gap = self.reserved_gap();
        let mut target = budget_bytes.saturating_sub(gap);
        let mut steps = 0;
        let mut tries = 0;
        // The last try, whatever the target says, is a least-memory plan. On a device the gap
        // between reserved and in-use bytes changes with the plan (pages), so a target lowered by
        // overshoots may pass below the in-use floor while the floor's plan still fits: there it
        // is the least predicted plan. On the host it is every region under the treatment of the
        // profile's least step (measured, or extrapolated from measured steps): predictions from
        // an extrapolated profile may miss by more than the retries take back. On the host a
        // budget below the floor is refused before any step.
        let device = self.on_device();
        let floor = self.smallest_peak();
        loop {
            let last = tries == RETRIES || ((device || tries > 0) && target <= floor);
            let started = Instant::now();
            let plan = match (last, device) {
                (false, _) => self.plan(target),
                (true, true) => Ok(self.least_plan()),
                (true, false) => Ok(self.least_measured_plan()),
            };
            solve_seconds += started.elapsed().as_secs_f64();
            let mut plan = plan.map_err(|error| match error {
                PlanError::BelowFloor { floor, holders, .. } => PlanError::BelowFloor {
                    budget: budget_bytes,
                    floor: floor + gap,
                    holders,
                },
            })?;
            plan.budget_bytes = budget_bytes;
            let (result, report) = StepReport::measure(meter.clone(), || plan.run(|| step.run()));
            result.map_err(|error| FitError::Profile(ProfileError::Step(error)))?;
            steps += 1;
            let measured = checked_bytes(&report);
            if measured <= budget_bytes {
                return Ok(Fitted {
                    plan,
                    profile: self.clone(),
                    measured_peak_bytes: measured,
                    measured_seconds: report.seconds,
                    steps,
                    solve_seconds,
                });
            }
            if last {
                // The floor is what the plan holding least was measured at: one figure, the
                // one a step reaches (a prediction below it was not met).
                return Err(FitError::Budget(PlanError::BelowFloor {
                    budget: budget_bytes,
                    floor: measured,
                    holders: format!(
                        "measured: a step under the plan that holds least, {} bytes peaking at {}",
                        if report.reserved_peak_bytes.is_some() {
                            "reserved"
                        } else {
                            "in-use"
                        },
                        report.peak_at
                    ),
                }));
            }
            tries += 1;
            let over = measured - budget_bytes;
            // The plan's prediction missed by `measured - predicted`: ask for one predicting
            // that much less than the budget, i.e. this plan's prediction less the overshoot.
            // Lowering the target alone could leave it above this prediction (the solver's
            // choices are discrete), and the solver would return the same plan again.
            target = target
                .min(plan.predicted_peak_bytes)
                .saturating_sub(over + budget_bytes / 200);
        }
    }

    /// The smallest budget a plan is predicted to meet: the
    /// [`smallest_peak`](Profile::smallest_peak) in use, plus on a device the least that the
    /// bytes reserved exceeded those in use over the profiled steps. A fit checks a budget
    /// below it with the plan that holds least, at once.
    ///
    /// ```
    /// use burn_checkpoint_core::engine::{planned, recording};
    /// use burn_checkpoint_core::memory::HostMeter;
    /// use burn_checkpoint_core::planner::Profile;
    /// use burn_checkpoint_core::{RegionId, RegionName, Treatment};
    ///
    /// // A stand-in for a step with one region: a Burn crate's regions call these hooks.
    /// let mut step = || {
    ///     let held = vec![1u8; 4096];
    ///     let id = RegionId::next(RegionName::new("block"));
    ///     recording::top_level_opened(&id.name, id.index, planned(&id));
    ///     recording::top_level_closed();
    ///     drop(held);
    /// };
    /// let profile = Profile::try_measure(HostMeter, &Treatment::ALL, &mut step)?;
    /// // On the host nothing is reserved beyond what is in use.
    /// assert_eq!(profile.predicted_floor(), profile.smallest_peak());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn predicted_floor(&self) -> u64 {
        self.smallest_peak() + self.reserved_gap()
    }

    /// Whether its steps were measured on a device (their reports have bytes reserved).
    pub(crate) fn on_device(&self) -> bool {
        self.steps
            .iter()
            .any(|s| s.report.reserved_peak_bytes.is_some())
    }

    /// On a device, the least that the bytes reserved exceeded the peak in use over the
    /// profiled steps (the model, pages' free space); 0 on the host.
    fn reserved_gap(&self) -> u64 {
        self.steps
            .iter()
            .map(|s| checked_bytes(&s.report).saturating_sub(s.report.peak_bytes))
            .min()
            .unwrap_or(0)
    }

    /// Each figure of two profiles of the same step at batch sizes `a` (`self`) and `b`
    /// (`larger`), extended linearly to batch `to`: the profile of a batch too large to run with
    /// every region kept (such a step is the largest there is). Where the peak was, and the
    /// regions' names and treatments, are `larger`'s.
    pub fn extrapolate(&self, a: usize, larger: &Profile, b: usize, to: usize) -> Profile {
        let scale = (to as f64 - a as f64) / (b as f64 - a as f64);
        let line = |x: f64, y: f64| x + (y - x) * scale;
        let bytes = |x: u64, y: u64| line(x as f64, y as f64).max(0.0).round() as u64;
        let signed = |x: i64, y: i64| line(x as f64, y as f64).round() as i64;
        let seconds = |x: f64, y: f64| line(x, y).max(0.0);
        let mut out = self.clone();
        for (step, other) in out.steps.iter_mut().zip(&larger.steps) {
            let (r, o) = (&mut step.report, &other.report);
            r.peak_bytes = bytes(r.peak_bytes, o.peak_bytes);
            r.reserved_peak_bytes = r
                .reserved_peak_bytes
                .zip(o.reserved_peak_bytes)
                .map(|(x, y)| bytes(x, y));
            r.end_bytes = signed(r.end_bytes, o.end_bytes);
            r.seconds = seconds(r.seconds, o.seconds);
            r.offloaded_peak_bytes = bytes(r.offloaded_peak_bytes, o.offloaded_peak_bytes);
            r.outside_windows_peak_bytes = r
                .outside_windows_peak_bytes
                .zip(o.outside_windows_peak_bytes)
                .map(|(x, y)| bytes(x, y));
            r.peak_at = o.peak_at.clone();
            for (region, other) in r.regions.iter_mut().zip(&o.regions) {
                region.held_bytes = signed(region.held_bytes, other.held_bytes);
                region.forward_peak_bytes =
                    bytes(region.forward_peak_bytes, other.forward_peak_bytes);
                region.forward_seconds = seconds(region.forward_seconds, other.forward_seconds);
                region.recomputed_bytes = bytes(region.recomputed_bytes, other.recomputed_bytes);
                region.recompute_seconds =
                    seconds(region.recompute_seconds, other.recompute_seconds);
                region.offloaded_bytes = bytes(region.offloaded_bytes, other.offloaded_bytes);
                region.backward_peak_bytes =
                    bytes(region.backward_peak_bytes, other.backward_peak_bytes);
            }
            for (kind, value) in r.outside_by_kind.iter_mut() {
                *value = bytes(
                    *value,
                    o.outside_by_kind.get(kind).copied().unwrap_or(*value),
                );
            }
            for (site, value) in r.outside_by_site.iter_mut() {
                *value = bytes(
                    *value,
                    o.outside_by_site.get(site).copied().unwrap_or(*value),
                );
            }
        }
        out
    }
}

/// What a step's budget is checked against: on a device the bytes reserved, else the peak in use.
fn checked_bytes(report: &StepReport) -> u64 {
    report.reserved_peak_bytes.unwrap_or(report.peak_bytes)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;
    use crate::memory::RegionRecord;
    use crate::planner::plan::planned;
    use crate::{RegionId, RegionName, Treatment};

    fn held(regions: &[RegionRecord]) -> Vec<i64> {
        regions.iter().map(|r| r.held_bytes).collect()
    }

    /// A meter whose peak is what the fake step says it was.
    #[derive(Clone)]
    struct Told(Arc<AtomicU64>);

    impl MemoryMeter for Told {
        fn in_use(&self) -> u64 {
            0
        }
        fn peak(&self) -> Option<u64> {
            Some(self.0.load(Ordering::Relaxed))
        }
        fn describe(&self) -> String {
            "told".to_string()
        }
    }

    /// Steps that peak at what the planner predicts plus `error`, a miss a real meter shows
    /// (another thread's allocations, an allocator's rounding).
    fn misses_by(profile: &Profile, error: u64, budget: u64) -> Result<Fitted, FitError<()>> {
        measures(profile, budget, |chosen| profile.predict(chosen) + error)
    }

    /// A profile of three regions saved before step times were medians: its steps' times are
    /// one sample each of a step under a millisecond, the step keeping every region the
    /// slowest. These tests are about memory: each step's time is made the kept step's plus its
    /// regions' recomputes, as a larger model's steps measure.
    fn fixture() -> Profile {
        let mut profile: Profile =
            serde_json::from_str(include_str!("../../tests/fixtures/profile-before-30.json"))
                .unwrap();
        let kept = profile.steps[0].report.seconds;
        for step in &mut profile.steps {
            let recompute: f64 = step
                .report
                .regions
                .iter()
                .map(|r| r.recompute_seconds)
                .sum();
            step.report.seconds = kept + recompute;
        }
        profile
    }

    /// Fits `budget` with steps whose peak `peak` gives for the treatments of the plan in force,
    /// read back as the regions of a real step read them.
    fn measures(
        profile: &Profile,
        budget: u64,
        peak: impl Fn(&[Treatment]) -> u64,
    ) -> Result<Fitted, FitError<()>> {
        // Its steps are watched for allocation failures, which another test's could look like.
        let _alone = crate::memory::one_failing_test_at_a_time();
        let told = Told(Arc::new(AtomicU64::new(0)));
        let names: Vec<String> = profile.steps[0]
            .report
            .regions
            .iter()
            .map(|r| r.name.clone())
            .collect();
        let meter = told.clone();
        profile.fit(meter, budget, || {
            let chosen: Vec<Treatment> = names
                .iter()
                .map(|name| {
                    let id = RegionId::next(RegionName::new(name.clone()));
                    planned(&id).unwrap_or(Treatment::Keep)
                })
                .collect();
            told.0.store(peak(&chosen), Ordering::Relaxed);
            Ok(())
        })
    }

    #[test]
    fn a_plan_over_its_budget_is_followed_by_one_that_holds_less() {
        let profile = fixture();
        // A budget well above what its plan predicts (the solver's choices are discrete): there
        // lowering the target by the overshoot alone returned the same plan until the retries
        // ran out.
        let (floor, roof) = (profile.smallest_peak(), profile.largest_peak());
        let (budget, first) = (0..100)
            .map(|k| roof - (roof - floor) * k / 100)
            .map(|b| (b, profile.plan(b).unwrap().predicted_peak_bytes))
            .find(|&(b, predicted)| b - predicted > b / 25)
            .expect("a budget 4% over its plan's prediction");
        // The first plan measures just over the budget; one holding a region less fits.
        let error = budget - first + budget / 1000;
        let fitted = misses_by(&profile, error, budget).unwrap();
        assert!(fitted.steps > 1, "the first plan was over the budget");
        assert!(fitted.plan.predicted_peak_bytes < first);
        assert!(fitted.measured_peak_bytes <= budget);
        // A miss larger than anything the regions can give back is refused, not looped on,
        // naming one floor: what the plan holding least was measured at, no other figure.
        let refused = misses_by(&profile, roof, budget).unwrap_err();
        let FitError::Budget(PlanError::BelowFloor { floor, holders, .. }) = &refused else {
            panic!("{refused}");
        };
        assert!(
            *floor > roof,
            "the measured step's peak: a prediction plus the miss"
        );
        assert!(!holders.contains("MiB"), "{holders}");
    }

    #[test]
    fn on_the_host_the_last_try_is_the_plan_that_measured_least() {
        let profile = fixture();
        let least = profile.least_measured_plan();
        let (floor, roof) = (least.predicted_peak_bytes, profile.largest_peak());
        let treatment = profile.least_step().treatment;
        // Every plan but the profile's least one peaks just over the budget, whatever it predicts
        // (as from a profile extrapolated too low, in CI): the retries, each a little
        // lower, run out before their targets reach the floor.
        let peak = |budget: u64| {
            move |chosen: &[Treatment]| match chosen.iter().all(|&t| t == treatment) {
                true => floor,
                false => budget + 1,
            }
        };
        let budget = roof - 1;
        let fitted = measures(&profile, budget, peak(budget)).expect("the least step fits");
        assert_eq!(fitted.plan.regions, least.regions);
        assert_eq!(fitted.measured_peak_bytes, floor);
        assert_eq!(fitted.steps, RETRIES + 1);
        // Below what the least profiled step measured, the fit still ends in an error.
        assert!(measures(&profile, floor - 1, peak(floor - 1)).is_err());
    }

    #[test]
    fn extrapolation_is_linear_in_the_batch() {
        let small = fixture();
        // The same step at twice the batch, every figure twice as large.
        let mut large = small.clone();
        for step in &mut large.steps {
            let report = &mut step.report;
            report.peak_bytes *= 2;
            report.seconds *= 2.0;
            for region in &mut report.regions {
                region.held_bytes *= 2;
                region.recompute_seconds *= 2.0;
            }
            for bytes in report.outside_by_kind.values_mut() {
                *bytes *= 2;
            }
        }
        let at_three = small.extrapolate(1, &large, 2, 3);
        for (three, one) in at_three.steps.iter().zip(&small.steps) {
            let treatment = one.treatment;
            assert_eq!(
                three.report.peak_bytes,
                3 * one.report.peak_bytes,
                "{treatment}"
            );
            let tripled: Vec<i64> = held(&one.report.regions).iter().map(|h| 3 * h).collect();
            assert_eq!(held(&three.report.regions), tripled);
            assert_eq!(three.report.outside_bytes(), 3 * one.report.outside_bytes());
        }
    }
}
