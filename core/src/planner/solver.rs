//! The budget planner: from a [`Profile`], a [`Treatment`] for every top-level region instance
//! so that the step's peak stays within a byte budget at the least step time.
//!
//! # How it decides
//!
//! The profile gives, for each region instance `i` and treatment `t`, the bytes it holds from
//! forward to backward `h[i][t]` and what it adds to the step with every region kept `c[i][t]`
//! (the step with every region under `t` less the step keeping them, shared out in proportion to
//! the instances' measured recomputes: negative where that step was the faster), and for
//! each treatment `t` the step with every region so: its peak outside the regions' backward
//! windows `O[t]`, and the peak of each instance's backward window `W[i][t]` (from backward's
//! first recompute for it to the next region's: its recompute and its backward). A plan giving
//! instance `i` the treatment `t_i` is predicted to peak at the larger of
//!
//! - `Σ_i h[i][t_i] + max R[t]` over the treatments it uses, where `R[t] = O[t] − Σ_i h[i][t]`
//!   is what the step holds besides its regions outside the windows (weights, what is made
//!   outside regions, the head's backward): the peak where everything regions hold is still
//!   held; and
//! - for each instance `j` that recomputes, `W[j][t_j] + Σ_{i<j} (h[i][t_i] − h[i][t_j])`: its
//!   window as measured, with what the regions before it hold under the plan instead of under
//!   `t_j` (backward has freed those after it).
//!
//! Both are exact for the measured plans (every region under one treatment) and a model between
//! them. For each set of treatments the planner solves the multiple-choice knapsack (minimise
//! `Σ c`, subject to the bound on the total and, for each recomputing choice, the bound its
//! window puts on the bytes held before it) exactly by dynamic programming over bytes in 4096
//! steps of the budget, rounding each `h` up (so the prediction never undercounts), and keeps the
//! fastest plan; a measured step that fits is kept over a mix predicted no faster. Profiles saved
//! before windows were recorded have none: their `O[t]` is the step's peak, as if every recompute
//! coincided with everything held.
//!
//! [`Profile::fit`] then checks the plan on real steps: if a measured peak is over the budget, it
//! plans again for the budget less the overshoot (at most three times).

use super::plan::Plan;
use super::profile::{Profile, TreatedStep};
use crate::memory::{StepReport, mib, sizes_apart};
use crate::treatment::Treatment;

/// Why no plan fits the budget.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// Even the plan that holds least is predicted (or measured) over the budget.
    #[error(
        "a budget of {} cannot be met: the smallest peak these regions reach is {} ({holders})",
        sizes_apart(*budget, *floor).0,
        sizes_apart(*budget, *floor).1
    )]
    BelowFloor {
        /// The budget asked for, in bytes.
        budget: u64,
        /// The smallest peak reachable, in bytes.
        floor: u64,
        /// What holds that peak.
        holders: String,
    },
}

/// One choice for an instance.
#[derive(Clone, Copy, Debug)]
struct Choice {
    treatment: Treatment,
    /// The bytes it holds.
    held: u64,
    /// What it adds to the step with every region kept, in seconds.
    cost: f64,
    /// The most bytes the instances before it may hold when it is chosen (its backward window's
    /// bound); `None`: no bound.
    bound: Option<u64>,
}

/// The multiple-choice knapsack the planner solves: one choice per instance, `held` rounded up
/// to `unit` bytes, minimising the summed cost within `capacity` bytes in all and within each
/// chosen option's bound on the bytes before it. `None` if nothing fits.
fn solve(options: &[Vec<Choice>], capacity: u64, unit: u64) -> Option<Vec<usize>> {
    let slots = (capacity / unit) as usize;
    let units = |held: u64| held.div_ceil(unit) as usize;
    // Rounded down: the bytes before, rounded up, within it are within the bound.
    let bound = |cap: Option<u64>| cap.map_or(slots, |cap| ((cap / unit) as usize).min(slots));
    // best[c]: the least cost of the instances so far holding at most c units (non-increasing
    // in c); choice[i][c] what instance i took there.
    let mut best = vec![0.0f64; slots + 1];
    let mut choice: Vec<Vec<u8>> = Vec::with_capacity(options.len());
    for instance in options {
        let mut next = vec![f64::INFINITY; slots + 1];
        let mut took = vec![u8::MAX; slots + 1];
        for (o, choice) in instance.iter().enumerate() {
            let (need, before) = (units(choice.held), bound(choice.bound));
            for c in need..=slots {
                let total = best[(c - need).min(before)] + choice.cost;
                if total < next[c] {
                    next[c] = total;
                    took[c] = o as u8;
                }
            }
        }
        best = next;
        choice.push(took);
    }
    if !best[slots].is_finite() {
        return None;
    }
    let mut picked = vec![0; options.len()];
    let mut c = slots;
    for i in (0..options.len()).rev() {
        let o = choice[i][c] as usize;
        picked[i] = o;
        let Choice {
            held, bound: cap, ..
        } = options[i][o];
        c = (c - units(held)).min(bound(cap));
    }
    Some(picked)
}

