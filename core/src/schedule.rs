//! How a checkpointed scan keeps its carries for backward ([`Schedule`]), and the order in which
//! its backward restores, advances and differentiates steps ([`ScanPlan`]): every carry stored,
//! or binomial checkpointing (Griewank and Walther's *revolve*: the fewest recomputed steps for a
//! number of stored carries). The crate for Burn 0.22 runs the plan in its scan's one graph node;
//! the crate for Burn 0.21 cuts a scan into regions between the carries it stores (each step run
//! once more, none advanced again: see its `Region::scan`).

use serde::{Deserialize, Serialize};

/// How a checkpointed scan keeps the carries its backward starts its steps from.
///
/// A scan of `T` steps runs each step forward once; its backward differentiates each step from
/// the carry that step started from (a nested backward over that step alone: one more forward of
/// it, with autodiff). What differs is where those carries come from.
///
/// ```
/// use burn_checkpoint_core::{ScanPlan, Schedule};
///
/// // 1 000 steps, 32 carries stored at a time: backward advances 1 371 steps again (1.37 a
/// // step) besides differentiating each once.
/// let plan = ScanPlan::new(Schedule::Snapshots(32), 1_000, 4_096);
/// assert_eq!(plan.snapshots(), 32);
/// assert_eq!(plan.advances(), 1_371);
/// // Every carry stored: no step advances again.
/// assert_eq!(ScanPlan::new(Schedule::EveryStep, 1_000, 4_096).advances(), 0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Schedule {
    /// Every step's carry stored in forward: backward differentiates each step from its own (one
    /// extra forward of every step, `T - 1` carries held).
    EveryStep,
    /// At most this many carries stored at once besides the scan's initial one (and the one a
    /// step is differentiated from), placed by binomial
    /// checkpointing (revolve): the fewest forward steps run again for that many. With `c`
    /// snapshots, up to `binomial(c + 1 + r, r)` steps run each step forward at most `r` times,
    /// the forward's own run included (besides the one run that differentiates it).
    /// `Snapshots(0)` runs each step again from the start; `T - 1` or more is
    /// [`EveryStep`](Schedule::EveryStep).
    Snapshots(usize),
    /// As many carries as fit in this many bytes (each the carry's size), placed as
    /// [`Snapshots`](Schedule::Snapshots) places them.
    Budget(u64),
}

impl Schedule {
    /// How many carries a scan of `steps` steps stores under this schedule besides its initial
    /// one, each carry `carry_bytes` in size: `steps - 1` at most (every step's).
    ///
    /// ```
    /// use burn_checkpoint_core::Schedule;
    ///
    /// assert_eq!(Schedule::EveryStep.carries(48, 1_024), 47);
    /// assert_eq!(Schedule::Snapshots(7).carries(48, 1_024), 7);
    /// assert_eq!(Schedule::Snapshots(99).carries(48, 1_024), 47);
    /// assert_eq!(Schedule::Budget(10_000).carries(48, 1_024), 9);
    /// ```
    pub fn carries(self, steps: usize, carry_bytes: u64) -> usize {
        let most = steps.saturating_sub(1);
        match self {
            Schedule::EveryStep => most,
            Schedule::Snapshots(count) => count.min(most),
            Schedule::Budget(bytes) => {
                usize::try_from(bytes / carry_bytes.max(1)).map_or(most, |count| count.min(most))
            }
        }
    }
}

/// What a scan's backward does next, on its current carry (`carry_t`: the carry step `t` starts
/// from) and the carries it stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanAction {
    /// The carry stored before step `t` (step 0: the scan's initial carry) becomes the current
    /// one.
    Restore(usize),
    /// Runs step `t` without autodiff from the current carry (`carry_t`), which becomes
    /// `carry_{t+1}`.
    Advance(usize),
    /// Stores the current carry, the one step `t` starts from.
    Store(usize),
    /// Drops the carry stored before step `t`.
    Drop(usize),
    /// Differentiates step `t` from the current carry (`carry_t`): its nested backward, seeded
    /// with the gradients of its output and of the carry it gave.
    Differentiate(usize),
}

/// A scan's plan: which carries its forward stores and what its backward does, for a number of
/// steps under a [`Schedule`]. The forward runs every step once, storing the carries before the
/// steps in [`stored_in_forward`](ScanPlan::stored_in_forward); the backward then runs
/// [`backward`](ScanPlan::backward) in order, each step differentiated once, the last first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanPlan {
    steps: usize,
    snapshots: usize,
    stored_in_forward: Vec<usize>,
    backward: Vec<ScanAction>,
}

