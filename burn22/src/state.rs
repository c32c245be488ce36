//! The per-thread region state: one stack of frames, as the crate for Burn 0.21 keeps
//! (`src/region/state.rs`). A frame is an open region, a region's body run again in backward (a
//! recompute), a region node's forward, or the run of a region kept by name; what each holds
//! (the seeds regions draw, recorded in forward and replayed when backward runs a body again;
//! whether a body saves its compute-bound outputs; the runs of regions kept by name) lives in its
//! frame and goes with it. Beside the stack: which region names have had their recompute
//! checked.
//!
//! Regions open and close around their forward call; backward runs a region's body again under
//! [`recomputing`], where the regions it opens are nested ones (no name index, no plan, nothing
//! reported).

use std::any::Any;
use std::cell::RefCell;
use std::collections::{HashSet, VecDeque};
use std::marker::PhantomData;
use std::sync::Arc;

use burn::backend::DispatchTensor;
use burn::module::ParamId;
use burn::tensor::Device;
use burn_checkpoint_core::engine;
use burn_checkpoint_core::engine::recording;
use burn_checkpoint_core::{KeptRegions, RegionId, RegionName, RunAs, Schedule, Treatment};

use crate::policy::Policy;
use crate::seed::region_seed;

/// One frame of the thread's stack.
enum Frame {
    /// An open region ([`open`]).
    Region {
        /// Whether its body runs as [`Run::SaveComputeBound`] (a region opened directly inside
        /// is a memory-bound op of it).
        saving: bool,
        /// The seeds drawn inside its body, at any depth, in order, until its node takes them
        /// ([`Opened::nested_seeds`]).
        seeds: Option<Vec<u64>>,
        /// The names its policy keeps ([`Policy::recompute_all_but`]), at any depth.
        keeps: Option<KeptRegions>,
    },
    /// A region's body run again in backward, or by the first instance's check ([`recomputing`]).
    Recompute {
        /// The seeds its forward's nested regions drew: replayed to the regions it opens.
        seeds: VecDeque<u64>,
        /// The runs its forward kept by name, in order: taken by the regions of those names.
        kept: VecDeque<KeptRun>,
    },
    /// A region node's forward, on untracked tensors ([`recording_kept`]).
    NodeForward {
        /// The nested regions its policy keeps by name.
        keeps: Option<KeptRegions>,
        /// The parameters it runs on stand-ins of: a kept region's run makes leaves of those it
        /// uses.
        stand_ins: Arc<HashSet<ParamId>>,
        /// The runs of the regions it kept, in order (its node holds them).
        kept: Vec<KeptRun>,
    },
    /// A kept region's own run, tracked ([`in_kept_run`]): the regions it opens run as their
    /// code says.
    InKeptRun,
}

impl Frame {
    /// Whether the frame counts in a region's depth (a top-level region opens with none).
    fn is_region_or_recompute(&self) -> bool {
        matches!(self, Frame::Region { .. } | Frame::Recompute { .. })
    }

    /// Whether the frame decides what a region kept by name does.
    fn is_keeping(&self) -> bool {
        !matches!(self, Frame::Region { .. })
    }
}

#[derive(Default)]
struct State {
    /// Outermost first.
    frames: Vec<Frame>,
    /// The region names whose first instance on this thread has been checked (its body run a
    /// second time, compared with its forward: `check.rs`).
    checked: HashSet<String>,
}

/// The lookups on the stack, innermost first (as tracing-subscriber's `SpanStack::current`).
impl State {
    /// The seeds the innermost recompute replays, if one is running.
    fn replaying(&mut self) -> Option<&mut VecDeque<u64>> {
        self.frames.iter_mut().rev().find_map(|frame| match frame {
            Frame::Recompute { seeds, .. } => Some(seeds),
            _ => None,
        })
    }

    /// The innermost frame that decides what a region kept by name does, and the one after it
    /// outwards (see [`Frame::is_keeping`]).
    fn keeping(&mut self) -> (Option<&mut Frame>, Option<&mut Frame>) {
        let mut keeping = self.frames.iter_mut().rev().filter(|f| f.is_keeping());
        (keeping.next(), keeping.next())
    }

    /// The innermost region open or recomputing, if any: a region opened now is nested in it.
    fn enclosing_region(&self) -> Option<&Frame> {
        self.frames
            .iter()
            .rev()
            .find(|frame| frame.is_region_or_recompute())
    }
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
}

fn with_state<R>(f: impl FnOnce(&mut State) -> R) -> R {
    STATE.with(|state| f(&mut state.borrow_mut()))
}

