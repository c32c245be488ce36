//! The per-thread region state: which regions are open, what a top-level region is called, how a
//! plan has it run, and what the memory report hears of it. Regions here open and close around
//! their forward call; backward runs a region's body again under [`recomputing`], where the
//! regions it opens are nested ones (no name index, no plan, nothing reported).

use std::cell::Cell;

use burn_checkpoint_core::memory::recording;
use burn_checkpoint_core::planner;
use burn_checkpoint_core::{RegionId, RegionName, Treatment};

thread_local! {
    /// How many regions are open on this thread (a recompute counts as one).
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// How an opened region runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Run {
    /// Its body as plain autodiff ops: a plan keeps it.
    Keep,
    /// A region node, its stored inputs on the device (`offload: false`) or in host memory.
    Region { offload: bool },
}

/// An open region; closing it (dropping, panics included) restores the depth and, for a
/// top-level region, tells the memory report.
pub(crate) struct Opened {
    /// How it runs.
    pub(crate) run: Run,
    /// Its slot in the step's memory report, if one is being recorded and it is top-level.
    pub(crate) slot: Option<usize>,
    top_level: bool,
}

/// Opens a region called `name` whose code asks for `offload`: a top-level region gets the next
/// index of its name and runs as the plan in force says (if it names it).
///
/// # Panics
///
/// Under a plan that gives it [`Treatment::SaveComputeBound`], which Burn 0.22's regions cannot
/// run (they see no op inside, so keep none of them: a region recomputes its whole body).
pub(crate) fn open(name: RegionName, offload: bool) -> Opened {
    let top_level = DEPTH.with(|depth| {
        let top_level = depth.get() == 0;
        depth.set(depth.get() + 1);
        top_level
    });
    let mut opened = Opened {
        run: Run::Region { offload },
        slot: None,
        top_level,
    };
    if !top_level {
        return opened;
    }
    let id = RegionId::next(name);
    let planned = planner::planned(&id);
    opened.run = match planned {
        None => Run::Region { offload },
        Some(Treatment::Keep) => Run::Keep,
        Some(Treatment::RecomputeAll) => Run::Region { offload: false },
        Some(Treatment::Offload) => Run::Region { offload: true },
        Some(other) => panic!(
            "a plan gives region {id} the treatment {other}, which regions on Burn 0.22 cannot \
             run (they recompute their whole body: keep, recompute-all and offload only); was \
             the plan made with the crate for Burn 0.21?"
        ),
    };
    if recording::on() {
        recording::top_level_opened(&id.name, id.index, planned);
        opened.slot = recording::current_region();
    }
    opened
}

impl Drop for Opened {
    fn drop(&mut self) {
        // `try_with`: nothing to restore while the thread is being torn down.
        let _ = DEPTH.try_with(|depth| depth.set(depth.get() - 1));
        if self.top_level {
            recording::top_level_closed();
        }
    }
}

/// Runs `f` (a region's body run again in backward) with the regions it opens nested.
pub(crate) fn recomputing<R>(f: impl FnOnce() -> R) -> R {
    struct Close;
    impl Drop for Close {
        fn drop(&mut self) {
            let _ = DEPTH.try_with(|depth| depth.set(depth.get() - 1));
        }
    }
    DEPTH.with(|depth| depth.set(depth.get() + 1));
    let _close = Close;
    f()
}
