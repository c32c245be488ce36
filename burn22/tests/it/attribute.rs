//! `#[checkpoint]` on a module's method: the same gradients as the method without it.

use crate::common;

use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Distribution, Tensor};
use burn_checkpoint_22::checkpoint;
use common::{device, grad_of, param_grads};

#[derive(Module, Debug)]
struct Block {
    up: Linear,
    down: Linear,
}

impl Block {
    fn new(width: usize, device: &Device) -> Self {
        Self {
            up: LinearConfig::new(width, 3 * width).init(device),
            down: LinearConfig::new(3 * width, width).init(device),
        }
    }

    /// The body, without a region.
    fn plain(&self, x: Tensor<2>, scale: f32) -> Tensor<2> {
        let h = burn::tensor::activation::gelu(self.up.forward(x.clone()));
        self.down.forward(h) * scale + x
    }

    /// The same body, a region; `scale` is captured, `x` is the input.
    #[checkpoint]
    fn region(&self, x: Tensor<2>, scale: f32) -> Tensor<2> {
        let h = burn::tensor::activation::gelu(self.up.forward(x.clone()));
        self.down.forward(h) * scale + x
    }

    /// Two inputs, several outputs, an early return.
    #[checkpoint]
    fn pair(&self, (a, b): (Tensor<2>, Tensor<2>), mut steps: Vec<Tensor<2>>) -> Vec<Tensor<2>> {
        if steps.is_empty() {
            return vec![self.up.forward(a)];
        }
        steps.push(self.down.forward(self.up.forward(a) * self.up.forward(b)));
        steps
    }
}

#[test]
fn a_checkpointed_method_gives_the_gradients_of_the_plain_one() {
    let device = device();
    device.seed(8);
    let block = Block::new(6, &device);
    let x = Tensor::<2>::random([4, 6], Distribution::Default, &device).require_grad();

    let plain = block.plain(block.plain(x.clone(), 0.5), 2.0).sum();
    let plain_grads = plain.backward();
    let region = block.region(block.region(x.clone(), 0.5), 2.0).sum();
    let region_grads = region.backward();

    assert_eq!(plain.into_data(), region.into_data());
    assert_eq!(grad_of(&x, &plain_grads), grad_of(&x, &region_grads));
    assert_eq!(
        param_grads(&block, &plain_grads),
        param_grads(&block, &region_grads)
    );
}

#[test]
fn tuple_and_vec_arguments_are_inputs() {
    let device = device();
    device.seed(9);
    let block = Block::new(4, &device);
    let a = Tensor::<2>::random([2, 4], Distribution::Default, &device).require_grad();
    let b = Tensor::<2>::random([2, 4], Distribution::Default, &device).require_grad();
    let s = Tensor::<2>::random([2, 4], Distribution::Default, &device).require_grad();

    let outputs = block.pair((a.clone(), b.clone()), vec![s.clone()]);
    assert_eq!(outputs.len(), 2);
    let plain = block
        .down
        .forward(block.up.forward(a.clone()) * block.up.forward(b.clone()));
    assert_eq!(outputs[1].clone().into_data(), plain.clone().into_data());

    let grads = (outputs[0].clone() * 3.0 + outputs[1].clone())
        .sum()
        .backward();
    let plain_grads = (s.clone() * 3.0 + plain).sum().backward();
    for (name, tensor) in [("a", &a), ("b", &b), ("s", &s)] {
        assert_eq!(
            grad_of(tensor, &grads),
            grad_of(tensor, &plain_grads),
            "{name}"
        );
    }
    assert_eq!(block.pair((a.clone(), b), Vec::new()).len(), 1);
}
