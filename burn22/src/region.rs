//! The per-thread region state: which regions are open, what a top-level region is called, how a
//! plan has it run, what the memory report hears of it, the seeds regions draw (recorded in
//! forward, replayed when backward runs a body again), and which region names have had their
//! recompute checked. Regions here open and close around their forward call; backward runs a
//! region's body again under [`recomputing`], where the regions it opens are nested ones (no name
//! index, no plan, nothing reported).

use std::cell::{Cell, RefCell};
use std::collections::{HashSet, VecDeque};

use burn::tensor::Device;
use burn_checkpoint_core::memory::recording;
use burn_checkpoint_core::planner;
use burn_checkpoint_core::{RegionId, RegionName, Treatment};

use crate::policy::Policy;
use crate::seed::region_seed;

thread_local! {
    /// How many regions are open on this thread (a recompute counts as one).
    static DEPTH: Cell<usize> = const { Cell::new(0) };
    /// How many recomputes are running on this thread (a recompute's body may open regions whose
    /// bodies run inside it: still a recompute).
    static RECOMPUTING: Cell<usize> = const { Cell::new(0) };
    /// The seeds of this thread's regions: recorded while their forward runs, replayed while
    /// backward runs them again.
    static SEEDS: RefCell<Seeds> = RefCell::new(Seeds::default());
    /// For each open region and running recompute, innermost last: whether its body runs as
    /// [`Run::SaveComputeBound`] (a region opened directly inside one is a memory-bound op).
    static SAVING: RefCell<Vec<bool>> = const { RefCell::new(Vec::new()) };
    /// The region names whose first instance on this thread has been checked (its body run a
    /// second time, compared with its forward: `check.rs`).
    static CHECKED: RefCell<HashSet<String>> = RefCell::new(HashSet::new());
}

/// The seeds drawn by seeded regions (see [`crate::Region::seeded`]).
///
/// Each open region records the seeds drawn inside its body, at any depth, in order; when
/// backward runs its body again, those seeds are replayed to the regions the body opens, which
/// draw nothing from the device then. A region that draws nothing itself therefore never touches
/// the device's generator, in forward or in backward, whatever its body nests.
#[derive(Default)]
struct Seeds {
    /// One list per open region, innermost last.
    recording: Vec<Vec<u64>>,
    /// One queue per running recompute, innermost last.
    replaying: Vec<VecDeque<u64>>,
}

/// How an opened region runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Run {
    /// Its body as plain autodiff ops: a plan keeps it.
    Keep,
    /// Its body as Burn's own ops, its tensors tagged Balanced while it runs
    /// ([`Policy::SaveComputeBound`](crate::Policy::SaveComputeBound)).
    SaveComputeBound,
    /// A region node, its stored inputs on the device (`offload: false`) or in host memory.
    Region { offload: bool },
}

/// An open region; closing it (dropping, panics included) restores the depth and the seed
/// recording and, for a top-level region, tells the memory report.
pub(crate) struct Opened {
    /// How it runs.
    pub(crate) run: Run,
    /// Its slot in the step's memory report, if one is being recorded and it is top-level.
    pub(crate) slot: Option<usize>,
    /// Whether it was opened directly inside a region running as [`Run::SaveComputeBound`]: its
    /// node is then a memory-bound op of that region's (its output recomputed where needed).
    pub(crate) memory_bound: bool,
    /// Whether a plan in force chose how it runs.
    pub(crate) planned: bool,
    top_level: bool,
    /// Whether it still records seeds (until [`Opened::nested_seeds`] takes them).
    recording: bool,
}

/// Opens a region called `name` whose code asks for `policy` and `offload`: a top-level region
/// gets the next index of its name and runs as the plan in force says (if it names it).
pub(crate) fn open(name: RegionName, policy: Policy, offload: bool) -> Opened {
    let top_level = DEPTH.with(|depth| {
        let top_level = depth.get() == 0;
        depth.set(depth.get() + 1);
        top_level
    });
    SEEDS.with(|seeds| seeds.borrow_mut().recording.push(Vec::new()));
    let coded = match policy {
        Policy::RecomputeAll => Run::Region { offload },
        Policy::SaveComputeBound => Run::SaveComputeBound,
    };
    let mut opened = Opened {
        run: coded,
        slot: None,
        memory_bound: SAVING.with(|saving| saving.borrow().last() == Some(&true)),
        planned: false,
        top_level,
        recording: true,
    };
    if top_level {
        let id = RegionId::next(name);
        let planned = planner::planned(&id);
        opened.planned = planned.is_some();
        opened.run = match planned {
            None => coded,
            Some(Treatment::Keep) => Run::Keep,
            Some(Treatment::SaveComputeBound) => Run::SaveComputeBound,
            Some(Treatment::RecomputeAll) => Run::Region { offload: false },
            Some(Treatment::Offload) => Run::Region { offload: true },
            Some(other) => panic!(
                "a plan gives region {id} the treatment {other}, which this crate does not know"
            ),
        };
        if recording::on() {
            recording::top_level_opened(&id.name, id.index, planned);
            opened.slot = recording::current_region();
        }
    }
    SAVING.with(|saving| {
        saving
            .borrow_mut()
            .push(opened.run == Run::SaveComputeBound)
    });
    opened
}

