//! Shared test helpers: the two backends compared, deterministic data, gradient comparison.
#![allow(dead_code)]

pub mod transformer;

use burn::backend::{Autodiff, NdArray};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Shape, Tensor, TensorData};
use burn_checkpoint::Checkpointed;

use std::sync::{Mutex, MutexGuard};

/// The reference: Burn's plain autodiff.
pub type Plain = Autodiff<NdArray>;
/// The decorator over the same backend.
pub type Ckpt = Checkpointed<Autodiff<NdArray>>;

/// Uniform values in [-1, 1), the same for the same seed.
pub fn data(shape: impl Into<Shape>, seed: u64) -> TensorData {
    let shape = shape.into();
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    let values: Vec<f32> = (0..shape.num_elements())
        .map(|_| {
            // splitmix64
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            ((z >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect();
    TensorData::new(values, shape)
}

/// A tensor's values.
pub fn values<B: burn::tensor::backend::Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
    t.into_data().convert::<f32>().to_vec::<f32>().unwrap()
}

/// One input of a case: its data and whether it requires a gradient.
#[derive(Clone, Debug)]
pub struct Input {
    pub data: TensorData,
    pub grad: bool,
}

impl Input {
    pub fn new(data: TensorData, grad: bool) -> Self {
        Input { data, grad }
    }
}

/// What a run of a case produced: the output values, then each gradient of an input that
/// requires one.
#[derive(Debug)]
pub struct Outcome {
    pub output: Vec<f32>,
    pub grads: Vec<Vec<f32>>,
}

/// Runs `f` over `inputs` on backend `B`: each input goes through `tanh` first (so that inside a
/// region the op's operands are recomputed nodes, not stored inputs) when `pre` is set; with
/// `region`, `f` and a `tanh` after it run inside a checkpoint region. The loss weighs the output
/// with fixed random values so that every gradient is non-trivial.
pub fn run<B: AutodiffBackend, const D: usize, const O: usize>(
    inputs: &[Input],
    pre: bool,
    region: bool,
    f: &dyn Fn(Vec<Tensor<B, D>>) -> Tensor<B, O>,
) -> Outcome {
    let device = Default::default();
    let leaves: Vec<Tensor<B, D>> = inputs
        .iter()
        .map(|input| {
            let t = Tensor::<B, D>::from_data(input.data.clone(), &device);
            if input.grad { t.require_grad() } else { t }
        })
        .collect();
    let body = || {
        let operands = leaves
            .iter()
            .map(|t| if pre { t.clone().tanh() } else { t.clone() })
            .collect();
        f(operands).tanh()
    };
    let output = if region {
        burn_checkpoint::checkpoint(body)
    } else {
        body()
    };
    let weights = Tensor::<B, O>::from_data(data(output.shape(), 0xABCD), &device);
    let loss = (output.clone() * weights).sum();
    let grads = loss.backward();
    Outcome {
        output: values(output),
        grads: leaves
            .iter()
            .zip(inputs)
            .filter(|(_, input)| input.grad)
            .map(|(leaf, _)| values(leaf.grad(&grads).expect("a gradient")))
            .collect(),
    }
}

/// Asserts both outcomes are equal bit for bit.
pub fn assert_bitwise(plain: &Outcome, ckpt: &Outcome) {
    assert_eq!(bits(&plain.output), bits(&ckpt.output), "outputs differ");
    assert_eq!(plain.grads.len(), ckpt.grads.len());
    for (i, (a, b)) in plain.grads.iter().zip(&ckpt.grads).enumerate() {
        assert_eq!(bits(a), bits(b), "gradient {i} differs");
    }
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

/// Asserts two lists of values are bitwise equal.
pub fn assert_values_bitwise(what: &str, plain: &[f32], ckpt: &[f32]) {
    assert_eq!(bits(plain), bits(ckpt), "{what} differs");
}

/// Holds off every other test that takes it, for the caller's scope: for a test that reads what
/// the whole process does (the counting allocator, the offload store) or draws from the backend's
/// one random generator. A test that panicked while holding it does not poison it for the rest.
pub fn alone() -> MutexGuard<'static, ()> {
    static ALONE: Mutex<()> = Mutex::new(());
    ALONE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
