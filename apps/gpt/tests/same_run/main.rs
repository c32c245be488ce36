//! The GPT trained with and without regions gives the same run: every cut's loss and gradients
//! against plain autodiff (`cuts`), and offload's parameters step by step against the same
//! regions kept on the device (`offload`).
//!
//! One test binary for both: they instantiate the same model on the same backends (NdArray,
//! wgpu fused and unfused), which a binary each compiled twice (333 and 329 s of
//! compile time apart).

use std::sync::{Mutex, MutexGuard};

mod cuts;
mod offload;

/// One test at a time: the backends' random generators (dropout masks are drawn from them) and
/// offload's bound on bytes in flight (`Settings`) are the process's.
fn alone() -> MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}