/// Pushes `frame`; the guard pops it, and whatever a panic left above it, when dropped.
fn push(frame: Frame) -> FrameGuard {
    let height = with_state(|state| {
        state.frames.push(frame);
        state.frames.len() - 1
    });
    FrameGuard {
        height,
        _not_send: PhantomData,
    }
}

/// A pushed frame, at index `height`.
struct FrameGuard {
    height: usize,
    // The state is per thread: the frame must be popped on the thread that pushed it.
    _not_send: PhantomData<*const ()>,
}

impl Drop for FrameGuard {
    fn drop(&mut self) {
        // `try_with`: nothing to restore while the thread is being torn down.
        let _ = STATE.try_with(|state| state.borrow_mut().frames.truncate(self.height));
    }
}

/// The run of a region kept by name
/// ([`Policy::recompute_all_but`](crate::Policy::recompute_all_but)): its body, run once in the
/// forward of the region node it is nested in, with autodiff on fresh leaves of its tensors. The
/// node's recompute builds the kept region's node from it (its gradient is this run's) instead of
/// running the body again.
#[derive(Clone)]
pub(crate) struct KeptRun {
    /// The body run on leaves: the region's inputs, then the parameters its body used.
    pub(crate) rerun: Rerun,
    /// Which parameters the leaves after the inputs are, in order.
    pub(crate) params: Vec<ParamId>,
    /// The seeds the regions nested in it drew: where it is taken, the recompute skips them.
    pub(crate) nested_seeds: Vec<u64>,
    /// The arrangement of its outputs (the region's `O::Layout`).
    pub(crate) layout: Arc<dyn Any + Send + Sync>,
    /// The kept region's name: a recompute takes the run where it opens a region of that name.
    pub(crate) name: RegionName,
}

impl std::fmt::Debug for KeptRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "KeptRun({}: {} leaves, {} outputs)",
            self.name,
            self.rerun.leaves.len(),
            self.rerun.outputs.len()
        )
    }
}

impl KeptRun {
    /// The arrangement of its outputs, the region's `O::Layout`.
    pub(crate) fn layout<L: Clone + 'static>(&self) -> L {
        self.layout
            .downcast_ref::<L>()
            .expect("a kept run's outputs are the region's")
            .clone()
    }
}

/// A body run on fresh autodiff leaves, as dispatch tensors: what a backward differentiates
/// instead of running the body again (a kept region's run, a node's rematerialised recompute).
#[derive(Debug, Clone)]
pub(crate) struct Rerun {
    /// The leaves: the region's inputs, then its parameters.
    pub(crate) leaves: Vec<DispatchTensor>,
    /// What the body gave from them (tracked).
    pub(crate) outputs: Vec<DispatchTensor>,
}

/// What a region kept by name does with its run.
pub(crate) enum KeptAction {
    /// Runs its body kept (autodiff on leaves) and adds the run to the enclosing node's forward.
    Run,
    /// Adds this run, which the recompute it is in replays, to the enclosing node's forward (a
    /// node inside that recompute keeps it again, for its own recompute).
    Pass(KeptRun),
    /// Builds its node from this run (it is in the recompute of the node that kept it).
    Node(KeptRun),
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
    /// Kept by name by the region node it is nested in: see [`Opened::kept`].
    Kept,
}

/// An open region; closing it (dropping, panics included) pops its frame and, for a top-level
/// region, tells the memory report.
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
    /// With [`Run::Kept`]: what it does with its run.
    pub(crate) kept: Option<KeptAction>,
    /// Whether a region it is nested in keeps its name (its policy's
    /// [`recompute_all_but`](Policy::recompute_all_but)), however that region runs: a seeded
    /// one then leaves the generator after its forward where taking its kept run leaves it, so
    /// that what comes after it draws the same whether a plan keeps the enclosing region or not.
    pub(crate) named_kept: bool,
    /// The schedule a plan gives it (`Treatment::Scan`): a scan keeps its carries so, whatever
    /// its code's schedule.
    pub(crate) schedule: Option<Schedule>,
    top_level: bool,
    /// Its frame.
    frame: FrameGuard,
}

