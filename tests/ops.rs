//! Every covered op, inside a region, against plain `Autodiff<NdArray>` on random shapes: outputs
//! and gradients with respect to every input must be bitwise equal, no op may fall back, and the
//! op must really have been recomputed during backward.

mod common;

use burn::tensor::module::{
    adaptive_avg_pool2d, avg_pool2d, conv_transpose2d, conv1d, conv2d, linear, max_pool2d,
    max_pool2d_with_indices,
};
use burn::tensor::ops::{ConvOptions, ConvTransposeOptions};
use burn::tensor::{Bool, Int, Tensor, TensorData};
use burn_checkpoint::coverage;
use common::{Ckpt, Input, Plain, assert_bitwise, data, run};
use proptest::prelude::*;

/// Runs `body` (written once, typed for each backend) on plain autodiff and inside a region on the
/// decorator, then checks equality, fallbacks and that `op` was recomputed.
macro_rules! compare {
    ($inputs:expr, $pre:expr, $op:expr, $d:literal => $o:literal, |$t:ident| $body:expr) => {{
        let inputs: Vec<Input> = $inputs;
        let f_plain = |$t: Vec<Tensor<Plain, $d>>| -> Tensor<Plain, $o> { $body };
        let f_ckpt = |$t: Vec<Tensor<Ckpt, $d>>| -> Tensor<Ckpt, $o> { $body };
        let plain = run::<Plain, $d, $o>(&inputs, $pre, false, &f_plain);
        coverage::reset();
        let ckpt = run::<Ckpt, $d, $o>(&inputs, $pre, true, &f_ckpt);
        assert_bitwise(&plain, &ckpt);
        let fallbacks = coverage::fallbacks();
        assert!(fallbacks.is_empty(), "fell back: {fallbacks:?}");
        if inputs.iter().any(|input| input.grad) {
            let recomputed = coverage::recomputes().get($op).copied().unwrap_or(0);
            assert!(
                recomputed >= 1,
                "`{}` was not recomputed: {:?}",
                $op,
                coverage::recomputes()
            );
        }
    }};
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 12,
        ..ProptestConfig::default()
    }
}

