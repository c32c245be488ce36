//! The ways to train the GPT, named once for its benchmarks and tests.

use app_kit::method::MethodName;
use app_kit::tape::Tape;

use crate::model::Cut;

/// How a training step runs: which autodiff backend and where the model's regions go. The
/// benchmarks' `--methods` take these names.
///
/// ```
/// use app_kit::tape::Tape;
/// use gpt::{Cut, Method};
///
/// let method = Method::BlockBalanced;
/// assert_eq!((method.name(), method.cut()), ("block-balanced", Cut::Block));
/// assert_eq!(method.tape(), Tape::RegionsOverBalanced);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Plain `Autodiff<I>`.
    Plain,
    /// Burn's `Autodiff<I, BalancedCheckpointing>`.
    Balanced,
    /// `#[checkpoint]` per block ([`Cut::Block`]) on `Checkpointed<Autodiff<I>>`.
    Block,
    /// The same over Balanced: `Checkpointed<Autodiff<I, BalancedCheckpointing>>`.
    BlockBalanced,
    /// Per block, keeping matmul outputs ([`Cut::BlockSave`]).
    BlockSave,
    /// Per block, keeping the attention's work by name ([`Cut::BlockKeepingAttention`]).
    BlockKeepAttention,
    /// Per block, its input held in host memory ([`Cut::BlockOffload`]).
    BlockOffload,
    /// `checkpoint_sequential` with √n segments ([`Cut::SequentialSqrt`]).
    SeqSqrt,
    /// `checkpoint_sequential` with 2 segments ([`Cut::SequentialTwo`]).
    SeqTwo,
    /// The whole stack one region ([`Cut::Whole`]).
    Whole,
}

impl Method {
    /// Every method, in the order tables list them.
    pub const ALL: [Method; 10] = [
        Method::Plain,
        Method::Balanced,
        Method::Block,
        Method::BlockBalanced,
        Method::BlockSave,
        Method::BlockKeepAttention,
        Method::BlockOffload,
        Method::SeqSqrt,
        Method::SeqTwo,
        Method::Whole,
    ];

    /// The method's name in the one table of every app's names (`name()`: the command line's
    /// and JSON's spelling).
    pub fn word(self) -> MethodName {
        match self {
            Method::Plain => MethodName::Plain,
            Method::Balanced => MethodName::Balanced,
            Method::Block => MethodName::Block,
            Method::BlockBalanced => MethodName::BlockBalanced,
            Method::BlockSave => MethodName::BlockSave,
            Method::BlockKeepAttention => MethodName::BlockKeepAttention,
            Method::BlockOffload => MethodName::BlockOffload,
            Method::SeqSqrt => MethodName::SeqSqrt,
            Method::SeqTwo => MethodName::SeqTwo,
            Method::Whole => MethodName::Whole,
        }
    }

    /// The method as tables name it.
    pub fn label(self) -> &'static str {
        match self {
            Method::Plain => "plain Autodiff",
            Method::Balanced => "Burn BalancedCheckpointing",
            Method::Block => "#[checkpoint] per block",
            Method::BlockBalanced => "#[checkpoint] per block, over Balanced",
            Method::BlockSave => "per block, SaveComputeBound",
            Method::BlockKeepAttention => "per block, attention kept by name",
            Method::BlockOffload => "per block, offloaded",
            Method::SeqSqrt => "checkpoint_sequential, Sqrt",
            Method::SeqTwo => "checkpoint_sequential, 2 segments",
            Method::Whole => "whole stack one region",
        }
    }

    /// The autodiff backend the method trains on.
    pub fn tape(self) -> Tape {
        match self {
            Method::Plain => Tape::Plain,
            Method::Balanced => Tape::Balanced,
            Method::BlockBalanced => Tape::RegionsOverBalanced,
            _ => Tape::Regions,
        }
    }

    /// Where the model's regions go ([`GptConfig::cut`](crate::GptConfig::cut)).
    pub fn cut(self) -> Cut {
        match self {
            Method::Plain | Method::Balanced => Cut::None,
            Method::Block | Method::BlockBalanced => Cut::Block,
            Method::BlockSave => Cut::BlockSave,
            Method::BlockKeepAttention => Cut::BlockKeepingAttention,
            Method::BlockOffload => Cut::BlockOffload,
            Method::SeqSqrt => Cut::SequentialSqrt,
            Method::SeqTwo => Cut::SequentialTwo,
            Method::Whole => Cut::Whole,
        }
    }
}

app_kit::method_names!(Method);

#[cfg(test)]
mod tests {
    use clap::ValueEnum;

    use super::*;

    #[test]
    fn names_are_the_command_lines() {
        assert_eq!(Method::value_variants(), Method::ALL);
        for method in Method::ALL {
            assert_eq!(Method::from_str(method.name(), false), Ok(method));
        }
    }
}
