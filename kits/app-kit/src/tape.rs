//! Which autodiff backend a benchmark's method trains on: [`Tape`], named once for the apps of
//! both Burn crates (each maps it to its backend types; no Burn in it).

use burn_checkpoint_core::planner::Base;

/// The autodiff backend a method trains on, over an inner backend `I`: the apps' `Method`s say
/// which, and each bench or trainer turns it into a type with one `match`.
///
/// ```
/// use app_kit::tape::Tape;
///
/// // A bench's one place that names backend types, as a string here.
/// fn backend(tape: Tape) -> &'static str {
///     match tape {
///         Tape::Plain => "Autodiff<I>",
///         Tape::Balanced => "Autodiff<I, BalancedCheckpointing>",
///         Tape::Regions => "Checkpointed<Autodiff<I>>",
///         Tape::RegionsOverBalanced => "Checkpointed<Autodiff<I, BalancedCheckpointing>>",
///     }
/// }
/// assert!(Tape::RegionsOverBalanced.regions() && !Tape::Balanced.regions());
/// assert_eq!(backend(Tape::Regions), "Checkpointed<Autodiff<I>>");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tape {
    /// Burn's `Autodiff<I>`: every activation backward needs is held.
    Plain,
    /// Burn's `Autodiff<I, BalancedCheckpointing>`: Burn recomputes its cheap ops.
    Balanced,
    /// `Checkpointed<Autodiff<I>>`: the model's regions, plain autodiff elsewhere.
    Regions,
    /// `Checkpointed<Autodiff<I, BalancedCheckpointing>>`: the model's regions, Balanced
    /// elsewhere.
    RegionsOverBalanced,
}

impl Tape {
    /// Whether the model's regions run (the backend is `Checkpointed`).
    pub fn regions(self) -> bool {
        matches!(self, Tape::Regions | Tape::RegionsOverBalanced)
    }

    /// What the regions sit on: the planner's [`Base`] of this tape.
    ///
    /// ```
    /// use app_kit::tape::Tape;
    /// use burn_checkpoint_core::planner::Base;
    ///
    /// assert_eq!(Tape::RegionsOverBalanced.base(), Base::Balanced);
    /// assert_eq!(Tape::Regions.base(), Base::Plain);
    /// ```
    pub fn base(self) -> Base {
        match self {
            Tape::Plain | Tape::Regions => Base::Plain,
            Tape::Balanced | Tape::RegionsOverBalanced => Base::Balanced,
        }
    }
}
