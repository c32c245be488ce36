//! How a stack of layers is cut into segments (`checkpoint_sequential` in both Burn crates).

use std::ops::Range;

/// How many segments `checkpoint_sequential` cuts a stack into.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Segments {
    /// √n segments for n layers, rounded (Chen et al. 2016): stored boundaries and one
    /// segment's recomputed activations then cost about the same, and their sum is smallest.
    #[default]
    Sqrt,
    /// This many segments, clamped to the stack: at most one per layer, at least one (so
    /// `Count(0)` is one segment, as `Count(1)`).
    Count(usize),
}

impl Segments {
    /// The number of segments for `layers` layers: between 1 and `layers` (1 for an empty
    /// stack). `Sqrt` gives 4 for 16 layers; `Count(32)` gives 16 for 16 layers; `Count(0)` 1.
    pub fn count(self, layers: usize) -> usize {
        let wanted = match self {
            Segments::Sqrt => (layers as f64).sqrt().round() as usize,
            Segments::Count(count) => count,
        };
        wanted.clamp(1, layers.max(1))
    }

    /// The segments of a stack of `layers` layers, in order: [`count`](Self::count) contiguous
    /// ranges covering `0..layers`, the first `layers % count` one layer longer.
    pub fn ranges(self, layers: usize) -> impl Iterator<Item = Range<usize>> {
        let count = self.count(layers);
        let (base, extra) = (layers / count, layers % count);
        (0..count).scan(0, move |start, index| {
            let end = *start + base + usize::from(index < extra);
            let range = *start..end;
            *start = end;
            Some(range)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Segments;

    #[test]
    fn counts_are_clamped_to_the_stack() {
        assert_eq!(Segments::Sqrt.count(16), 4);
        assert_eq!(Segments::Count(32).count(16), 16);
        assert_eq!(Segments::Count(0).count(16), 1);
        assert_eq!(Segments::Sqrt.count(0), 1);
    }

    #[test]
    fn ranges_cover_the_stack_in_order_as_evenly_as_possible() {
        let ranges = |layers, segments: Segments| segments.ranges(layers).collect::<Vec<_>>();
        assert_eq!(ranges(10, Segments::Count(3)), vec![0..4, 4..7, 7..10]);
        assert_eq!(ranges(16, Segments::Sqrt), vec![0..4, 4..8, 8..12, 12..16]);
        assert_eq!(ranges(0, Segments::Sqrt), vec![0..0]);
    }
}