impl Profile {
    /// The plan with the least predicted step time whose predicted peak is within
    /// `budget_bytes` (see the module's documentation for how it predicts), or why none is.
    pub fn plan(&self, budget_bytes: u64) -> Result<Plan, PlanError> {
        let regions = self.steps[0].report.regions.len();
        let cost = |t: Treatment, i: usize| self.cost(t, i);
        // First the profiled steps that fit, each a plan giving every region one treatment,
        // its time and peak measured; a mix replaces one only if predicted faster (a tie keeps
        // the measured).
        let mut best: Option<(f64, u64, Vec<Treatment>)> = None;
        let mut consider = |time: f64, peak: u64, chosen: Vec<Treatment>| {
            if best.as_ref().is_none_or(|(t, ..)| time < *t - 1e-9) {
                best = Some((time, peak, chosen));
            }
        };
        for step in self
            .steps
            .iter()
            .filter(|s| s.report.peak_bytes <= budget_bytes)
        {
            let time = step.report.seconds - self.step(Treatment::Keep).seconds;
            consider(time, step.report.peak_bytes, vec![step.treatment; regions]);
        }
        let unit = (budget_bytes / 4096).max(1);
        // Each non-empty set of treatments: its largest rest, then the knapsack within the rest
        // of the budget over those treatments only.
        for allowed in self.treatment_sets() {
            let fixed = allowed.iter().map(|&t| self.rest(t)).max().unwrap_or(0);
            let Some(capacity) = budget_bytes.checked_sub(fixed) else {
                continue;
            };
            let options: Vec<Vec<Choice>> = (0..regions)
                .map(|i| {
                    allowed
                        .iter()
                        .filter_map(|&t| {
                            let cap = match self.window(t, i) {
                                0 => None,
                                // What the regions before may hold: the budget less the window's
                                // rest; a window over the budget rules the choice out.
                                window => Some(
                                    (budget_bytes + self.held_before(t, i)).checked_sub(window)?,
                                ),
                            };
                            Some(Choice {
                                treatment: t,
                                held: self.held(t, i),
                                cost: cost(t, i),
                                bound: cap,
                            })
                        })
                        .collect()
                })
                .collect();
            let Some(picked) = solve(&options, capacity, unit) else {
                continue;
            };
            let chosen: Vec<Treatment> = picked
                .iter()
                .enumerate()
                .map(|(i, &o)| options[i][o].treatment)
                .collect();
            let time: f64 = chosen.iter().enumerate().map(|(i, &t)| cost(t, i)).sum();
            // The peak as predicted, with the treatments actually used.
            consider(time, self.predict(&chosen), chosen);
        }
        // The knapsack rounds what each instance holds up: at a budget a measured step just met
        // (the floor, say) it may find nothing, but that step's plan fits, measured.
        let Some((_, peak, chosen)) = best else {
            return Err(self.below_floor(budget_bytes));
        };
        Ok(Plan {
            budget_bytes,
            predicted_peak_bytes: peak,
            ..self.plan_of(chosen)
        })
    }

    /// The plan giving the profiled top-level regions, in order, `treatments`, on this
    /// profile's base, with its predicted recompute and step time.
    fn plan_of(&self, treatments: impl IntoIterator<Item = Treatment>) -> Plan {
        let regions = &self.steps[0].report.regions;
        let mut recompute = 0.0;
        let mut plan = regions.iter().zip(treatments).enumerate().fold(
            Plan::new(),
            |plan, (i, (region, treatment))| {
                recompute += self.cost(treatment, i);
                plan.with(region.name.clone(), region.index, treatment)
            },
        );
        plan.base = self.base;
        plan.predicted_recompute_seconds = recompute;
        plan.predicted_step_seconds = self.step(Treatment::Keep).seconds + recompute;
        plan
    }

