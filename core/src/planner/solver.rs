//! The budget planner: from a [`Profile`], a [`Treatment`] for every top-level region instance
//! so that the step's peak stays within a byte budget at the least recompute time.
//!
//! # How it decides
//!
//! The profile gives, for each region instance `i` and treatment `t`, the bytes it holds from
//! forward to backward `h[i][t]` and the time its recompute takes `c[i][t]` (measured), and for
//! each treatment the step's peak `P[t]` with every region so. The planner predicts a plan's peak
//! as `Σ h[i][t_i] + max F[t]` over the treatments it uses, where `F[t] = P[t] − Σ_i h[i][t]` is
//! what the step holds besides the regions under `t` (weights, gradients, the optimizer, what
//! is made outside regions, and the transient of backward or of one region's recompute). This
//! is exact for the three measured plans and a heuristic between them: it assumes the peak
//! comes where everything regions hold is still held (the start of backward), which holds for
//! networks whose activations dominate. For each set of treatments it solves the
//! multiple-choice knapsack (minimise `Σ c`, subject to `Σ h ≤ budget − max F`) exactly by
//! dynamic programming over bytes in 4096 steps of the budget, rounding each `h` up (so the
//! prediction never undercounts), and keeps the cheapest plan.
//!
//! [`Profile::fit`] then checks the plan on real steps: if a measured peak is over the budget, it
//! plans again for the budget less the overshoot (at most three times).

use super::plan::Plan;
use super::profile::Profile;
use crate::memory::{StepReport, mib};
use crate::treatment::Treatment;

/// Why no plan fits the budget.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// Even the plan that holds least is predicted (or measured) over the budget.
    #[error(
        "a budget of {budget:.1} MiB cannot be met: the smallest peak these regions reach is \
         {floor:.1} MiB ({holders})",
        budget = mib(*budget as usize),
        floor = mib(*floor as usize)
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

