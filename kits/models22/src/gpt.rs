//! A GPT-style language model on Burn 0.22 (pre-LayerNorm blocks of causal self-attention and
//! a GELU MLP); a region per block is `Block#i`, made by `#[checkpoint]`.

use app_kit::gpt::GptShape;
use burn::module::Module;
use burn::nn::attention::{
    MhaInput, MultiHeadAttention, MultiHeadAttentionConfig, generate_autoregressive_mask,
};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{
    Embedding, EmbeddingConfig, Gelu, LayerNorm, LayerNormConfig, Linear, LinearConfig,
};
use burn::tensor::activation::{quiet_softmax, softmax};
use burn::tensor::{Device, Distribution, Int, Tensor};
use burn_checkpoint_22::{Policy, Region, checkpoint};

use crate::{Cut, Unit};

/// A pre-LayerNorm transformer block.
#[derive(Module, Debug)]
pub struct Block {
    norm1: LayerNorm,
    attention: MultiHeadAttention,
    norm2: LayerNorm,
    up: Linear,
    down: Linear,
    gelu: Gelu,
}

impl Block {
    #[checkpoint(name = "Block")]
    fn region(&self, x: Tensor<3>) -> Tensor<3> {
        self.forward(x)
    }

    #[checkpoint(name = "Block", offload)]
    fn offloaded_region(&self, x: Tensor<3>) -> Tensor<3> {
        self.forward(x)
    }

    #[checkpoint(name = "Block", policy = Policy::SaveComputeBound)]
    fn saving_region(&self, x: Tensor<3>) -> Tensor<3> {
        self.forward(x)
    }

    /// The block as a region that recomputes all but the nested regions `kept` names
    /// (`Policy::recompute_all_but`), which its body opens.
    fn region_keeping(&self, x: Tensor<3>, kept: Kept) -> Tensor<3> {
        Region::named("Block")
            .policy(Policy::recompute_all_but([kept.pattern()]))
            .run(self, x, move |block, x| block.forward_parts(x, Some(kept)))
    }

    fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        self.forward_parts(x, None)
    }

    /// The block, opening the nested regions `kept` names (only the cuts that keep them open
    /// them: inside a `SaveComputeBound` block a nested region is a memory-bound op, and outside
    /// regions one of its own).
    fn forward_parts(&self, x: Tensor<3>, kept: Option<Kept>) -> Tensor<3> {
        let attention = |attention: &MultiHeadAttention, normed: Tensor<3>| {
            let [batch, seq, _] = normed.dims();
            let mask = generate_autoregressive_mask(batch, seq, &normed.device());
            attention
                .forward(MhaInput::self_attn(normed).mask_attn(mask))
                .context
        };
        let normed = self.norm1.forward(x.clone());
        let attended = match kept {
            None => attention(&self.attention, normed),
            Some(Kept::Attention) => {
                Region::named("attention").run(&self.attention, normed, attention)
            }
            Some(Kept::Projections) => causal_self_attention_by_parts(&self.attention, normed),
        };
        let x = x + attended;
        let h = self
            .gelu
            .forward(self.up.forward(self.norm2.forward(x.clone())));
        x + self.down.forward(h)
    }
}

/// The nested regions a block opens for its region to keep: what the block's body opens and
/// the policy's pattern, in one place.
#[derive(Clone, Copy)]
enum Kept {
    /// `attention`, around burn-nn's `MultiHeadAttention`.
    Attention,
    /// `attention.qkv` and `attention.output`, around the attention's projections.
    Projections,
}

impl Kept {
    /// The pattern naming these regions in `Policy::recompute_all_but`.
    fn pattern(self) -> &'static str {
        match self {
            Kept::Attention => "attention",
            Kept::Projections => "attention.*",
        }
    }
}

/// burn-nn 0.22's `MultiHeadAttention::forward` on causal self-attention, op for op (the same
/// bits), written out from the module's public fields so that its projections are regions of
/// their own: `attention.qkv` (query, key and value, split into heads) and `attention.output`.
/// burn-nn runs all four inside its one `forward`, so no region could name them there.
fn causal_self_attention_by_parts(attention: &MultiHeadAttention, x: Tensor<3>) -> Tensor<3> {
    let [batch, seq, d_model] = x.dims();
    let mask = generate_autoregressive_mask(batch, seq, &x.device());
    let qkv = |attention: &MultiHeadAttention, x: Tensor<3>| {
        let [batch, seq, _] = x.dims();
        let heads = |linear: &Linear, x: Tensor<3>| {
            linear
                .forward(x)
                .reshape([batch, seq, attention.n_heads, attention.d_k])
                .swap_dims(1, 2)
        };
        (
            heads(&attention.query, x.clone()),
            heads(&attention.key, x.clone()),
            heads(&attention.value, x),
        )
    };
    let (query, key, value) = Region::named("attention.qkv").run(attention, x, qkv);
    let scores = query
        .matmul(key.transpose())
        .div_scalar((attention.d_k as f32).sqrt())
        .mask_fill(mask.reshape([batch, 1, seq, seq]), attention.min_float);
    let weights = if attention.quiet_softmax {
        quiet_softmax(scores, 3)
    } else {
        softmax(scores, 3)
    };
    let context = attention
        .dropout
        .forward(weights)
        .matmul(value)
        .swap_dims(1, 2)
        .reshape([batch, seq, d_model]);
    Region::named("attention.output").run(attention, context, |attention, context| {
        attention.output.forward(context)
    })
}