    /// What instance `i` holds under `treatment` (nothing, rather than less than nothing).
    fn held(&self, treatment: Treatment, i: usize) -> u64 {
        self.step(treatment).regions[i].held_bytes.max(0) as u64
    }

    /// What the instances before `i` hold under `treatment`.
    fn held_before(&self, treatment: Treatment, i: usize) -> u64 {
        (0..i).map(|k| self.held(treatment, k)).sum()
    }

    /// The peak of instance `i`'s backward window under `treatment`; 0 where none was measured
    /// (a kept region, or a profile saved before windows were recorded).
    fn window(&self, treatment: Treatment, i: usize) -> u64 {
        self.step(treatment).regions[i].backward_peak_bytes
    }

    /// What the step under `treatment` holds besides its regions outside the backward windows:
    /// its peak there less what the regions hold.
    fn rest(&self, treatment: Treatment) -> u64 {
        let step = self.step(treatment);
        let outside = step.outside_windows_peak_bytes.unwrap_or(step.peak_bytes);
        outside.saturating_sub(step.held_by_regions())
    }

    /// The peak the planner predicts for the instances under `chosen` (the module's
    /// documentation says how).
    pub(super) fn predict(&self, chosen: &[Treatment]) -> u64 {
        let held: Vec<u64> = chosen
            .iter()
            .enumerate()
            .map(|(i, &t)| self.held(t, i))
            .collect();
        let rest = chosen.iter().map(|&t| self.rest(t)).max().unwrap_or(0);
        let all_held = rest + held.iter().sum::<u64>();
        let mut before = 0;
        let mut windows = 0;
        for (j, &t) in chosen.iter().enumerate() {
            let window = self.window(t, j);
            if window > 0 {
                windows = windows.max((window + before).saturating_sub(self.held_before(t, j)));
            }
            before += held[j];
        }
        all_held.max(windows)
    }

    /// The smallest peak the planner can reach for these regions: the least of the measured
    /// peaks and of the predicted peaks with every instance under the treatment (of a set of
    /// treatments) that holds least.
    pub fn smallest_peak(&self) -> u64 {
        self.least_plan().predicted_peak_bytes
    }