impl ScanPlan {
    /// The plan for `steps` steps under `schedule`, each carry `carry_bytes` in size (what
    /// [`Schedule::Budget`] divides by).
    pub fn new(schedule: Schedule, steps: usize, carry_bytes: u64) -> Self {
        let snapshots = schedule.carries(steps, carry_bytes);
        let mut actions = Vec::new();
        if steps > 0 {
            reverse(0, steps, snapshots, &mut actions);
        }
        // The forward runs every step anyway: the stores before the first differentiation are its
        // (their advances are its steps), and the carry the last step starts from is stored too.
        let first = actions
            .iter()
            .position(|action| matches!(action, ScanAction::Differentiate(_)))
            .unwrap_or(actions.len());
        let mut stored_in_forward: Vec<usize> = actions[..first]
            .iter()
            .filter_map(|action| match action {
                ScanAction::Store(t) => Some(*t),
                _ => None,
            })
            .collect();
        let mut backward = actions.split_off(first);
        if let Some(last) = steps.checked_sub(1) {
            backward.insert(0, ScanAction::Restore(last));
            if last > 0 && !stored_in_forward.contains(&last) {
                stored_in_forward.push(last);
                // Dropped once the last step is differentiated, as a snapshot would be.
                backward.insert(2, ScanAction::Drop(last));
            }
        }
        ScanPlan {
            steps,
            snapshots,
            stored_in_forward,
            backward,
        }
    }

    /// The number of steps.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// The most carries held at once besides the initial one.
    pub fn snapshots(&self) -> usize {
        self.snapshots
    }

    /// The steps whose starting carries the forward stores, in order.
    pub fn stored_in_forward(&self) -> &[usize] {
        &self.stored_in_forward
    }

    /// The backward's actions, in order.
    pub fn backward(&self) -> &[ScanAction] {
        &self.backward
    }

    /// How many steps the backward advances again without autodiff (besides differentiating
    /// each step once): 0 when every carry is stored.
    pub fn advances(&self) -> usize {
        self.backward
            .iter()
            .filter(|action| matches!(action, ScanAction::Advance(_)))
            .count()
    }
}

/// `binomial(snapshots + forwards, snapshots)`: how many steps revolve reverses with that many
/// snapshots and each step advanced at most `forwards` times (saturating).
fn reach(snapshots: usize, forwards: usize) -> u128 {
    let mut value: u128 = 1;
    for k in 1..=snapshots.min(forwards) as u128 {
        let n = (snapshots.max(forwards) as u128) + k;
        value = value.saturating_mul(n) / k;
        if value > u64::MAX as u128 {
            return u128::MAX;
        }
    }
    value
}

/// Where revolve puts its next snapshot in a segment of `steps` steps (more than one) with `free`
/// snapshots left: after the first `split` steps. With `c = free + 1` carries counting the
/// segment's start and `r` the fewest repetitions with `binomial(c + r, c) >= steps`, the least
/// split that leaves the right part within reach of `c - 1` carries and the left part no shorter
/// than `binomial(c + r - 2, c)` (checked against every placement in the tests).
fn split(steps: usize, free: usize) -> usize {
    let (steps_128, carries) = (steps as u128, free + 1);
    let mut forwards = 1;
    while reach(carries, forwards) < steps_128 {
        forwards += 1;
    }
    let right_within_reach = steps_128.saturating_sub(reach(carries - 1, forwards));
    let left_least = if forwards >= 2 {
        reach(carries, forwards - 2)
    } else {
        0
    };
    right_within_reach.max(left_least).clamp(1, steps_128 - 1) as usize
}

