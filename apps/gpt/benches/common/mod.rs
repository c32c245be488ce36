//! What the device benches (`device_memory`, `offload_time`) share: the GPT they train, as the
//! command line gives it.

use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, Int, Tensor};
use gpt::GptConfig;

/// The GPT and its batch (`--blocks 4 --d-model 256 --heads 4 --seq 128 --batch 8 --vocab 256`
/// by default).
#[derive(clap::Args, Clone, Debug)]
pub struct Shape {
    /// Transformer blocks.
    #[arg(long, default_value_t = 4)]
    pub blocks: usize,
    /// Model width.
    #[arg(long, default_value_t = 256)]
    pub d_model: usize,
    /// Attention heads.
    #[arg(long, default_value_t = 4)]
    pub heads: usize,
    /// Sequence length.
    #[arg(long, default_value_t = 128)]
    pub seq: usize,
    /// Sequences per step.
    #[arg(long, default_value_t = 8)]
    pub batch: usize,
    /// Vocabulary.
    #[arg(long, default_value_t = 256)]
    pub vocab: usize,
}

impl Shape {
    /// The model's configuration.
    pub fn config(&self) -> GptConfig {
        GptConfig::new(self.vocab, self.d_model, self.blocks, self.heads, self.seq)
    }

    /// A batch of random tokens, `[batch, seq + 1]` (inputs and their next tokens).
    pub fn tokens<B: Backend>(&self, device: &B::Device) -> Tensor<B, 2, Int> {
        Tensor::random(
            [self.batch, self.seq + 1],
            Distribution::Uniform(0.0, self.vocab as f64),
            device,
        )
    }

    /// As the tables' titles give it: `GPT 4 blocks, d 256, 4 heads, batch 8 × 128, vocab 256`.
    pub fn describe(&self) -> String {
        format!(
            "GPT {} blocks, d {}, {} heads, batch {} × {}, vocab {}",
            self.blocks, self.d_model, self.heads, self.batch, self.seq, self.vocab
        )
    }
}
