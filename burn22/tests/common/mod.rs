//! Models and helpers the tests share.
#![allow(dead_code)]

use burn::module::{Module, ModuleVisitor, Param};
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Gradients, Tensor, TensorData};
use burn_checkpoint_22::{Layer, checkpoint};

use std::sync::{Mutex, MutexGuard};

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

/// Every float parameter's gradient, in visit order.
pub fn param_grads(module: &impl Module, grads: &Gradients) -> Vec<Option<TensorData>> {
    struct Grads<'a>(&'a Gradients, Vec<Option<TensorData>>);

    impl ModuleVisitor for Grads<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.1.push(param.val().grad(self.0).map(|g| g.into_data()));
        }
    }

    let mut visitor = Grads(grads, Vec::new());
    module.visit(&mut visitor);
    visitor.1
}

/// The gradient of `x`, as data.
pub fn grad_of<const D: usize>(x: &Tensor<D>, grads: &Gradients) -> Option<TensorData> {
    x.grad(grads).map(|g| g.into_data())
}

/// The CPU device with autodiff.
pub fn device() -> Device {
    Device::flex().autodiff()
}

/// Asserts two gradients equal within `4e-6` relative to their size (where several outputs of a
/// region share a path, their gradients add in another order than in plain autodiff).
pub fn assert_close(left: Option<TensorData>, right: Option<TensorData>, what: &str) {
    let (Some(left), Some(right)) = (left.clone(), right.clone()) else {
        assert_eq!(left, right, "{what}");
        return;
    };
    assert_eq!(left.shape(), right.shape(), "{what}");
    let left = left.try_to_vec::<f32>().expect("f32");
    let right = right.try_to_vec::<f32>().expect("f32");
    for (index, (l, r)) in left.iter().zip(&right).enumerate() {
        assert!(
            l.to_bits() == r.to_bits() || (l - r).abs() <= 4e-6 * l.abs().max(1.0),
            "{what}: element {index} is {l} and {r}"
        );
    }
}

/// The device's generator, one test at a time: Burn's CPU generator is one for the whole process,
/// so a test that seeds it and compares what is drawn after takes this for its whole body.
pub fn generator() -> MutexGuard<'static, ()> {
    static GENERATOR: Mutex<()> = Mutex::new(());
    GENERATOR
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Holds off every other test that takes it: for a test that reads what the whole process does
/// (the counting allocator, the offload store).
pub fn alone() -> MutexGuard<'static, ()> {
    static ALONE: Mutex<()> = Mutex::new(());
    ALONE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
