//! A region recomputed in backward gives the gradients of plain autodiff, bit for bit.

use crate::common;

use burn::tensor::{Distribution, Int, Tensor};
use burn_checkpoint_22::{Segments, checkpoint, checkpoint_fn, checkpoint_sequential};
use burn_checkpoint_22_models::densenet::DenseNet;
use burn_checkpoint_22_models::gpt::Gpt;
use burn_checkpoint_22_models::{Cut, initialised};
use common::{Mlp, Stack, assert_close, device, grad_of, param_grads};

#[test]
fn a_region_per_block_gives_the_gradients_of_plain_autodiff() {
    let device = device();
    device.seed(7);
    let stack = Stack::new(3, 16, &device);
    let x = Tensor::<2>::random([4, 16], Distribution::Default, &device).require_grad();

    let plain = stack.forward(x.clone(), false).powf_scalar(2.0).sum();
    let plain_grads = plain.backward();
    let regions = stack.forward(x.clone(), true).powf_scalar(2.0).sum();
    let region_grads = regions.backward();

    assert_eq!(plain.into_data(), regions.into_data(), "same loss");
    assert_eq!(grad_of(&x, &plain_grads), grad_of(&x, &region_grads));
    let plain = param_grads(&stack, &plain_grads);
    assert_eq!(plain.len(), 12);
    assert!(plain.iter().all(Option::is_some));
    assert_eq!(plain, param_grads(&stack, &region_grads));
}

/// DenseNet-BC: every layer's output goes to every later layer of its block, so a tensor is an
/// input of several regions and gets its gradient's terms from each. They add in plain autodiff's
/// order only if each region hands its inputs their gradients one depth below its deepest input,
/// as plain autodiff's `cat` does (a chain of two-tensor joins handed them out at other depths:
/// the sums differed in their last bits from three layers per block on).
#[test]
fn dense_layers_as_regions_give_the_gradients_of_plain_autodiff() {
    let device = device();
    for depth in [22, 40] {
        device.seed(3);
        let model = initialised(DenseNet::new(depth, 4, 3, 10, &device));
        let images = Tensor::<4>::random([2, 3, 8, 8], Distribution::Default, &device);
        let grads = |cut| {
            let loss = model.forward(images.clone(), cut).powf_scalar(2.0).mean();
            param_grads(&model, &loss.backward())
        };
        let plain = grads(Cut::None);
        // Every weight's (batch norm's running statistics have none).
        assert_eq!(
            plain.iter().flatten().count(),
            6 * (depth - 4) / 2 + 3 * 2 + 2 + 3
        );
        assert!(
            grads(Cut::Each) == plain,
            "DenseNet-BC-{depth}, every layer a region"
        );
        assert!(
            grads(Cut::EverySecond) == plain,
            "DenseNet-BC-{depth}, every second layer"
        );
    }
}

#[test]
fn regions_nest() {
    let device = device();
    device.seed(3);
    let stack = Stack::new(2, 8, &device);
    let x = Tensor::<2>::random([3, 8], Distribution::Default, &device).require_grad();

    let plain = stack.forward(x.clone(), false).sum();
    let plain_grads = plain.backward();
    let nested = checkpoint(&stack, x.clone(), |stack, x| stack.forward(x, true)).sum();
    let nested_grads = nested.backward();

    assert_eq!(plain.into_data(), nested.into_data());
    assert_eq!(grad_of(&x, &plain_grads), grad_of(&x, &nested_grads));
    assert_eq!(
        param_grads(&stack, &plain_grads),
        param_grads(&stack, &nested_grads)
    );
}

#[test]
fn several_inputs_and_outputs_an_unused_output_and_a_used_one_twice() {
    let device = device();
    device.seed(5);
    let block = Mlp::new(6, &device);
    let x = Tensor::<2>::random([3, 6], Distribution::Default, &device).require_grad();
    let y = Tensor::<2>::random([3, 6], Distribution::Default, &device).require_grad();
    let body = |block: &Mlp, (x, y): (Tensor<2>, Tensor<2>)| {
        let h = block.forward(x.clone() * y.clone());
        (h.clone().exp(), vec![h.clone() - y, h], x.sin())
    };
    let loss = |(a, b, _unused): (Tensor<2>, Vec<Tensor<2>>, Tensor<2>)| {
        (a.clone() * b[0].clone()).sum() + b[1].clone().sum() + a.mean()
    };

    let plain = loss(body(&block, (x.clone(), y.clone())));
    let plain_grads = plain.backward();
    let region = loss(checkpoint(&block, (x.clone(), y.clone()), body));
    let region_grads = region.backward();

    assert_eq!(plain.into_data(), region.into_data());
    // Paths from several outputs meet inside the region: their contributions add in another
    // order than plain autodiff's.
    assert_close(grad_of(&x, &plain_grads), grad_of(&x, &region_grads), "x");
    assert_close(grad_of(&y, &plain_grads), grad_of(&y, &region_grads), "y");
    let plain = param_grads(&block, &plain_grads);
    for (index, (p, r)) in plain
        .into_iter()
        .zip(param_grads(&block, &region_grads))
        .enumerate()
    {
        assert!(p.is_some(), "parameter {index} has a gradient");
        assert_close(p, r, &format!("parameter {index}"));
    }
}

