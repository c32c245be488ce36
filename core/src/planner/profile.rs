//! The profile the budget planner reads ([`Profile::measure`]): one step per [`Treatment`], every
//! top-level region run that way.

use std::convert::Infallible;
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::base::Base;
use super::plan::{Lookup, with_lookup};
use crate::memory::{MemoryMeter, StepReport, mib, mib_signed, shorten};
use crate::treatment::Treatment;
use returns::StepResult;

/// One step measured under each [`Treatment`], every top-level region run that way: what each
/// region instance holds and what its recompute costs under each, which is what the budget
/// planner ([`Profile::plan`]) chooses from. Serialisable (JSON through `serde_json`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[non_exhaustive]
pub struct Profile {
    /// The step under each treatment profiled, [`Treatment::Keep`] first.
    pub steps: Vec<TreatedStep>,
    /// What the step's regions sat on ([`Profile::on`]; plain in profiles saved before bases,
    /// and left out of the JSON when plain).
    #[serde(default, skip_serializing_if = "Base::is_plain")]
    pub base: Base,
}

/// One profiled step and the treatment every top-level region had in it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[non_exhaustive]
pub struct TreatedStep {
    /// How every top-level region ran.
    pub treatment: Treatment,
    /// What the step measured.
    pub report: StepReport,
}

/// Why a profile could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError<E> {
    /// The step failed.
    #[error("a profiled step failed")]
    Step(#[source] E),
    /// The step ran no region: there is nothing to choose.
    #[error(
        "the profiled step opened no checkpoint region: the planner chooses how regions run, so \
         the model needs regions (`#[checkpoint]`, `checkpoint`) where they may go"
    )]
    NoRegions,
    /// Two profiled steps did not open the same regions (control flow that depends on the data
    /// or on a counter): a plan by `name#index` would not name the same region every step.
    #[error(
        "the profiled steps opened different regions ({first} under {first_treatment}, {second} \
         under {second_treatment}): a plan needs the same regions every step"
    )]
    Differ {
        /// The regions of the first step, `name#index` joined.
        first: String,
        /// Its treatment.
        first_treatment: Treatment,
        /// The regions of the step that differs.
        second: String,
        /// Its treatment.
        second_treatment: Treatment,
    },
}

/// A training step the planner runs (to profile it, time it again, check a plan): a closure
/// returning `()` (a step that cannot fail) or `Result<(), E>`, or a value of the caller's that
/// runs one (and holds whatever else the caller keeps with it: a name, a placement).
///
/// ```
/// use burn_checkpoint_core::planner::Step;
///
/// let mut runs = 0;
/// let mut step = || runs += 1;
/// step.run().unwrap();
/// let mut failing = || Err::<(), _>("out of memory");
/// assert_eq!(failing.run(), Err("out of memory"));
/// assert_eq!(runs, 1);
/// ```
pub trait Step {
    /// Why a step failed ([`Infallible`] for a closure returning `()`).
    type Error;

    /// Runs the step once (forward, backward, optimizer: it trains the model).
    fn run(&mut self) -> Result<(), Self::Error>;
}

impl<F: FnMut() -> R, R: StepResult> Step for F {
    type Error = R::Error;

    fn run(&mut self) -> Result<(), R::Error> {
        self().into_result()
    }
}

/// What a [`Step`] closure may return, unnameable outside the crate (a sealed trait: users write
/// closures, not impls of it).
mod returns {
    use std::convert::Infallible;

    /// What a [`Step`](super::Step) closure returns: `()`, or `Result<(), E>` (as std's
    /// `Termination` is for `main`).
    pub trait StepResult {
        /// Why the step failed.
        type Error;

        /// The step's outcome as a `Result`.
        fn into_result(self) -> Result<(), Self::Error>;
    }

    impl StepResult for () {
        type Error = Infallible;

        fn into_result(self) -> Result<(), Infallible> {
            Ok(())
        }
    }

    impl<E> StepResult for Result<(), E> {
        type Error = E;

        fn into_result(self) -> Result<(), E> {
            self
        }
    }
}

/// How many rounds [`Candidates::retime`](super::Candidates::retime) and [`Profile::retime`] time
/// each profiled step again: with two (three samples a step, the profiled one included), a Burn
/// 0.22 budget sweep chose a step measured 1.07× the fastest; with four, every plan of the four
/// sweeps was within 3 % of the fastest hand cut that fits (docs/memory-budget.md).
pub(crate) const RETIME_ROUNDS: usize = 4;

