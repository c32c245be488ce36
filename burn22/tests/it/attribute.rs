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

/// A recurrent cell as burn-nn's users write one: its state is burn-nn's `LstmState`, and a
/// carry of the model's own (`#[derive(RegionTensors)]`) holds one beside an optional memory.
#[derive(Module, Debug)]
struct Cell {
    input: Linear,
    hidden: Linear,
}

#[derive(burn_checkpoint_22::RegionTensors)]
struct Carry {
    state: burn::nn::LstmState<2>,
    memory: Option<Tensor<2>>,
}

/// A tuple struct with a generic rank: derived too.
#[derive(burn_checkpoint_22::RegionTensors)]
struct Pair<const D: usize>(Tensor<D>, Tensor<D>);

impl Cell {
    fn step(&self, x: Tensor<2>, state: burn::nn::LstmState<2>) -> burn::nn::LstmState<2> {
        let gate = (self.input.forward(x) + self.hidden.forward(state.hidden)).tanh();
        let cell = state.cell * gate.clone().exp().recip() + gate;
        burn::nn::LstmState::new(cell.clone(), cell.tanh())
    }

    /// `step` as a region: burn-nn's state is an input by its name.
    #[checkpoint]
    fn step_region(&self, x: Tensor<2>, state: burn::nn::LstmState<2>) -> burn::nn::LstmState<2> {
        self.step(x, state)
    }

    fn carry(&self, x: Tensor<2>, carry: Carry) -> Carry {
        let state = self.step(x, carry.state);
        let memory = carry.memory.map(|m| m + state.hidden.clone());
        Carry { state, memory }
    }

    /// `carry` as a region: the derived struct is an input because `inputs(..)` names it.
    #[checkpoint(inputs(carry))]
    fn carry_region(&self, x: Tensor<2>, carry: Carry) -> Carry {
        let state = self.step(x, carry.state);
        let memory = carry.memory.map(|m| m + state.hidden.clone());
        Carry { state, memory }
    }
}

/// The losses are plain autodiff's bit for bit; the gradients within 4e-6 of their size: the
/// input's shared weight gets one term per step, which regions add in another order than plain
/// autodiff (`gradients::recurrent_cells_as_regions_…` says when and why).
#[test]
fn burn_nn_states_and_derived_structs_cross_regions() {
    use burn_checkpoint_22::Region;
    use common::assert_close;
    let device = device();
    device.seed(11);
    let cell = Cell {
        input: LinearConfig::new(5, 6).init(&device),
        hidden: LinearConfig::new(6, 6).init(&device),
    };
    let xs: Vec<_> = (0..4)
        .map(|_| Tensor::<2>::random([3, 5], Distribution::Default, &device).require_grad())
        .collect();
    let start = || {
        let zeros = Tensor::<2>::zeros([3, 6], &device);
        burn::nn::LstmState::new(zeros.clone(), zeros.require_grad())
    };
    let memory = Tensor::<2>::random([3, 6], Distribution::Default, &device).require_grad();
    // Four steps, each of the three ways: plain, `LstmState` through the attribute (the memory
    // updated outside the regions), the derived carry through the attribute (the memory through
    // the regions).
    let run = |way: usize| {
        let mut carry = Carry {
            state: start(),
            memory: Some(memory.clone()),
        };
        for x in &xs {
            carry = match way {
                0 => cell.carry(x.clone(), carry),
                1 => {
                    let state = cell.step_region(x.clone(), carry.state);
                    let memory = carry.memory.map(|m| m + state.hidden.clone());
                    Carry { state, memory }
                }
                _ => cell.carry_region(x.clone(), carry),
            };
        }
        let memory_loss = carry.memory.expect("kept").sum();
        let loss = carry.state.cell.sum() + carry.state.hidden.powf_scalar(2.0).sum() + memory_loss;
        let value = loss.clone().into_data();
        let grads = loss.backward();
        let mut all: Vec<_> = xs.iter().map(|x| grad_of(x, &grads)).collect();
        all.push(grad_of(&memory, &grads));
        all.extend(param_grads(&cell, &grads));
        (value, all)
    };
    let (plain_loss, plain) = run(0);
    assert!(plain.iter().all(Option::is_some));
    for (way, what) in [
        (1, "LstmState through #[checkpoint]"),
        (2, "a derived carry"),
    ] {
        let (loss, grads) = run(way);
        assert_eq!(loss, plain_loss, "{what}: the loss");
        for (index, (got, want)) in grads.into_iter().zip(plain.clone()).enumerate() {
            assert_close(got, want, &format!("{what}: gradient {index}"));
        }
    }
    // A tuple struct through `Region::run_fn`.
    let a = Tensor::<2>::ones([2, 2], &device).require_grad();
    let out = Region::named("pair").run_fn(Pair(a.clone(), a.clone() * 2.0), |Pair(x, y)| {
        Pair(x.clone() * y.clone(), y.exp())
    });
    let grads = (out.0.sum() + out.1.sum()).backward();
    assert_eq!(
        grad_of(&a, &grads),
        Some(burn::tensor::TensorData::from(
            [[4.0 + 2.0 * 2f32.exp(); 2]; 2]
        ))
    );
}
