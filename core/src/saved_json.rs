//! Reports, profiles and plans saved as JSON before the report was typed (`treatment` a string,
//! `outside_by_kind` keyed by strings; commit a597beb) load after it, and save back to the same
//! JSON. Unit tests of the crate (the last module: it may use every other), its fixtures in
//! `tests/fixtures/`.

use crate::engine::{planned, recording};
use crate::memory::{HostMeter, StepReport};
use crate::planner::{Base, Candidates, Plan, Profile};
use crate::{OpKind, RegionId, RegionName, Treatment};
use serde_json::Value;

const REPORT: &str = include_str!("../tests/fixtures/report-before-30.json");
const PROFILE: &str = include_str!("../tests/fixtures/profile-before-30.json");
const PLAN: &str = include_str!("../tests/fixtures/plan-before-30.json");

/// `text` loaded as `T` and saved again gives the same JSON.
fn round_trips<T: serde::Serialize + serde::de::DeserializeOwned>(text: &str) -> T {
    let value: T = serde_json::from_str(text).expect("loads");
    let before: Value = serde_json::from_str(text).unwrap();
    let after = serde_json::to_value(&value).unwrap();
    assert_eq!(before, after, "saved back the same");
    value
}

#[test]
fn a_report_saved_before_loads_typed() {
    let report: StepReport = round_trips(REPORT);
    assert_eq!(report.regions.len(), 3);
    assert!(
        report.regions.iter().all(|r| r.treatment.is_none()),
        "\"as-written\" is no treatment"
    );
    assert_eq!(report.outside_by_kind[&OpKind::Matmul], 8192);
    assert_eq!(report.outside_by_kind[&OpKind::Layout], 16384);
    assert_eq!(report.regions[2].offloaded_bytes, 8192);
}

#[test]
fn a_profile_saved_before_loads_typed_and_plans_the_same() {
    let profile: Profile = round_trips(PROFILE);
    for (step, treatment) in profile.steps.iter().zip(Treatment::ALL) {
        assert_eq!(step.treatment, treatment);
        assert!(
            step.report
                .regions
                .iter()
                .all(|r| r.treatment == Some(treatment))
        );
    }
    let plan: Plan = round_trips(PLAN);
    // The plan was made by this profile for this budget, before the change, when the solver
    // summed recomputes: with step times that say what that sum said (this profile's were
    // single samples of sub-millisecond steps, the kept one the slowest), the same plan now.
    let mut summed = profile.clone();
    let kept = summed.steps[0].report.seconds;
    for step in &mut summed.steps {
        step.report.seconds = kept
            + step
                .report
                .regions
                .iter()
                .map(|r| r.recompute_seconds)
                .sum::<f64>();
    }
    let again = summed.plan(plan.budget_bytes).unwrap();
    assert_eq!(again.regions, plan.regions);
    assert_eq!(again.predicted_peak_bytes, plan.predicted_peak_bytes);
}

#[test]
fn an_unknown_treatment_is_refused() {
    let bad = REPORT.replacen("\"as-written\"", "\"recompute-some\"", 1);
    let error = serde_json::from_str::<StepReport>(&bad).unwrap_err();
    assert!(error.to_string().contains("recompute-some"), "{error}");
}

