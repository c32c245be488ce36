//! DenseNet-BC, a GPT and a recurrent network (modern-lstm's) on Burn 0.22, and where their
//! regions go ([`Cut`]): the models the trainer for Burn 0.22 (`apps/train22`) trains, and that
//! this crate's benches (`benches/`: regions against Burn's Balanced, the planner's budget sweep,
//! a region's cost as live regions grow) and tests (`tests/models/`: every cut's gradients
//! against plain autodiff's) run burn-checkpoint-22 on.
//!
//! ```
//! use burn::tensor::{Device, Tensor};
//! use burn_checkpoint_22_models::Cut;
//! use burn_checkpoint_22_models::densenet::DenseNet;
//!
//! let device = Device::flex().autodiff();
//! // DenseNet-BC-10 (one layer per block) for 1-channel images and 10 classes.
//! let model = DenseNet::new(10, 4, 1, 10, &device);
//! let logits = model.forward(Tensor::zeros([2, 1, 28, 28], &device), Cut::Regions);
//! assert_eq!(logits.dims(), [2, 10]);
//! ```

pub mod densenet;
pub mod gpt;
pub mod lstm;

/// Which of a model's units (DenseNet's dense layers, the GPT's blocks, the LSTM's cell calls)
/// are regions (the LSTM's cell calls: every cut but [`Cut::None`]), in the words of app-kit's
/// table of methods (`regions` is a region per unit of whichever model, as `train22` says).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// None: plain autodiff.
    None,
    /// Every unit a region: the layer cut, one region per block.
    Regions,
    /// Every unit, each region's inputs held in host memory between forward and backward.
    RegionsOffload,
    /// Every second unit (the first, the third, ...); the others' activations are kept.
    EverySecond,
    /// Every unit a region keeping its compute-bound outputs (`Policy::SaveComputeBound`);
    /// inside a dense layer, its concatenation, first batch norm and ReLU are a region of their
    /// own, which Balanced recomputes (the "memory-efficient DenseNet" trade).
    RegionsSave,
    /// Every unit a region recomputing all but its attention (`Policy::recompute_all_but`
    /// naming the region `attention` a GPT block opens around burn-nn's `MultiHeadAttention`):
    /// the attention's work is held from forward to backward. DenseNet's layers hold no
    /// attention: for them it is [`Cut::Regions`].
    RegionsKeepAttention,
    /// Every unit a region recomputing all but its attention's projections
    /// (`Policy::recompute_all_but(["attention.*"])` matching the regions `attention.qkv`, the
    /// query, key and value projections, and `attention.output` a GPT block opens in its
    /// attention, written out op for op as burn-nn's `MultiHeadAttention` runs it): what the
    /// projections compute is held from forward to backward, the scores, softmax and MLP
    /// recomputed. DenseNet's layers hold no attention: for them it is [`Cut::Regions`].
    RegionsKeepProjections,
}

/// How one unit runs under a [`Cut`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Plain autodiff ops.
    Plain,
    /// A region recomputing its whole body, its inputs on the device or (`offloaded`) in host
    /// memory.
    Region { offloaded: bool },
    /// A region keeping its compute-bound outputs.
    SavingComputeBound,
    /// A region recomputing all but its nested region `attention`.
    KeepingAttention,
    /// A region recomputing all but its nested regions `attention.qkv` and `attention.output`.
    KeepingProjections,
}

impl Cut {
    /// How unit `index` (counted over the whole model) runs.
    pub fn unit(self, index: usize) -> Unit {
        match self {
            Cut::None => Unit::Plain,
            Cut::Regions => Unit::Region { offloaded: false },
            Cut::RegionsOffload => Unit::Region { offloaded: true },
            Cut::EverySecond if index.is_multiple_of(2) => Unit::Region { offloaded: false },
            Cut::EverySecond => Unit::Plain,
            Cut::RegionsSave => Unit::SavingComputeBound,
            Cut::RegionsKeepAttention => Unit::KeepingAttention,
            Cut::RegionsKeepProjections => Unit::KeepingProjections,
        }
    }
}

/// A module's lazy parameters drawn now (the tests' and benches' helper, which the trainer uses
/// too).
pub use bench_kit_22::initialised;
