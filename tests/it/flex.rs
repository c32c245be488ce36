//! `Checkpointed<Autodiff<Flex>>`: the decorator over burn-flex, the CPU backend Burn 0.22
//! recommends over NdArray. A conv block in a region gives the gradients of plain
//! `Autodiff<Flex>`.

use crate::common;

use burn::backend::{Autodiff, Flex};
use burn::tensor::Tensor;
use burn::tensor::activation::relu;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::module::conv2d;
use burn::tensor::ops::ConvOptions;
use burn_checkpoint::{Checkpointed, checkpoint};
use common::{assert_values_bitwise, data, values};

type Plain = Autodiff<Flex>;
type Ckpt = Checkpointed<Autodiff<Flex>>;

/// `conv3×3(relu(conv1×1(relu(x))))`, a DenseNet-BC layer without batch norm.
fn block<B: AutodiffBackend>(
    x: Tensor<B, 4>,
    w1: &Tensor<B, 4>,
    w2: &Tensor<B, 4>,
) -> Tensor<B, 4> {
    let h = conv2d(
        relu(x),
        w1.clone(),
        None,
        ConvOptions::new([1, 1], [0, 0], [1, 1], 1),
    );
    conv2d(
        relu(h),
        w2.clone(),
        None,
        ConvOptions::new([1, 1], [1, 1], [1, 1], 1),
    )
}

fn run<B: AutodiffBackend>(region: bool) -> Vec<Vec<f32>> {
    let device = Default::default();
    let x = Tensor::<B, 4>::from_data(data([2, 6, 8, 8], 1), &device).require_grad();
    let w1 = Tensor::<B, 4>::from_data(data([8, 6, 1, 1], 2), &device).require_grad();
    let w2 = Tensor::<B, 4>::from_data(data([4, 8, 3, 3], 3), &device).require_grad();
    let y = if region {
        checkpoint(|| block(x.clone(), &w1, &w2))
    } else {
        block(x.clone(), &w1, &w2)
    };
    let loss = (y.clone() * y).sum();
    let grads = loss.clone().backward();
    vec![
        values(loss),
        values(x.grad(&grads).unwrap()),
        values(w1.grad(&grads).unwrap()),
        values(w2.grad(&grads).unwrap()),
    ]
}

#[test]
fn conv_block_in_a_region_on_flex() {
    let plain = run::<Plain>(false);
    let ckpt = run::<Ckpt>(true);
    for (i, (a, b)) in plain.iter().zip(&ckpt).enumerate() {
        assert_values_bitwise(&format!("value {i}"), a, b);
    }
}
