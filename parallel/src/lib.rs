//! Data-parallel training: one thread per device, gradients averaged with burn-collective.
//!
//! [`DataParallel`] keeps a replica of the model and of the optimizer on each device, each on
//! its own OS thread. A [`step`](DataParallel::step) takes one [`Shard`] of the batch per device
//! ([`split_batch`] cuts a tensor into them) and a loss function, and runs in two phases:
//!
//! 1. every worker runs forward and backward on its shard and packs its gradients into flat
//!    buckets ([`DataParallelConfig::with_bucket_bytes`], 25 MiB by default): no collective call
//!    yet, so a worker that panics or errors here stops the step everywhere with nothing changed;
//! 2. once every worker is ready, each all-reduces the buckets (burn-collective, strategy
//!    [`AllReduceStrategy`] centralized, tree or ring), unpacks the mean gradients, and applies
//!    the optimizer step, so the replicas stay bitwise equal.
//!
//! Checkpoint regions work unchanged: each worker's forward and backward run on its own thread
//! with its own region state. The guide page `docs/data-parallel.md` covers several GPUs and
//! several machines (burn-collective's orchestrator, [`run_orchestrator`], [`NodeArgs`]).
//!
//! This crate uses only Burn's public API, and none of burn-checkpoint's: it trains any
//! `AutodiffBackend`, `Checkpointed<Autodiff<B>>` included. It is a crate of its own so that
//! burn-checkpoint builds without burn-collective's tokio, axum and websocket stack.

#![warn(missing_docs)]

mod args;
mod bucket;
mod config;
mod coordinator;
mod data_parallel;
mod error;
mod loss;
mod nodes;
mod owned;
mod rendezvous;
mod session;
mod shard;
mod stats;
mod visit;
mod worker;

pub use args::NodeArgs;
pub use burn::collective::AllReduceStrategy;
pub use config::{DEFAULT_BUCKET_BYTES, DataParallelConfig};
pub use data_parallel::DataParallel;
pub use error::{BoxError, ParallelError};
pub use loss::IntoLoss;
pub use nodes::{DEFAULT_TIMEOUT, Nodes, run_orchestrator};
pub use shard::{Shard, split_batch};
pub use stats::StepStats;

// The README's quick start, run as a doctest: what crates.io shows compiles and passes.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct Readme;
