//! Offloading regions (`Region::offloaded`): gradients bitwise equal to plain autodiff (an MLP, a
//! transformer stack, nested regions, a boundary read by two regions), the host copies counted
//! and released with the graph — after backward, and when a panic abandons the graph before it
//! (Burn frees an abandoned graph at the next backward pass).
//!
//! Runs alone (`common::alone`): the offload store counts every thread of the process.

use crate::common;

use std::panic::{AssertUnwindSafe, catch_unwind};

use burn::tensor::Tensor;
use burn::tensor::activation::relu;
use burn::tensor::backend::AutodiffBackend;
use burn_checkpoint::memory::{Meter, OffloadedBytes, StepReport};
use burn_checkpoint::{Layer, Policy, Region};
use common::transformer::Block;
use common::{Ckpt, Plain, assert_values_bitwise, data, values};

const WIDTH: usize = 32;
const BATCH: usize = 16;

fn weights<B: AutodiffBackend>(count: usize) -> Vec<Tensor<B, 2>> {
    (0..count as u64)
        .map(|i| {
            let w = data([WIDTH, WIDTH], 20 + i).to_vec::<f32>().unwrap();
            let w: Vec<f32> = w.iter().map(|v| v * 0.3).collect();
            Tensor::<B, 2>::from_data(
                burn::tensor::TensorData::new(w, [WIDTH, WIDTH]),
                &Default::default(),
            )
            .require_grad()
        })
        .collect()
}

/// Four regions of two layers, each `region` (none: plain layers).
fn mlp<B: AutodiffBackend>(ws: &[Tensor<B, 2>], region: Option<Region>) -> Tensor<B, 2> {
    let mut h = Tensor::<B, 2>::from_data(data([BATCH, WIDTH], 1), &Default::default());
    for pair in ws.chunks(2) {
        let layers = |h: Tensor<B, 2>| {
            let h = relu(h.matmul(pair[0].clone()));
            relu(h.matmul(pair[1].clone())) + 0.5
        };
        h = match &region {
            Some(region) => region.run(|| layers(h)),
            None => layers(h),
        };
    }
    h
}

fn grads<B: AutodiffBackend>(loss: Tensor<B, 1>, ws: &[Tensor<B, 2>]) -> Vec<Vec<f32>> {
    let grads = loss.backward();
    ws.iter().map(|w| values(w.grad(&grads).unwrap())).collect()
}

fn assert_all_bitwise(what: &str, expected: &[Vec<f32>], got: &[Vec<f32>]) {
    assert_eq!(expected.len(), got.len());
    for (i, (a, b)) in expected.iter().zip(got).enumerate() {
        assert_values_bitwise(&format!("{what}: weight {i}"), a, b);
    }
}

#[test]
fn an_offloading_mlp_has_plain_gradients_and_releases_its_copies() {
    let _alone = common::alone();
    let plain = weights::<Plain>(8);
    let expected = grads(mlp(&plain, None).sum(), &plain);
    let ws = weights::<Ckpt>(8);
    let before = OffloadedBytes::now().in_use as usize;
    for policy in [
        Region::new().offloaded(),
        Region::new().policy(Policy::SaveComputeBound).offloaded(),
    ] {
        let loss = mlp(&ws, Some(policy.clone())).sum();
        // Regions 2 to 4 each keep their input (the region before's output) on the host; with
        // SaveComputeBound also their kept matmul outputs.
        let boundary = BATCH * WIDTH * 4;
        assert!(
            OffloadedBytes::now().in_use as usize - before >= 3 * boundary,
            "{policy:?}: {} bytes offloaded",
            OffloadedBytes::now().in_use as usize - before
        );
        assert_all_bitwise(&format!("{policy:?}"), &expected, &grads(loss, &ws));
        assert_eq!(
            OffloadedBytes::now().in_use as usize,
            before,
            "{policy:?}: copies released"
        );
    }
}

#[test]
fn a_policy_can_offload_single_outputs() {
    let _alone = common::alone();
    let plain = weights::<Plain>(8);
    let expected = grads(mlp(&plain, None).sum(), &plain);
    let ws = weights::<Ckpt>(8);
    let before = OffloadedBytes::now().in_use as usize;
    // Only the matmul outputs, in a region that does not offload otherwise.
    let dots = Policy::custom(|op| match op.kind() {
        burn_checkpoint::OpKind::Matmul => burn_checkpoint::Decision::Offload,
        _ => burn_checkpoint::Decision::Recompute,
    });
    let loss = mlp(&ws, Some(Region::new().policy(dots))).sum();
    // Of each region's two matmuls, the first's output is read by the ReLU before the second
    // (the second's by ops after it): 8 outputs, each read by a region op.
    let output = BATCH * WIDTH * 4;
    assert!(
        OffloadedBytes::now().in_use as usize - before >= 4 * output,
        "{} bytes offloaded",
        OffloadedBytes::now().in_use as usize - before
    );
    assert_all_bitwise("offloaded matmul outputs", &expected, &grads(loss, &ws));
    assert_eq!(OffloadedBytes::now().in_use as usize, before);
}