/// A broadcast partner of `[m, n]`: the same shape, `[1, n]` or `[m, 1]`.
fn broadcast_shape(m: usize, n: usize, which: u8) -> [usize; 2] {
    match which % 3 {
        0 => [m, n],
        1 => [1, n],
        _ => [m, 1],
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn elementwise(m in 1usize..6, n in 1usize..6, which in 0u8..3, op in 0u8..4,
                   ga: bool, gb: bool, pre: bool, seed: u64) {
        let inputs = vec![
            Input::new(data([m, n], seed), ga),
            Input::new(data(broadcast_shape(m, n, which), seed + 1), gb),
        ];
        match op {
            0 => compare!(inputs, pre, "add", 2 => 2, |t| t[0].clone() + t[1].clone()),
            1 => compare!(inputs, pre, "sub", 2 => 2, |t| t[0].clone() - t[1].clone()),
            2 => compare!(inputs, pre, "mul", 2 => 2, |t| t[0].clone() * t[1].clone()),
            _ => compare!(inputs, pre, "div", 2 => 2, |t| t[0].clone() / (t[1].clone() + 2.0)),
        }
    }

    #[test]
    fn matmul(b in 1usize..3, m in 1usize..5, k in 1usize..5, n in 1usize..5, which in 0u8..3,
              ga: bool, gb: bool, pre: bool, seed: u64) {
        // Batch dimensions broadcast: one side may have a batch of 1.
        let (bl, br) = match which { 0 => (b, b), 1 => (1, b), _ => (b, 1) };
        let inputs = vec![
            Input::new(data([bl, m, k], seed), ga),
            Input::new(data([br, k, n], seed + 1), gb),
        ];
        compare!(inputs, pre, "matmul", 3 => 3, |t| t[0].clone().matmul(t[1].clone()));
    }

    #[test]
    fn linear_op(b in 1usize..5, i in 1usize..5, o in 1usize..5, bias: bool,
                 gx: bool, gw: bool, gb: bool, pre: bool, seed: u64) {
        let mut inputs = vec![
            Input::new(data([b, i], seed), gx),
            Input::new(data([i, o], seed + 1), gw),
        ];
        if bias {
            inputs.push(Input::new(data([1, o], seed + 2), gb));
        }
        compare!(inputs, pre, "linear", 2 => 2, |t| {
            let bias = t.get(2).map(|b| b.clone().reshape([o]));
            linear(t[0].clone(), t[1].clone(), bias)
        });
    }

    #[test]
    fn conv1d_op(b in 1usize..3, c in 1usize..4, co in 1usize..4, l in 3usize..8, k in 1usize..4,
                 stride in 1usize..3, padding in 0usize..2, bias: bool,
                 gx: bool, gw: bool, gb: bool, pre: bool, seed: u64) {
        let mut inputs = vec![
            Input::new(data([b, c, l], seed), gx),
            Input::new(data([co, c, k], seed + 1), gw),
        ];
        if bias {
            inputs.push(Input::new(data([1, 1, co], seed + 2), gb));
        }
        let options = ConvOptions::new([stride], [padding], [1], 1);
        compare!(inputs, pre, "conv1d", 3 => 3, |t| {
            let bias = t.get(2).map(|b| b.clone().reshape([co]));
            conv1d(t[0].clone(), t[1].clone(), bias, options.clone())
        });
    }

    #[test]
    fn conv2d_op(b in 1usize..3, c in 1usize..4, co in 1usize..4, h in 3usize..7, k in 1usize..4,
                 stride in 1usize..3, padding in 0usize..2, dilation in 1usize..3, bias: bool,
                 gx: bool, gw: bool, gb: bool, pre: bool, seed: u64) {
        prop_assume!(dilation * (k - 1) < h + 2 * padding);
        let mut inputs = vec![
            Input::new(data([b, c, h, h + 1], seed), gx),
            Input::new(data([co, c, k, k], seed + 1), gw),
        ];
        if bias {
            inputs.push(Input::new(data([1, 1, 1, co], seed + 2), gb));
        }
        let options = ConvOptions::new([stride, stride], [padding, padding], [dilation, dilation], 1);
        compare!(inputs, pre, "conv2d", 4 => 4, |t| {
            let bias = t.get(2).map(|b| b.clone().reshape([co]));
            conv2d(t[0].clone(), t[1].clone(), bias, options.clone())
        });
    }

    #[test]
    fn conv_transpose2d_op(b in 1usize..3, c in 1usize..4, co in 1usize..4, h in 2usize..5,
                           k in 1usize..4, stride in 1usize..3, bias: bool,
                           gx: bool, gw: bool, gb: bool, pre: bool, seed: u64) {
        let mut inputs = vec![
            Input::new(data([b, c, h, h], seed), gx),
            Input::new(data([c, co, k, k], seed + 1), gw),
        ];
        if bias {
            inputs.push(Input::new(data([1, 1, 1, co], seed + 2), gb));
        }
        let options = ConvTransposeOptions::new([stride, stride], [0, 0], [0, 0], [1, 1], 1);
        compare!(inputs, pre, "conv_transpose2d", 4 => 4, |t| {
            let bias = t.get(2).map(|b| b.clone().reshape([co]));
            conv_transpose2d(t[0].clone(), t[1].clone(), bias, options.clone())
        });
    }

    #[test]
    fn pool2d(b in 1usize..3, c in 1usize..3, h in 2usize..8, k in 1usize..3, stride in 1usize..3,
              which in 0u8..4, pre: bool, seed: u64) {
        let inputs = vec![Input::new(data([b, c, h, h + 1], seed), true)];
        match which {
            0 => compare!(inputs, pre, "avg_pool2d", 4 => 4,
                |t| avg_pool2d(t[0].clone(), [k, k], [stride, stride], [0, 0], true, false)),
            1 => compare!(inputs, pre, "max_pool2d", 4 => 4,
                |t| max_pool2d(t[0].clone(), [k, k], [stride, stride], [0, 0], [1, 1], false)),
            2 => compare!(inputs, pre, "max_pool2d", 4 => 4,
                |t| max_pool2d_with_indices(t[0].clone(), [k, k], [stride, stride], [0, 0], [1, 1], false).0),
            _ => compare!(inputs, pre, "adaptive_avg_pool2d", 4 => 4,
                |t| adaptive_avg_pool2d(t[0].clone(), [(h / 2).max(1), 2])),
        }
    }

    #[test]
    fn cat(count in 1usize..20, m in 1usize..4, dim in 0usize..2, grads in any::<u32>(),
           pre: bool, seed: u64) {
        // More than 16 operands exercises grouping.
        let inputs: Vec<Input> = (0..count)
            .map(|i| {
                let shape = if dim == 0 { [1 + i % 3, m] } else { [m, 1 + i % 3] };
                Input::new(data(shape, seed + i as u64), grads & (1 << i) != 0)
            })
            .collect();
        compare!(inputs, pre, "cat", 2 => 2, |t| Tensor::cat(t, dim));
    }

    #[test]
    fn reductions(m in 1usize..5, n in 1usize..5, dim in 0usize..2, which in 0u8..8,
                  pre: bool, seed: u64) {
        let inputs = vec![Input::new(data([m, n], seed), true)];
        match which {
            0 => compare!(inputs, pre, "sum", 2 => 1, |t| t[0].clone().sum()),
            1 => compare!(inputs, pre, "mean", 2 => 1, |t| t[0].clone().mean()),
            2 => compare!(inputs, pre, "sum_dim", 2 => 2, |t| t[0].clone().sum_dim(dim)),
            3 => compare!(inputs, pre, "mean_dim", 2 => 2, |t| t[0].clone().mean_dim(dim)),
            4 => compare!(inputs, pre, "max_dim", 2 => 2, |t| t[0].clone().max_dim(dim)),
            5 => compare!(inputs, pre, "min_dim", 2 => 2, |t| t[0].clone().min_dim(dim)),
            6 => compare!(inputs, pre, "max_dim", 2 => 2, |t| t[0].clone().max_dim_with_indices(dim).0),
            _ => compare!(inputs, pre, "min_dim", 2 => 2, |t| t[0].clone().min_dim_with_indices(dim).0),
        }
    }

    #[test]
    fn masks(m in 1usize..5, n in 1usize..5, where_op: bool, gt: bool, gv: bool,
             pre: bool, seed: u64) {
        let mask: Vec<bool> = data([m, n], seed + 7).to_vec::<f32>().unwrap().iter().map(|v| *v > 0.0).collect();
        let mask = TensorData::new(mask, [m, n]);
        // mask_fill's only float operand must be tracked, or there is no op to recompute.
        let inputs = vec![
            Input::new(data([m, n], seed), gt || !where_op),
            Input::new(data([m, n], seed + 1), gv),
        ];
        if where_op {
            compare!(inputs, pre, "mask_where", 2 => 2, |t| {
                let mask = Tensor::<_, 2, Bool>::from_data(mask.clone(), &t[0].device());
                t[0].clone().mask_where(mask, t[1].clone())
            });
        } else {
            compare!(inputs, pre, "mask_fill", 2 => 2, |t| {
                let mask = Tensor::<_, 2, Bool>::from_data(mask.clone(), &t[0].device());
                t[0].clone().mask_fill(mask, 0.5) + t[1].clone()
            });
        }
    }

    #[test]
    fn gather(m in 1usize..5, n in 1usize..5, dim in 0usize..2, pre: bool, seed: u64) {
        let size = if dim == 0 { m } else { n };
        let indices: Vec<i64> = data([m, n], seed + 3).to_vec::<f32>().unwrap().iter()
            .map(|v| (((v + 1.0) / 2.0 * size as f32) as i64).min(size as i64 - 1))
            .collect();
        let indices = TensorData::new(indices, [m, n]);
        let inputs = vec![Input::new(data([m, n], seed), true)];
        compare!(inputs, pre, "gather", 2 => 2, |t| {
            let indices = Tensor::<_, 2, Int>::from_data(indices.clone(), &t[0].device());
            t[0].clone().gather(dim, indices)
        });
    }
}