/// A model of `shape` on `device`.
pub fn model(shape: &GptShape, device: &Device) -> Gpt {
    Gpt::new(
        shape.vocab,
        shape.d_model,
        shape.blocks,
        shape.heads,
        shape.seq,
        // burn-nn's default for attention.
        0.1,
        device,
    )
}

/// A batch of random token sequences `[batch, seq + 1]`: the inputs and, one token on, their
/// targets.
pub fn tokens(shape: &GptShape, device: &Device) -> Tensor<2, Int> {
    Tensor::random(
        [shape.batch, shape.seq + 1],
        Distribution::Uniform(0.0, shape.vocab as f64),
        device,
    )
}

/// Embeddings, blocks, final LayerNorm, output projection.
#[derive(Module, Debug)]
pub struct Gpt {
    tokens: Embedding,
    positions: Embedding,
    blocks: Vec<Block>,
    norm: LayerNorm,
    head: Linear,
}

impl Gpt {
    /// `blocks` blocks of width `d_model` with `heads` heads, over `vocab` tokens and `context`
    /// positions; `dropout` is the attention's (burn-nn's default: 0.1). A dropout above 0 makes
    /// each block's region seeded: its masks, and so the run, differ from the same model without
    /// regions (docs/burn-0.22.md, "What a region guarantees").
    pub fn new(
        vocab: usize,
        d_model: usize,
        blocks: usize,
        heads: usize,
        context: usize,
        dropout: f64,
        device: &Device,
    ) -> Self {
        Self {
            tokens: EmbeddingConfig::new(vocab, d_model).init(device),
            positions: EmbeddingConfig::new(context, d_model).init(device),
            blocks: (0..blocks)
                .map(|_| Block {
                    norm1: LayerNormConfig::new(d_model).init(device),
                    attention: MultiHeadAttentionConfig::new(d_model, heads)
                        .with_dropout(dropout)
                        .init(device),
                    norm2: LayerNormConfig::new(d_model).init(device),
                    up: LinearConfig::new(d_model, 4 * d_model).init(device),
                    down: LinearConfig::new(4 * d_model, d_model).init(device),
                    gelu: Gelu::new(),
                })
                .collect(),
            norm: LayerNormConfig::new(d_model).init(device),
            head: LinearConfig::new(d_model, vocab)
                .with_bias(false)
                .init(device),
        }
    }

    /// Mean next-token cross-entropy over `tokens` `[batch, seq + 1]` ([`tokens`]); the blocks
    /// `cut` names are regions.
    pub fn loss(&self, tokens: Tensor<2, Int>, cut: Cut) -> Tensor<1> {
        let [batch, length] = tokens.dims();
        let targets = tokens.clone().slice([0..batch, 1..length]);
        let logits = self.logits(tokens.slice([0..batch, 0..length - 1]), cut);
        let [batch, seq, vocab] = logits.dims();
        CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(
                logits.reshape([batch * seq, vocab]),
                targets.reshape([batch * seq]),
            )
    }

    /// The next-token logits `[batch, seq, vocab]` of `tokens` `[batch, seq]` (seq at most the
    /// model's context); the blocks `cut` names are regions.
    pub fn logits(&self, tokens: Tensor<2, Int>, cut: Cut) -> Tensor<3> {
        let [batch, seq] = tokens.dims();
        let device = tokens.device();
        let positions = Tensor::<1, Int>::arange(0..seq as i64, &device)
            .reshape([1, seq])
            .repeat_dim(0, batch);
        let mut x = self.tokens.forward(tokens) + self.positions.forward(positions);
        for (index, block) in self.blocks.iter().enumerate() {
            x = match cut.unit(index) {
                Unit::Region { offloaded: false } => block.region(x),
                Unit::Region { offloaded: true } => block.offloaded_region(x),
                Unit::SavingComputeBound => block.saving_region(x),
                Unit::KeepingAttention => block.region_keeping(x, Kept::Attention),
                Unit::KeepingProjections => block.region_keeping(x, Kept::Projections),
                Unit::Plain => block.forward(x),
            };
        }
        self.head.forward(self.norm.forward(x))
    }
}
