//! The usual CIFAR augmentation: a random crop of the image padded by 4 zero pixels on each
//! side, and a horizontal flip half of the time.
//!
//! The random choices for an item are a function of a seed and the item's index, not of a
//! generator shared between loader threads: the same epoch seed gives the same crops whatever
//! thread loads the item, and a resumed run sees the same crops as an uninterrupted one.

use crate::ImageItem;
use crate::images::Images;
use crate::seeds::{SplitMix, mix};

/// A dataset whose images are randomly cropped (with padding) and flipped.
#[derive(Debug, Clone)]
pub struct Augmented<D> {
    inner: D,
    shape: [usize; 3],
    pad: usize,
    seed: u64,
}

impl<D> Augmented<D> {
    /// `inner`'s images of `shape`, cropped after padding by `pad` and flipped, drawn from `seed`.
    pub fn new(inner: D, shape: [usize; 3], pad: usize, seed: u64) -> Self {
        Augmented {
            inner,
            shape,
            pad,
            seed,
        }
    }
}

/// Crops `pixels` (of `shape`) at offset (`dy`, `dx`) in the image padded by `pad` zeros, then
/// mirrors it left-right when `flip`.
pub fn crop_and_flip(
    pixels: &[u8],
    [channels, height, width]: [usize; 3],
    pad: usize,
    (dy, dx): (usize, usize),
    flip: bool,
) -> Vec<u8> {
    let mut out = vec![0u8; pixels.len()];
    for c in 0..channels {
        for y in 0..height {
            // Row `y` of the crop is row `y + dy - pad` of the image (outside it: padding).
            let Some(sy) = (y + dy).checked_sub(pad).filter(|&sy| sy < height) else {
                continue;
            };
            for x in 0..width {
                let Some(sx) = (x + dx).checked_sub(pad).filter(|&sx| sx < width) else {
                    continue;
                };
                let ox = if flip { width - 1 - x } else { x };
                out[(c * height + y) * width + ox] = pixels[(c * height + sy) * width + sx];
            }
        }
    }
    out
}

impl<D: Images> Images for Augmented<D> {
    fn get(&self, index: usize) -> Option<ImageItem> {
        let item = self.inner.get(index)?;
        let mut rng = SplitMix::new(mix(self.seed, index as u64));
        let range = 2 * self.pad as u64 + 1;
        let offset = (rng.below(range) as usize, rng.below(range) as usize);
        let flip = rng.below(2) == 1;
        Some(ImageItem {
            pixels: crop_and_flip(&item.pixels, self.shape, self.pad, offset, flip),
            label: item.label,
        })
    }

    fn len(&self) -> usize {
        self.inner.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crop_shifts_with_zero_padding_and_flip_mirrors() {
        // One channel, 2×3: rows [1 2 3], [4 5 6].
        let image = [1, 2, 3, 4, 5, 6];
        let shape = [1, 2, 3];
        assert_eq!(crop_and_flip(&image, shape, 1, (1, 1), false), image);
        // Offset (0, 0) in the padded image: the crop starts one pixel up and left.
        assert_eq!(
            crop_and_flip(&image, shape, 1, (0, 0), false),
            [0, 0, 0, 0, 1, 2]
        );
        assert_eq!(
            crop_and_flip(&image, shape, 1, (1, 2), false),
            [2, 3, 0, 5, 6, 0]
        );
        assert_eq!(
            crop_and_flip(&image, shape, 1, (1, 1), true),
            [3, 2, 1, 6, 5, 4]
        );
    }
}
