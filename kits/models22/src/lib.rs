//! DenseNet-BC, a GPT and a recurrent network (modern-lstm's) on Burn 0.22, and where their
//! regions go ([`Cut`]): the models burn-checkpoint-22's benchmarks measure and its trainer
//! (`apps/train22`) trains, and its tests compare.
//!
//! ```
//! use burn::tensor::{Device, Tensor};
//! use burn_checkpoint_22_models::Cut;
//! use burn_checkpoint_22_models::densenet::DenseNet;
//!
//! let device = Device::flex().autodiff();
//! // DenseNet-BC-10 (one layer per block) for 1-channel images and 10 classes.
//! let model = DenseNet::new(10, 4, 1, 10, &device);
//! let logits = model.forward(Tensor::zeros([2, 1, 28, 28], &device), Cut::Each);
//! assert_eq!(logits.dims(), [2, 10]);
//! ```

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::Tensor;

pub mod densenet;
pub mod gpt;
pub mod lstm;

/// Which of a model's units (DenseNet's dense layers, the GPT's blocks, the LSTM's cell calls)
/// are regions (the LSTM's cell calls: every cut but [`Cut::None`]).
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
    /// Every unit a region keeping its compute-bound outputs (`Policy::SaveComputeBound`);
    /// inside a dense layer, its concatenation, first batch norm and ReLU are a region of their
    /// own, which Balanced recomputes (the "memory-efficient DenseNet" trade).
    EachSavingComputeBound,
    /// Every unit a region recomputing all but its attention (`Policy::recompute_all_but`
    /// naming the region `attention` a GPT block opens around burn-nn's `MultiHeadAttention`):
    /// the attention's work is held from forward to backward. DenseNet's layers hold no
    /// attention: for them it is [`Cut::Each`].
    EachKeepingAttention,
    /// Every unit a region recomputing all but its attention's projections
    /// (`Policy::recompute_all_but(["attention.*"])` matching the regions `attention.qkv`, the
    /// query, key and value projections, and `attention.output` a GPT block opens in its
    /// attention, written out op for op as burn-nn's `MultiHeadAttention` runs it): what the
    /// projections compute is held from forward to backward, the scores, softmax and MLP
    /// recomputed. DenseNet's layers hold no attention: for them it is [`Cut::Each`].
    EachKeepingProjections,
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
            Cut::Each => Unit::Region { offloaded: false },
            Cut::EachOffloaded => Unit::Region { offloaded: true },
            Cut::EverySecond if index.is_multiple_of(2) => Unit::Region { offloaded: false },
            Cut::EverySecond => Unit::Plain,
            Cut::EachSavingComputeBound => Unit::SavingComputeBound,
            Cut::EachKeepingAttention => Unit::KeepingAttention,
            Cut::EachKeepingProjections => Unit::KeepingProjections,
        }
    }
}

/// Initialises a module's lazy parameters now (Burn draws them from the generator at their
/// first use otherwise), so that a measured step does not count them.
///
/// ```
/// use burn::nn::LinearConfig;
/// use burn::tensor::Device;
/// use burn_checkpoint_22_models::initialised;
///
/// let linear = initialised(LinearConfig::new(4, 4).init(&Device::flex()));
/// assert_eq!(linear.weight.val().dims(), [4, 4]);
/// ```
pub fn initialised<M: Module>(module: M) -> M {
    struct Touch;

    impl ModuleVisitor for Touch {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let _ = param.val();
        }
    }

    module.visit(&mut Touch);
    module
}