/// `Candidates::fastest` plans on the profile whose plan is predicted faster: the same profile on
/// two bases, one of them with every step 10 % faster, is chosen whichever order they come in;
/// the plan carries its base, and a saved plan or profile on Balanced says so in its JSON.
#[test]
fn the_fastest_base_is_chosen_and_its_plans_say_it() {
    let plain: Profile = serde_json::from_str(PROFILE).unwrap();
    let mut balanced = plain.clone().on(Base::Balanced);
    for step in &mut balanced.steps {
        step.report.seconds *= 0.9;
    }
    // The steps are names here: nothing is run.
    let candidates = |profiles: [(&Profile, &'static str); 2]| {
        let mut candidates = Candidates::new();
        for (profile, name) in profiles {
            candidates.push(profile.clone(), name);
        }
        candidates
    };
    for budget in [plain.largest_peak(), plain.smallest_peak()] {
        for order in [
            [(&plain, "plain"), (&balanced, "balanced")],
            [(&balanced, "balanced"), (&plain, "plain")],
        ] {
            let candidates = candidates(order);
            let (chosen, plan) = candidates.fastest(budget).unwrap();
            assert_eq!(
                (chosen.profile.base, chosen.step),
                (Base::Balanced, "balanced")
            );
            assert_eq!(plan, chosen.profile.plan(budget).unwrap());
            assert_eq!(plan.base, Base::Balanced);
            assert!(plan.predicted_step_seconds > 0.0);
            let json = serde_json::to_string(&plan).unwrap();
            assert!(json.contains("\"base\":\"balanced\""), "{json}");
            let back: Plan = serde_json::from_str(&json).unwrap();
            assert_eq!(back, plan);
        }
    }
    // Equal times: the first wins.
    let twin = plain.clone().on(Base::Balanced);
    let twins = candidates([(&plain, "first"), (&twin, "second")]);
    assert_eq!(twins.fastest(plain.largest_peak()).unwrap().0.step, "first");
    // Below every floor: the error of the smallest.
    let both = candidates([(&plain, "plain"), (&balanced, "balanced")]);
    let error = both.fastest(plain.smallest_peak() / 2).unwrap_err();
    assert!(error.to_string().contains("cannot be met"), "{error}");
}

/// `Candidates::retime` times every candidate's every step again, interleaved, and
/// `Candidates::fit` runs the fastest candidate's step alone, under the plan it checks.
#[test]
fn candidates_retime_every_step_and_fit_on_the_chosen_one() {
    use std::cell::RefCell;

    let runs = RefCell::new(Vec::new());
    let step = |name: &'static str, profile: &Profile| {
        let names: Vec<String> = profile.steps[0]
            .report
            .regions
            .iter()
            .map(|r| r.name.clone())
            .collect();
        let runs = &runs;
        move || {
            for name in &names {
                let id = RegionId::next(RegionName::new(name.clone()));
                recording::top_level_opened(&id.name, id.index, planned(&id));
                recording::top_level_closed();
            }
            runs.borrow_mut().push(name);
        }
    };
    // Profiled times no stand-in step takes: each is one sample of five once retimed.
    let mut plain: Profile = serde_json::from_str(PROFILE).unwrap();
    for treated in &mut plain.steps {
        treated.report.seconds = 1000.0;
    }
    let balanced = plain.clone().on(Base::Balanced);
    let mut candidates = Candidates::new();
    candidates.push(plain.clone(), step("plain", &plain));
    candidates.push(balanced.clone(), step("balanced", &balanced));
    candidates.retime().unwrap();
    let treatments = plain.treatments().len();
    let retimed = runs.take();
    // Four rounds, as the planner's docs say (its `RETIME_ROUNDS`).
    assert_eq!(retimed.len(), 2 * treatments * 4);
    // The first round runs plain's steps then balanced's, the second the other way round.
    assert_eq!(retimed[..treatments], vec!["plain"; treatments][..]);
    assert_eq!(
        retimed[treatments..2 * treatments],
        vec!["balanced"; treatments][..]
    );
    assert_eq!(
        retimed[2 * treatments..3 * treatments],
        vec!["balanced"; treatments][..]
    );
    // Every step's time is the median of its five samples: one of the four taken now.
    for candidate in candidates.iter() {
        assert!(
            candidate
                .profile
                .steps
                .iter()
                .all(|s| s.report.seconds < 1000.0)
        );
    }
    // The fit runs the chosen candidate's step only.
    let (chosen, fitted) = candidates.fit(HostMeter, plain.largest_peak()).unwrap();
    let name = match chosen.profile.base {
        Base::Plain => "plain",
        Base::Balanced => "balanced",
    };
    assert_eq!(fitted.plan.base, chosen.profile.base);
    assert_eq!(runs.take(), vec![name; fitted.steps]);

    // Unretimed candidates are retimed by the fit where the budget is within reach, and not
    // where it is out of it: that refusal runs no step.
    let mut candidates = Candidates::new();
    candidates.push(plain.clone(), step("plain", &plain));
    candidates.push(balanced.clone(), step("balanced", &balanced));
    let floor = plain.predicted_floor().min(balanced.predicted_floor());
    let refused = candidates
        .fit(HostMeter, floor - 1)
        .map(|_| ())
        .unwrap_err();
    assert!(refused.to_string().contains("cannot be met"), "{refused}");
    assert!(runs.take().is_empty(), "no step for a budget out of reach");
    let (_, fitted) = candidates.fit(HostMeter, plain.largest_peak()).unwrap();
    assert_eq!(runs.take().len(), 2 * treatments * 4 + fitted.steps);
}
