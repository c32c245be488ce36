//! Activations, with burn-autodiff 0.21's backwards (each reads the activation's input).

use burn_backend::Backend;

use crate::recompute::{RegionOp, build};
use crate::types::{Primitive, Tracked};

#[derive(Debug, Clone, Copy)]
enum Activation {
    Relu,
    Gelu,
    Sigmoid,
    LogSigmoid,
}

impl<I: Backend> RegionOp<I, 1> for Activation {
    fn name(&self) -> &'static str {
        match self {
            Activation::Relu => "relu",
            Activation::Gelu => "gelu",
            Activation::Sigmoid => "sigmoid",
            Activation::LogSigmoid => "log_sigmoid",
        }
    }

    fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
        match self {
            Activation::Relu => I::relu(x),
            Activation::Gelu => I::gelu(x),
            Activation::Sigmoid => I::sigmoid(x),
            Activation::LogSigmoid => I::log_sigmoid(x),
        }
    }

    fn saved(&self, _: [bool; 1]) -> [bool; 1] {
        [true]
    }

    fn backward(
        self,
        [x]: [Option<Primitive<I>>; 1],
        grad: Primitive<I>,
        _: [bool; 1],
    ) -> [Option<Primitive<I>>; 1] {
        let x = x.expect("activations read their input");
        let grad = match self {
            // Burn hands relu_backward the input, whose sign pattern is the output's.
            Activation::Relu => I::relu_backward(x, grad),
            Activation::Gelu => I::gelu_backward(x, grad),
            Activation::Sigmoid => I::sigmoid_backward(I::sigmoid(x), grad),
            Activation::LogSigmoid => I::log_sigmoid_backward(x, grad),
        };
        [Some(grad)]
    }
}

/// `relu(x)` in a region.
pub(crate) fn relu<I: Backend>(tensor: Tracked<I>) -> Tracked<I> {
    build::<I, _, 1>(Activation::Relu, [tensor])
}

/// `gelu(x)` in a region.
pub(crate) fn gelu<I: Backend>(tensor: Tracked<I>) -> Tracked<I> {
    build::<I, _, 1>(Activation::Gelu, [tensor])
}

/// `sigmoid(x)` in a region.
pub(crate) fn sigmoid<I: Backend>(tensor: Tracked<I>) -> Tracked<I> {
    build::<I, _, 1>(Activation::Sigmoid, [tensor])
}

/// `log_sigmoid(x)` in a region.
pub(crate) fn log_sigmoid<I: Backend>(tensor: Tracked<I>) -> Tracked<I> {
    build::<I, _, 1>(Activation::LogSigmoid, [tensor])
}
