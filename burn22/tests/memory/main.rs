//! The tests that read the whole process's memory, one binary with a counting allocator: each
//! takes `common::alone()`, since the allocator (and the offload store) counts every thread.

use burn_checkpoint_22::memory::CountingAllocator;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

#[path = "../common/mod.rs"]
mod common;

mod budget;
mod conformance;
mod memory;
mod timeline;
