//! What the GPT benches share: the GPT they train and its batch, from the shape the command line
//! gives (bench-kit's `GptShape`).

use bench_kit::gpt::GptShape;
use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, Int, Tensor};
use gpt::GptConfig;

/// The device benches' (`device_memory`, `offload_time`) GPT unless flags say otherwise.
#[allow(dead_code)] // `budget` and `transformer` have defaults of their own
pub const DEVICE_SHAPE: GptShape = GptShape {
    blocks: 4,
    d_model: 256,
    heads: 4,
    seq: 128,
    batch: 8,
    vocab: 256,
};

/// The model's configuration.
pub fn config(shape: &GptShape) -> GptConfig {
    GptConfig::new(
        shape.vocab,
        shape.d_model,
        shape.blocks,
        shape.heads,
        shape.seq,
    )
}

/// A batch of random tokens, `[batch, seq + 1]` (inputs and their next tokens).
pub fn tokens<B: Backend>(shape: &GptShape, device: &B::Device) -> Tensor<B, 2, Int> {
    Tensor::random(
        [shape.batch, shape.seq + 1],
        Distribution::Uniform(0.0, shape.vocab as f64),
        device,
    )
}