impl Opened {
    /// The seeds the regions nested in this one drew while its forward ran, in order: what its
    /// recompute replays. Stops the recording.
    pub(crate) fn nested_seeds(&mut self) -> Vec<u64> {
        self.recording = false;
        SEEDS.with(|seeds| seeds.borrow_mut().recording.pop().unwrap_or_default())
    }
}

impl Drop for Opened {
    fn drop(&mut self) {
        // `try_with`: nothing to restore while the thread is being torn down.
        let _ = DEPTH.try_with(|depth| depth.set(depth.get() - 1));
        let _ = SAVING.try_with(|saving| saving.borrow_mut().pop());
        if self.recording {
            let _ = SEEDS.try_with(|seeds| seeds.borrow_mut().recording.pop());
        }
        if self.top_level {
            recording::top_level_closed();
        }
    }
}

impl Opened {
    /// This region's seed (it is seeded): the next one its enclosing recompute replays, or a new
    /// one drawn from `device`'s generator (see [`region_seed`]). The regions it is nested in
    /// record it; its own recording is of the seeds drawn inside its body.
    ///
    /// # Panics
    ///
    /// When a recompute opens more seeded regions than its forward did (a body whose path depends
    /// on something besides its inputs and module).
    pub(crate) fn seed(&self, device: &Device) -> u64 {
        let replayed = SEEDS.with(|seeds| {
            let mut seeds = seeds.borrow_mut();
            seeds.replaying.last_mut().map(|queue| {
                queue.pop_front().expect(
                    "a checkpoint region's recompute opened a seeded region its forward did not: \
                     the body must run the same code each time (depend on its inputs and module \
                     only)",
                )
            })
        });
        let seed = replayed.unwrap_or_else(|| region_seed(device));
        SEEDS.with(|seeds| {
            let mut seeds = seeds.borrow_mut();
            // The last recording is this region's own (open since `open`).
            let enclosing = seeds.recording.len().saturating_sub(1);
            for recording in &mut seeds.recording[..enclosing] {
                recording.push(seed);
            }
        });
        seed
    }
}

/// Runs `f` (a region's body run again in backward) with the regions it opens nested, the seeds
/// its forward recorded replayed to them, and [`is_recomputing`] true.
pub(crate) fn recomputing<R>(nested_seeds: &[u64], f: impl FnOnce() -> R) -> R {
    struct Close;
    impl Drop for Close {
        fn drop(&mut self) {
            let _ = DEPTH.try_with(|depth| depth.set(depth.get() - 1));
            let _ = RECOMPUTING.try_with(|count| count.set(count.get() - 1));
            let _ = SEEDS.try_with(|seeds| seeds.borrow_mut().replaying.pop());
            let _ = SAVING.try_with(|saving| saving.borrow_mut().pop());
        }
    }
    DEPTH.with(|depth| depth.set(depth.get() + 1));
    SAVING.with(|saving| saving.borrow_mut().push(false));
    RECOMPUTING.with(|count| count.set(count.get() + 1));
    SEEDS.with(|seeds| {
        let mut seeds = seeds.borrow_mut();
        seeds.replaying.push(nested_seeds.iter().copied().collect());
        // The recompute's own forward records nothing for its region: only the regions it opens
        // record (for their own recomputes).
    });
    let _close = Close;
    f()
}

/// Whether this thread is running a region's body again in backward: see
/// [`Region::is_recomputing`](crate::Region::is_recomputing).
pub(crate) fn is_recomputing() -> bool {
    RECOMPUTING.with(Cell::get) > 0
}

/// Whether a region called `name` is still to be checked on this thread; the first call for a
/// name says yes, later ones no.
pub(crate) fn check_first(name: &RegionName) -> bool {
    CHECKED.with(|checked| checked.borrow_mut().insert(name.to_string()))
}
