//! `checkpoint_sequential`: a stack of layers cut into segments, each segment a region.

use burn::nn;
use burn::tensor::Tensor;
use burn::tensor::backend::Backend;

use crate::region::Region;
use burn_checkpoint_core::Segments;

/// A layer of a stack run by [`checkpoint_sequential`]: takes the previous layer's output and
/// returns its own, of the same type.
///
/// Burn's `Linear`, `LayerNorm`, `BatchNorm`, `Conv1d`, `Conv2d`, `Relu`, `Gelu` and `Dropout`
/// are layers as they are. Implement it for a module of your own by calling its forward:
///
/// ```
/// use burn::nn::{Linear, LinearConfig};
/// use burn::prelude::*;
/// use burn_checkpoint::Layer;
///
/// #[derive(Module, Debug)]
/// struct Block<B: Backend> {
///     linear: Linear<B>,
/// }
///
/// impl<B: Backend> Layer<Tensor<B, 2>> for Block<B> {
///     fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
///         burn::tensor::activation::relu(self.linear.forward(x))
///     }
/// }
/// ```
pub trait Layer<T> {
    /// The layer's output for `input`.
    fn forward(&self, input: T) -> T;
}

impl<T, L: Layer<T> + ?Sized> Layer<T> for &L {
    fn forward(&self, input: T) -> T {
        (**self).forward(input)
    }
}

impl<T, L: Layer<T> + ?Sized> Layer<T> for Box<L> {
    fn forward(&self, input: T) -> T {
        (**self).forward(input)
    }
}

/// Burn's modules whose forward keeps the tensor's type are layers as they are.
macro_rules! burn_layers {
    ($($module:ident),* $(; $($stateless:ident),*)?) => {
        $(
            impl<B: Backend, const D: usize> Layer<Tensor<B, D>> for nn::$module<B> {
                fn forward(&self, input: Tensor<B, D>) -> Tensor<B, D> {
                    nn::$module::forward(self, input)
                }
            }
        )*
        $($(
            impl<B: Backend, const D: usize> Layer<Tensor<B, D>> for nn::$stateless {
                fn forward(&self, input: Tensor<B, D>) -> Tensor<B, D> {
                    nn::$stateless::forward(self, input)
                }
            }
        )*)?
    };
}

burn_layers!(Linear, LayerNorm, BatchNorm; Relu, Gelu, Dropout);

impl<B: Backend> Layer<Tensor<B, 3>> for nn::conv::Conv1d<B> {
    fn forward(&self, input: Tensor<B, 3>) -> Tensor<B, 3> {
        nn::conv::Conv1d::forward(self, input)
    }
}

impl<B: Backend> Layer<Tensor<B, 4>> for nn::conv::Conv2d<B> {
    fn forward(&self, input: Tensor<B, 4>) -> Tensor<B, 4> {
        nn::conv::Conv2d::forward(self, input)
    }
}

/// Runs `layers` one after the other on `input`, cut into `segments` contiguous segments of
/// (nearly) equal length; every segment but the last is a checkpoint region.
///
/// Only the segments' boundaries are held between forward and backward; backward recomputes one
/// segment at a time from them. The last segment is not a region: backward needs its activations
/// at once. `torch.utils.checkpoint.checkpoint_sequential`, for Burn.
///
/// ```
/// use burn::backend::{Autodiff, NdArray};
/// use burn::nn::{Linear, LinearConfig};
/// use burn::prelude::*;
/// use burn_checkpoint::{Checkpointed, Layer, Segments, checkpoint_sequential, Region};
///
/// #[derive(Module, Debug)]
/// struct Block<B: Backend> {
///     linear: Linear<B>,
/// }
///
/// impl<B: Backend> Layer<Tensor<B, 2>> for Block<B> {
///     fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
///         burn::tensor::activation::relu(self.linear.forward(x))
///     }
/// }
///
/// type B = Checkpointed<Autodiff<NdArray>>;
/// let device = Default::default();
/// let blocks: Vec<Block<B>> = (0..16)
///     .map(|_| Block { linear: LinearConfig::new(32, 32).init(&device) })
///     .collect();
/// let x = Tensor::<B, 2>::ones([8, 32], &device);
///
/// // 4 segments of 4 blocks; the first 3 are recomputed during backward.
/// let y = checkpoint_sequential(&blocks, Segments::Sqrt, x);
/// let grads = y.sum().backward();
/// assert!(blocks[0].linear.weight.grad(&grads).is_some());
/// ```
#[track_caller]
pub fn checkpoint_sequential<T, L: Layer<T>>(layers: &[L], segments: Segments, input: T) -> T {
    Region::new().sequential(layers, segments, input)
}