/// Opens a region called `name` whose code asks for `policy` and `offload`: a top-level region
/// gets the next index of its name and runs as the plan in force says (if it names it).
pub(crate) fn open(name: RegionName, policy: &Policy, offload: bool) -> Opened {
    let (top_level, memory_bound, named_kept) = with_state(|state| {
        let innermost = state.enclosing_region();
        let memory_bound = matches!(innermost, Some(Frame::Region { saving: true, .. }));
        let named_kept = state.frames.iter().any(
            |frame| matches!(frame, Frame::Region { keeps: Some(keeps), .. } if keeps.keeps(&name)),
        );
        (innermost.is_none(), memory_bound, named_kept)
    });
    let coded = match policy {
        Policy::RecomputeAll | Policy::RecomputeAllBut(_) => Run::Region { offload },
        Policy::SaveComputeBound => Run::SaveComputeBound,
    };
    let (mut run, mut planned, mut slot, mut kept) = (coded, false, None, None);
    let mut schedule = None;
    if top_level {
        let id = RegionId::next(name);
        let plan = engine::planned(&id);
        planned = plan.is_some();
        run = plan.map_or(coded, |treatment| planned_run(treatment, coded));
        if let Some(Treatment::Scan(planned)) = plan {
            schedule = Some(planned);
        }
        if recording::on() {
            recording::top_level_opened(&id.name, id.index, plan);
            slot = recording::current_region();
        }
    } else if let Some(action) = kept_action(&name, true) {
        run = Run::Kept;
        kept = Some(action);
    }
    let frame = push(Frame::Region {
        saving: run == Run::SaveComputeBound,
        seeds: Some(Vec::new()),
        keeps: policy.kept().cloned(),
    });
    Opened {
        run,
        slot,
        memory_bound,
        planned,
        kept,
        named_kept,
        schedule,
        top_level,
        frame,
    }
}

/// How a top-level region whose code asks for `coded` runs under a plan's `treatment` (the
/// core's rule, [`Treatment::run_as`], in this crate's words).
fn planned_run(treatment: Treatment, coded: Run) -> Run {
    match treatment.run_as() {
        RunAs::Keep => Run::Keep,
        RunAs::SaveComputeBound => Run::SaveComputeBound,
        RunAs::RecomputeAll { offload } => Run::Region { offload },
        RunAs::AsWritten => coded,
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
        let replayed = with_state(|state| {
            state.replaying().map(|seeds| {
                seeds.pop_front().expect(
                    "a checkpoint region's recompute opened a seeded region its forward did not: \
                     the body must run the same code each time (depend on its inputs and module \
                     only)",
                )
            })
        });
        let seed = replayed.unwrap_or_else(|| region_seed(device));
        self.record_in_enclosing(&[seed]);
        seed
    }

    /// The seeds the regions nested in this one drew while its forward ran, in order: what its
    /// recompute replays. Stops the recording.
    pub(crate) fn nested_seeds(&mut self) -> Vec<u64> {
        with_state(|state| match state.frames.get_mut(self.frame.height) {
            Some(Frame::Region { seeds, .. }) => seeds.take().unwrap_or_default(),
            _ => Vec::new(),
        })
    }

    /// The seeds the regions nested in this one drew since the last call (or since it opened),
    /// in order; the recording goes on: a scan takes each step's apart.
    pub(crate) fn nested_seeds_so_far(&mut self) -> Vec<u64> {
        with_state(|state| match state.frames.get_mut(self.frame.height) {
            Some(Frame::Region {
                seeds: Some(seeds), ..
            }) => std::mem::take(seeds),
            _ => Vec::new(),
        })
    }

    /// Where a kept region's run is taken (this region is the kept one): the `count` seeds its
    /// nested regions drew where it ran are skipped in the recompute replaying them, and recorded
    /// again by the regions open around it (a node's forward in that recompute keeps the run
    /// again). Stops this region's recording.
    pub(crate) fn skip_nested_seeds(&mut self, count: usize) {
        let skipped: Vec<u64> = with_state(|state| match state.replaying() {
            Some(seeds) => (0..count).filter_map(|_| seeds.pop_front()).collect(),
            None => Vec::new(),
        });
        self.record_in_enclosing(&skipped);
        let _ = self.nested_seeds();
    }

    /// Records `seeds` in every region open around this one (still recording).
    fn record_in_enclosing(&self, drawn: &[u64]) {
        with_state(|state| {
            for frame in &mut state.frames[..self.frame.height] {
                if let Frame::Region {
                    seeds: Some(recording),
                    ..
                } = frame
                {
                    recording.extend(drawn);
                }
            }
        });
    }
}

impl Drop for Opened {
    fn drop(&mut self) {
        if self.top_level {
            recording::top_level_closed();
        }
        // The frame pops when `self.frame` drops, after this.
    }
}

