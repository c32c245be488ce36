//! The ways to train the GPT, named once for its benchmarks and tests.

use app_kit::tape::Tape;

use crate::model::Cut;

app_kit::method_names! {
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
        /// Per block, keeping the attention's work by name ([`Cut::BlockKeepAttention`]).
        BlockKeepAttention,
        /// Per block, its input held in host memory ([`Cut::BlockOffload`]).
        BlockOffload,
        /// `checkpoint_sequential` with √n segments ([`Cut::SeqSqrt`]).
        SeqSqrt,
        /// `checkpoint_sequential` with 2 segments ([`Cut::SeqTwo`]).
        SeqTwo,
        /// The whole stack one region ([`Cut::Whole`]).
        Whole,
    }
}

impl Method {
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
            Method::BlockKeepAttention => Cut::BlockKeepAttention,
            Method::BlockOffload => Cut::BlockOffload,
            Method::SeqSqrt => Cut::SeqSqrt,
            Method::SeqTwo => Cut::SeqTwo,
            Method::Whole => Cut::Whole,
        }
    }
}

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