#[test]
fn a_boundary_read_by_two_offloading_regions_is_copied_once() {
    let _alone = common::alone();
    fn run<B: AutodiffBackend>(ws: &[Tensor<B, 2>], region: Option<Region>) -> Tensor<B, 1> {
        let x = Tensor::<B, 2>::from_data(data([BATCH, WIDTH], 3), &Default::default());
        let run = |f: &dyn Fn() -> Tensor<B, 2>| match &region {
            Some(region) => region.run(f),
            None => f(),
        };
        let h = run(&|| relu(x.clone().matmul(ws[0].clone())));
        let a = run(&|| relu(h.clone().matmul(ws[1].clone())));
        let b = run(&|| relu(h.clone().matmul(ws[2].clone())) * 2.0);
        (a + b).sum()
    }
    let plain = weights::<Plain>(3);
    let expected = grads(run(&plain, None), &plain);
    let ws = weights::<Ckpt>(3);
    let before = OffloadedBytes::now().in_use as usize;
    let loss = run(&ws, Some(Region::new().offloaded()));
    assert_eq!(
        OffloadedBytes::now().in_use as usize - before,
        BATCH * WIDTH * 4,
        "one host copy of `h` for both readers"
    );
    assert_all_bitwise("two readers", &expected, &grads(loss, &ws));
    assert_eq!(OffloadedBytes::now().in_use as usize, before);
}

#[test]
fn nested_regions_offload_with_their_outer_region() {
    let _alone = common::alone();
    fn run<B: AutodiffBackend>(ws: &[Tensor<B, 2>], outer: Option<Region>) -> Tensor<B, 1> {
        let x = Tensor::<B, 2>::from_data(data([BATCH, WIDTH], 5), &Default::default());
        let first = relu(x.matmul(ws[0].clone()));
        let body = || {
            let inner = Region::named("inner").run(|| relu(first.clone().matmul(ws[1].clone())));
            relu(inner.matmul(ws[2].clone()))
        };
        let y = match outer {
            Some(region) => region.run(body),
            None => body(),
        };
        y.sum()
    }
    let plain = weights::<Plain>(3);
    let expected = grads(run(&plain, None), &plain);
    let ws = weights::<Ckpt>(3);
    let before = OffloadedBytes::now().in_use as usize;
    let loss = run(&ws, Some(Region::new().offloaded()));
    assert!(
        OffloadedBytes::now().in_use as usize > before,
        "the inner region reads `first` from the host"
    );
    assert_all_bitwise("nested", &expected, &grads(loss, &ws));
    assert_eq!(OffloadedBytes::now().in_use as usize, before);
}

#[test]
fn a_transformer_stack_offloading_each_block_has_plain_gradients() {
    let _alone = common::alone();
    fn run<B: AutodiffBackend>(blocks: &[Block<B>], region: Option<Region>) -> Vec<Vec<f32>> {
        let mut x = Tensor::<B, 3>::from_data(data([2, 8, 16], 9), &Default::default());
        for block in blocks {
            x = match &region {
                Some(region) => region.run(|| block.forward(x)),
                None => block.forward(x),
            };
        }
        let grads = x.sum().backward();
        blocks
            .iter()
            .flat_map(|block| block.weights())
            .map(|w| values(w.grad(&grads).unwrap()))
            .collect()
    }
    let plain: Vec<Block<Plain>> = (0..3).map(|i| Block::new(16, i)).collect();
    let expected = run(&plain, None);
    let blocks: Vec<Block<Ckpt>> = (0..3).map(|i| Block::new(16, i)).collect();
    let before = OffloadedBytes::now().in_use as usize;
    let got = run(&blocks, Some(Region::new().offloaded()));
    assert_all_bitwise("transformer", &expected, &got);
    assert_eq!(OffloadedBytes::now().in_use as usize, before);
}

#[test]
fn a_panic_between_forward_and_backward_releases_the_host_copies() {
    let _alone = common::alone();
    let before = OffloadedBytes::now().in_use as usize;
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = catch_unwind(AssertUnwindSafe(|| {
        // The whole step unwinds: its weights too (a graph stays while any of its tensors does).
        let ws = weights::<Ckpt>(8);
        let loss = mlp(&ws, Some(Region::new().offloaded())).sum();
        assert!(OffloadedBytes::now().in_use as usize > before);
        if loss.clone().into_scalar() != f32::MAX {
            panic!("a failure after forward");
        }
        loss
    }));
    std::panic::set_hook(hook);
    assert!(result.is_err());
    // Burn 0.21 frees an abandoned graph (none of whose tensors is alive) a level per later
    // backward pass, from its inputs on, on any thread; the device memory such a graph holds
    // goes the same way. The copies go with their nodes.
    let mut passes = 0;
    while OffloadedBytes::now().in_use as usize != before && passes < 200 {
        let w = Tensor::<Ckpt, 1>::from_floats([1.0, 2.0], &Default::default()).require_grad();
        let _ = (w.clone() * w).sum().backward();
        passes += 1;
    }
    println!("released after {passes} later backward passes");
    assert_eq!(
        OffloadedBytes::now().in_use as usize,
        before,
        "the abandoned graph took its copies"
    );
}

#[test]
fn the_memory_report_counts_what_regions_offload() {
    let _alone = common::alone();
    let ws = weights::<Ckpt>(8);
    let (_, report) = StepReport::measure(Meter::Host, || {
        grads(mlp(&ws, Some(Region::new().offloaded())).sum(), &ws)
    });
    let boundary = (BATCH * WIDTH * 4) as u64;
    assert_eq!(report.regions.len(), 4);
    assert_eq!(
        report.regions[0].offloaded_bytes, 0,
        "the first reads only its input"
    );
    for region in &report.regions[1..] {
        assert_eq!(region.offloaded_bytes, boundary, "{region:?}");
    }
    assert!(report.offloaded_peak_bytes >= 3 * boundary, "{report}");
    println!("{report}");
}
