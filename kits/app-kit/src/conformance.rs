//! The conformance matrix's words, the same in both crates' tests
//! (`tests/memory/conformance.rs`, `burn22/tests/memory/conformance.rs`): the ways into a region
//! ([`Way`]), the hazards a user's program brings ([`Hazard`]), what a cell gave ([`Outcome`]),
//! and the table docs/conformance.md shows ([`table`]).

use std::fmt;

/// How a program enters regions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    /// `#[checkpoint]` on a module's method.
    Attribute,
    /// `Region::named(..).run(..)`.
    Run,
    /// `checkpoint(..)`, named by its place.
    Checkpoint,
    /// `checkpoint_fn(..)` (the crate for Burn 0.22's alone).
    CheckpointFn,
    /// `Region::sequential` over `Segments::Count(3)`.
    SequentialCount,
    /// `Region::sequential` over `Segments::Sqrt`.
    SequentialSqrt,
    /// `Region::scan` under `Schedule::EveryStep`.
    ScanEveryStep,
    /// `Region::scan` under `Schedule::Snapshots(1)`.
    ScanSnapshots,
    /// `Region::scan` under a `Schedule::Budget` of two carries.
    ScanBudget,
    /// `Region::offloaded`.
    Offloaded,
    /// `Policy::SaveComputeBound`.
    SaveComputeBound,
    /// Regions an enclosing one keeps by name (`Policy::recompute_all_but`).
    KeptByName,
    /// Regions nested in others.
    Nested,
    /// A plan keeping every region.
    PlanKeep,
    /// A plan recomputing regions whose code keeps their compute-bound outputs.
    PlanRecompute,
    /// A plan offloading every region.
    PlanOffload,
    /// A plan keeping a sequential's regions.
    PlanKeepSequential,
    /// A plan keeping a scan's regions.
    PlanKeepScan,
    /// A plan giving a scan `Treatment::Scan(Schedule::Snapshots(1))`.
    PlanSchedule,
}

impl Way {
    /// Every way, in the table's order.
    pub const ALL: [Way; 19] = [
        Way::Attribute,
        Way::Run,
        Way::Checkpoint,
        Way::CheckpointFn,
        Way::SequentialCount,
        Way::SequentialSqrt,
        Way::ScanEveryStep,
        Way::ScanSnapshots,
        Way::ScanBudget,
        Way::Offloaded,
        Way::SaveComputeBound,
        Way::KeptByName,
        Way::Nested,
        Way::PlanKeep,
        Way::PlanRecompute,
        Way::PlanOffload,
        Way::PlanKeepSequential,
        Way::PlanKeepScan,
        Way::PlanSchedule,
    ];

    /// The way as the table names it.
    pub fn label(self) -> &'static str {
        match self {
            Way::Attribute => "`#[checkpoint]`",
            Way::Run => "`Region::run`",
            Way::Checkpoint => "`checkpoint`",
            Way::CheckpointFn => "`checkpoint_fn`",
            Way::SequentialCount => "`checkpoint_sequential`, `Count(3)`",
            Way::SequentialSqrt => "`checkpoint_sequential`, `Sqrt`",
            Way::ScanEveryStep => "scan, `EveryStep`",
            Way::ScanSnapshots => "scan, `Snapshots(1)`",
            Way::ScanBudget => "scan, `Budget` of 2 carries",
            Way::Offloaded => "`Region::offloaded`",
            Way::SaveComputeBound => "`Policy::SaveComputeBound`",
            Way::KeptByName => "kept by name",
            Way::Nested => "nested",
            Way::PlanKeep => "a plan keeps",
            Way::PlanRecompute => "a plan recomputes",
            Way::PlanOffload => "a plan offloads",
            Way::PlanKeepSequential => "a plan keeps a sequential",
            Way::PlanKeepScan => "a plan keeps a scan",
            Way::PlanSchedule => "a plan's `Scan(Snapshots(1))`",
        }
    }

    /// Whether it is a scan.
    pub fn is_scan(self) -> bool {
        matches!(
            self,
            Way::ScanEveryStep
                | Way::ScanSnapshots
                | Way::ScanBudget
                | Way::PlanKeepScan
                | Way::PlanSchedule
        )
    }

    /// Whether it is a sequential stack.
    pub fn is_sequential(self) -> bool {
        matches!(
            self,
            Way::SequentialCount | Way::SequentialSqrt | Way::PlanKeepSequential
        )
    }

    /// Whether a plan keeps its regions (their code runs once, as plain autodiff ops).
    pub fn kept_by_plan(self) -> bool {
        matches!(
            self,
            Way::PlanKeep | Way::PlanKeepSequential | Way::PlanKeepScan
        )
    }
}

/// What a user's program brings to its regions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hazard {
    /// Nothing: the program as it is.
    Nothing,
    /// Parameters Burn draws at their first use.
    Lazy,
    /// A dropout inside each region.
    DropoutInside,
    /// A dropout before the regions.
    DropoutBefore,
    /// A dropout after them.
    DropoutAfter,
    /// A batch norm inside each region (its running statistics).
    BatchNorm,
    /// Noise the body draws itself: on Burn 0.22 a region must be told (`seeded`); on Burn 0.21
    /// the decorator replays the drawn tensor.
    Seeded,
    /// A second tensor through every region.
    TwoOutputs,
    /// A region's parameter used again outside it.
    ParameterOutside,
    /// An input that does not require a gradient.
    InputWithoutGradient,
    /// A counter the body increments unless it is recomputing.
    SideEffect,
    /// Three training steps.
    ThreeSteps,
    /// A body reading state it changed (a counter it increments each run).
    MutatesCapture,
}

