//! A stack of layers cut into regions: [`checkpoint_sequential`].

use std::ops::Range;

use burn::module::Module;
use burn::nn;
use burn::tensor::Tensor;

use crate::policy::Policy;
use crate::region::Region;
use crate::state;
use crate::tensors::{NoTensors, RegionTensors};
use burn_checkpoint_core::Segments;

/// A layer of a stack: `T` in, `T` out.
///
/// Burn's `Linear`, `LayerNorm`, `BatchNorm`, `Conv1d`, `Conv2d`, `Relu`, `Gelu` and `Dropout`
/// are layers as they are; a module of your own implements it by calling its forward (see
/// [`checkpoint_sequential`]).
pub trait Layer<T> {
    /// The layer's forward pass.
    fn forward(&self, input: T) -> T;
}

/// Burn's modules whose forward keeps the tensor's type are layers as they are.
macro_rules! burn_layers {
    ($($module:ty),*) => {$(
        impl<const D: usize> Layer<Tensor<D>> for $module {
            fn forward(&self, input: Tensor<D>) -> Tensor<D> {
                <$module>::forward(self, input)
            }
        }
    )*};
}

burn_layers!(
    nn::Linear,
    nn::LayerNorm,
    nn::BatchNorm,
    nn::Relu,
    nn::Gelu,
    nn::Dropout
);

impl Layer<Tensor<3>> for nn::conv::Conv1d {
    fn forward(&self, input: Tensor<3>) -> Tensor<3> {
        nn::conv::Conv1d::forward(self, input)
    }
}

impl Layer<Tensor<4>> for nn::conv::Conv2d {
    fn forward(&self, input: Tensor<4>) -> Tensor<4> {
        nn::conv::Conv2d::forward(self, input)
    }
}

/// Runs `layers` one after the other on `input`, cut into `segments` contiguous segments of
/// (nearly) equal length; every segment but the last is recomputed in backward.
///
/// Only the segments' boundaries are held between forward and backward; backward recomputes one
/// segment at a time from them. The last segment is not recomputed: backward needs its
/// activations at once. The segments before it are one checkpoint region, one node of Burn's
/// graph, each segment a step of its [`scan`](Region::scan) (the boundaries its carries, each
/// segment seeded as a region of its own would be); under
/// [`Policy::SaveComputeBound`], or kept by name by a region
/// around it, each segment is a region of its own. `torch.utils.checkpoint.checkpoint_sequential`,
/// for Burn 0.22.
///
/// ```
/// use burn::module::Module;
/// use burn::nn::{Linear, LinearConfig};
/// use burn::tensor::{Device, Tensor};
/// use burn_checkpoint_22::{Layer, Segments, checkpoint_sequential};
///
/// #[derive(Module, Debug)]
/// struct Block {
///     linear: Linear,
/// }
///
/// impl Layer<Tensor<2>> for Block {
///     fn forward(&self, x: Tensor<2>) -> Tensor<2> {
///         burn::tensor::activation::relu(self.linear.forward(x))
///     }
/// }
///
/// let device = Device::flex().autodiff();
/// let blocks: Vec<Block> = (0..16)
///     .map(|_| Block { linear: LinearConfig::new(32, 32).init(&device) })
///     .collect();
/// let x = Tensor::<2>::ones([8, 32], &device);
///
/// // 4 segments of 4 blocks; the first 3 are recomputed during backward.
/// let y = checkpoint_sequential(&blocks, Segments::Sqrt, x);
/// let grads = y.sum().backward();
/// assert!(blocks[0].linear.weight.val().grad(&grads).is_some());
/// ```
#[track_caller]
pub fn checkpoint_sequential<T, L>(layers: &[L], segments: Segments, input: T) -> T
where
    T: RegionTensors + 'static,
    L: Layer<T> + Module + Sync + 'static,
{
    Region::new().sequential(layers, segments, input)
}

impl Region {
    /// Runs `layers` one after the other on `input`, cut into `segments` segments, every one but
    /// the last recomputed as one instance of this region (its [`schedule`](Region::schedule)
    /// keeps their boundaries): see [`checkpoint_sequential`], which is
    /// `Region::new().sequential(..)`.
    ///
    /// ```
    /// use burn::nn::{Linear, LinearConfig};
    /// use burn::tensor::{Device, Tensor};
    /// use burn_checkpoint_22::{Region, Segments};
    ///
    /// let device = Device::flex().autodiff();
    /// let layers: Vec<Linear> = (0..9).map(|_| LinearConfig::new(8, 8).init(&device)).collect();
    /// let x = Tensor::<2>::ones([4, 8], &device);
    ///
    /// // Segments 0 and 1 as region `stack#0`, the boundary between them in host memory until
    /// // backward.
    /// let y = Region::named("stack")
    ///     .offloaded()
    ///     .sequential(&layers, Segments::Sqrt, x);
    /// # let _ = y.sum().backward();
    /// ```
    pub fn sequential<T, L>(&self, layers: &[L], segments: Segments, input: T) -> T
    where
        T: RegionTensors + 'static,
        L: Layer<T> + Module + Sync + 'static,
    {
        let ranges: Vec<Range<usize>> = segments.ranges(layers.len()).collect();
        let Some((last, regioned)) = ranges.split_last() else {
            return input;
        };
        let settings = self.settings();
        let x = if regioned.is_empty() {
            input
        } else if settings.policy == Policy::SaveComputeBound || state::kept_by_name(&settings.name)
        {
            // What a scan does not do yet (keep its compute-bound outputs, be kept by name): a
            // region per segment.
            regioned.iter().fold(input, |x, range| {
                let segment = layers[range.clone()].to_vec();
                self.run(&segment, x, |segment: &Vec<L>, x| run(segment, x))
            })
        } else {
            // One node for all the segments: each a step of a scan, its input the carry.
            let cell: Vec<L> = layers[..last.start].to_vec();
            let segments = regioned.to_vec();
            let steps = segments.len();
            let step = move |cell: &Vec<L>, x, _: NoTensors, t: usize| {
                (NoTensors(1), run(&cell[segments[t].clone()], x))
            };
            self.scan_indexed(&cell, input, NoTensors(steps), 0, steps, step)
                .1
        };
        run(&layers[last.clone()], x)
    }
}

fn run<T, L: Layer<T>>(layers: &[L], input: T) -> T {
    layers.iter().fold(input, |x, layer| layer.forward(x))
}
