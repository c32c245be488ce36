//! Regions against plain autodiff on modules and signatures, one binary (each file a module).
//! The tests here seed the generator for their own models but compare nothing across draws; those
//! that do are in `tests/seeded/` (a process whose tests all take the generator's lock), the
//! memory tests in `tests/memory/` (a counting allocator), the wgpu tests in `tests/wgpu.rs`.

#[path = "../common/mod.rs"]
mod common;

mod attribute;
mod gradients;
mod scan;
mod signatures;
mod single_input;
