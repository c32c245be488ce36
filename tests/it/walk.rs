//! The recompute walk on regions whose ops share inputs (residual chains, attention's q, k and v
//! from one input): gradients bitwise equal to plain autodiff, each region op recomputed at most
//! once per backward, and the walk linear in the ops it recomputes. Burn 0.21's own checkpointer
//! walks every path instead, so these regions took exponential time before (40 residual blocks:
//! 2^40 paths); the counts below fail if that comes back, without timing anything.

use crate::common;

use std::collections::BTreeMap;

use burn::tensor::Tensor;
use burn::tensor::backend::AutodiffBackend;
use burn_checkpoint::counters::Counters;
use burn_checkpoint::{Layer, Segments, checkpoint, checkpoint_sequential};
use common::transformer::Block;
use common::{Ckpt, Plain, assert_values_bitwise, data, values};

/// Model width of the blocks.
const D: usize = 8;

/// `h + tanh(h)`, `n` times: every block's two ops share `h`, so the paths from the last block
/// to the region's input double with each block.
fn residual_chain<B: AutodiffBackend>(x: Tensor<B, 2>, n: usize) -> Tensor<B, 2> {
    (0..n).fold(x, |h, _| h.clone() + h.tanh())
}

/// The loss's value and the input's gradient.
fn residual_run<B: AutodiffBackend>(n: usize, region: bool) -> Vec<Vec<f32>> {
    let x = Tensor::<B, 2>::from_data(data([8, 8], 1), &Default::default()).require_grad();
    let y = if region {
        checkpoint(|| residual_chain(x.clone(), n))
    } else {
        residual_chain(x.clone(), n)
    };
    let loss = (y * Tensor::from_data(data([8, 8], 2), &Default::default())).sum();
    let grads = loss.clone().backward();
    vec![values(loss), values(x.grad(&grads).unwrap())]
}

fn assert_same(what: &str, plain: &[Vec<f32>], ckpt: &[Vec<f32>]) {
    assert_eq!(plain.len(), ckpt.len());
    for (i, (a, b)) in plain.iter().zip(ckpt).enumerate() {
        assert_values_bitwise(&format!("{what}: value {i}"), a, b);
    }
}

/// What one backward recomputed, and the steps its walk took.
fn recorded(run: impl FnOnce()) -> (BTreeMap<&'static str, u64>, u64) {
    Counters::reset();
    run();
    (Counters::now().recomputes, Counters::now().walk_steps)
}

#[test]
fn a_long_residual_chain_in_one_region_is_walked_once() {
    for n in [8, 40] {
        let plain = residual_run::<Plain>(n, false);
        let mut ckpt = Vec::new();
        let (recomputes, steps) = recorded(|| ckpt = residual_run::<Ckpt>(n, true));
        assert_same(&format!("{n} blocks"), &plain, &ckpt);
        // Each block's `tanh` and `add` at most once; the walk looks at each recomputed op once.
        for op in ["tanh", "add"] {
            let count = recomputes.get(op).copied().unwrap_or(0);
            assert!(
                count <= n as u64,
                "{n} blocks: `{op}` recomputed {count} times"
            );
        }
        let total: u64 = recomputes.values().sum();
        assert_eq!(steps, total, "{n} blocks: walk steps against recomputes");
        assert!(
            total >= n as u64,
            "{n} blocks: the region was recomputed ({total})"
        );
    }
}

/// How the blocks are checkpointed.
#[derive(Clone, Copy, Debug)]
enum Cut {
    None,
    /// All blocks in one region.
    Whole,
    /// One region around all blocks, and one inside it around each block.
    Nested,
    /// `checkpoint_sequential` with √n segments.
    Sequential,
}

/// The loss and every weight's gradient, for `blocks` blocks.
fn transformer_run<B: AutodiffBackend>(blocks: usize, cut: Cut) -> Vec<Vec<f32>> {
    let device = Default::default();
    let layers: Vec<Block<B>> = (0..blocks as u64).map(|i| Block::new(D, i)).collect();
    let x = Tensor::<B, 3>::from_data(data([2, 6, D], 99), &device).require_grad();
    let stack = |x: Tensor<B, 3>| layers.iter().fold(x, |x, layer| layer.forward(x));
    let y = match cut {
        Cut::None => stack(x.clone()),
        Cut::Whole => checkpoint(|| stack(x.clone())),
        Cut::Nested => checkpoint(|| {
            layers
                .iter()
                .fold(x.clone(), |x, layer| checkpoint(|| layer.forward(x)))
        }),
        Cut::Sequential => checkpoint_sequential(&layers, Segments::Sqrt, x.clone()),
    };
    let loss = (y * Tensor::from_data(data([2, 6, D], 7), &device)).sum();
    let grads = loss.clone().backward();
    let mut all = vec![values(loss), values(x.grad(&grads).unwrap())];
    for layer in &layers {
        all.extend(layer.weights().map(|w| values(w.grad(&grads).unwrap())));
    }
    all
}

#[test]
fn transformer_blocks_in_one_region_are_exact_and_recomputed_once() {
    let blocks = 6;
    let plain = transformer_run::<Plain>(blocks, Cut::None);
    for cut in [Cut::Whole, Cut::Nested, Cut::Sequential] {
        let mut ckpt = Vec::new();
        let (recomputes, steps) = recorded(|| ckpt = transformer_run::<Ckpt>(blocks, cut));
        assert_same(&format!("{cut:?}"), &plain, &ckpt);
        let total: u64 = recomputes.values().sum();
        assert_eq!(steps, total, "{cut:?}: walk steps against recomputes");
        // Per block the forward runs 8 matmuls (q, k, v, scores, attention, o, up, down) and
        // one gelu: none may be recomputed twice.
        let matmuls = recomputes.get("matmul").copied().unwrap_or(0);
        assert!(matmuls <= 8 * blocks as u64, "{cut:?}: {matmuls} matmuls");
        let gelus = recomputes.get("gelu").copied().unwrap_or(0);
        assert!(gelus <= blocks as u64, "{cut:?}: {gelus} gelus");
        assert!(total > 0, "{cut:?}: something was recomputed");
    }
}

#[test]
fn walk_steps_grow_linearly_with_the_region() {
    let steps = |blocks| recorded(|| drop(transformer_run::<Ckpt>(blocks, Cut::Whole))).1;
    let (four, eight, twelve) = (steps(4), steps(8), steps(12));
    // Each block adds the same ops, so each block adds the same steps (a walk over paths would
    // multiply them instead).
    assert!(eight > four, "4 blocks: {four} steps, 8 blocks: {eight}");
    assert_eq!(
        eight - four,
        twelve - eight,
        "4, 8, 12 blocks: {four}, {eight}, {twelve} steps"
    );
}