impl Profile {
    /// Runs `step` once per treatment in `treatments` (both Burn crates' regions run
    /// [`Treatment::ALL`]), with every top-level region run that way, measured with `meter`.
    /// [`Treatment::Keep`] runs first, whether listed or not; [`Treatment::Offload`] runs only
    /// where the meter's bytes are a device's (it reports [`reserved`](MemoryMeter::reserved)
    /// bytes): on the host a host copy is as many bytes as what it replaces. The steps train the
    /// model like any other.
    ///
    /// ```
    /// use burn_checkpoint_core::engine::{planned, recording};
    /// use burn_checkpoint_core::memory::HostMeter;
    /// use burn_checkpoint_core::planner::Profile;
    /// use burn_checkpoint_core::{RegionId, RegionName, Treatment};
    ///
    /// // A stand-in for a step of four regions: a Burn crate's regions call these hooks.
    /// let step = || {
    ///     for _ in 0..4 {
    ///         let id = RegionId::next(RegionName::new("block"));
    ///         recording::top_level_opened(&id.name, id.index, planned(&id));
    ///         recording::top_level_closed();
    ///     }
    /// };
    /// let treatments = [Treatment::Keep, Treatment::RecomputeAll, Treatment::Offload];
    /// let profile = Profile::measure(HostMeter, &treatments, step).unwrap();
    /// assert_eq!(profile.treatments(), [Treatment::Keep, Treatment::RecomputeAll]);
    /// let kept = &profile.step(Treatment::Keep).regions;
    /// assert_eq!(kept.len(), 4);
    /// assert!(kept.iter().all(|region| region.treatment == Some(Treatment::Keep)));
    /// ```
    pub fn measure<M: MemoryMeter + Clone>(
        meter: M,
        treatments: &[Treatment],
        step: impl FnMut(),
    ) -> Result<Profile, ProfileError<Infallible>> {
        Self::try_measure(meter, treatments, step)
    }

    /// [`Profile::measure`] for any [`Step`], one that can fail among them: the first error stops
    /// profiling.
    pub fn try_measure<M: MemoryMeter + Clone, S: Step>(
        meter: M,
        treatments: &[Treatment],
        mut step: S,
    ) -> Result<Profile, ProfileError<S::Error>> {
        let on_device = meter.reserved().is_some();
        // Keep first: the planner's largest peak, and the regions every other step must match.
        let mut treatments: Vec<Treatment> = treatments
            .iter()
            .copied()
            .filter(|&t| t != Treatment::Keep && (t != Treatment::Offload || on_device))
            .collect();
        treatments.insert(0, Treatment::Keep);
        treatments.dedup();
        let mut steps = Vec::new();
        for treatment in treatments {
            let every: Lookup = Arc::new(move |_| Some(treatment));
            let (result, report) =
                StepReport::measure(meter.clone(), || with_lookup(every, || step.run()));
            result.map_err(ProfileError::Step)?;
            steps.push(TreatedStep { treatment, report });
        }
        let profile = Profile {
            steps,
            base: Base::Plain,
        };
        profile.check()?;
        Ok(profile)
    }

    /// This profile, saying that its step's regions sat on `base` (the step measured is the
    /// caller's: a backend type on Burn 0.21, a device on Burn 0.22). Its plans carry the base.
    ///
    /// ```
    /// use burn_checkpoint_core::engine::{planned, recording};
    /// use burn_checkpoint_core::memory::HostMeter;
    /// use burn_checkpoint_core::planner::{Base, Profile};
    /// use burn_checkpoint_core::{RegionId, RegionName, Treatment};
    ///
    /// let step = || {
    ///     let id = RegionId::next(RegionName::new("block"));
    ///     recording::top_level_opened(&id.name, id.index, planned(&id));
    ///     recording::top_level_closed();
    /// };
    /// let profile = Profile::measure(HostMeter, &Treatment::ALL, step).unwrap();
    /// let profile = profile.on(Base::Balanced);
    /// assert_eq!(profile.plan(u64::MAX).unwrap().base, Base::Balanced);
    /// ```
    pub fn on(mut self, base: Base) -> Profile {
        self.base = base;
        self
    }

    /// Times every profiled step again, four times (every other round in the reverse order;
    /// `step` runs the step), each under the treatment it was profiled with, and
    /// keeps the median of its times (the profiled one included) as its
    /// [`seconds`](StepReport::seconds). What it holds is left as profiled.
    ///
    /// Profiled once, a step's time is one sample, and on a shared machine samples a few
    /// percent apart swap: the solver compares the steps of a profile ([`Profile::plan`]: each
    /// treatment's cost is what its step took more than keeping), so it wants medians of
    /// interleaved samples. For several profiles compared with each other (bases, placements),
    /// [`Candidates::retime`](super::Candidates::retime) interleaves their steps. The steps
    /// train the model like any other.
    ///
    /// ```
    /// use burn_checkpoint_core::engine::{planned, recording};
    /// use burn_checkpoint_core::memory::HostMeter;
    /// use burn_checkpoint_core::planner::Profile;
    /// use burn_checkpoint_core::{RegionId, RegionName, Treatment};
    ///
    /// let step = || {
    ///     let id = RegionId::next(RegionName::new("block"));
    ///     recording::top_level_opened(&id.name, id.index, planned(&id));
    ///     recording::top_level_closed();
    /// };
    /// let mut profile = Profile::measure(HostMeter, &Treatment::ALL, step).unwrap();
    /// let mut runs = 0;
    /// profile
    ///     .retime(|| {
    ///         runs += 1;
    ///         step();
    ///     })
    ///     .unwrap();
    /// assert_eq!(runs, 4 * profile.treatments().len());
    /// ```
    pub fn retime<S: Step>(&mut self, mut step: S) -> Result<(), S::Error> {
        retime_interleaved(&mut [(self, &mut step)], RETIME_ROUNDS)
    }

