//! Models and helpers the tests share (those the networks' tests share too are bench-kit-22's).
#![allow(dead_code)]

// Each binary uses some of them.
#[allow(unused_imports)]
pub use bench_kit_22::{alone, assert_close, generator, grad_of, initialised, param_grads, sgd};

use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Tensor};
use burn_checkpoint_22::{Layer, checkpoint};

/// A residual MLP block.
#[derive(Module, Debug)]
pub struct Mlp {
    pub a: Linear,
    pub b: Linear,
}

impl Mlp {
    pub fn new(width: usize, device: &Device) -> Self {
        Self {
            a: LinearConfig::new(width, 2 * width).init(device),
            b: LinearConfig::new(2 * width, width).init(device),
        }
    }

    pub fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        let h = burn::tensor::activation::relu(self.a.forward(x.clone()));
        self.b.forward(h).tanh() + x
    }
}

impl Layer<Tensor<2>> for Mlp {
    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        Mlp::forward(self, x)
    }
}

/// A residual block with a GELU, `width → 4·width → width`: `x + tanh(down(gelu(up(x))))`. The
/// tests give it the region methods they need.
#[derive(Module, Debug)]
pub struct Block {
    pub up: Linear,
    pub down: Linear,
}

impl Block {
    pub fn new(width: usize, device: &Device) -> Self {
        Self {
            up: LinearConfig::new(width, 4 * width).init(device),
            down: LinearConfig::new(4 * width, width).init(device),
        }
    }

    /// The block's computation, outside any region.
    pub fn body(&self, x: Tensor<2>) -> Tensor<2> {
        let h = burn::tensor::activation::gelu(self.up.forward(x.clone()));
        self.down.forward(h).tanh() + x
    }
}

impl Layer<Tensor<2>> for Block {
    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.body(x)
    }
}

/// MLP blocks one after the other, each a region or not.
#[derive(Module, Debug)]
pub struct Stack {
    pub blocks: Vec<Mlp>,
}

impl Stack {
    pub fn new(depth: usize, width: usize, device: &Device) -> Self {
        Self {
            blocks: (0..depth).map(|_| Mlp::new(width, device)).collect(),
        }
    }

    pub fn forward(&self, mut x: Tensor<2>, regions: bool) -> Tensor<2> {
        for block in &self.blocks {
            x = if regions {
                checkpoint(block, x, |block, x| block.forward(x))
            } else {
                block.forward(x)
            };
        }
        x
    }
}

/// The CPU device with autodiff.
pub fn device() -> Device {
    Device::flex().autodiff()
}