/// The multiple-choice knapsack the planner solves: one treatment per instance, `held` rounded up
/// to `unit` bytes, minimising the summed cost within `capacity` bytes. `None` if nothing fits.
fn solve(options: &[Vec<(Treatment, u64, f64)>], capacity: u64, unit: u64) -> Option<Vec<usize>> {
    let slots = (capacity / unit) as usize;
    let units = |held: u64| held.div_ceil(unit) as usize;
    // best[c]: the least cost of the instances so far within c units; choice[i][c] what instance
    // i took there.
    let mut best = vec![0.0f64; slots + 1];
    let mut choice: Vec<Vec<u8>> = Vec::with_capacity(options.len());
    for instance in options {
        let mut next = vec![f64::INFINITY; slots + 1];
        let mut took = vec![u8::MAX; slots + 1];
        for (o, &(_, held, cost)) in instance.iter().enumerate() {
            let need = units(held);
            for c in need..=slots {
                let total = best[c - need] + cost;
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
        c -= units(options[i][o].1);
    }
    Some(picked)
}

impl Profile {
    /// The plan with the least recompute time whose predicted peak is within `budget_bytes` (see
    /// the module's documentation for how it predicts), or why none is.
    pub fn plan(&self, budget_bytes: u64) -> Result<Plan, PlanError> {
        let regions = &self.steps[0].report.regions;
        if budget_bytes >= self.largest_peak() {
            // Measured: with every region kept the step fits (no rounding of a prediction).
            let mut plan = self.plan_of(regions.iter().map(|_| Treatment::Keep));
            plan.budget_bytes = budget_bytes;
            plan.predicted_peak_bytes = self.largest_peak();
            return Ok(plan);
        }
        let cost = |t: Treatment, i: usize| self.cost(t, i);
        let unit = (budget_bytes / 4096).max(1);
        let mut best: Option<(f64, u64, Vec<Treatment>)> = None;
        // Each non-empty set of treatments: its largest rest, then the knapsack within the rest
        // of the budget over those treatments only.
        for allowed in self.treatment_sets() {
            let fixed = allowed.iter().map(|&t| self.rest(t)).max().unwrap_or(0);
            let Some(capacity) = budget_bytes.checked_sub(fixed) else {
                continue;
            };
            let options: Vec<Vec<_>> = (0..regions.len())
                .map(|i| {
                    allowed
                        .iter()
                        .map(|&t| (t, self.held(t, i), cost(t, i)))
                        .collect()
                })
                .collect();
            let Some(picked) = solve(&options, capacity, unit) else {
                continue;
            };
            let chosen: Vec<Treatment> = picked
                .iter()
                .enumerate()
                .map(|(i, &o)| options[i][o].0)
                .collect();
            let time: f64 = chosen.iter().enumerate().map(|(i, &t)| cost(t, i)).sum();
            // The peak as predicted, with the treatments actually used.
            let used_rest = chosen.iter().map(|&t| self.rest(t)).max().unwrap_or(0);
            let peak = used_rest
                + chosen
                    .iter()
                    .enumerate()
                    .map(|(i, &t)| self.held(t, i))
                    .sum::<u64>();
            if best.as_ref().is_none_or(|(t, ..)| time < *t) {
                best = Some((time, peak, chosen));
            }
        }
        // The knapsack rounds what each instance holds up: at a budget a measured step just met
        // (the floor, say), it may find nothing; that step's plan fits, measured.
        let measured = || {
            self.steps
                .iter()
                .filter(|s| s.report.peak_bytes <= budget_bytes)
                .map(|s| {
                    let chosen = vec![s.treatment; regions.len()];
                    let time = (0..regions.len()).map(|i| cost(s.treatment, i)).sum();
                    (time, s.report.peak_bytes, chosen)
                })
                .min_by(|a: &(f64, u64, Vec<Treatment>), b| a.0.total_cmp(&b.0))
        };
        let Some((time, peak, chosen)) = best.or_else(measured) else {
            return Err(self.below_floor(budget_bytes));
        };
        Ok(Plan {
            budget_bytes,
            predicted_peak_bytes: peak,
            predicted_recompute_seconds: time,
            ..self.plan_of(chosen)
        })
    }

    /// The plan giving the profiled top-level regions, in order, `treatments`.
    fn plan_of(&self, treatments: impl IntoIterator<Item = Treatment>) -> Plan {
        let regions = &self.steps[0].report.regions;
        regions
            .iter()
            .zip(treatments)
            .fold(Plan::new(), |plan, (region, treatment)| {
                plan.with(region.name.clone(), region.index, treatment)
            })
    }

    /// What instance `i` holds under `treatment` (nothing, rather than less than nothing).
    fn held(&self, treatment: Treatment, i: usize) -> u64 {
        self.step(treatment).regions[i].held_bytes.max(0) as u64
    }

    /// What the step under `treatment` holds besides its regions: its peak less what the regions
    /// hold.
    fn rest(&self, treatment: Treatment) -> u64 {
        let step = self.step(treatment);
        step.peak_bytes.saturating_sub(step.held_by_regions())
    }

    /// The smallest peak the planner can reach for these regions: the least of the measured
    /// peaks and of the predicted peaks with every instance under the treatment (of a set of
    /// treatments) that holds least.
    pub fn smallest_peak(&self) -> u64 {
        let measured = self.steps.iter().map(|s| s.report.peak_bytes).min();
        let regions = self.steps[0].report.regions.len();
        let predicted = self
            .treatment_sets()
            .map(|allowed| {
                let fixed = allowed.iter().map(|&t| self.rest(t)).max().unwrap_or(0);
                let least = (0..regions)
                    .map(|i| allowed.iter().map(|&t| self.held(t, i)).min().unwrap_or(0))
                    .sum::<u64>();
                fixed + least
            })
            .min();
        predicted.into_iter().chain(measured).min().unwrap_or(0)
    }

    /// The plan of [`Profile::smallest_peak`]: every region under the treatment of the measured
    /// step that peaked least, or, where a mix predicts less, each region under the treatment
    /// (of the best set) that holds least. What a fit tries last, whatever the target.
    pub(crate) fn least_plan(&self) -> Plan {
        let least = self
            .steps
            .iter()
            .min_by_key(|s| s.report.peak_bytes)
            .expect("a profile has a step per treatment");
        let regions = self.steps[0].report.regions.len();
        let mixed = self
            .treatment_sets()
            .map(|allowed| {
                let fixed = allowed.iter().map(|&t| self.rest(t)).max().unwrap_or(0);
                let chosen: Vec<Treatment> = (0..regions)
                    .map(|i| {
                        *allowed
                            .iter()
                            .min_by_key(|&&t| self.held(t, i))
                            .expect("a set is not empty")
                    })
                    .collect();
                let held: u64 = chosen
                    .iter()
                    .enumerate()
                    .map(|(i, &t)| self.held(t, i))
                    .sum();
                (fixed + held, chosen)
            })
            .min_by_key(|(predicted, _)| *predicted);
        let (predicted, chosen) = match mixed {
            Some((predicted, chosen)) if predicted < least.report.peak_bytes => (predicted, chosen),
            _ => (least.report.peak_bytes, vec![least.treatment; regions]),
        };
        let mut plan = self.plan_of(chosen);
        plan.predicted_peak_bytes = predicted;
        plan
    }

    /// The peak with every region kept (no recompute): a budget at or above it needs no plan.
    pub fn largest_peak(&self) -> u64 {
        self.step(Treatment::Keep).peak_bytes
    }

    fn below_floor(&self, budget: u64) -> PlanError {
        let (treatment, step) = self
            .steps
            .iter()
            .map(|s| (s.treatment, &s.report))
            .min_by_key(|(_, report)| report.peak_bytes)
            .expect("a profile measures every treatment");
        PlanError::BelowFloor {
            budget,
            floor: self.smallest_peak(),
            holders: holders(treatment, step),
        }
    }
}

impl Profile {
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

    /// What instance `i` costs a step under `treatment`, in seconds: its recompute; for
    /// [`Treatment::Offload`] also what its forward took more than under
    /// [`Treatment::RecomputeAll`] (the copies to host memory), where both were profiled.
    fn cost(&self, treatment: Treatment, i: usize) -> f64 {
        let region = |t: Treatment| &self.step(t).regions[i];
        match treatment {
            Treatment::Keep => 0.0,
            Treatment::Offload if self.treatments().contains(&Treatment::RecomputeAll) => {
                let copies = region(Treatment::Offload).forward_seconds
                    - region(Treatment::RecomputeAll).forward_seconds;
                region(Treatment::Offload).recompute_seconds + copies.max(0.0)
            }
            t => region(t).recompute_seconds,
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
    format!(
        "measured with every region {treatment}: peak {:.1} MiB at {}; {:.1} MiB of it held at the \
         regions' boundaries; the rest is what ops outside regions hold (they made {:.1} MiB over \
         the step: {}), the weights' gradients, the optimizer state and backward's working memory",
        mib(step.peak_bytes as usize),
        step.peak_at,
        mib(step.held_by_regions() as usize),
        mib(step.outside_bytes() as usize),
        kinds.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_knapsack_picks_the_cheapest_plan_that_fits() {
        use Treatment::*;
        // Two instances: keeping costs 0 and holds 10; recomputing costs 1 (or 3) and holds 2.
        let options = vec![
            vec![(Keep, 10, 0.0), (RecomputeAll, 2, 1.0)],
            vec![(Keep, 10, 0.0), (RecomputeAll, 2, 3.0)],
        ];
        assert_eq!(solve(&options, 20, 1), Some(vec![0, 0]));
        // 12 fits one kept: the cheaper one recomputes.
        assert_eq!(solve(&options, 12, 1), Some(vec![1, 0]));
        assert_eq!(solve(&options, 4, 1), Some(vec![1, 1]));
        assert_eq!(solve(&options, 3, 1), None);
        // Rounding up to the unit never lets a plan overflow.
        assert_eq!(solve(&options, 12, 4), Some(vec![1, 1]));
    }
}
