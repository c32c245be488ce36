//! The tests of regions in burn-train and of the trainer for Burn 0.22 users, one binary (each
//! file a module), with a counting allocator (the trainer's memory column): every test that
//! measures memory or draws from the generator takes `alone()`.

use std::sync::{Mutex, MutexGuard};

use burn_checkpoint_22::memory::CountingAllocator;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

// burn-train with data parallelism on two wgpu devices (`--features wgpu`).
#[cfg(feature = "wgpu")]
mod ddp;
// The trainer on one and two wgpu devices (`--features wgpu`).
#[cfg(feature = "wgpu")]
mod devices;
mod learner;
// A run out of device memory on a capped wgpu device (`--features wgpu`).
#[cfg(feature = "wgpu")]
mod out_of_memory;
mod stop;
mod trainer;

/// Holds off every other test that takes it: the allocator counts every thread, and Flex's
/// generator is one for the whole process.
pub fn alone() -> MutexGuard<'static, ()> {
    static ALONE: Mutex<()> = Mutex::new(());
    ALONE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A run's losses as bits: equal only when equal bit for bit.
pub fn bits(losses: &[f32]) -> Vec<u32> {
    losses.iter().map(|l| l.to_bits()).collect()
}
