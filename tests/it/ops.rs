//! Every covered op, inside a region, against plain `Autodiff<NdArray>` on random shapes: outputs
//! and gradients with respect to every input must be bitwise equal, no op may fall back, and the
//! op must really have been recomputed during backward.

use crate::common;

use burn::tensor::module::{
    adaptive_avg_pool1d, adaptive_avg_pool2d, avg_pool1d, avg_pool2d, conv_transpose1d,
    conv_transpose2d, conv_transpose3d, conv1d, conv2d, conv3d, ctc_loss, deform_conv2d, embedding,
    interpolate, linear, max_pool1d, max_pool1d_with_indices, max_pool2d, max_pool2d_with_indices,
};
use burn::tensor::ops::{
    ConvOptions, ConvTransposeOptions, DeformConvOptions, InterpolateMode, InterpolateOptions,
};
use burn::tensor::{Bool, FloatDType, IndexingUpdateOp, Int, Tensor, TensorData};
use burn_checkpoint::counters::Counters;
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
        Counters::reset();
        let ckpt = run::<Ckpt, $d, $o>(&inputs, $pre, true, &f_ckpt);
        assert_bitwise(&plain, &ckpt);
        let fallbacks = Counters::now().fallbacks;
        assert!(fallbacks.is_empty(), "fell back: {fallbacks:?}");
        if inputs.iter().any(|input| input.grad) {
            let recomputed = Counters::now().recomputes.get($op).copied().unwrap_or(0);
            assert!(
                recomputed >= 1,
                "`{}` was not recomputed: {:?}",
                $op,
                Counters::now().recomputes
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

/// Indices in `0..size`, as `shape`, drawn with replacement.
fn random_indices(shape: impl Into<burn::tensor::Shape>, size: usize, seed: u64) -> TensorData {
    let shape = shape.into();
    let indices: Vec<i64> = data(shape.clone(), seed)
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|v| (((v + 1.0) / 2.0 * size as f32) as i64).min(size as i64 - 1))
        .collect();
    TensorData::new(indices, shape)
}

/// `0..n` shuffled (a Fisher-Yates shuffle driven by `data`).
fn permutation(n: usize, seed: u64) -> Vec<usize> {
    let draws = data([n.max(1)], seed).to_vec::<f32>().unwrap();
    let mut items: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = (((draws[i] + 1.0) / 2.0 * (i + 1) as f32) as usize).min(i);
        items.swap(i, j);
    }
    items
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

proptest! {
    #![proptest_config(config())]

    #[test]
    fn cross(m in 1usize..4, dim in 0usize..2, ga: bool, gb: bool, pre: bool, seed: u64) {
        let shape = if dim == 0 { [3, m] } else { [m, 3] };
        let inputs = vec![
            Input::new(data(shape, seed), ga),
            Input::new(data(shape, seed + 1), gb),
        ];
        compare!(inputs, pre, "cross", 2 => 2, |t| t[0].clone().cross(t[1].clone(), dim));
    }

    #[test]
    fn slice_assign(m in 1usize..5, n in 1usize..5, start in 0usize..4, len in 1usize..4,
                    gt: bool, gv: bool, pre: bool, seed: u64) {
        // An untracked `tensor` is the `pad` pattern: a tracked value written into a constant.
        prop_assume!(start + len <= m);
        let inputs = vec![
            Input::new(data([m, n], seed), gt),
            Input::new(data([len, n], seed + 1), gv),
        ];
        compare!(inputs, pre, "slice_assign", 2 => 2,
            |t| t[0].clone().slice_assign([start..start + len, 0..n], t[1].clone()));
    }

    #[test]
    fn scatter_add(m in 1usize..5, n in 1usize..5, p in 1usize..5, dim in 0usize..2,
                   gt: bool, gv: bool, pre: bool, seed: u64) {
        // Indices drawn with replacement: several values may land on one position.
        let (shape, size) = if dim == 0 { ([p, n], m) } else { ([m, p], n) };
        let indices = random_indices(shape, size, seed + 3);
        let inputs = vec![
            Input::new(data([m, n], seed), gt),
            Input::new(data(shape, seed + 1), gv),
        ];
        compare!(inputs, pre, "scatter_add", 2 => 2, |t| {
            let indices = Tensor::<_, 2, Int>::from_data(indices.clone(), &t[0].device());
            t[0].clone().scatter(dim, indices, t[1].clone(), IndexingUpdateOp::Add)
        });
    }

    #[test]
    fn scatter_nd(a in 1usize..5, b in 1usize..4, c in 1usize..3, k in 1usize..3, p in 1usize..5,
                  reduction in 0u8..6, gd: bool, gv: bool, pre: bool, seed: u64) {
        // Unique indices (the other reductions require them), except for a duplicating `Add`.
        let (reduction, unique) = match reduction {
            0 => (IndexingUpdateOp::Add, true),
            1 => (IndexingUpdateOp::Add, false),
            2 => (IndexingUpdateOp::Assign, true),
            3 => (IndexingUpdateOp::Mul, true),
            4 => (IndexingUpdateOp::Min, true),
            _ => (IndexingUpdateOp::Max, true),
        };
        let positions = if k == 1 { a } else { a * b };
        let p = if unique { p.min(positions) } else { p };
        let flat: Vec<usize> = if unique {
            permutation(positions, seed + 3).into_iter().take(p).collect()
        } else {
            let drawn = random_indices([p], positions, seed + 3);
            drawn.to_vec::<i64>().unwrap().into_iter().map(|i| i as usize).collect()
        };
        let indices: Vec<i64> = flat
            .iter()
            .flat_map(|&i| if k == 1 { vec![i as i64] } else { vec![(i / b) as i64, (i % b) as i64] })
            .collect();
        let indices = TensorData::new(indices, [p, k]);
        // `values` is `[p, b, c]` for one indexed dimension, `[p, c]` (passed as `[1, p, c]`) for
        // two.
        let values = if k == 1 { [p, b, c] } else { [1, p, c] };
        let inputs = vec![
            Input::new(data([a, b, c], seed), gd),
            Input::new(data(values, seed + 1), gv),
        ];
        compare!(inputs, pre, "scatter_nd", 3 => 3, |t| {
            let indices = Tensor::<_, 2, Int>::from_data(indices.clone(), &t[0].device());
            if k == 1 {
                t[0].clone().scatter_nd(indices, t[1].clone(), reduction)
            } else {
                t[0].clone().scatter_nd(indices, t[1].clone().reshape([p, c]), reduction)
            }
        });
    }

    #[test]
    fn gather_nd(a in 1usize..5, b in 1usize..4, c in 1usize..3, k in 1usize..3, p in 1usize..5,
                 pre: bool, seed: u64) {
        let first = random_indices([p, 1], a, seed + 3).to_vec::<i64>().unwrap();
        let second = random_indices([p, 1], b, seed + 4).to_vec::<i64>().unwrap();
        let indices: Vec<i64> = (0..p)
            .flat_map(|i| if k == 1 { vec![first[i]] } else { vec![first[i], second[i]] })
            .collect();
        let indices = TensorData::new(indices, [p, k]);
        let inputs = vec![Input::new(data([a, b, c], seed), true)];
        if k == 1 {
            compare!(inputs, pre, "gather_nd", 3 => 3, |t| {
                let indices = Tensor::<_, 2, Int>::from_data(indices.clone(), &t[0].device());
                t[0].clone().gather_nd::<2, 3>(indices)
            });
        } else {
            compare!(inputs, pre, "gather_nd", 3 => 2, |t| {
                let indices = Tensor::<_, 2, Int>::from_data(indices.clone(), &t[0].device());
                t[0].clone().gather_nd::<2, 2>(indices)
            });
        }
    }

    #[test]
    fn cumulative(m in 1usize..5, n in 1usize..5, dim in 0usize..2, which in 0u8..4,
                  pre: bool, seed: u64) {
        let inputs = vec![Input::new(data([m, n], seed), true)];
        match which {
            0 => compare!(inputs, pre, "cumsum", 2 => 2, |t| t[0].clone().cumsum(dim)),
            1 => compare!(inputs, pre, "cumprod", 2 => 2, |t| t[0].clone().cumprod(dim)),
            2 => compare!(inputs, pre, "cummin", 2 => 2, |t| t[0].clone().cummin(dim)),
            _ => compare!(inputs, pre, "cummax", 2 => 2, |t| t[0].clone().cummax(dim)),
        }
    }

    #[test]
    fn sort(m in 1usize..5, n in 1usize..5, dim in 0usize..2, which in 0u8..4,
            pre: bool, seed: u64) {
        let inputs = vec![Input::new(data([m, n], seed), true)];
        match which {
            0 => compare!(inputs, pre, "sort", 2 => 2, |t| t[0].clone().sort(dim)),
            1 => compare!(inputs, pre, "sort", 2 => 2, |t| t[0].clone().sort_descending(dim)),
            2 => compare!(inputs, pre, "sort", 2 => 2, |t| t[0].clone().sort_with_indices(dim).0),
            _ => compare!(inputs, pre, "sort", 2 => 2,
                |t| t[0].clone().sort_descending_with_indices(dim).0),
        }
    }

    #[test]
    fn cast(m in 1usize..5, n in 1usize..5, pre: bool, seed: u64) {
        let inputs = vec![Input::new(data([m, n], seed), true)];
        compare!(inputs, pre, "cast", 2 => 2, |t| {
            let wide = t[0].clone().cast(FloatDType::F64);
            (wide.clone() * wide).cast(FloatDType::F32)
        });
    }

    #[test]
    fn unfold(m in 1usize..6, n in 1usize..6, dim in 0usize..2, size in 1usize..4,
              step in 1usize..3, pre: bool, seed: u64) {
        prop_assume!(size <= if dim == 0 { m } else { n });
        let inputs = vec![Input::new(data([m, n], seed), true)];
        compare!(inputs, pre, "unfold", 2 => 3, |t| t[0].clone().unfold::<3, _>(dim, size, step));
    }

    #[test]
    fn embedding_op(v in 1usize..6, d in 1usize..4, b in 1usize..3, s in 1usize..4,
                    pre: bool, seed: u64) {
        let indices = random_indices([b, s], v, seed + 3);
        let inputs = vec![Input::new(data([v, d], seed), true)];
        compare!(inputs, pre, "embedding", 2 => 3, |t| {
            let indices = Tensor::<_, 2, Int>::from_data(indices.clone(), &t[0].device());
            embedding(t[0].clone(), indices)
        });
    }

    #[test]
    fn conv3d_op(b in 1usize..3, c in 1usize..3, co in 1usize..3, h in 2usize..5, k in 1usize..3,
                 stride in 1usize..3, padding in 0usize..2, bias: bool,
                 gx: bool, gw: bool, gb: bool, pre: bool, seed: u64) {
        let mut inputs = vec![
            Input::new(data([b, c, h, h + 1, h], seed), gx),
            Input::new(data([co, c, k, k, k], seed + 1), gw),
        ];
        if bias {
            inputs.push(Input::new(data([1, 1, 1, 1, co], seed + 2), gb));
        }
        let options = ConvOptions::new([stride; 3], [padding; 3], [1; 3], 1);
        compare!(inputs, pre, "conv3d", 5 => 5, |t| {
            let bias = t.get(2).map(|b| b.clone().reshape([co]));
            conv3d(t[0].clone(), t[1].clone(), bias, options.clone())
        });
    }

    #[test]
    fn conv_transpose1d_op(b in 1usize..3, c in 1usize..4, co in 1usize..4, l in 2usize..6,
                           k in 1usize..4, stride in 1usize..3, bias: bool,
                           gx: bool, gw: bool, gb: bool, pre: bool, seed: u64) {
        let mut inputs = vec![
            Input::new(data([b, c, l], seed), gx),
            Input::new(data([c, co, k], seed + 1), gw),
        ];
        if bias {
            inputs.push(Input::new(data([1, 1, co], seed + 2), gb));
        }
        let options = ConvTransposeOptions::new([stride], [0], [0], [1], 1);
        compare!(inputs, pre, "conv_transpose1d", 3 => 3, |t| {
            let bias = t.get(2).map(|b| b.clone().reshape([co]));
            conv_transpose1d(t[0].clone(), t[1].clone(), bias, options.clone())
        });
    }

    #[test]
    fn conv_transpose3d_op(b in 1usize..3, c in 1usize..3, co in 1usize..3, h in 1usize..4,
                           k in 1usize..3, stride in 1usize..3, bias: bool,
                           gx: bool, gw: bool, gb: bool, pre: bool, seed: u64) {
        let mut inputs = vec![
            Input::new(data([b, c, h, h + 1, h], seed), gx),
            Input::new(data([c, co, k, k, k], seed + 1), gw),
        ];
        if bias {
            inputs.push(Input::new(data([1, 1, 1, 1, co], seed + 2), gb));
        }
        let options = ConvTransposeOptions::new([stride; 3], [0; 3], [0; 3], [1; 3], 1);
        compare!(inputs, pre, "conv_transpose3d", 5 => 5, |t| {
            let bias = t.get(2).map(|b| b.clone().reshape([co]));
            conv_transpose3d(t[0].clone(), t[1].clone(), bias, options.clone())
        });
    }

    #[test]
    fn deform_conv2d_op(b in 1usize..3, c in 1usize..3, co in 1usize..3, h in 2usize..5,
                        k in 1usize..3, mask: bool, bias: bool, grads in any::<u8>(),
                        pre: bool, seed: u64) {
        prop_assume!(k <= h);
        let (oh, ow) = (h - k + 1, h + 1 - k + 1);
        let mut inputs = vec![
            Input::new(data([b, c, h, h + 1], seed), grads & 1 != 0),
            Input::new(data([b, 2 * k * k, oh, ow], seed + 1), grads & 2 != 0),
            Input::new(data([co, c, k, k], seed + 2), grads & 4 != 0),
        ];
        if mask {
            inputs.push(Input::new(data([b, k * k, oh, ow], seed + 3), grads & 8 != 0));
        }
        if bias {
            inputs.push(Input::new(data([1, 1, 1, co], seed + 4), grads & 16 != 0));
        }
        let options = DeformConvOptions::new([1, 1], [0, 0], [1, 1], 1, 1);
        compare!(inputs, pre, "deform_conv2d", 4 => 4, |t| {
            let mask_t = mask.then(|| t[3].clone());
            let bias_t = bias.then(|| t[if mask { 4 } else { 3 }].clone().reshape([co]));
            deform_conv2d(t[0].clone(), t[1].clone(), t[2].clone(), mask_t, bias_t, options.clone())
        });
    }

    #[test]
    fn pool1d(b in 1usize..3, c in 1usize..3, l in 2usize..8, k in 1usize..3, stride in 1usize..3,
              which in 0u8..4, pre: bool, seed: u64) {
        let inputs = vec![Input::new(data([b, c, l], seed), true)];
        match which {
            0 => compare!(inputs, pre, "avg_pool1d", 3 => 3,
                |t| avg_pool1d(t[0].clone(), k, stride, 0, true, false)),
            1 => compare!(inputs, pre, "max_pool1d", 3 => 3,
                |t| max_pool1d(t[0].clone(), k, stride, 0, 1, false)),
            2 => compare!(inputs, pre, "max_pool1d", 3 => 3,
                |t| max_pool1d_with_indices(t[0].clone(), k, stride, 0, 1, false).0),
            _ => compare!(inputs, pre, "adaptive_avg_pool1d", 3 => 3,
                |t| adaptive_avg_pool1d(t[0].clone(), (l / 2).max(1))),
        }
    }

    #[test]
    fn interpolate_op(b in 1usize..3, c in 1usize..3, h in 1usize..5, w in 1usize..5,
                      oh in 1usize..7, ow in 1usize..7, pre: bool, seed: u64) {
        // Nearest: the only mode whose backward NdArray implements.
        let inputs = vec![Input::new(data([b, c, h, w], seed), true)];
        let options = InterpolateOptions::new(InterpolateMode::Nearest);
        compare!(inputs, pre, "interpolate", 4 => 4,
            |t| interpolate(t[0].clone(), [oh, ow], options.clone()));
    }
}

/// `ctc_loss` on NdArray (no native CTC backward) is decomposed into tensor ops, as Burn does: in
/// a region each is recomputed (the loss's recursion over time steps shares paths: linear with
/// this crate's walk), nothing falls back, gradients are bitwise equal.
#[test]
fn ctc_loss_recomputed() {
    let (t_len, n, s, c) = (5, 2, 2, 4);
    let targets = TensorData::new(vec![1i64, 2, 3, 1], [n, s]);
    let input_lengths = TensorData::new(vec![5i64, 4], [n]);
    let target_lengths = TensorData::new(vec![2i64, 1], [n]);
    let inputs = vec![Input::new(data([t_len, n, c], 7), true)];
    macro_rules! body {
        ($b:ty) => {
            |t: Vec<Tensor<$b, 3>>| -> Tensor<$b, 1> {
                let device = t[0].device();
                ctc_loss(
                    burn::tensor::activation::log_softmax(t[0].clone(), 2),
                    Tensor::<$b, 2, Int>::from_data(targets.clone(), &device),
                    Tensor::<$b, 1, Int>::from_data(input_lengths.clone(), &device),
                    Tensor::<$b, 1, Int>::from_data(target_lengths.clone(), &device),
                    0,
                )
            }
        };
    }
    for pre in [false, true] {
        let plain = run::<Plain, 3, 1>(&inputs, pre, false, &body!(Plain));
        Counters::reset();
        let ckpt = run::<Ckpt, 3, 1>(&inputs, pre, true, &body!(Ckpt));
        assert_bitwise(&plain, &ckpt);
        assert!(
            Counters::now().fallbacks.is_empty(),
            "{:?}",
            Counters::now().fallbacks
        );
        let recomputed: u64 = Counters::now().recomputes.values().sum();
        assert!(recomputed > 0);
        assert_eq!(Counters::now().walk_steps, recomputed);
    }
}
