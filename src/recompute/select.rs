//! Indexing and selection: gather, mask_where, mask_fill and cat.

use core::fmt;

use burn_backend::{Backend, Scalar, Shape, Slice, TensorMetadata};

use super::{RegionOp, build, unbroadcast};
use crate::types::{BoolPrimitive, IntPrimitive, Primitive, Tracked};

/// `gather(dim, tensor, indices)`: the indices are not computed by the region's float ops, so the
/// op holds them (a handle), as Burn does.
#[derive(Clone)]
struct Gather<I: Backend> {
    dim: usize,
    indices: IntPrimitive<I>,
    shape: Shape,
}

// By hand, as every op holding a tensor: a derive would print the tensor's data.
impl<I: Backend> fmt::Debug for Gather<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gather(dim {}, {:?})", self.dim, self.shape)
    }
}

impl<I: Backend> RegionOp<I, 1> for Gather<I> {
    fn name(&self) -> &'static str {
        "gather"
    }

    fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
        I::float_gather(self.dim, x, self.indices.clone())
    }

    fn saved(&self, _: [bool; 1]) -> [bool; 1] {
        [false]
    }

    fn backward(
        self,
        _: [Option<Primitive<I>>; 1],
        grad: Primitive<I>,
        _: [bool; 1],
    ) -> [Option<Primitive<I>>; 1] {
        let zeros = I::float_zeros(self.shape, &I::float_device(&grad), grad.dtype().into());
        [Some(I::float_scatter_add(
            self.dim,
            zeros,
            self.indices,
            grad,
        ))]
    }
}

/// `gather` in a region.
pub(crate) fn gather<I: Backend>(
    dim: usize,
    tensor: Tracked<I>,
    indices: IntPrimitive<I>,
) -> Tracked<I> {
    let shape = tensor.primitive.shape();
    build::<I, _, _>(
        Gather::<I> {
            dim,
            indices,
            shape,
        },
        [tensor],
    )
}

/// `mask_where(tensor, mask, value)`: `value` where `mask`, else `tensor`.
#[derive(Clone)]
struct MaskWhere<I: Backend> {
    mask: BoolPrimitive<I>,
    tensor: Shape,
    value: Shape,
}

impl<I: Backend> fmt::Debug for MaskWhere<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MaskWhere({:?}, {:?})", self.tensor, self.value)
    }
}

impl<I: Backend> RegionOp<I, 2> for MaskWhere<I> {
    fn name(&self) -> &'static str {
        "mask_where"
    }

    fn forward(&self, [tensor, value]: [Primitive<I>; 2]) -> Primitive<I> {
        I::float_mask_where(tensor, self.mask.clone(), value)
    }

    fn saved(&self, _: [bool; 2]) -> [bool; 2] {
        [false, false]
    }

    fn backward(
        self,
        _: [Option<Primitive<I>>; 2],
        grad: Primitive<I>,
        [tensor, value]: [bool; 2],
    ) -> [Option<Primitive<I>>; 2] {
        let device = I::float_device(&grad);
        let dtype = grad.dtype().into();
        let for_value = value.then(|| grad.clone());
        let tensor_grad = tensor.then(|| {
            let zeros = I::float_zeros(self.tensor.clone(), &device, dtype);
            let grad = I::float_mask_where(grad, self.mask.clone(), zeros);
            unbroadcast::<I>(grad, &self.tensor)
        });
        let value_grad = for_value.map(|grad| {
            let zeros = I::float_zeros(self.value.clone(), &device, dtype);
            let grad = I::float_mask_where(zeros, self.mask, grad);
            unbroadcast::<I>(grad, &self.value)
        });
        [tensor_grad, value_grad]
    }
}

/// `mask_where` in a region.
pub(crate) fn mask_where<I: Backend>(
    tensor: Tracked<I>,
    mask: BoolPrimitive<I>,
    value: Tracked<I>,
) -> Tracked<I> {
    let op = MaskWhere::<I> {
        mask,
        tensor: tensor.primitive.shape(),
        value: value.primitive.shape(),
    };
    build::<I, _, _>(op, [tensor, value])
}

/// `mask_fill(tensor, mask, value)`: a scalar where `mask`.
#[derive(Clone)]
struct MaskFill<I: Backend> {
    mask: BoolPrimitive<I>,
    value: Scalar,
}

impl<I: Backend> fmt::Debug for MaskFill<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MaskFill({:?})", self.value)
    }
}

impl<I: Backend> RegionOp<I, 1> for MaskFill<I> {
    fn name(&self) -> &'static str {
        "mask_fill"
    }

    fn forward(&self, [x]: [Primitive<I>; 1]) -> Primitive<I> {
        I::float_mask_fill(x, self.mask.clone(), self.value)
    }

    fn saved(&self, _: [bool; 1]) -> [bool; 1] {
        [false]
    }

    fn backward(
        self,
        _: [Option<Primitive<I>>; 1],
        grad: Primitive<I>,
        _: [bool; 1],
    ) -> [Option<Primitive<I>>; 1] {
        [Some(I::float_mask_fill(grad, self.mask, 0f32.into()))]
    }
}

/// `mask_fill` in a region.
pub(crate) fn mask_fill<I: Backend>(
    tensor: Tracked<I>,
    mask: BoolPrimitive<I>,
    value: Scalar,
) -> Tracked<I> {
    build::<I, _, _>(MaskFill::<I> { mask, value }, [tensor])
}

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
