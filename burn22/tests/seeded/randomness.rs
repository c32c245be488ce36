//! Dropout and batch norm inside a region. Burn's CPU generator is one for the whole process: the
//! tests take turns through `common::generator()`.

use crate::common;

use burn::module::Module;
use burn::nn::{BatchNorm, BatchNormConfig, Dropout, DropoutConfig, Linear, LinearConfig};
use burn::tensor::{Device, Distribution, Tensor};
use burn_checkpoint_22::{checkpoint, region_seed};
use common::{device, grad_of, initialised, param_grads};

#[derive(Module, Debug)]
struct Noisy {
    a: Linear,
    dropout: Dropout,
    norm: BatchNorm,
}

impl Noisy {
    fn new(width: usize, device: &Device) -> Self {
        Self {
            a: LinearConfig::new(width, width).init(device),
            dropout: DropoutConfig::new(0.5).init(),
            norm: BatchNormConfig::new(width).init(device),
        }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        let h = self.dropout.forward(self.a.forward(x));
        let [n, c] = h.dims();
        self.norm
            .forward(h.reshape([n, c, 1]))
            .reshape([n, c])
            .tanh()
    }
}

#[test]
fn dropout_draws_the_same_masks_and_batch_norm_updates_once() {
    let _generator = common::generator();
    let device = device();
    let build = || {
        device.seed(11);
        initialised(Noisy::new(8, &device))
    };
    let (plain_net, region_net) = (build(), build());
    device.seed(5);
    let x = Tensor::<2>::random([6, 8], Distribution::Default, &device);

    // The reference: plain autodiff, with the generator used as a region uses it.
    device.seed(21);
    let seed = region_seed(&device);
    device.seed(seed);
    let plain = plain_net.forward(x.clone()).sum();
    let plain_grads = plain.backward();

    device.seed(21);
    let region = checkpoint(&region_net, x, |net, x| net.forward(x)).sum();
    let region_grads = region.backward();

    assert_eq!(plain.into_data(), region.into_data(), "same loss");
    assert_eq!(
        param_grads(&plain_net, &plain_grads),
        param_grads(&region_net, &region_grads),
        "same gradients: the recompute drew the forward's dropout mask"
    );
    assert_eq!(
        plain_net.norm.running_mean.value_sync().into_data(),
        region_net.norm.running_mean.value_sync().into_data(),
        "running mean updated once"
    );
    assert_eq!(
        plain_net.norm.running_var.value_sync().into_data(),
        region_net.norm.running_var.value_sync().into_data(),
        "running variance updated once"
    );
}

#[test]
fn dropout_alone_in_a_region_over_one_tensor() {
    let _generator = common::generator();
    let device = device();
    let dropout = DropoutConfig::new(0.5).init();
    device.seed(3);
    let x = Tensor::<2>::random([5, 7], Distribution::Default, &device).require_grad();

    device.seed(13);
    let seed = region_seed(&device);
    device.seed(seed);
    let plain = dropout.forward(x.clone()).exp().sum();
    let plain_grads = plain.backward();

    device.seed(13);
    let region = checkpoint(&dropout, x.clone(), |dropout, x| dropout.forward(x).exp()).sum();
    let region_grads = region.backward();

    assert_eq!(
        plain.into_data(),
        region.into_data(),
        "same mask, same loss"
    );
    let grad = grad_of(&x, &region_grads).expect("x has a gradient");
    assert_eq!(grad.shape(), &burn::tensor::Shape::new([5, 7]));
    assert_eq!(Some(grad), grad_of(&x, &plain_grads));
}