    /// The treatments profiled, in the order measured ([`Treatment::Keep`] first).
    pub fn treatments(&self) -> Vec<Treatment> {
        self.steps.iter().map(|step| step.treatment).collect()
    }

    fn check<E>(&self) -> Result<(), ProfileError<E>> {
        let ids = |step: &TreatedStep| {
            let ids: Vec<_> = step.report.regions.iter().map(|r| r.id()).collect();
            ids.join(", ")
        };
        let first = &self.steps[0];
        if first.report.regions.is_empty() {
            return Err(ProfileError::NoRegions);
        }
        for other in &self.steps[1..] {
            if ids(other) != ids(first) {
                return Err(ProfileError::Differ {
                    first: shorten(&ids(first), 300),
                    first_treatment: first.treatment,
                    second: shorten(&ids(other), 300),
                    second_treatment: other.treatment,
                });
            }
        }
        Ok(())
    }

    /// The step measured with every top-level region under `treatment`.
    ///
    /// # Panics
    ///
    /// If the profile measured no step under `treatment` (see [`Profile::treatments`]).
    pub fn step(&self, treatment: Treatment) -> &StepReport {
        match self.steps.iter().find(|step| step.treatment == treatment) {
            Some(step) => &step.report,
            None => panic!(
                "this profile measured no step under {treatment} (it measured {:?})",
                self.treatments()
            ),
        }
    }
}

/// Times the steps of `entries` again, `rounds` times, interleaved (each round runs each
/// profile's treatments in turn, every other round in the reverse order), and keeps each step's
/// median: [`Profile::retime`] for one profile, [`Candidates::retime`](super::Candidates::retime)
/// for several.
pub(super) fn retime_interleaved<S: Step>(
    entries: &mut [(&mut Profile, &mut S)],
    rounds: usize,
) -> Result<(), S::Error> {
    let mut times: Vec<Vec<Vec<f64>>> = entries
        .iter()
        .map(|(p, _)| p.steps.iter().map(|s| vec![s.report.seconds]).collect())
        .collect();
    let order: Vec<(usize, usize)> = entries
        .iter()
        .enumerate()
        .flat_map(|(i, (p, _))| (0..p.steps.len()).map(move |k| (i, k)))
        .collect();
    for round in 0..rounds {
        for j in 0..order.len() {
            // Every other round backwards: a step's time depends on what the step before left
            // the allocator, so no step always follows the same one.
            let (i, k) = match round % 2 {
                0 => order[j],
                _ => order[order.len() - 1 - j],
            };
            let (profile, step) = &mut entries[i];
            let treatment = profile.steps[k].treatment;
            let every: Lookup = Arc::new(move |_| Some(treatment));
            let started = Instant::now();
            with_lookup(every, || S::run(&mut **step))?;
            times[i][k].push(started.elapsed().as_secs_f64());
        }
    }
    for ((profile, _), times) in entries.iter_mut().zip(times) {
        for (treated, mut samples) in profile.steps.iter_mut().zip(times) {
            samples.sort_by(f64::total_cmp);
            treated.report.seconds = samples[samples.len() / 2];
        }
    }
    Ok(())
}

impl fmt::Display for Profile {
    /// Per region name: what its instances hold under each treatment and, for each treatment
    /// that recomputes, what their recompute costs; then each step's peak and where it was.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keep = self.step(Treatment::Keep);
        writeln!(f, "memory report ({})", keep.meter)?;
        write!(f, "{:<40} {:>5}", "region (held MiB; recompute s)", "count")?;
        for step in &self.steps {
            write!(f, " {:>19}", shorten(&step.treatment.to_string(), 19))?;
        }
        writeln!(f)?;
        let totals: Vec<_> = self.steps.iter().map(|s| s.report.by_name()).collect();
        for (n, name) in totals[0].iter().enumerate() {
            write!(f, "{:<40} {:>5}", shorten(&name.name, 40), name.instances)?;
            for (step, totals) in self.steps.iter().zip(&totals) {
                let total = &totals[n];
                let cell = match step.treatment {
                    Treatment::Keep => format!("{:.2}", mib_signed(total.held_bytes)),
                    _ => format!(
                        "{:.2}; {:.3}",
                        mib_signed(total.held_bytes),
                        total.recompute_seconds
                    ),
                };
                write!(f, " {cell:>19}")?;
            }
            writeln!(f)?;
        }
        for step in &self.steps {
            let report = &step.report;
            let made = match report.outside_made() {
                Some(bytes) => format!("{:.1} MiB", mib(bytes as usize)),
                None => "not measured".to_string(),
            };
            writeln!(
                f,
                "every region {:<19} step peak {:>9.1} MiB at {}; {:.3} s; made outside regions \
                 {made}",
                step.treatment,
                mib(report.peak_bytes as usize),
                report.peak_at,
                report.seconds,
            )?;
        }
        Ok(())
    }
}
