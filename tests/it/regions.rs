//! What a region does at its edges: inputs without gradients, nesting, several outputs, panics,
//! tensors passed through, backward called twice. Each is compared with plain autodiff.

use crate::common;

use std::panic::{AssertUnwindSafe, catch_unwind};

use burn::tensor::Tensor;
use burn::tensor::activation::relu;
use burn::tensor::backend::AutodiffBackend;
use burn_checkpoint::{Region, checkpoint};
use common::{Ckpt, Plain, assert_values_bitwise, data, values};

/// Two layers `relu(x·w)`.
fn block<B: AutodiffBackend>(x: Tensor<B, 2>, w: &Tensor<B, 2>) -> Tensor<B, 2> {
    relu(relu(x.matmul(w.clone())).matmul(w.clone()))
}

fn leaves<B: AutodiffBackend>(x_grad: bool) -> (Tensor<B, 2>, Tensor<B, 2>) {
    let device = Default::default();
    let x = Tensor::<B, 2>::from_data(data([4, 6], 1), &device);
    let x = if x_grad { x.require_grad() } else { x };
    let w = Tensor::<B, 2>::from_data(data([6, 6], 2), &device).require_grad();
    (x, w)
}

fn grads<B: AutodiffBackend>(
    loss: Tensor<B, 1>,
    x: &Tensor<B, 2>,
    w: &Tensor<B, 2>,
) -> Vec<Vec<f32>> {
    let grads = loss.clone().backward();
    let mut all = vec![values(loss), values(w.grad(&grads).unwrap())];
    if let Some(g) = x.grad(&grads) {
        all.push(values(g));
    }
    all
}

fn assert_same(plain: Vec<Vec<f32>>, ckpt: Vec<Vec<f32>>) {
    assert_eq!(plain.len(), ckpt.len());
    for (i, (a, b)) in plain.iter().zip(&ckpt).enumerate() {
        assert_values_bitwise(&format!("value {i}"), a, b);
    }
}

#[test]
fn region_input_without_gradient() {
    let run = |region: bool| -> Vec<Vec<f32>> {
        if region {
            let (x, w) = leaves::<Ckpt>(false);
            let y = checkpoint(|| block(x.clone(), &w));
            grads(y.sum(), &x, &w)
        } else {
            let (x, w) = leaves::<Plain>(false);
            grads(block(x.clone(), &w).sum(), &x, &w)
        }
    };
    assert_same(run(false), run(true));
}

#[test]
fn nested_regions_give_the_gradients_of_plain_autodiff() {
    let (px, pw) = leaves::<Plain>(true);
    let plain = grads(block(block(px.clone(), &pw), &pw).sum(), &px, &pw);
    let (x, w) = leaves::<Ckpt>(true);
    let y = checkpoint(|| {
        let inner = checkpoint(|| {
            assert_eq!(Region::depth(), 2);
            block(x.clone(), &w)
        });
        assert_eq!(Region::depth(), 1);
        block(inner, &w)
    });
    assert_eq!(Region::depth(), 0);
    assert_same(plain, grads(y.sum(), &x, &w));
}

#[test]
fn region_returning_a_tuple() {
    let (px, pw) = leaves::<Plain>(true);
    let h = block(px.clone(), &pw);
    let plain = grads(h.clone().sum() + h.exp().mean(), &px, &pw);
    let (x, w) = leaves::<Ckpt>(true);
    let (a, b) = checkpoint(|| {
        let h = block(x.clone(), &w);
        (h.clone().sum(), h.exp().mean())
    });
    assert_same(plain, grads(a + b, &x, &w));
}

#[test]
fn panic_inside_a_region_closes_it() {
    let result = catch_unwind(|| checkpoint(|| panic!("inside")));
    assert!(result.is_err());
    assert_eq!(Region::depth(), 0);

    struct Model;
    impl Model {
        #[burn_checkpoint::checkpoint]
        fn forward(&self, x: Tensor<Ckpt, 2>) -> Tensor<Ckpt, 2> {
            assert_eq!(Region::depth(), 1);
            if x.dims()[0] > 0 {
                panic!("inside the attribute");
            }
            x
        }
    }
    let (x, _) = leaves::<Ckpt>(true);
    let result = catch_unwind(AssertUnwindSafe(|| Model.forward(x)));
    assert!(result.is_err());
    assert_eq!(Region::depth(), 0);
}

#[test]
fn tensor_from_outside_returned_unchanged() {
    let (px, pw) = leaves::<Plain>(true);
    let plain = grads(block(px.clone(), &pw).sum(), &px, &pw);
    let (x, w) = leaves::<Ckpt>(true);
    let h = block(x.clone(), &w);
    let same = checkpoint(|| h.clone());
    assert_same(plain, grads(same.sum(), &x, &w));
}

#[test]
fn early_return_closes_the_region() {
    #[burn_checkpoint::checkpoint]
    fn first_positive(values: &[f32]) -> Option<f32> {
        for v in values {
            if *v > 0.0 {
                return Some(*v);
            }
        }
        None
    }
    assert_eq!(first_positive(&[-1.0, 2.0]), Some(2.0));
    assert_eq!(Region::depth(), 0);
}

/// Backward twice through the same graph: whatever plain autodiff does (an error or gradients),
/// the decorator does too.
#[test]
fn a_second_backward_through_regions_does_what_plain_autodiff_does() {
    fn twice<B: AutodiffBackend>(region: bool) -> (Vec<f32>, Result<Vec<f32>, ()>) {
        let (x, w) = leaves::<B>(true);
        let y = if region {
            checkpoint(|| block(x.clone(), &w))
        } else {
            block(x.clone(), &w)
        };
        let loss = y.sum();
        let first = values(w.grad(&loss.clone().backward()).unwrap());
        let second = catch_unwind(AssertUnwindSafe(|| {
            w.grad(&loss.backward()).map(values).unwrap_or_default()
        }))
        .map_err(|_| ());
        (first, second)
    }
    let (plain_first, plain_second) = twice::<Plain>(false);
    let (first, second) = twice::<Ckpt>(true);
    assert_values_bitwise("first gradient", &plain_first, &first);
    match (plain_second, second) {
        (Ok(a), Ok(b)) => assert_values_bitwise("second gradient", &a, &b),
        (Err(()), Err(())) => {}
        (a, b) => panic!("plain: {a:?}, decorator: {b:?}"),
    }
    assert_eq!(Region::depth(), 0);
}

#[test]
fn regions_in_a_training_loop_release_their_bookkeeping() {
    // Many steps: what the decorator remembers of region outputs stays bounded.
    let (x, w) = leaves::<Ckpt>(true);
    for _ in 0..200 {
        let y = checkpoint(|| block(x.clone(), &w));
        assert!(burn_checkpoint::__private::remembered_outputs() > 0);
        let _ = y.sum().backward();
        assert_eq!(burn_checkpoint::__private::remembered_outputs(), 0);
    }
}
