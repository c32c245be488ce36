//! The per-thread region state: which regions are open, what a top-level region is called, how a
//! plan has it run, what the memory report hears of it, the seeds regions draw (recorded in
//! forward, replayed when backward runs a body again), and which region names have had their
//! recompute checked, and the runs of regions kept by name ([`Held`]: made in a region node's
//! forward, taken by its recompute). Regions here open and close around their forward call;
//! backward runs a region's body again under [`recomputing`], where the regions it opens are
//! nested ones (no name index, no plan, nothing reported).

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

use burn::backend::DispatchTensor;
use burn::module::ParamId;
use burn::tensor::Device;
use burn_checkpoint_core::memory::recording;
use burn_checkpoint_core::planner;
use burn_checkpoint_core::{KeptRegions, RegionId, RegionName, Treatment};

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
    /// Where the runs of regions kept by name go and come from, innermost last.
    static HOLDING: RefCell<Vec<Holding>> = const { RefCell::new(Vec::new()) };
}

/// The run of a region kept by name ([`Policy::recompute_all_but`](crate::Policy::recompute_all_but)):
/// its body, run once in the forward of the region node it is nested in, with autodiff on fresh
/// leaves of its tensors. The node's recompute builds the kept region's node from it (its
/// gradient is this run's) instead of running the body again.
#[derive(Clone)]
pub(crate) struct Held {
    /// The leaves: the region's inputs, then the parameters its body used.
    pub(crate) leaves: Vec<DispatchTensor>,
    /// Which parameters the leaves after the inputs are, in order.
    pub(crate) params: Vec<ParamId>,
    /// What the body gave (tracked).
    pub(crate) outputs: Vec<DispatchTensor>,
    /// The seeds the regions nested in it drew: where it is taken, the recompute skips them.
    pub(crate) nested_seeds: Vec<u64>,
    /// The arrangement of its outputs (the region's `O::Layout`).
    pub(crate) layout: Arc<dyn Any + Send + Sync>,
    /// The kept region's name: a recompute takes the run where it opens a region of that name.
    pub(crate) name: RegionName,
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Held({}: {} leaves, {} outputs)",
            self.name,
            self.leaves.len(),
            self.outputs.len()
        )
    }
}

/// One frame of [`HOLDING`].
enum Holding {
    /// A region node's forward (untracked): regions its policy keeps by name run held, and their
    /// runs are added here (its node holds them).
    Recording {
        kept: Option<KeptRegions>,
        /// The parameters the node's forward runs on stand-ins of: a kept region's run makes
        /// leaves of those it uses.
        stand_ins: Arc<HashSet<ParamId>>,
        held: Vec<Held>,
    },
    /// A recompute (or the recompute check): the runs its region's forward held, in order.
    Replaying(VecDeque<Held>),
    /// A kept region's own run (tracked): the regions it opens run as their code says.
    Barrier,
}

/// What a region kept by name does with its run.
pub(crate) enum Hold {
    /// Runs its body held (autodiff on leaves) and adds the run to the enclosing node's forward.
    Run,
    /// Adds this run, which the recompute it is in replays, to the enclosing node's forward (a
    /// node inside that recompute holds it again, for its own recompute).
    Pass(Held),
    /// Builds its node from this run (it is in the recompute of the node that held it).
    Node(Held),
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
    /// ([`Policy::SaveComputeBound`]).
    SaveComputeBound,
    /// A region node, its stored inputs on the device (`offload: false`) or in host memory.
    Region { offload: bool },
    /// Kept by name by the region node it is nested in: see [`Opened::hold`].
    Held,
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
    /// With [`Run::Held`]: what it does with its run.
    pub(crate) hold: Option<Hold>,
    top_level: bool,
    /// Whether it still records seeds (until [`Opened::nested_seeds`] takes them).
    recording: bool,
}

