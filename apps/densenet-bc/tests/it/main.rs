//! DenseNet-BC's tests, one binary (each file a module): every cut against the uncheckpointed
//! model, the trainer end to end, its data-parallel step. The runs out of device memory are
//! binaries of their own (`tests/out_of_memory*.rs`): each caps its process's wgpu device before
//! the first tensor.

#[path = "../common/mod.rs"]
mod common;

mod cuts;
mod parallel;
mod trainer;