    /// The plan of [`Profile::smallest_peak`]: every region under the treatment of the measured
    /// step that peaked least, or, where a mix predicts less, each region under the treatment
    /// (of the best set) that holds least. What a fit on a device tries last, whatever the
    /// target, and what a caller keeping a budget over a run starts from.
    ///
    /// ```
    /// use burn_checkpoint_core::engine::{planned, recording};
    /// use burn_checkpoint_core::memory::HostMeter;
    /// use burn_checkpoint_core::planner::Profile;
    /// use burn_checkpoint_core::{RegionId, RegionName, Treatment};
    ///
    /// let mut step = || {
    ///     let held = vec![1u8; 4096];
    ///     let id = RegionId::next(RegionName::new("block"));
    ///     recording::top_level_opened(&id.name, id.index, planned(&id));
    ///     recording::top_level_closed();
    ///     drop(held);
    /// };
    /// let profile = Profile::try_measure(HostMeter, &Treatment::ALL, &mut step)?;
    /// assert_eq!(profile.least_plan().predicted_peak_bytes, profile.smallest_peak());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn least_plan(&self) -> Plan {
        let least = self.least_measured_plan();
        let regions = self.steps[0].report.regions.len();
        let mixed = self
            .treatment_sets()
            .map(|allowed| {
                let chosen: Vec<Treatment> = (0..regions)
                    .map(|i| {
                        *allowed
                            .iter()
                            .min_by_key(|&&t| self.held(t, i))
                            .expect("a set is not empty")
                    })
                    .collect();
                (self.predict(&chosen), chosen)
            })
            .min_by_key(|(predicted, _)| *predicted);
        match mixed {
            Some((predicted, chosen)) if predicted < least.predicted_peak_bytes => {
                let mut plan = self.plan_of(chosen);
                plan.predicted_peak_bytes = predicted;
                plan
            }
            _ => least,
        }
    }

    /// Every region under the treatment of the profiled step that peaked least: the plan whose
    /// prediction is a step of the profile itself (measured, or extrapolated from measured
    /// steps), not a sum of its parts. What a fit on the host tries last, where predictions
    /// missed.
    pub(crate) fn least_measured_plan(&self) -> Plan {
        let least = self.least_step();
        let regions = least.report.regions.len();
        let mut plan = self.plan_of(vec![least.treatment; regions]);
        plan.predicted_peak_bytes = least.report.peak_bytes;
        plan
    }

    /// The peak with every region kept (no recompute): a budget at or above it needs no plan.
    pub fn largest_peak(&self) -> u64 {
        self.step(Treatment::Keep).peak_bytes
    }

    /// The profiled step that peaked least.
    pub(crate) fn least_step(&self) -> &TreatedStep {
        self.steps
            .iter()
            .min_by_key(|s| s.report.peak_bytes)
            .expect("a profile has a step per treatment")
    }

    /// Why no plan meets `budget`: the floor, and what holds it.
    pub(super) fn below_floor(&self, budget: u64) -> PlanError {
        let least = self.least_step();
        PlanError::BelowFloor {
            budget,
            floor: self.smallest_peak(),
            holders: holders(least.treatment, &least.report),
        }
    }

    /// Every non-empty set of the profiled treatments.
    fn treatment_sets(&self) -> impl Iterator<Item = Vec<Treatment>> + use<> {
        let treatments = self.treatments();
        (1u32..(1 << treatments.len())).map(move |set| {
            treatments
                .iter()
                .enumerate()
                .filter(|(k, _)| set & (1 << k) != 0)
                .map(|(_, t)| *t)
                .collect()
        })
    }

    /// What instance `i` adds to the step with every region kept, under `treatment`, in
    /// seconds: its share of what the step with every region under `treatment` took more than
    /// that step ([`Profile::retime`]: medians), shared out in proportion to the instances'
    /// measured recomputes (evenly where none was timed: save-compute-bound on Burn 0.22, where
    /// Burn's own backward recomputes the memory-bound ops). A plan giving every region one
    /// treatment is so predicted at that step's measured time.
    ///
    /// Summing the recomputes alone missed what a treatment changes besides them: on Burn's
    /// Balanced, a region's recompute replaces recomputes Burn's checkpointing did, and on
    /// either base holding less can make the rest of the step faster. Such a share is negative:
    /// that treatment's step was faster than keeping.
    fn cost(&self, treatment: Treatment, i: usize) -> f64 {
        if treatment == Treatment::Keep {
            return 0.0;
        }
        let step = self.step(treatment);
        let extra = step.seconds - self.step(Treatment::Keep).seconds;
        let timed: f64 = step.regions.iter().map(|r| r.recompute_seconds).sum();
        if timed > 0.0 {
            extra * step.regions[i].recompute_seconds / timed
        } else {
            extra / step.regions.len() as f64
        }
    }
}

