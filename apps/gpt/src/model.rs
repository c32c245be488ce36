//! The model and its checkpoint cuts.

use burn::config::Config;
use burn::module::Module;
use burn::nn::attention::{
    MhaInput, MultiHeadAttention, MultiHeadAttentionConfig, generate_autoregressive_mask,
};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{
    Dropout, DropoutConfig, Embedding, EmbeddingConfig, Gelu, LayerNorm, LayerNormConfig, Linear,
    LinearConfig,
};
use burn::optim::{GradientsParams, Optimizer};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Int, Tensor};
use burn_checkpoint::{Layer, Policy, Region, Segments, checkpoint, checkpoint_sequential};

/// Where the model puts its checkpoint regions.
#[derive(Config, Debug, Copy, PartialEq, Eq)]
pub enum Cut {
    /// No region.
    None,
    /// Each block a region (`#[checkpoint]` on the block's forward).
    Block,
    /// Each block a region keeping its matmul outputs (`Policy::SaveComputeBound`).
    BlockSave,
    /// Each block a region that recomputes all but its attention (`Policy::recompute_all_but`
    /// naming the nested region `attention`, around burn-nn's `MultiHeadAttention`): the
    /// attention's work is kept from forward to backward, the norms and the MLP recomputed.
    BlockKeepAttention,
    /// Each block a region whose input (the previous block's output) is held in host memory
    /// (`Region::offloaded`).
    BlockOffload,
    /// `checkpoint_sequential(&blocks, Segments::Sqrt, x)`: √n segments, all but the last a
    /// region.
    SeqSqrt,
    /// `checkpoint_sequential(&blocks, Segments::Count(2), x)`.
    SeqTwo,
    /// The whole stack of blocks one region.
    Whole,
}

/// The model's hyper-parameters.
#[derive(Config, Debug)]
pub struct GptConfig {
    /// Tokens in the vocabulary.
    pub vocab: usize,
    /// Model width.
    pub d_model: usize,
    /// Transformer blocks.
    pub blocks: usize,
    /// Attention heads (dividing `d_model`).
    pub heads: usize,
    /// Longest sequence (positions embedded).
    pub context: usize,
    /// The MLP's hidden width, as a multiple of `d_model`.
    #[config(default = 4)]
    pub mlp_ratio: usize,
    /// Dropout after attention, after the MLP and on the embeddings.
    #[config(default = 0.0)]
    pub dropout: f64,
    /// Where checkpoint regions go.
    #[config(default = "Cut::None")]
    pub cut: Cut,
}

impl GptConfig {
    /// A freshly initialised model.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Gpt<B> {
        let blocks = (0..self.blocks)
            .map(|_| Block {
                norm1: LayerNormConfig::new(self.d_model).init(device),
                attention: MultiHeadAttentionConfig::new(self.d_model, self.heads)
                    .with_dropout(self.dropout)
                    .init(device),
                norm2: LayerNormConfig::new(self.d_model).init(device),
                up: LinearConfig::new(self.d_model, self.mlp_ratio * self.d_model).init(device),
                down: LinearConfig::new(self.mlp_ratio * self.d_model, self.d_model).init(device),
                gelu: Gelu::new(),
                dropout: DropoutConfig::new(self.dropout).init(),
            })
            .collect();
        Gpt {
            tokens: EmbeddingConfig::new(self.vocab, self.d_model).init(device),
            positions: EmbeddingConfig::new(self.context, self.d_model).init(device),
            dropout: DropoutConfig::new(self.dropout).init(),
            blocks,
            norm: LayerNormConfig::new(self.d_model).init(device),
            head: LinearConfig::new(self.d_model, self.vocab)
                .with_bias(false)
                .init(device),
            cut: self.cut,
        }
    }
}

/// A pre-LayerNorm transformer block: causal self-attention, then a GELU MLP, each added to
/// the residual stream.
#[derive(Module, Debug)]
pub struct Block<B: Backend> {
    norm1: LayerNorm<B>,
    attention: MultiHeadAttention<B>,
    norm2: LayerNorm<B>,
    up: Linear<B>,
    down: Linear<B>,
    gelu: Gelu,
    dropout: Dropout,
}

