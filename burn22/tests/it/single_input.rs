//! A region over exactly one tensor: the region node's parent is that tensor itself (no join
//! node stands between them), and it must get its gradient, not a join's placeholder. Every
//! public form, bitwise against plain autodiff.

use crate::common;

use burn::module::Module;
use burn::nn::{Gelu, Linear, LinearConfig};
use burn::tensor::{Distribution, Tensor};
use burn_checkpoint_22::{Layer, Segments, checkpoint, checkpoint_fn, checkpoint_sequential};
use common::{device, grad_of, param_grads};

#[test]
fn checkpoint_fn_over_one_1d_tensor() {
    let device = device();
    let x = Tensor::<1>::from_floats([1.0, 2.0, 3.0], &device).require_grad();

    let plain_grads = x.clone().exp().sum().backward();
    let region = checkpoint_fn(x.clone(), |x: Tensor<1>| x.exp());
    let region_grads = region.sum().backward();

    let grad = grad_of(&x, &region_grads).expect("x has a gradient");
    assert_eq!(grad.shape(), &burn::tensor::Shape::new([3]));
    assert_eq!(Some(grad), grad_of(&x, &plain_grads));
}

#[test]
fn checkpoint_fn_over_one_2d_tensor() {
    let device = device();
    device.seed(1);
    let x = Tensor::<2>::random([4, 5], Distribution::Default, &device).require_grad();
    let body = |x: Tensor<2>| x.clone().sin() * x.tanh();

    let plain_grads = body(x.clone()).sum().backward();
    let region_grads = checkpoint_fn(x.clone(), body).sum().backward();

    let grad = grad_of(&x, &region_grads).expect("x has a gradient");
    assert_eq!(grad.shape(), &burn::tensor::Shape::new([4, 5]));
    assert_eq!(Some(grad), grad_of(&x, &plain_grads));
}

#[test]
fn checkpoint_over_a_module_without_parameters() {
    let device = device();
    device.seed(2);
    let gelu = Gelu::new();
    let x = Tensor::<2>::random([3, 6], Distribution::Default, &device).require_grad();

    let plain_grads = gelu.forward(x.clone()).sum().backward();
    let region_grads = checkpoint(&gelu, x.clone(), |gelu, x| gelu.forward(x))
        .sum()
        .backward();

    assert!(grad_of(&x, &plain_grads).is_some());
    assert_eq!(grad_of(&x, &plain_grads), grad_of(&x, &region_grads));
}

#[test]
fn checkpoint_over_a_frozen_module() {
    let device = device();
    device.seed(3);
    let frozen = LinearConfig::new(6, 4).init(&device).no_grad();
    let x = Tensor::<2>::random([3, 6], Distribution::Default, &device).require_grad();

    let plain_grads = frozen.forward(x.clone()).tanh().sum().backward();
    let region_grads = checkpoint(&frozen, x.clone(), |linear, x| linear.forward(x).tanh())
        .sum()
        .backward();

    assert!(grad_of(&x, &plain_grads).is_some());
    assert_eq!(grad_of(&x, &plain_grads), grad_of(&x, &region_grads));
    assert_eq!(
        param_grads(&frozen, &plain_grads),
        param_grads(&frozen, &region_grads)
    );
    assert!(
        param_grads(&frozen, &region_grads)
            .iter()
            .all(Option::is_none)
    );
}

#[test]
fn the_input_is_computed_from_a_parameter() {
    let device = device();
    device.seed(4);
    let w = Tensor::<2>::random([2, 3], Distribution::Default, &device).require_grad();
    let body = |h: Tensor<2>| h.exp();

    let plain_grads = body(w.clone() * 2.0).sum().backward();
    let region_grads = checkpoint_fn(w.clone() * 2.0, body).sum().backward();

    let grad = grad_of(&w, &region_grads).expect("w has a gradient");
    assert_eq!(grad.shape(), &burn::tensor::Shape::new([2, 3]));
    assert_eq!(Some(grad), grad_of(&w, &plain_grads));
}

#[test]
fn the_input_comes_out_of_a_linear() {
    let device = device();
    device.seed(5);
    let linear: Linear = LinearConfig::new(8, 16).init(&device);
    let x = Tensor::<2>::random([4, 8], Distribution::Default, &device).require_grad();
    let body = |h: Tensor<2>| h.clone().tanh() * h;

    let plain_grads = body(linear.forward(x.clone())).sum().backward();
    let region_grads = checkpoint_fn(linear.forward(x.clone()), body)
        .sum()
        .backward();

    assert_eq!(grad_of(&x, &plain_grads), grad_of(&x, &region_grads));
    let plain = param_grads(&linear, &plain_grads);
    assert!(plain.iter().all(Option::is_some));
    assert_eq!(plain, param_grads(&linear, &region_grads));
}

/// A module of activations only, its forward a region through the attribute.
#[derive(Module, Debug)]
struct Activations;

impl Activations {
    fn plain(&self, x: Tensor<2>) -> Tensor<2> {
        burn::tensor::activation::gelu(x).exp()
    }

    #[burn_checkpoint_22::checkpoint]
    fn region(&self, x: Tensor<2>) -> Tensor<2> {
        burn::tensor::activation::gelu(x).exp()
    }
}

impl Layer<Tensor<2>> for Activations {
    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        self.plain(x)
    }
}

#[test]
fn the_attribute_on_a_method_of_a_module_without_parameters() {
    let device = device();
    device.seed(6);
    let x = Tensor::<2>::random([3, 4], Distribution::Default, &device).require_grad();

    let plain_grads = Activations.plain(x.clone()).sum().backward();
    let region_grads = Activations.region(x.clone()).sum().backward();

    assert!(grad_of(&x, &plain_grads).is_some());
    assert_eq!(grad_of(&x, &plain_grads), grad_of(&x, &region_grads));
}

#[test]
fn checkpoint_sequential_over_layers_without_parameters() {
    let device = device();
    device.seed(7);
    let layers = vec![Activations, Activations, Activations, Activations];
    let x = Tensor::<2>::random([3, 4], Distribution::Default, &device)
        .mul_scalar(0.1)
        .require_grad();

    let plain = layers
        .iter()
        .fold(x.clone(), |x, layer| layer.plain(x))
        .sum();
    let plain_grads = plain.backward();
    for segments in [Segments::Sqrt, Segments::Count(4)] {
        let cut = checkpoint_sequential(&layers, segments, x.clone()).sum();
        let grads = cut.backward();
        assert_eq!(
            grad_of(&x, &plain_grads),
            grad_of(&x, &grads),
            "{segments:?}"
        );
    }
}