/// What holds the peak of `step` (every region under `treatment`), for the error.
fn holders(treatment: Treatment, step: &StepReport) -> String {
    let mut kinds: Vec<_> = step.outside_by_kind.iter().collect();
    kinds.sort_by(|a, b| b.1.cmp(a.1));
    let kinds: Vec<String> = kinds
        .iter()
        .take(3)
        .map(|(kind, bytes)| format!("{kind:?} {:.1} MiB", mib(**bytes as usize)))
        .collect();
    let made = match step.outside_made() {
        Some(bytes) => format!(
            "they made {:.1} MiB over the step: {}",
            mib(bytes as usize),
            kinds.join(", ")
        ),
        None => "what they made is not measured".to_string(),
    };
    format!(
        "measured with every region {treatment}: peak {:.1} MiB at {}; {:.1} MiB of it held at the \
         regions' boundaries; the rest is what ops outside regions hold ({made}), the weights' \
         gradients, the optimizer state and backward's working memory",
        mib(step.peak_bytes as usize),
        step.peak_at,
        mib(step.held_by_regions() as usize),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(treatment: Treatment, held: u64, cost: f64, bound: Option<u64>) -> Choice {
        Choice {
            treatment,
            held,
            cost,
            bound,
        }
    }

    #[test]
    fn the_knapsack_picks_the_cheapest_plan_that_fits() {
        use Treatment::*;
        // Two instances: keeping costs 0 and holds 10; recomputing costs 1 (or 3) and holds 2.
        let options = vec![
            vec![c(Keep, 10, 0.0, None), c(RecomputeAll, 2, 1.0, None)],
            vec![c(Keep, 10, 0.0, None), c(RecomputeAll, 2, 3.0, None)],
        ];
        assert_eq!(solve(&options, 20, 1), Some(vec![0, 0]));
        // 12 fits one kept: the cheaper one recomputes.
        assert_eq!(solve(&options, 12, 1), Some(vec![1, 0]));
        assert_eq!(solve(&options, 4, 1), Some(vec![1, 1]));
        assert_eq!(solve(&options, 3, 1), None);
        // Rounding up to the unit never lets a plan overflow.
        assert_eq!(solve(&options, 12, 4), Some(vec![1, 1]));
    }

    /// A region written with its own policy, profiled as written, holding what recomputing all
    /// holds but faster than keeping (as DenseNet's layers keeping batch norm's statistics,
    /// over Balanced): where it fits, the planner chooses it for every region, predicted at
    /// its step's measured time; a mix predicted no faster than a measured step loses to it.
    #[test]
    fn a_step_as_written_faster_than_keeping_is_chosen_where_it_fits() {
        let mut profile: Profile =
            serde_json::from_str(include_str!("../../tests/fixtures/profile-before-30.json"))
                .unwrap();
        for (step, seconds) in profile.steps.iter_mut().zip([1.0, 1.2, 1.4]) {
            step.report.seconds = seconds;
        }
        let mut written = profile
            .steps
            .iter()
            .find(|s| s.treatment == Treatment::RecomputeAll)
            .unwrap()
            .clone();
        written.treatment = Treatment::AsWritten;
        written.report.seconds = 0.9;
        profile.steps.push(written.clone());
        for budget in [written.report.peak_bytes, profile.largest_peak()] {
            let plan = profile.plan(budget).unwrap();
            let counts = plan.counts();
            assert_eq!(counts["block"][&Treatment::AsWritten], 3, "{plan}");
            assert!((plan.predicted_step_seconds - 0.9).abs() < 1e-9, "{plan}");
            assert!(plan.predicted_recompute_seconds < 0.0, "{plan}");
            assert_eq!(plan.predicted_peak_bytes, written.report.peak_bytes);
        }
        // Slower than keeping, it is chosen only where memory asks for it, as the others.
        profile.steps.last_mut().unwrap().report.seconds = 1.1;
        let roof = profile.plan(profile.largest_peak()).unwrap();
        assert_eq!(roof.counts()["block"][&Treatment::Keep], 3, "{roof}");
        let floor = profile.plan(written.report.peak_bytes).unwrap();
        assert_eq!(floor.counts()["block"][&Treatment::AsWritten], 3, "{floor}");
        assert!((floor.predicted_step_seconds - 1.1).abs() < 1e-9, "{floor}");
    }

    #[test]
    fn a_window_bounds_what_the_instances_before_it_hold() {
        use Treatment::*;
        // Keeping the second holds 20 bytes; recomputing it costs 3 and its window leaves room
        // for 4 bytes before it.
        let bounded = |cap| {
            vec![
                vec![c(Keep, 10, 0.0, None), c(RecomputeAll, 2, 1.0, None)],
                vec![c(Keep, 20, 0.0, None), c(RecomputeAll, 2, 3.0, cap)],
            ]
        };
        // Unbounded, 14 bytes fit the first kept and the second recomputed.
        assert_eq!(solve(&bounded(None), 14, 1), Some(vec![0, 1]));
        // Bounded, the first kept (10 bytes before the second) breaks the window: both recompute.
        assert_eq!(solve(&bounded(Some(4)), 14, 1), Some(vec![1, 1]));
        // With room for both kept, no window applies.
        assert_eq!(solve(&bounded(Some(4)), 30, 1), Some(vec![0, 0]));
        // A window no instance before it fits under: no plan recomputes the second.
        assert_eq!(solve(&bounded(Some(1)), 14, 1), None);
    }
}
