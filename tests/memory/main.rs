//! The tests that read the whole process's memory, one binary with a counting allocator: every
//! test takes `common::alone()`, since the allocator (and the offload store) counts every thread.

use burn_checkpoint::memory::CountingAllocator;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

#[path = "../common/mod.rs"]
mod common;

mod budget;
mod conformance;
mod measured;
mod memory;
mod offload;
mod policy_memory;
mod scan;
mod sequential;
mod timeline;
mod walk_memory;