/// Opens a region called `name` whose code asks for `policy` and `offload`: a top-level region
/// gets the next index of its name and runs as the plan in force says (if it names it).
pub(crate) fn open(name: RegionName, policy: &Policy, offload: bool) -> Opened {
    let top_level = DEPTH.with(|depth| {
        let top_level = depth.get() == 0;
        depth.set(depth.get() + 1);
        top_level
    });
    SEEDS.with(|seeds| seeds.borrow_mut().recording.push(Vec::new()));
    let coded = match policy {
        Policy::RecomputeAll | Policy::RecomputeAllBut(_) => Run::Region { offload },
        Policy::SaveComputeBound => Run::SaveComputeBound,
    };
    let mut opened = Opened {
        run: coded,
        slot: None,
        memory_bound: SAVING.with(|saving| saving.borrow().last() == Some(&true)),
        planned: false,
        hold: None,
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
    } else if let Some(hold) = hold(&name) {
        opened.run = Run::Held;
        opened.hold = Some(hold);
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
/// its forward recorded replayed to them, the runs of the regions it kept by name (`held`) given
/// to them, and [`is_recomputing`] true.
pub(crate) fn recomputing<R>(nested_seeds: &[u64], held: &[Held], f: impl FnOnce() -> R) -> R {
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
    let _frame = Frame::push(Holding::Replaying(held.iter().cloned().collect()));
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

/// Whether a nested region called `name` is kept by name here, and what it does with its run.
fn hold(name: &RegionName) -> Option<Hold> {
    HOLDING.with(|holding| {
        let mut holding = holding.borrow_mut();
        let (innermost, outer) = holding.split_last_mut()?;
        let is_next = |queue: &VecDeque<Held>| queue.front().is_some_and(|held| held.name == *name);
        match innermost {
            Holding::Barrier => None,
            // In a recompute's body: the run its forward held, if it is this region's.
            Holding::Replaying(queue) => is_next(queue)
                .then(|| queue.pop_front())
                .flatten()
                .map(Hold::Node),
            Holding::Recording { kept, .. } => {
                // A node's forward inside a recompute: the run that recompute's forward held, if
                // it is this region's (nothing between them but this forward).
                if let Some(Holding::Replaying(queue)) = outer.last_mut()
                    && is_next(queue)
                {
                    return queue.pop_front().map(Hold::Pass);
                }
                kept.as_ref()
                    .is_some_and(|kept| kept.keeps(name))
                    .then_some(Hold::Run)
            }
        }
    })
}

/// Runs `f`, the forward of a region node whose policy keeps `kept` by name (on untracked
/// tensors), and returns what it gave with the runs of the regions it kept, in order.
pub(crate) fn recording_held<R>(
    kept: Option<KeptRegions>,
    stand_ins: HashSet<ParamId>,
    f: impl FnOnce() -> R,
) -> (R, Vec<Held>) {
    // A region inside a node's forward builds no node (nothing there is tracked): the regions
    // it opens hold their runs for that node.
    if HOLDING.with(|holding| matches!(holding.borrow().last(), Some(Holding::Recording { .. }))) {
        return (f(), Vec::new());
    }
    let _frame = Frame::push(Holding::Recording {
        kept,
        stand_ins: Arc::new(stand_ins),
        held: Vec::new(),
    });
    let value = f();
    let held = HOLDING.with(|holding| match holding.borrow_mut().last_mut() {
        Some(Holding::Recording { held, .. }) => std::mem::take(held),
        _ => Vec::new(),
    });
    (value, held)
}

/// The parameters the innermost node's forward runs on stand-ins of (see [`Hold::Run`]).
pub(crate) fn stand_ins() -> Arc<HashSet<ParamId>> {
    HOLDING.with(|holding| match holding.borrow().last() {
        Some(Holding::Recording { stand_ins, .. }) => stand_ins.clone(),
        _ => Arc::default(),
    })
}

/// Runs `f`, a kept region's own run: the regions it opens run as their code says.
pub(crate) fn held_run<R>(f: impl FnOnce() -> R) -> R {
    let _frame = Frame::push(Holding::Barrier);
    f()
}

/// Adds `held`, the run of a region kept by name, to the forward of the node it is nested in.
pub(crate) fn add_held(held: Held) {
    HOLDING.with(|holding| {
        if let Some(Holding::Recording { held: runs, .. }) = holding.borrow_mut().last_mut() {
            runs.push(held);
        }
    });
}

/// The seeds the regions nested in a kept region drew (`count` of them, recorded where it ran),
/// skipped by the recompute that takes its run, and recorded again by the regions open around
/// it (a node's forward in that recompute holds the run again).
pub(crate) fn skip_nested_seeds(count: usize) {
    SEEDS.with(|seeds| {
        let mut seeds = seeds.borrow_mut();
        let skipped: Vec<u64> = match seeds.replaying.last_mut() {
            Some(queue) => (0..count).filter_map(|_| queue.pop_front()).collect(),
            None => Vec::new(),
        };
        // The innermost recording is the kept region's own.
        let enclosing = seeds.recording.len().saturating_sub(1);
        for recording in &mut seeds.recording[..enclosing] {
            recording.extend(&skipped);
        }
    });
}

impl Held {
    /// The arrangement of its outputs, the region's `O::Layout`.
    pub(crate) fn layout<L: Clone + 'static>(&self) -> L {
        self.layout
            .downcast_ref::<L>()
            .expect("a held run's outputs are the region's")
            .clone()
    }
}

/// A frame of [`HOLDING`], popped when dropped (panics included).
struct Frame;

impl Frame {
    fn push(frame: Holding) -> Frame {
        HOLDING.with(|holding| holding.borrow_mut().push(frame));
        Frame
    }
}

impl Drop for Frame {
    fn drop(&mut self) {
        let _ = HOLDING.try_with(|holding| holding.borrow_mut().pop());
    }
}
