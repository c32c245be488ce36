//! What the data-parallel tests share: the two backends trained, and the small model.
#![allow(dead_code)]

pub mod cubecl;
pub mod mlp;

use burn::backend::{Autodiff, NdArray};
use burn_checkpoint::Checkpointed;

use std::sync::{Mutex, MutexGuard};

/// Burn's plain autodiff.
pub type Plain = Autodiff<NdArray>;
/// The same with burn-checkpoint's regions.
pub type Ckpt = Checkpointed<Autodiff<NdArray>>;

/// Holds off every other test that takes it: burn-collective keeps one session per backend type
/// per process (and `Plain` and `Ckpt` share the inner backend), and a multi-node test starts
/// three processes on a machine of two cores.
pub fn alone() -> MutexGuard<'static, ()> {
    static ALONE: Mutex<()> = Mutex::new(());
    ALONE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