impl<B: Backend> Block<B> {
    /// The block on `x` `[batch, sequence, d_model]`.
    pub fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        self.forward_parts(x, false)
    }

    /// The block, its attention a region named `attention` if `named` (a region of the default
    /// policy changes nothing inside a recomputed one, but would inside one of another policy:
    /// only the cut that names it opens it).
    fn forward_parts(&self, x: Tensor<B, 3>, named: bool) -> Tensor<B, 3> {
        let [batch, seq, _] = x.dims();
        let mask = generate_autoregressive_mask::<B>(batch, seq, &x.device());
        let input = MhaInput::self_attn(self.norm1.forward(x.clone())).mask_attn(mask);
        let attention = || self.attention.forward(input).context;
        let attended = if named {
            Region::named("attention").run(attention)
        } else {
            attention()
        };
        let x = x + self.dropout.forward(attended);
        let h = self
            .gelu
            .forward(self.up.forward(self.norm2.forward(x.clone())));
        x + self.dropout.forward(self.down.forward(h))
    }

    /// The block as a checkpoint region.
    #[checkpoint]
    pub fn forward_checkpointed(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        self.forward(x)
    }

    /// The block as a checkpoint region that keeps its matmul outputs.
    #[checkpoint(policy = Policy::SaveComputeBound)]
    pub fn forward_keeping_matmuls(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        self.forward(x)
    }

    /// The block as a checkpoint region that keeps its attention's work by name.
    pub fn forward_keeping_attention(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        Region::named("block")
            .policy(Policy::recompute_all_but(["attention"]))
            .run(|| self.forward_parts(x, true))
    }

    /// The block as a checkpoint region that holds its input in host memory.
    #[checkpoint(offload)]
    pub fn forward_offloaded(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        self.forward(x)
    }
}

impl<B: Backend> Layer<Tensor<B, 3>> for Block<B> {
    fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        Block::forward(self, x)
    }
}

/// The language model: embeddings, blocks, a final LayerNorm and the output projection.
#[derive(Module, Debug)]
pub struct Gpt<B: Backend> {
    tokens: Embedding<B>,
    positions: Embedding<B>,
    dropout: Dropout,
    blocks: Vec<Block<B>>,
    norm: LayerNorm<B>,
    head: Linear<B>,
    cut: Cut,
}

impl<B: Backend> Gpt<B> {
    /// Next-token logits `[batch, sequence, vocab]` for `tokens` `[batch, sequence]`.
    pub fn forward(&self, tokens: Tensor<B, 2, Int>) -> Tensor<B, 3> {
        let [batch, seq] = tokens.dims();
        let device = tokens.device();
        let positions = Tensor::<B, 1, Int>::arange(0..seq as i64, &device)
            .reshape([1, seq])
            .repeat_dim(0, batch);
        let x = self.tokens.forward(tokens) + self.positions.forward(positions);
        let x = self.dropout.forward(x);
        let stack = |x: Tensor<B, 3>| self.blocks.iter().fold(x, |x, block| block.forward(x));
        let x = match self.cut {
            Cut::None => stack(x),
            Cut::Block => self
                .blocks
                .iter()
                .fold(x, |x, block| block.forward_checkpointed(x)),
            Cut::BlockSave => self
                .blocks
                .iter()
                .fold(x, |x, block| block.forward_keeping_matmuls(x)),
            Cut::BlockKeepAttention => self
                .blocks
                .iter()
                .fold(x, |x, block| block.forward_keeping_attention(x)),
            Cut::BlockOffload => self
                .blocks
                .iter()
                .fold(x, |x, block| block.forward_offloaded(x)),
            Cut::SeqSqrt => checkpoint_sequential(&self.blocks, Segments::Sqrt, x),
            Cut::SeqTwo => checkpoint_sequential(&self.blocks, Segments::Count(2), x),
            Cut::Whole => checkpoint(|| stack(x)),
        };
        self.head.forward(self.norm.forward(x))
    }

    /// The mean cross-entropy of predicting `targets` `[batch, sequence]` from `tokens`.
    pub fn loss(&self, tokens: Tensor<B, 2, Int>, targets: Tensor<B, 2, Int>) -> Tensor<B, 1> {
        let logits = self.forward(tokens);
        let [batch, seq, vocab] = logits.dims();
        CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(
                logits.reshape([batch * seq, vocab]),
                targets.reshape([batch * seq]),
            )
    }

    /// The same model with its regions cut as `cut` says.
    pub fn with_cut(mut self, cut: Cut) -> Self {
        self.cut = cut;
        self
    }
}

impl<B: AutodiffBackend> Gpt<B> {
    /// One training step on `tokens` `[batch, sequence + 1]` (each position's target is the
    /// next token): the loss, backward, and `optimizer`'s step at `learning_rate`. `between`
    /// runs between forward and backward, where a step holds what backward will read (to
    /// measure it). Returns the model after the step and the loss.
    pub fn train_step<O: Optimizer<Self, B>>(
        self,
        optimizer: &mut O,
        tokens: Tensor<B, 2, Int>,
        learning_rate: f64,
        between: impl FnOnce(),
    ) -> (Self, Tensor<B, 1>) {
        let [batch, seq] = tokens.dims();
        let inputs = tokens.clone().slice([0..batch, 0..seq - 1]);
        let targets = tokens.slice([0..batch, 1..seq]);
        let loss = self.loss(inputs, targets);
        between();
        let grads = GradientsParams::from_grads(loss.backward(), &self);
        (optimizer.step(learning_rate, self, grads), loss)
    }
}
