//! Dropout and batch norm inside a region. Burn's CPU generator is one for the whole process: the
//! tests take turns through `common::generator()`.

use crate::common;

use burn::module::Module;
use burn::nn::{BatchNorm, BatchNormConfig, Dropout, DropoutConfig, Linear, LinearConfig};
use burn::tensor::{Device, Distribution, Tensor};
use burn_checkpoint_22::{Region, checkpoint, checkpoint_scan, region_seed};
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

/// A scan whose cell draws dropout masks and updates batch statistics: each step gets a seed of
/// its own (drawn as a region's, before the step), backward's runs of a step draw its masks
/// again, the running statistics are updated once per step — the loop written out with the
/// generator used the same way gives the same loss and gradients, bit for bit.
#[test]
fn a_scans_cell_draws_each_steps_masks_again_and_updates_batch_norm_once_a_step() {
    let _generator = common::generator();
    let device = device();
    let build = || {
        device.seed(11);
        initialised(Noisy::new(8, &device))
    };
    let (plain_net, scan_net) = (build(), build());
    device.seed(5);
    let xs = Tensor::<3>::random([6, 5, 8], Distribution::Default, &device).require_grad();
    let h0 = Tensor::<2>::zeros([6, 8], &device);
    let step = |net: &Noisy, h: Tensor<2>, x: Tensor<2>| {
        let h = net.forward(h + x);
        (h.clone(), h)
    };

    device.seed(21);
    let mut h = h0.clone();
    let mut ys = Vec::new();
    for t in 0..5 {
        let seed = region_seed(&device);
        device.seed(seed);
        let (y, next) = step(&plain_net, h, xs.clone().narrow(1, t, 1).squeeze_dim(1));
        ys.push(y);
        h = next;
    }
    let plain = Tensor::stack::<3>(ys, 1).sum() + h.sum();
    let plain_grads = plain.backward();

    device.seed(21);
    let (ys, last) = checkpoint_scan(&scan_net, h0, xs.clone(), 1, step);
    let scan = ys.sum() + last.sum();
    let scan_grads = scan.backward();

    assert_eq!(plain.into_data(), scan.into_data(), "same loss");
    assert_eq!(grad_of(&xs, &plain_grads), grad_of(&xs, &scan_grads));
    assert_eq!(
        param_grads(&plain_net, &plain_grads),
        param_grads(&scan_net, &scan_grads),
        "same gradients: backward drew each step's masks again"
    );
    assert_eq!(
        plain_net.norm.running_mean.value_sync().into_data(),
        scan_net.norm.running_mean.value_sync().into_data(),
        "running mean updated once a step"
    );
}

/// A seeded region inside a scan's step (its dropout draws from a seed of its own): backward's
/// runs of the step replay the seed the region drew in that step's forward — the loop written
/// out, the generator used as the scan and the region use it, gives the same loss and gradients.
#[test]
fn a_seeded_region_inside_a_scans_step_draws_its_masks_again() {
    let _generator = common::generator();
    let device = device();
    let build = || {
        device.seed(12);
        initialised(Noisy::new(8, &device))
    };
    let (plain_net, scan_net) = (build(), build());
    device.seed(6);
    let xs = Tensor::<3>::random([4, 6, 8], Distribution::Default, &device).require_grad();
    let h0 = Tensor::<2>::zeros([4, 8], &device);

    device.seed(22);
    let mut h = h0.clone();
    let mut ys = Vec::new();
    for t in 0..6 {
        // The scan's seed for the step, then the region's own.
        let seed = region_seed(&device);
        device.seed(seed);
        let seed = region_seed(&device);
        device.seed(seed);
        let next = plain_net.forward(h + xs.clone().narrow(1, t, 1).squeeze_dim(1));
        ys.push(next.clone());
        h = next;
    }
    let plain = Tensor::stack::<3>(ys, 1).sum();
    let plain_grads = plain.backward();

    device.seed(22);
    let (ys, _) = checkpoint_scan(&scan_net, h0, xs.clone(), 1, |net: &Noisy, h, x| {
        let next = Region::named("inner")
            .seeded()
            .run(net, h + x, |net, input| net.forward(input));
        (next.clone(), next)
    });
    let scan = ys.sum();
    let scan_grads = scan.backward();

    assert_eq!(plain.into_data(), scan.into_data(), "same loss");
    assert_eq!(grad_of(&xs, &plain_grads), grad_of(&xs, &scan_grads));
    assert_eq!(
        param_grads(&plain_net, &plain_grads),
        param_grads(&scan_net, &scan_grads)
    );
}

impl burn_checkpoint_22::Layer<Tensor<2>> for Noisy {
    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        Noisy::forward(self, x)
    }
}

/// `checkpoint_sequential` runs its segments as one node's steps: each segment draws its seed
/// as a region per segment drew it, so the masks, the batch norms' updates and the gradients are
/// those of the regions it ran before (and the same run twice).
#[test]
fn dropout_in_checkpoint_sequential_draws_what_a_region_per_segment_drew() {
    use burn_checkpoint_22::Segments;

    let _generator = common::generator();
    let device = device();
    let build = || {
        device.seed(12);
        initialised((0..6).map(|_| Noisy::new(8, &device)).collect::<Vec<_>>())
    };
    device.seed(6);
    let x = Tensor::<2>::random([6, 8], Distribution::Default, &device).require_grad();
    let run = |one_node: bool| {
        let layers = build();
        device.seed(22);
        let region = Region::named("stack");
        let y = if one_node {
            region.sequential(&layers, Segments::Count(3), x.clone())
        } else {
            // The segments 0..2, 2..4 as regions, 4..6 after them.
            let mut h = x.clone();
            for start in [0, 2] {
                let segment = layers[start..start + 2].to_vec();
                h = region.run(&segment, h, |segment: &Vec<Noisy>, h| {
                    segment.iter().fold(h, |h, layer| layer.forward(h))
                });
            }
            layers[4..].iter().fold(h, |h, layer| layer.forward(h))
        };
        let loss = y.sum();
        let grads = loss.clone().backward();
        let means: Vec<_> = layers
            .iter()
            .map(|layer| layer.norm.running_mean.value_sync().into_data())
            .collect();
        (
            loss.into_data(),
            grad_of(&x, &grads),
            param_grads(&layers, &grads),
            means,
        )
    };
    let regions = run(false);
    let one_node = run(true);
    assert!(regions.1.is_some());
    assert_eq!(regions, one_node);
    assert_eq!(run(true), one_node, "the same run twice");
}
