//! DenseNet-BC (Huang et al. 2017, "bottleneck + compression") for 32×32 images, as in the
//! "memory-efficient DenseNet" experiment, with a choice of where checkpoint regions go; and the
//! example trainer built on it (the `train` binary: real data, checkpoint modes, save/resume,
//! progress and a report).
//!
//! ```
//! use burn::backend::{Autodiff, NdArray};
//! use burn::prelude::*;
//! use burn_checkpoint::Checkpointed;
//! use densenet_bc::{Cut, DenseNetConfig};
//!
//! type B = Checkpointed<Autodiff<NdArray>>;
//! let device = Default::default();
//! // DenseNet-BC-40 (6 layers per block), the whole dense layer recomputed during backward.
//! let model = DenseNetConfig::new(40).with_cut(Cut::Layer).init::<B>(&device);
//! let images = Tensor::<B, 4>::zeros([2, 3, 8, 8], &device);
//! let logits = model.forward(images);
//! assert_eq!(logits.dims(), [2, 10]);
//! ```
//!
//! Not part of burn-checkpoint's public API: it is the model the benchmark and the trainer share.

mod method;
mod model;

pub mod data;
pub mod train;

/// The seeds every random choice of a run derives from (image-data's, shared with the trainer
/// for Burn 0.22).
pub use image_data::seeds;

pub use method::Method;
pub use model::{
    BLOCK_REGION, BOTTLENECK_REGION, Cut, DenseBlock, DenseLayer, DenseNet, DenseNetConfig,
    LAYER_REGION, RegionPolicy, Stage, Transition,
};
