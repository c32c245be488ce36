//! What the data-parallel tests share: the two backends trained, and the small model.
#![allow(dead_code)]

pub mod cubecl;
pub mod mlp;

use burn::backend::{Autodiff, NdArray};
use burn_checkpoint::Checkpointed;

/// Burn's plain autodiff.
pub type Plain = Autodiff<NdArray>;
/// The same with burn-checkpoint's regions.
pub type Ckpt = Checkpointed<Autodiff<NdArray>>;
