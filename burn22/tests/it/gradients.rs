//! A region recomputed in backward gives the gradients of plain autodiff, bit for bit.

use crate::common;

use burn::tensor::{Distribution, Tensor};
use burn_checkpoint_22::{Segments, checkpoint, checkpoint_fn, checkpoint_sequential};
use common::{Mlp, Stack, assert_close, device, grad_of, initialised, param_grads};

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

/// Where a scan cannot stand for the segments yet (a `SaveComputeBound` policy, a sequential kept
/// by name by the region around it), `checkpoint_sequential` runs a region per segment: plain
/// autodiff's gradients either way.
#[test]
fn checkpoint_sequential_saving_compute_bound_or_kept_by_name_gives_plain_gradients() {
    use burn_checkpoint_22::{Policy, Region};

    let device = device();
    device.seed(13);
    let stack = Stack::new(6, 8, &device);
    let x = Tensor::<2>::random([5, 8], Distribution::Default, &device).require_grad();
    let plain_grads = stack.forward(x.clone(), false).sum().backward();
    let sequential = |region: Region, x| region.sequential(&stack.blocks, Segments::Count(3), x);
    let saving = sequential(
        Region::named("stack").policy(Policy::SaveComputeBound),
        x.clone(),
    );
    let kept = Region::named("outer")
        .policy(Policy::recompute_all_but(["stack"]))
        .run(&stack, x.clone(), move |stack, x| {
            Region::named("stack").sequential(&stack.blocks, Segments::Count(3), x)
        });
    for (name, y) in [("saving compute-bound", saving), ("kept by name", kept)] {
        let grads = y.sum().backward();
        assert_eq!(grad_of(&x, &plain_grads), grad_of(&x, &grads), "{name}");
        assert_eq!(
            param_grads(&stack, &plain_grads),
            param_grads(&stack, &grads),
            "{name}"
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
        .map(|_| initialised(LinearConfig::new(6, 6).init(&device)))
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

/// A region over more tensors than one graph node takes as parents (32) has joins below its
/// node; one over fewer has its tensors as its node's own parents. Either way, and nested in a
/// `SaveComputeBound` region (a memory-bound node: one join below it), every tensor gets plain
/// autodiff's gradient: each is also read outside the region, so the order its two terms are
/// added in shows.
#[test]
fn regions_over_many_tensors_give_the_gradients_of_plain_autodiff() {
    use burn_checkpoint_22::{Policy, Region};

    let device = device();
    device.seed(11);
    let base = Tensor::<2>::random([3, 5], Distribution::Default, &device).require_grad();
    let body = |xs: Vec<Tensor<2>>| {
        xs.into_iter()
            .enumerate()
            .map(|(i, x)| (x * (i as f32 * 0.25 + 0.5)).sin())
            .reduce(|a, b| a + b)
            .expect("a tensor")
    };
    for width in [1, 2, 31, 32, 33, 63, 64, 70] {
        let inputs = || -> Vec<Tensor<2>> {
            (0..width)
                .map(|i| base.clone().mul_scalar(i as f32 + 1.0).exp())
                .collect()
        };
        let outside = |xs: &[Tensor<2>]| {
            xs.iter()
                .map(|x| x.clone().powf_scalar(2.0).sum())
                .reduce(|a, b| a + b)
                .expect("a tensor")
        };
        let plain = {
            let xs = inputs();
            body(xs.clone()).sum() + outside(&xs)
        };
        let plain_grads = plain.backward();
        let region = {
            let xs = inputs();
            checkpoint_fn(xs.clone(), body).sum() + outside(&xs)
        };
        let region_grads = region.backward();
        let nested = {
            let xs = inputs();
            let out = Region::new()
                .policy(Policy::SaveComputeBound)
                .run_fn(xs.clone(), move |xs| checkpoint_fn(xs, body).cos());
            out.sum() + outside(&xs)
        };
        let nested_grads = nested.backward();

        assert_eq!(plain.into_data(), region.into_data(), "{width} tensors");
        let plain = grad_of(&base, &plain_grads);
        assert!(plain.is_some());
        assert_eq!(plain, grad_of(&base, &region_grads), "{width} tensors");
        let nested_plain = {
            let xs = inputs();
            (body(xs.clone()).cos().sum() + outside(&xs)).backward()
        };
        assert_eq!(
            grad_of(&base, &nested_plain),
            grad_of(&base, &nested_grads),
            "{width} tensors, nested in a SaveComputeBound region"
        );
    }
}
