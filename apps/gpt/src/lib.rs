//! A GPT-style language model written the way a Burn user writes one (burn-nn's
//! `MultiHeadAttention` with a causal mask, `LayerNorm`, a GELU MLP, token and position
//! embeddings, dropout), with a choice of where checkpoint regions go: burn-checkpoint's
//! transformer workload, for its tests and its benchmark.
//!
//! ```
//! use burn::backend::{Autodiff, NdArray};
//! use burn::prelude::*;
//! use burn_checkpoint::Checkpointed;
//! use gpt::{Cut, GptConfig};
//!
//! type B = Checkpointed<Autodiff<NdArray>>;
//! let device = Default::default();
//! // 4 blocks, the whole stack one region: recomputed in backward, one forward's worth at most.
//! let model = GptConfig::new(64, 32, 4, 2, 16).with_cut(Cut::Whole).init::<B>(&device);
//! let tokens = Tensor::<B, 2, Int>::zeros([2, 16], &device);
//! let loss = model.loss(tokens.clone(), tokens);
//! let grads = loss.backward();
//! ```
//!
//! Not part of burn-checkpoint's public API.

mod method;
mod model;

pub use method::Method;
pub use model::{Block, Cut, Gpt, GptConfig};
