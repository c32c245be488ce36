//! A `--memory-budget` kept over a whole training run on a device: [`Guard`].
//!
//! The planner checks its plan on one step of a copy of the model, on the calling thread. In
//! burn-train a step runs on a worker thread, the optimizer's update on another, metrics and the
//! data loader on others still, and cubecl gives each thread a stream with pools of its own:
//! their pages count in what the device reserves, and the checked step saw none of them
//! (docs/burn-0.22-train.md measures a plan checked at 97.9 MiB reserving 111.8 in a run). So the
//! run plans each step against the budget itself: before each step the pools give back the pages no
//! tensor holds and what they still hold is read; the step runs the plan predicted to fit in what
//! is left, with what the pages added to a plan's predicted peak in the run's steps so far (its
//! slack: the most bytes seen, and the most as a share of the prediction, since the pages grow
//! with what a plan allocates) counted; after it, the pages go back again before the update. The
//! first step, with no slack seen yet, runs the plan that holds least.
//!
//! What no plan decides is watched instead: from the end of each step to the start of the next
//! (the optimizer's update, the next batch loaded) and through each validation batch the pools
//! are sampled too. A step whose plan cannot fit, or any of these phases over the budget, stops
//! the run with a message naming the phase and the budget it would take (the trainer's exit
//! status 2), so a run that ends well kept its budget throughout: a promise kept, or refused.

use std::sync::{Arc, Mutex, MutexGuard};

use burn_checkpoint_22::memory::{Measure, MemoryMeter, Meter};
use burn_checkpoint_22::planner::{Plan, Profile};
use burn_checkpoint_core::memory::size;

/// A budget kept over a run's steps on a device: the plan each step runs under, chosen from
/// the profile the planner planned from, and what the run's pages add to it (see the module's
/// documentation). Clones share one state (burn-train forks the model per step).
///
/// ```no_run
/// use burn_checkpoint_22::memory::Meter;
/// use burn_checkpoint_22::planner::Profile;
/// use burn_checkpoint_22_train::budget::Guard;
///
/// # fn profile() -> Profile { unimplemented!() }
/// # fn meter() -> Meter { unimplemented!() }
/// let guard = Guard::new(80 << 20, profile());
/// let (plan, start) = guard.before_step(&meter()).expect("the budget can hold");
/// // … the step runs under `plan`, its reserved peak measured …
/// # let peak = 0;
/// guard.after_step(&plan, start, peak, &meter()).expect("within the budget");
/// ```
#[derive(Clone)]
pub struct Guard(Arc<Mutex<State>>);

// burn-train's summary prints the model: one word.
impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Guard")
    }
}

struct State {
    budget: u64,
    profile: Profile,
    /// What the pools grew during the steps so far beyond their plans' predicted peaks in use:
    /// the most bytes, and the most as a share of the prediction; `None` before the first step.
    slack: Option<Slack>,
    /// The plan the last step ran, and how many times the plan changed.
    current: Option<Plan>,
    changes: usize,
    /// Steps run so far (for messages).
    steps: usize,
    /// The pools sampled since the last step ended (its update, loading, validation).
    outside: Option<Measure>,
}

/// What the pages added to the steps' predicted peaks so far (see [`State::slack`]).
#[derive(Clone, Copy, Debug)]
struct Slack {
    most: u64,
    share: f64,
}

impl Slack {
    /// The bytes a step under a plan predicted to peak at `predicted` is expected to add to its
    /// start: the prediction, and the pages seen so far added to it, both as bytes and as a
    /// share of it (the pages grow with the bytes a plan allocates: a plan larger than those
    /// run so far is held to the share).
    fn expected(self, predicted: u64) -> u64 {
        let by_share = (predicted as f64 * (1.0 + self.share)).ceil() as u64;
        (predicted + self.most).max(by_share)
    }

    /// The largest prediction whose expected bytes fit in `room`.
    fn room_for_prediction(self, room: u64) -> u64 {
        let by_share = (room as f64 / (1.0 + self.share)).floor() as u64;
        room.saturating_sub(self.most).min(by_share)
    }
}