/// Runs `f` (a region's body run again in backward) with the regions it opens nested, the seeds
/// its forward recorded replayed to them, the runs of the regions it kept by name (`kept`) given
/// to them, and [`is_recomputing`] true.
pub(crate) fn recomputing<R>(nested_seeds: &[u64], kept: &[KeptRun], f: impl FnOnce() -> R) -> R {
    let _frame = push(Frame::Recompute {
        seeds: nested_seeds.iter().copied().collect(),
        kept: kept.iter().cloned().collect(),
    });
    f()
}

/// Whether this thread is running a region's body again in backward: see
/// [`Region::is_recomputing`](crate::Region::is_recomputing).
pub(crate) fn is_recomputing() -> bool {
    with_state(|state| {
        state
            .frames
            .iter()
            .any(|frame| matches!(frame, Frame::Recompute { .. }))
    })
}

/// Whether a region called `name` is still to be checked on this thread; the first call for a
/// name says yes, later ones no.
pub(crate) fn check_first(name: &RegionName) -> bool {
    with_state(|state| state.checked.insert(name.to_string()))
}

/// Whether a region called `name`, opened now, would be kept by name by a region it is nested
/// in (the state as it is: nothing taken).
pub(crate) fn kept_by_name(name: &RegionName) -> bool {
    kept_action(name, false).is_some()
}

/// Whether a nested region called `name` is kept by name here, and what it does with its run;
/// `take` takes that run from the recompute's queue (opening the region), else it is copied.
fn kept_action(name: &RegionName, take: bool) -> Option<KeptAction> {
    with_state(|state| {
        let (innermost, outer) = state.keeping();
        let next = |queue: &mut VecDeque<KeptRun>| {
            if !queue.front().is_some_and(|run| run.name == *name) {
                None
            } else if take {
                queue.pop_front()
            } else {
                queue.front().cloned()
            }
        };
        match innermost? {
            Frame::InKeptRun | Frame::Region { .. } => None,
            // In a recompute's body: the run its forward kept, if it is this region's.
            Frame::Recompute { kept, .. } => next(kept).map(KeptAction::Node),
            Frame::NodeForward { keeps, .. } => {
                let keeps = keeps.as_ref().is_some_and(|keeps| keeps.keeps(name));
                // A node's forward inside a recompute: the run that recompute's forward kept, if
                // it is this region's (nothing between them but this forward).
                if let Some(Frame::Recompute { kept, .. }) = outer
                    && let Some(run) = next(kept)
                {
                    return Some(KeptAction::Pass(run));
                }
                keeps.then_some(KeptAction::Run)
            }
        }
    })
}

/// Runs `f`, the forward of a region node whose policy keeps `keeps` by name (on untracked
/// tensors), and returns what it gave with the runs of the regions it kept, in order.
pub(crate) fn recording_kept<R>(
    keeps: Option<KeptRegions>,
    stand_ins: HashSet<ParamId>,
    f: impl FnOnce() -> R,
) -> (R, Vec<KeptRun>) {
    // A region inside a node's forward builds no node (nothing there is tracked): the regions
    // it opens keep their runs for that node.
    let inside_a_node_forward =
        with_state(|state| matches!(state.keeping().0, Some(Frame::NodeForward { .. })));
    if inside_a_node_forward {
        return (f(), Vec::new());
    }
    let frame = push(Frame::NodeForward {
        keeps,
        stand_ins: Arc::new(stand_ins),
        kept: Vec::new(),
    });
    let value = f();
    let kept = with_state(|state| match state.frames.get_mut(frame.height) {
        Some(Frame::NodeForward { kept, .. }) => std::mem::take(kept),
        _ => Vec::new(),
    });
    (value, kept)
}

/// The parameters the innermost node's forward runs on stand-ins of (see [`KeptAction::Run`]).
pub(crate) fn stand_ins() -> Arc<HashSet<ParamId>> {
    with_state(|state| match state.keeping().0 {
        Some(Frame::NodeForward { stand_ins, .. }) => stand_ins.clone(),
        _ => Arc::default(),
    })
}

/// Runs `f`, a kept region's own run: the regions it opens run as their code says.
pub(crate) fn in_kept_run<R>(f: impl FnOnce() -> R) -> R {
    let _frame = push(Frame::InKeptRun);
    f()
}

/// Adds `run`, the run of a region kept by name, to the forward of the node it is nested in.
pub(crate) fn add_kept_run(run: KeptRun) {
    with_state(|state| {
        if let Some(Frame::NodeForward { kept, .. }) = state.keeping().0 {
            kept.push(run);
        }
    });
}
