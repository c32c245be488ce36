//! The ways a step can run that the planner chooses among: [`Candidates`], each a [`Profile`]
//! with the caller's [`Step`] that measured it.

use super::fit::{FitError, Fitted};
use super::plan::Plan;
use super::profile::{Profile, ProfileError, RETIME_ROUNDS, Step, retime_interleaved};
use super::solver::PlanError;
use crate::memory::MemoryMeter;

/// One way to run the step: its profile, and the caller's step that measured it (and runs its
/// plans).
#[derive(Debug)]
#[non_exhaustive]
pub struct Candidate<S> {
    /// The step profiled under each treatment, on its [`Base`](super::Base).
    pub profile: Profile,
    /// The step that measured it.
    pub step: S,
}

/// The ways a step can run that the planner chooses among — the same regions on each
/// [`Base`](super::Base), or other placements of them — each a [`Profile`] with the step that
/// measured it. [`retime`](Candidates::retime) times their steps again side by side,
/// [`fastest`](Candidates::fastest) says which one's plan for a budget is predicted fastest, and
/// [`fit`](Candidates::fit) checks that plan on its own step (retiming them first where the
/// choice needs it).
///
/// ```
/// use burn_checkpoint_core::engine::{planned, recording};
/// use burn_checkpoint_core::memory::HostMeter;
/// use burn_checkpoint_core::planner::{Base, Candidates, Profile};
/// use burn_checkpoint_core::{RegionId, RegionName, Treatment};
///
/// // A stand-in for a step of a region on each base: a Burn crate's regions call these hooks.
/// let step = |bytes: usize| {
///     move || {
///         let held = vec![1u8; bytes];
///         let id = RegionId::next(RegionName::new("block"));
///         recording::top_level_opened(&id.name, id.index, planned(&id));
///         recording::top_level_closed();
///         drop(held);
///     }
/// };
/// let mut candidates = Candidates::new();
/// for (base, bytes) in [(Base::Plain, 2048), (Base::Balanced, 1024)] {
///     let mut step = step(bytes);
///     let profile = Profile::try_measure(HostMeter, &Treatment::ALL, &mut step)?.on(base);
///     candidates.push(profile, step);
/// }
/// let (chosen, fitted) = candidates.fit(HostMeter, u64::MAX)?;
/// assert_eq!(fitted.plan.base, chosen.profile.base);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Candidates<S> {
    list: Vec<Candidate<S>>,
    /// Whether [`retime`](Candidates::retime) ran since the last candidate was added.
    retimed: bool,
}

impl<S> Default for Candidates<S> {
    fn default() -> Self {
        Candidates {
            list: Vec::new(),
            retimed: false,
        }
    }
}

impl<S> Candidates<S> {
    /// None yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `profile`, measured by `step`.
    pub fn push(&mut self, profile: Profile, step: S) {
        self.list.push(Candidate { profile, step });
        self.retimed = false;
    }

    /// The candidates, in the order given.
    pub fn iter(&self) -> std::slice::Iter<'_, Candidate<S>> {
        self.list.iter()
    }

    /// The candidates, in the order given, their steps to run.
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, Candidate<S>> {
        self.list.iter_mut()
    }

    /// The candidate whose plan for `budget_bytes` is predicted fastest (the step with every
    /// region kept on its base, plus what the plan's treatments add to it), and that plan. The
    /// first wins a tie; where none can meet the budget, the error is the one with the smallest
    /// floor's.
    ///
    /// # Panics
    ///
    /// With no candidates.
    pub fn fastest(&self, budget_bytes: u64) -> Result<(&Candidate<S>, Plan), PlanError> {
        let index = self.fastest_index(budget_bytes)?;
        let chosen = &self.list[index];
        let plan = chosen.profile.plan(budget_bytes)?;
        Ok((chosen, plan))
    }

    fn fastest_index(&self, budget_bytes: u64) -> Result<usize, PlanError> {
        assert!(
            !self.list.is_empty(),
            "at least one candidate to choose from"
        );
        let mut best: Option<(f64, usize)> = None;
        for (index, candidate) in self.list.iter().enumerate() {
            if let Ok(plan) = candidate.profile.plan(budget_bytes)
                && best.is_none_or(|(seconds, _)| plan.predicted_step_seconds < seconds)
            {
                best = Some((plan.predicted_step_seconds, index));
            }
        }
        match best {
            Some((_, index)) => Ok(index),
            None => Err(self
                .list
                .iter()
                .map(|candidate| &candidate.profile)
                .min_by_key(|profile| profile.smallest_peak())
                .expect("not empty")
                .below_floor(budget_bytes)),
        }
    }
}

impl<S: Step> Candidates<S> {
    /// Times every profiled step of every candidate again, four times, interleaved
    /// (each round runs each candidate's treatments in turn, every other round in the reverse
    /// order), each under the treatment it was profiled with, and keeps the median of its times
    /// (the profiled one included): what [`fastest`](Candidates::fastest) compares across
    /// candidates, and [`Profile::plan`] across a profile's steps. See [`Profile::retime`].
    pub fn retime(&mut self) -> Result<(), S::Error> {
        let mut entries: Vec<_> = self
            .list
            .iter_mut()
            .map(|candidate| (&mut candidate.profile, &mut candidate.step))
            .collect();
        retime_interleaved(&mut entries, RETIME_ROUNDS)?;
        self.retimed = true;
        Ok(())
    }

    /// Plans for `budget_bytes` on the [`fastest`](Candidates::fastest) candidate and checks the
    /// plan on its step ([`Profile::fit`]): the candidate (whose step runs the plan, on the base
    /// the plan names) and what the fit did. The candidates are [`retime`](Candidates::retime)d
    /// first where the choice depends on their times: unless the budget is out of every
    /// candidate's predicted reach ([`Profile::predicted_floor`]), where a fit tries the plan
    /// that holds least at once and a budget it cannot meet is refused without the retime's
    /// steps.
    ///
    /// # Panics
    ///
    /// With no candidates.
    pub fn fit<M: MemoryMeter + Clone>(
        &mut self,
        meter: M,
        budget_bytes: u64,
    ) -> Result<(&mut Candidate<S>, Fitted), FitError<S::Error>> {
        let within_reach = self
            .list
            .iter()
            .any(|candidate| candidate.profile.predicted_floor() <= budget_bytes);
        if within_reach && !self.retimed {
            self.retime()
                .map_err(|error| FitError::Profile(ProfileError::Step(error)))?;
        }
        let index = match self.fastest_index(budget_bytes) {
            Ok(index) => index,
            // On a device a budget out of reach is refused with the floor a step measures, in
            // the bytes reserved (the solver's floor is in use): the plan that holds least,
            // checked on the candidate predicted to hold least.
            Err(_) if self.iter().any(|c| c.profile.on_device()) => self
                .iter()
                .enumerate()
                .min_by_key(|(_, c)| c.profile.predicted_floor())
                .map(|(index, _)| index)
                .expect("not empty"),
            Err(error) => return Err(error.into()),
        };
        let chosen = &mut self.list[index];
        let step = &mut chosen.step;
        let fitted = chosen.profile.fit(meter, budget_bytes, || step.run())?;
        Ok((chosen, fitted))
    }
}