#[test]
fn checkpoint_sequential_gives_the_gradients_of_plain_autodiff() {
    let device = device();
    device.seed(9);
    let stack = Stack::new(7, 8, &device);
    let x = Tensor::<2>::random([5, 8], Distribution::Default, &device).require_grad();

    let plain = stack.forward(x.clone(), false).sum();
    let plain_grads = plain.backward();
    for segments in [Segments::Sqrt, Segments::Count(1), Segments::Count(7)] {
        let cut = checkpoint_sequential(&stack.blocks, segments, x.clone()).sum();
        let grads = cut.backward();
        assert_eq!(plain.clone().into_data(), cut.into_data(), "{segments:?}");
        assert_eq!(
            grad_of(&x, &plain_grads),
            grad_of(&x, &grads),
            "{segments:?}"
        );
        assert_eq!(
            param_grads(&stack, &plain_grads),
            param_grads(&stack, &grads),
            "{segments:?}"
        );
    }
}

#[test]
fn regions_work_under_burns_balanced_checkpointing() {
    let device = device().gradient_checkpointing();
    device.seed(2);
    let stack = Stack::new(3, 8, &device);
    let x = Tensor::<2>::random([4, 8], Distribution::Default, &device).require_grad();

    let plain_grads = stack.forward(x.clone(), false).sum().backward();
    let region_grads = stack.forward(x.clone(), true).sum().backward();

    assert_eq!(grad_of(&x, &plain_grads), grad_of(&x, &region_grads));
    assert_eq!(
        param_grads(&stack, &plain_grads),
        param_grads(&stack, &region_grads)
    );
}

#[test]
fn frozen_parameters_and_inputs_without_gradient_get_none() {
    let device = device();
    device.seed(4);
    let block = Mlp::new(8, &device);
    let frozen = Mlp {
        a: burn::module::Module::no_grad(block.a.clone()),
        b: block.b.clone(),
    };
    let x = Tensor::<2>::random([3, 8], Distribution::Default, &device);

    let plain_grads = frozen.forward(x.clone()).sum().backward();
    let region_grads = checkpoint(&frozen, x.clone(), |m, x| m.forward(x))
        .sum()
        .backward();
    let grads = param_grads(&frozen, &region_grads);
    assert_eq!(grads, param_grads(&frozen, &plain_grads));
    assert!(grads[0].is_none() && grads[1].is_none(), "frozen layer");
    assert!(grads[2].is_some() && grads[3].is_some());
    assert_eq!(grad_of(&x, &region_grads), None);
}

#[test]
fn without_autodiff_a_region_is_its_body() {
    let device = burn::tensor::Device::flex();
    device.seed(6);
    let block = Mlp::new(4, &device);
    let x = Tensor::<2>::random([2, 4], Distribution::Default, &device);
    let region = checkpoint(&block, x.clone(), |m, x| m.forward(x));
    assert_eq!(block.forward(x).into_data(), region.into_data());
}

#[test]
#[should_panic(expected = "used a tracked tensor it was not given")]
fn a_captured_tracked_tensor_is_refused() {
    let device = device();
    let block = Mlp::new(4, &device);
    let outside = Tensor::<2>::ones([2, 4], &device).require_grad();
    let x = Tensor::<2>::ones([2, 4], &device);
    let _ = checkpoint(&block, x, move |m, x| m.forward(x) * outside.clone());
}

#[test]
fn a_region_without_parameters_gives_its_inputs_their_gradients() {
    let device = device();
    device.seed(10);
    let [q, k, v] = [0, 1, 2]
        .map(|_| Tensor::<3>::random([2, 5, 4], Distribution::Default, &device).require_grad());
    let attention = |(q, k, v): (Tensor<3>, Tensor<3>, Tensor<3>)| {
        burn::tensor::activation::softmax(q.matmul(k.swap_dims(1, 2)).div_scalar(2.0), 2).matmul(v)
    };

    let plain_grads = attention((q.clone(), k.clone(), v.clone()))
        .sum()
        .backward();
    let region_grads = checkpoint_fn((q.clone(), k.clone(), v.clone()), attention)
        .sum()
        .backward();
    for (name, x) in [("q", &q), ("k", &k), ("v", &v)] {
        assert!(grad_of(x, &plain_grads).is_some(), "{name}");
        assert_eq!(
            grad_of(x, &plain_grads),
            grad_of(x, &region_grads),
            "{name}"
        );
    }
}