impl Region {
    /// Runs `layers` one after the other on `input`, cut into `segments` segments, every one but
    /// the last an instance of this region: see [`checkpoint_sequential`], which is
    /// `Region::new().sequential(..)`.
    ///
    /// ```
    /// use burn::backend::{Autodiff, NdArray};
    /// use burn::nn::{Linear, LinearConfig};
    /// use burn::prelude::*;
    /// use burn_checkpoint::{Checkpointed, Policy, Region, Segments};
    ///
    /// type B = Checkpointed<Autodiff<NdArray>>;
    /// let device = Default::default();
    /// let layers: Vec<Linear<B>> =
    ///     (0..9).map(|_| LinearConfig::new(8, 8).init(&device)).collect();
    /// let x = Tensor::<B, 2>::ones([4, 8], &device);
    ///
    /// // Segments `stack#0` and `stack#1` keep their 6 matmul outputs.
    /// let y = Region::named("stack")
    ///     .policy(Policy::SaveComputeBound)
    ///     .sequential(&layers, Segments::Sqrt, x);
    /// # let _ = y.sum().backward();
    /// ```
    pub fn sequential<T, L: Layer<T>>(&self, layers: &[L], segments: Segments, input: T) -> T {
        let count = segments.count(layers.len());
        let mut x = input;
        for (segment, range) in segments.ranges(layers.len()).enumerate() {
            let run = &layers[range];
            let forward = |x| run.iter().fold(x, |x, layer| layer.forward(x));
            x = if segment + 1 < count {
                self.run(|| forward(x))
            } else {
                forward(x)
            };
        }
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the region depth each layer ran at.
    struct Probe;

    impl Layer<Vec<usize>> for Probe {
        fn forward(&self, mut depths: Vec<usize>) -> Vec<usize> {
            depths.push(Region::depth());
            depths
        }
    }

    fn depths(layers: usize, segments: Segments) -> Vec<usize> {
        let probes: Vec<Probe> = (0..layers).map(|_| Probe).collect();
        checkpoint_sequential(&probes, segments, Vec::new())
    }

    #[test]
    fn every_segment_but_the_last_is_a_region() {
        assert_eq!(
            depths(16, Segments::Sqrt),
            [[1; 12].as_slice(), &[0; 4]].concat()
        );
        assert_eq!(depths(5, Segments::Count(2)), [1, 1, 1, 0, 0]);
        assert_eq!(depths(3, Segments::Count(3)), [1, 1, 0]);
        assert_eq!(depths(3, Segments::Count(9)), [1, 1, 0]);
        assert_eq!(depths(4, Segments::Count(1)), [0, 0, 0, 0]);
        assert_eq!(depths(0, Segments::Sqrt), Vec::<usize>::new());
    }

    #[test]
    fn segments_are_as_even_as_possible() {
        // 10 layers, 3 segments: 4 + 3 + 3; the last (unregioned) one is 3 long.
        assert_eq!(depths(10, Segments::Sqrt), [1, 1, 1, 1, 1, 1, 1, 0, 0, 0]);
    }

    #[test]
    fn zero_segments_are_one() {
        assert_eq!(depths(4, Segments::Count(0)), depths(4, Segments::Count(1)));
    }
}
