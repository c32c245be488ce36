//! [`OpKind::Concat`](crate::OpKind::Concat): `cat`.

use burn_backend::{Backend, Slice, TensorMetadata};

use crate::recompute::{RegionOp, build};
use crate::types::{Primitive, Tracked};

/// Concatenation along `dim` of `N` tensors whose sizes along `dim` are `sizes`.
#[derive(Debug, Clone)]
struct Cat {
    dim: usize,
    sizes: Vec<usize>,
}

impl<I: Backend, const N: usize> RegionOp<I, N> for Cat {
    fn name(&self) -> &'static str {
        "cat"
    }

    fn forward(&self, inputs: [Primitive<I>; N]) -> Primitive<I> {
        I::float_cat(inputs.into(), self.dim)
    }

    fn saved(&self, _: [bool; N]) -> [bool; N] {
        [false; N]
    }

    fn backward(
        self,
        _: [Option<Primitive<I>>; N],
        grad: Primitive<I>,
        needs_grad: [bool; N],
    ) -> [Option<Primitive<I>>; N] {
        let whole: Vec<Slice> = grad
            .shape()
            .iter()
            .map(|&size| Slice::new(0, Some(size as isize), 1))
            .collect();
        let mut start = 0;
        core::array::from_fn(|i| {
            let end = start + self.sizes[i];
            let mut slices = whole.clone();
            slices[self.dim] = Slice::new(start as isize, Some(end as isize), 1);
            start = end;
            needs_grad[i].then(|| I::float_slice(grad.clone(), &slices))
        })
    }
}

/// The most operands one cat node takes; more are concatenated in groups, then the groups.
const MAX_CAT_OPERANDS: usize = 16;

/// `cat` in a region. Burn's `Backward` has a compile-time operand count: dispatch on it.
pub(crate) fn cat<I: Backend>(tensors: Vec<Tracked<I>>, dim: usize) -> Tracked<I> {
    if tensors.len() > MAX_CAT_OPERANDS {
        // Concatenation is associative, and copies values: grouping changes no bit.
        let mut tensors = tensors.into_iter();
        let mut groups = Vec::new();
        loop {
            let group: Vec<_> = tensors.by_ref().take(MAX_CAT_OPERANDS).collect();
            if group.is_empty() {
                break;
            }
            groups.push(cat::<I>(group, dim));
        }
        return cat::<I>(groups, dim);
    }
    let op = Cat {
        dim,
        sizes: tensors.iter().map(|t| t.primitive.shape()[dim]).collect(),
    };
    macro_rules! dispatch {
        ($($n:literal)*) => {
            match tensors.len() {
                $($n => build::<I, Cat, $n>(op, into_array(tensors)),)*
                _ => unreachable!("at most {MAX_CAT_OPERANDS} operands"),
            }
        };
    }
    dispatch!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16)
}

fn into_array<T, const N: usize>(items: Vec<T>) -> [T; N] {
    match items.try_into() {
        Ok(array) => array,
        Err(_) => unreachable!("the length was matched"),
    }
}