#[test]
fn an_unused_output_that_overflows_leaves_the_gradients_alone() {
    let device = device();
    let x = Tensor::<1>::from_floats([50.0, 60.0, 70.0], &device).require_grad();
    // The second output is ∞: an unused output must take no part in the recompute's backward
    // (a zero gradient for it would give 0 × ∞ = NaN).
    let body = |x: Tensor<1>| (x.clone().sin(), x.mul_scalar(2.0).exp());

    let plain_grads = body(x.clone()).0.sum().backward();
    let (used, unused) = checkpoint_fn(x.clone(), body);
    assert!(unused.into_data().iter::<f32>().all(f32::is_infinite));
    let region_grads = used.sum().backward();

    let grad = grad_of(&x, &region_grads).expect("x has a gradient");
    assert!(grad.iter::<f32>().all(f32::is_finite), "{grad:?}");
    assert_eq!(Some(grad), grad_of(&x, &plain_grads));
}

#[test]
fn burns_layers_stack_as_they_are() {
    use burn::nn::{Linear, LinearConfig};
    use burn_checkpoint_22::Layer;

    let device = device();
    device.seed(12);
    let layers: Vec<Linear> = (0..4)
        .map(|_| burn_checkpoint_22_models::initialised(LinearConfig::new(6, 6).init(&device)))
        .collect();
    let x = Tensor::<2>::random([3, 6], Distribution::Default, &device).require_grad();

    let plain_grads = layers
        .iter()
        .fold(x.clone(), |h, layer| Layer::forward(layer, h))
        .sum()
        .backward();
    let cut = checkpoint_sequential(&layers, Segments::Count(2), x.clone());
    let grads = cut.sum().backward();
    assert_eq!(grad_of(&x, &plain_grads), grad_of(&x, &grads));
    for layer in &layers {
        assert_eq!(param_grads(layer, &plain_grads), param_grads(layer, &grads));
    }
}

/// The GPT (pre-LayerNorm blocks of causal self-attention and a GELU MLP, the token and
/// position embeddings before them), its attention without dropout: a region per block gives
/// plain autodiff's gradients. (With dropout the regions are seeded: other masks, by design.)
#[test]
fn gpt_blocks_as_regions_give_the_gradients_of_plain_autodiff() {
    let device = device();
    device.seed(5);
    let model = initialised(Gpt::new(64, 32, 2, 2, 16, 0.0, &device));
    let tokens = Tensor::<2, Int>::random([2, 17], Distribution::Uniform(0.0, 64.0), &device);
    let grads = |cut| param_grads(&model, &model.loss(tokens.clone(), cut).backward());
    let plain = grads(Cut::None);
    assert_eq!(plain.iter().flatten().count(), 2 + 2 * 16 + 3);
    assert!(grads(Cut::Each) == plain, "every block a region");
    assert!(grads(Cut::EverySecond) == plain, "every second block");
    assert!(
        grads(Cut::EachKeepingAttention) == plain,
        "every block a region keeping its attention by name"
    );
    // The attention written out op for op (its projections regions of their own), against
    // burn-nn's `forward` in the plain run.
    assert!(
        grads(Cut::EachKeepingProjections) == plain,
        "every block a region keeping its attention's projections by name"
    );
}

/// A recurrent model (Burn's modern-lstm: a layer-normalised LSTM cell, two layers, both
/// directions), each cell call a region: the state passes from one region to the next, every
/// region of a layer shares its cell's weights. The input's gradient is plain autodiff's bit for
/// bit; a shared weight's is the sum of one term per region, which plain autodiff adds in the
/// order its graph walk meets the ops using the weight, and regions in the order they run
/// (latest step first): where the two orders differ (a weight used by an op whose depth does not
/// grow with the step, `weight_ih` and `norm_x` of the first layer) the sums differ in their last
/// bits (docs/burn-0.22.md, "Recurrent models").
#[test]
fn recurrent_cells_as_regions_give_the_gradients_of_plain_autodiff() {
    use burn_checkpoint_22_models::lstm::LstmNetwork;
    let device = device();
    for (layers, bidirectional) in [(1, false), (2, true)] {
        device.seed(5);
        let model = initialised(LstmNetwork::new(
            3,
            8,
            layers,
            bidirectional,
            0.0,
            1,
            &device,
        ));
        let x = LstmNetwork::sequences(4, 12, 3, &device).require_grad();
        let grads = |cut| {
            let loss = model.forward(x.clone(), cut).powf_scalar(2.0).mean();
            let grads = loss.backward();
            (param_grads(&model, &grads), grad_of(&x, &grads))
        };
        let (plain, plain_x) = grads(Cut::None);
        let (regions, regions_x) = grads(Cut::Each);
        let what = format!("{layers} layers, bidirectional {bidirectional}");
        assert!(
            plain_x.is_some() && plain_x == regions_x,
            "{what}: the input"
        );
        assert_eq!(plain.len(), regions.len());
        for (index, (plain, regions)) in plain.into_iter().zip(regions).enumerate() {
            assert!(plain.is_some(), "{what}: parameter {index} has a gradient");
            assert_close(plain, regions, &format!("{what}: parameter {index}"));
        }
    }
}
