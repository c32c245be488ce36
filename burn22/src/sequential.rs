//! A stack of layers cut into regions: [`checkpoint_sequential`].

use burn::module::Module;

use crate::checkpoint::checkpoint;
use crate::tensors::RegionTensors;

/// A layer of a stack: `T` in, `T` out.
pub trait Layer<T> {
    /// The layer's forward pass.
    fn forward(&self, input: T) -> T;
}

/// How many segments [`checkpoint_sequential`] cuts a stack into.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Segments {
    /// √n segments for n layers, rounded (Chen et al. 2016): stored boundaries and one
    /// segment's recomputed activations then cost about the same, and their sum is smallest.
    #[default]
    Sqrt,
    /// This many segments, clamped to the stack: at most one per layer, at least one.
    Count(usize),
}

impl Segments {
    /// The number of segments for `layers` layers: between 1 and `layers` (1 for an empty
    /// stack).
    ///
    /// ```
    /// use burn_checkpoint_22::Segments;
    ///
    /// assert_eq!(Segments::Sqrt.count(16), 4);
    /// assert_eq!(Segments::Count(32).count(16), 16);
    /// assert_eq!(Segments::Count(0).count(16), 1);
    /// ```
    pub fn count(self, layers: usize) -> usize {
        let wanted = match self {
            Segments::Sqrt => (layers as f64).sqrt().round() as usize,
            Segments::Count(count) => count,
        };
        wanted.clamp(1, layers.max(1))
    }
}

/// Runs `layers` one after the other on `input`, cut into `segments` contiguous segments of
/// (nearly) equal length; every segment but the last is a checkpoint region.
///
/// Only the segments' boundaries are held between forward and backward; backward recomputes one
/// segment at a time from them. The last segment is not a region: backward needs its activations
/// at once. `torch.utils.checkpoint.checkpoint_sequential`, for Burn 0.22.
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
pub fn checkpoint_sequential<T, L>(layers: &[L], segments: Segments, input: T) -> T
where
    T: RegionTensors + 'static,
    L: Layer<T> + Module + Sync + 'static,
{
    let count = segments.count(layers.len());
    let mut x = input;
    for (index, range) in segment_ranges(layers.len(), count).enumerate() {
        let segment = &layers[range];
        x = if index + 1 < count {
            checkpoint(&segment.to_vec(), x, |segment: &Vec<L>, x| run(segment, x))
        } else {
            run(segment, x)
        };
    }
    x
}

fn run<T, L: Layer<T>>(layers: &[L], input: T) -> T {
    layers.iter().fold(input, |x, layer| layer.forward(x))
}

/// `count` contiguous ranges covering `0..len`, the first `len % count` one longer.
fn segment_ranges(len: usize, count: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let (base, extra) = (len / count, len % count);
    (0..count).scan(0, move |start, index| {
        let end = *start + base + usize::from(index < extra);
        let range = *start..end;
        *start = end;
        Some(range)
    })
}

#[cfg(test)]
mod tests {
    use super::segment_ranges;

    #[test]
    fn segments_cover_the_stack_in_order() {
        let ranges: Vec<_> = segment_ranges(10, 3).collect();
        assert_eq!(ranges, vec![0..4, 4..7, 7..10]);
        let ranges: Vec<_> = segment_ranges(0, 1).collect();
        assert_eq!(ranges, vec![0..0]);
    }
}