impl Hazard {
    /// Every hazard, in the table's order.
    pub const ALL: [Hazard; 13] = [
        Hazard::Nothing,
        Hazard::Lazy,
        Hazard::DropoutInside,
        Hazard::DropoutBefore,
        Hazard::DropoutAfter,
        Hazard::BatchNorm,
        Hazard::Seeded,
        Hazard::TwoOutputs,
        Hazard::ParameterOutside,
        Hazard::InputWithoutGradient,
        Hazard::SideEffect,
        Hazard::ThreeSteps,
        Hazard::MutatesCapture,
    ];

    /// The hazard as the table names it.
    pub fn label(self) -> &'static str {
        match self {
            Hazard::Nothing => "none",
            Hazard::Lazy => "lazy parameters",
            Hazard::DropoutInside => "dropout inside",
            Hazard::DropoutBefore => "dropout before",
            Hazard::DropoutAfter => "dropout after",
            Hazard::BatchNorm => "batch norm",
            Hazard::Seeded => "seeded body",
            Hazard::TwoOutputs => "two outputs",
            Hazard::ParameterOutside => "parameter used outside",
            Hazard::InputWithoutGradient => "input without gradient",
            Hazard::SideEffect => "side effect",
            Hazard::ThreeSteps => "three steps",
            Hazard::MutatesCapture => "mutates a capture",
        }
    }

    /// Whether the body draws random numbers.
    pub fn draws_inside(self) -> bool {
        matches!(self, Hazard::DropoutInside | Hazard::Seeded)
    }

    /// Whether the program's parameters are drawn at their first use: as users build models,
    /// and where the body draws random numbers (a region's seed must not move those draws).
    pub fn lazy(self) -> bool {
        matches!(self, Hazard::Lazy) || self.draws_inside()
    }
}

/// What a cell gave.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Loss, gradients, running statistics, weights, side effects: the plain program's, bit for
    /// bit.
    Bitwise,
    /// Within a documented bound of the plain program's: gradient terms added in another order.
    Within,
    /// The documented exception of Burn 0.22: the body's draws come from its region's own seed;
    /// its masks are replayed, and the run is the same twice and under a plan keeping it.
    OwnSeed,
    /// Stopped with this message.
    Refused(String),
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Bitwise => write!(f, "="),
            Outcome::Within => write!(f, "≈"),
            Outcome::OwnSeed => write!(f, "seed"),
            Outcome::Refused(_) => write!(f, "refused"),
        }
    }
}

/// The matrix as docs/conformance.md shows it: a row a way, a column a hazard.
///
/// ```
/// use app_kit::conformance::{Hazard, Outcome, Way, table};
///
/// let row = (Way::Run, Hazard::ALL.map(|_| Outcome::Bitwise).to_vec());
/// let table = table(&[row]);
/// assert!(table.starts_with("| way in | none | lazy parameters |"));
/// let row = format!("| `Region::run` |{}\n", " = |".repeat(13));
/// assert!(table.ends_with(&row));
/// ```
pub fn table(rows: &[(Way, Vec<Outcome>)]) -> String {
    let mut table = String::from("| way in |");
    for hazard in Hazard::ALL {
        table += &format!(" {} |", hazard.label());
    }
    table += "\n|---|";
    table += &"---|".repeat(Hazard::ALL.len());
    for (way, outcomes) in rows {
        table += &format!("\n| {} |", way.label());
        for outcome in outcomes {
            table += &format!(" {outcome} |");
        }
    }
    table + "\n"
}

/// The largest difference between two runs' numbers, tensor by tensor, relative to each of
/// `plain`'s tensors' largest value; `None` where the two do not pair up (another count of
/// tensors, or of values in one).
///
/// ```
/// use app_kit::conformance::largest_difference;
///
/// let plain = vec![vec![2.0, -4.0], vec![1.0]];
/// assert_eq!(largest_difference(&plain, &plain), Some(0.0));
/// let other = vec![vec![2.0, -4.0 + 4e-6], vec![1.0]];
/// assert!((largest_difference(&plain, &other).unwrap() - 1e-6).abs() < 1e-7);
/// assert_eq!(largest_difference(&plain, &plain[..1]), None);
/// ```
pub fn largest_difference(plain: &[Vec<f32>], other: &[Vec<f32>]) -> Option<f32> {
    if plain.len() != other.len() {
        return None;
    }
    let mut largest = 0f32;
    for (a, b) in plain.iter().zip(other) {
        if a.len() != b.len() {
            return None;
        }
        let scale = a.iter().fold(f32::MIN_POSITIVE, |m, v| m.max(v.abs()));
        for (a, b) in a.iter().zip(b) {
            largest = largest.max((a - b).abs() / scale);
        }
    }
    Some(largest)
}