impl Guard {
    /// A guard keeping each step within `budget` bytes reserved, planning from `profile`.
    pub fn new(budget: u64, profile: Profile) -> Self {
        Guard(Arc::new(Mutex::new(State {
            budget,
            profile,
            slack: None,
            current: None,
            changes: 0,
            steps: 0,
            outside: None,
        })))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Before a step: the pages no tensor holds go back, what the pools still hold is read
    /// (`start`), and the plan predicted to keep the step within the budget is chosen. An error
    /// says why none can, or that the pools went over the budget since the last step ended.
    pub fn before_step(&self, meter: &Meter) -> Result<(Plan, u64), String> {
        self.check_outside(
            "between two steps (the optimizer's update, the next batch loaded)",
            None,
        )?;
        meter.release();
        let start = meter.reserved().unwrap_or(0);
        let mut state = self.lock();
        let plan = match state.slack {
            None => state.profile.least_plan(),
            Some(slack) => {
                let room = state.budget.saturating_sub(start);
                let plan = state.profile.plan(slack.room_for_prediction(room)).ok();
                let plan = plan.unwrap_or_else(|| state.profile.least_plan());
                let adds = slack.expected(plan.predicted_peak_bytes);
                if start + adds > state.budget {
                    return Err(format!(
                        "--memory-budget {}: the run's pools hold {} between steps, and a step \
                         under the plan that holds least adds {} (its predicted peak of {}, and \
                         the pages the steps so far added to theirs: up to {}, {:.0} % of a \
                         prediction): a budget of at least {} in this run",
                        size(state.budget),
                        size(start),
                        size(adds),
                        size(plan.predicted_peak_bytes),
                        size(slack.most),
                        slack.share * 100.0,
                        size(start + adds)
                    ));
                }
                plan
            }
        };
        if state
            .current
            .as_ref()
            .is_some_and(|current| current.regions != plan.regions)
        {
            state.changes += 1;
        }
        state.current = Some(plan.clone());
        Ok((plan, start))
    }

    /// After a step under `plan` that began with `start` bytes reserved and reserved at most
    /// `peak`: what the pages added to its prediction is kept (the most seen), and the pages
    /// the step no longer needs go back before the update, which is sampled from here. An error
    /// where the step went over the budget.
    pub fn after_step(
        &self,
        plan: &Plan,
        start: u64,
        peak: u64,
        meter: &Meter,
    ) -> Result<(), String> {
        let mut state = self.lock();
        let added = peak
            .saturating_sub(start)
            .saturating_sub(plan.predicted_peak_bytes);
        let first = state.slack.is_none();
        let share = added as f64 / plan.predicted_peak_bytes.max(1) as f64;
        let seen = Slack { most: added, share };
        state.slack = Some(state.slack.map_or(seen, |slack| Slack {
            most: slack.most.max(added),
            share: slack.share.max(share),
        }));
        state.steps += 1;
        let (budget, step) = (state.budget, state.steps);
        drop(state);
        meter.release();
        if peak > budget {
            let under = match first {
                true => "the plan that holds least".to_string(),
                false => format!(
                    "a plan predicted to peak at {}, to which its pages added {}, more than the \
                     steps before had added to theirs",
                    size(plan.predicted_peak_bytes),
                    size(added)
                ),
            };
            return Err(format!(
                "--memory-budget {}: the run's step {step}, under {under}, reserved {} (its pools \
                 held {} when it began): a budget of at least that in this run",
                size(budget),
                size(peak),
                size(start)
            ));
        }
        self.lock().outside = Some(meter.start());
        Ok(())
    }

    /// After a validation batch: the pools sampled since the last step ended (its update, and
    /// validation so far) are checked against the budget, and sampled again from here. An error
    /// where they went over it.
    pub fn after_validation_batch(&self, meter: &Meter) -> Result<(), String> {
        self.check_outside("validation (with the last step's update)", Some(meter))
    }

    /// The pools' most reserved bytes since the last step ended, checked against the budget;
    /// sampled again from here with `meter` where given. An error naming `phase` where they went
    /// over.
    fn check_outside(&self, phase: &str, again: Option<&Meter>) -> Result<(), String> {
        let outside = self.lock().outside.take();
        let reserved = outside.and_then(|measure| measure.finish().reserved);
        let budget = self.lock().budget;
        if let Some(reserved) = reserved
            && reserved > budget
        {
            return Err(format!(
                "--memory-budget {}: {phase} the pools reserved {}, which no plan decides: a \
                 budget of at least that in this run",
                size(budget),
                size(reserved)
            ));
        }
        if let Some(meter) = again {
            self.lock().outside = Some(meter.start());
        }
        Ok(())
    }

    /// After the run: `reserved`, the most its pools held from its first step to its last
    /// validation batch, checked against the budget (what a phase's own sampling could miss).
    pub fn check_run(&self, reserved: u64) -> Result<(), String> {
        let mut state = self.lock();
        // The sampling the last validation batch started again has nothing left to watch.
        drop(state.outside.take());
        let budget = state.budget;
        drop(state);
        if reserved > budget {
            return Err(format!(
                "--memory-budget {}: the run's pools reserved {} over its steps, updates and \
                 validation: a budget of at least that in this run",
                size(budget),
                size(reserved)
            ));
        }
        Ok(())
    }

    /// How many times a step ran another plan than the step before.
    pub fn changes(&self) -> usize {
        self.lock().changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A profile of three regions the core crate keeps as a fixture (peaks of 117 to 136 KiB).
    fn profile() -> Profile {
        serde_json::from_str(include_str!(
            "../../../core/tests/fixtures/profile-before-30.json"
        ))
        .unwrap()
    }

    /// The first step runs the plan that holds least; once a step has shown what the pages
    /// add, each step runs the plan predicted to fit what is left, and a budget no plan can
    /// keep is refused before the step, saying the least it would take.
    #[test]
    fn each_step_runs_the_plan_that_fits_what_is_left() {
        let (profile, meter) = (profile(), Meter::Host);
        let (least, roof) = (profile.smallest_peak(), profile.largest_peak());
        let slack = 10_000;
        let guard = Guard::new(roof + slack, profile.clone());
        let (first, start) = guard.before_step(&meter).unwrap();
        assert_eq!((first.predicted_peak_bytes, start), (least, 0));
        // The step's pools grew by its prediction and `slack` more.
        guard
            .after_step(&first, start, least + slack, &meter)
            .unwrap();
        let (second, _) = guard.before_step(&meter).unwrap();
        assert!(second.predicted_peak_bytes <= roof, "{second:?}");
        assert!(
            second.predicted_peak_bytes > least,
            "more room: a faster plan"
        );
        assert_eq!(guard.changes(), 1);

        let tight = Guard::new(least + slack - 1, profile.clone());
        let (first, start) = tight.before_step(&meter).unwrap();
        tight.after_step(&first, start, least - 1, &meter).unwrap();
        // Below what the least plan and the pages seen take: refused.
        let tight = Guard::new(least, profile.clone());
        let (first, start) = tight.before_step(&meter).unwrap();
        tight
            .after_step(&first, start, least + slack, &meter)
            .unwrap_err();
        let refused = tight.before_step(&meter).unwrap_err();
        assert!(refused.contains("a budget of at least"), "{refused}");
    }

    /// A step over the budget after the first, under a plan that fitted, stops the run; so does
    /// a whole run whose pools went over it, however they did.
    #[test]
    fn a_step_or_a_run_over_the_budget_is_refused() {
        let (profile, meter) = (profile(), Meter::Host);
        let budget = profile.largest_peak();
        let guard = Guard::new(budget, profile);
        let (first, start) = guard.before_step(&meter).unwrap();
        guard
            .after_step(&first, start, first.predicted_peak_bytes, &meter)
            .unwrap();
        let (second, start) = guard.before_step(&meter).unwrap();
        let over = guard
            .after_step(&second, start, budget + 1, &meter)
            .unwrap_err();
        assert!(
            over.contains("the run's step 2, under a plan predicted"),
            "{over}"
        );
        guard.check_run(budget).unwrap();
        let over = guard.check_run(budget + 1).unwrap_err();
        assert!(
            over.contains("over its steps, updates and validation"),
            "{over}"
        );
    }
}
