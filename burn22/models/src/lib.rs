//! The benchmarks' models on Burn 0.22, and where their regions go ([`Cut`]).

pub mod densenet;
pub mod gpt;

/// Which of a model's units (DenseNet's dense layers, the GPT's blocks) are regions.
// `compare` uses two of the cuts, `budget` all.
#[allow(dead_code)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// None: plain autodiff.
    None,
    /// Every unit: the layer cut, one region per block.
    Each,
    /// Every unit, each region's inputs held in host memory between forward and backward.
    EachOffloaded,
    /// Every second unit (the first, the third, ...); the others' activations are kept.
    EverySecond,
}

impl Cut {
    /// Whether unit `index` (counted over the whole model) is a region, and if so whether it
    /// offloads its inputs.
    pub fn region(self, index: usize) -> Option<bool> {
        match self {
            Cut::None => None,
            Cut::Each => Some(false),
            Cut::EachOffloaded => Some(true),
            Cut::EverySecond => index.is_multiple_of(2).then_some(false),
        }
    }
}
