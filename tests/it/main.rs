//! The library's tests, one binary (each file a module): regions against plain `Autodiff` op by
//! op and block by block, policies, names, the recompute walk, threads. The
//! tests that measure the whole process are in `tests/memory/`; `tests/warning.rs` is a process
//! of its own (its warning is once per process).

#[path = "../common/mod.rs"]
mod common;

mod blocks;
mod coverage;
mod flex;
mod names;
mod ops;
mod policies;
mod regions;
mod scan;
mod single_input;
mod threads;
mod walk;
