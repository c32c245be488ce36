//! The networks with regions against plain autodiff, one binary (each file a module): every
//! cut's gradients, and `Policy::SaveComputeBound`'s batch norm. Every test takes
//! `bench_kit_22::generator()` for its whole body: the policy tests compare what the generator
//! draws, and Burn's CPU generator is one per process. The library's own tests, on small modules
//! of their own, are in `burn22/tests/`.

mod gradients;
mod policies;