/// The actions that differentiate steps `start..end`, last first, from the carry stored before
/// `start`, holding at most `free` more carries. The recursion of revolve, run on a stack of its
/// own: with a snapshot per step it is as deep as the scan is long.
fn reverse(start: usize, end: usize, free: usize, out: &mut Vec<ScanAction>) {
    enum Task {
        Reverse {
            start: usize,
            end: usize,
            free: usize,
        },
        Then(ScanAction),
    }
    let mut tasks = vec![Task::Reverse { start, end, free }];
    while let Some(task) = tasks.pop() {
        let (start, end, free) = match task {
            Task::Then(action) => {
                out.push(action);
                continue;
            }
            Task::Reverse { start, end, free } => (start, end, free),
        };
        if end - start == 1 {
            out.push(ScanAction::Restore(start));
            out.push(ScanAction::Differentiate(start));
        } else if free == 0 {
            for t in (start..end).rev() {
                out.push(ScanAction::Restore(start));
                out.extend((start..t).map(ScanAction::Advance));
                out.push(ScanAction::Differentiate(t));
            }
        } else {
            let middle = start + split(end - start, free);
            out.push(ScanAction::Restore(start));
            out.extend((start..middle).map(ScanAction::Advance));
            out.push(ScanAction::Store(middle));
            // Run next: the right part with one snapshot fewer, then the drop, then the left.
            tasks.push(Task::Reverse {
                start,
                end: middle,
                free,
            });
            tasks.push(Task::Then(ScanAction::Drop(middle)));
            tasks.push(Task::Reverse {
                start: middle,
                end,
                free: free - 1,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;

    /// The fewest advances any placement achieves for `steps` steps from a stored start with
    /// `free` carries, the first forward sweep included (dynamic programming over the first
    /// snapshot's place).
    fn fewest(steps: usize, free: usize, memo: &mut BTreeMap<(usize, usize), usize>) -> usize {
        if steps <= 1 {
            return 0;
        }
        if free == 0 {
            return steps * (steps - 1) / 2;
        }
        if let Some(&known) = memo.get(&(steps, free)) {
            return known;
        }
        let best = (1..steps)
            .map(|left| left + fewest(steps - left, free - 1, memo) + fewest(left, free, memo))
            .min()
            .unwrap();
        memo.insert((steps, free), best);
        best
    }

    /// Runs a plan on integer "carries" (carry_t = t) and checks it: each step differentiated
    /// once, last first, from its own carry; at most `snapshots` carries held besides the first.
    /// Returns the advances the forward's sweep and the backward made together.
    fn simulate(plan: &ScanPlan) -> usize {
        let steps = plan.steps();
        let mut stored: BTreeSet<usize> = plan.stored_in_forward().iter().copied().collect();
        // The snapshots, and the carry the last step starts from (the current one: held by
        // every schedule while that step is differentiated).
        assert!(stored.len() <= plan.snapshots() + 1, "{plan:?}");
        stored.insert(0);
        let mut current = None;
        let mut next = steps;
        let mut advances = 0;
        for action in plan.backward() {
            match *action {
                ScanAction::Restore(t) => {
                    assert!(stored.contains(&t), "restores {t}, not stored: {plan:?}");
                    current = Some(t);
                }
                ScanAction::Advance(t) => {
                    assert_eq!(current, Some(t));
                    current = Some(t + 1);
                    advances += 1;
                }
                ScanAction::Store(t) => {
                    assert_eq!(current, Some(t));
                    stored.insert(t);
                    assert!(stored.len() - 1 <= plan.snapshots() + 1, "{plan:?}");
                }
                ScanAction::Drop(t) => assert!(t != 0 && stored.remove(&t)),
                ScanAction::Differentiate(t) => {
                    assert_eq!(current, Some(t));
                    assert_eq!(t + 1, next, "steps differentiated last first");
                    next = t;
                }
            }
        }
        assert_eq!(next, 0, "every step differentiated");
        assert_eq!(stored, BTreeSet::from([0]), "every stored carry dropped");
        // The forward's sweep: the advances up to the last stored carry.
        advances + plan.stored_in_forward().iter().max().copied().unwrap_or(0)
    }

    #[test]
    fn every_step_stores_every_carry_and_advances_none() {
        let plan = ScanPlan::new(Schedule::EveryStep, 6, 8);
        assert_eq!(plan.stored_in_forward(), &[1, 2, 3, 4, 5]);
        assert_eq!(plan.advances(), 0);
        simulate(&plan);
    }

    #[test]
    fn snapshots_advance_as_few_steps_as_any_placement() {
        let mut memo = BTreeMap::new();
        for steps in 1..=120 {
            for snapshots in 0..=8 {
                let plan = ScanPlan::new(Schedule::Snapshots(snapshots), steps, 8);
                let total = simulate(&plan);
                let free = snapshots.min(steps.saturating_sub(1));
                assert_eq!(
                    total,
                    fewest(steps, free, &mut memo),
                    "{steps} steps, {snapshots} snapshots: {plan:?}"
                );
            }
        }
    }

    #[test]
    fn revolve_reaches_the_binomial_bound() {
        // With c snapshots (c + 1 carries, the initial one counted), binomial(c + 1 + r, r) steps
        // run each step forward at most r times, the forward's own run included.
        for (snapshots, forwards) in [(3, 2), (10, 2), (5, 4), (1, 6)] {
            let steps = reach(snapshots + 1, forwards) as usize;
            let plan = ScanPlan::new(Schedule::Snapshots(snapshots), steps, 8);
            let total = simulate(&plan) + 1;
            assert!(total <= forwards * steps, "{total} > {forwards} × {steps}");
        }
        // Large scans plan quickly: 50 000 steps, √T snapshots, each step run at most 3 times.
        let plan = ScanPlan::new(Schedule::Snapshots(223), 50_000, 8);
        assert!(
            plan.advances() + 50_000 <= 3 * 50_000,
            "{}",
            plan.advances()
        );
    }

    #[test]
    fn a_budget_holds_the_carries_that_fit() {
        assert_eq!(
            ScanPlan::new(Schedule::Budget(10 * 64), 100, 64).snapshots(),
            10
        );
        assert_eq!(
            ScanPlan::new(Schedule::Budget(1 << 40), 100, 64).snapshots(),
            99
        );
        assert_eq!(ScanPlan::new(Schedule::Budget(0), 100, 64).snapshots(), 0);
        simulate(&ScanPlan::new(Schedule::Budget(0), 7, 64));
    }
}
