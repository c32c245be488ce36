//! A small pre-norm transformer block written with tensor ops (causal self-attention and a GELU
//! MLP, each with a residual), on any autodiff backend, with the same weights for the same seed.

use burn::tensor::activation::{gelu, softmax};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Bool, Tensor, TensorData};
use burn_checkpoint::Layer;

use super::data;

/// The block's weights. q, k and v all come from one normalised input: many paths to the same
/// ancestors, the shape that made Burn 0.21's checkpointer walk exponential.
pub struct Block<B: AutodiffBackend> {
    width: usize,
    q: Tensor<B, 2>,
    k: Tensor<B, 2>,
    v: Tensor<B, 2>,
    o: Tensor<B, 2>,
    up: Tensor<B, 2>,
    down: Tensor<B, 2>,
}

impl<B: AutodiffBackend> Block<B> {
    /// A block of model width `width` whose weights are drawn from `seed`.
    pub fn new(width: usize, seed: u64) -> Self {
        let scale = 1.0 / (width as f32).sqrt();
        let w = |i: u64, shape: [usize; 2]| {
            let values: Vec<f32> = data(shape, seed * 10 + i)
                .to_vec::<f32>()
                .unwrap()
                .into_iter()
                .map(|v| v * scale)
                .collect();
            Tensor::<B, 2>::from_data(TensorData::new(values, shape), &Default::default())
                .require_grad()
        };
        Block {
            width,
            q: w(0, [width, width]),
            k: w(1, [width, width]),
            v: w(2, [width, width]),
            o: w(3, [width, width]),
            up: w(4, [width, 4 * width]),
            down: w(5, [4 * width, width]),
        }
    }

    /// Every weight, in a fixed order.
    pub fn weights(&self) -> [&Tensor<B, 2>; 6] {
        [&self.q, &self.k, &self.v, &self.o, &self.up, &self.down]
    }
}

fn norm<B: AutodiffBackend>(x: Tensor<B, 3>) -> Tensor<B, 3> {
    let (var, mean) = x.clone().var_mean_bias(2);
    (x - mean) / (var + 1e-5).sqrt()
}

impl<B: AutodiffBackend> Layer<Tensor<B, 3>> for Block<B> {
    fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        let [batch, seq, _] = x.dims();
        let h = norm(x.clone());
        let project = |w: &Tensor<B, 2>| h.clone().matmul(w.clone().unsqueeze::<3>());
        let (q, k, v) = (project(&self.q), project(&self.k), project(&self.v));
        let scores = q.matmul(k.swap_dims(1, 2)) / (self.width as f64).sqrt();
        let future = Tensor::<B, 2, Bool>::tril_mask([seq, seq], 0, &x.device());
        let scores = scores.mask_fill(future.unsqueeze::<3>().expand([batch, seq, seq]), -1e9);
        let attention = softmax(scores, 2).matmul(v);
        let x = x + attention.matmul(self.o.clone().unsqueeze::<3>());
        let h = gelu(norm(x.clone()).matmul(self.up.clone().unsqueeze::<3>()));
        x + h.matmul(self.down.clone().unsqueeze::<3>())
    }
}
