//! A batch's pixels normalised to `f32` per channel, in host memory: what each trainer turns
//! into its Burn's tensors.

use crate::{ImageItem, Normalisation};

/// Images normalised and stacked, and their labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Normalised {
    /// `[batch, channels, height, width]`.
    pub shape: [usize; 4],
    /// The normalised pixels, row-major in `shape`.
    pub images: Vec<f32>,
    /// The class of each image.
    pub labels: Vec<i64>,
}

/// Normalises and stacks images of one shape: a pixel `p` becomes `(p / 255 − mean) / std` of
/// its channel.
///
/// ```
/// use image_data::{ImageItem, Normalisation, Normaliser};
///
/// let normalisation = Normalisation { mean: vec![0.5, 0.0], std: vec![0.5, 1.0] };
/// let item = ImageItem { pixels: vec![0, 255, 0, 255], label: 3 };
/// let batch = Normaliser::new([2, 1, 2], &normalisation).batch(&[item]);
/// assert_eq!(batch.shape, [1, 2, 1, 2]);
/// assert_eq!(batch.labels, vec![3]);
/// ```
#[derive(Debug, Clone)]
pub struct Normaliser {
    shape: [usize; 3],
    scale: Vec<f32>,
    shift: Vec<f32>,
}

impl Normaliser {
    /// A normaliser for images of `shape` (channels, height, width).
    pub fn new(shape: [usize; 3], normalisation: &Normalisation) -> Self {
        // (p / 255 − mean) / std = p · scale + shift
        let scale = normalisation
            .std
            .iter()
            .map(|s| 1.0 / (255.0 * s))
            .collect();
        let shift = normalisation
            .mean
            .iter()
            .zip(&normalisation.std)
            .map(|(m, s)| -m / s)
            .collect();
        Normaliser {
            shape,
            scale,
            shift,
        }
    }

    /// The batch of `items`.
    pub fn batch(&self, items: &[ImageItem]) -> Normalised {
        let [channels, height, width] = self.shape;
        let plane = height * width;
        let mut images = Vec::with_capacity(items.len() * channels * plane);
        for item in items {
            for (c, pixels) in item.pixels.chunks_exact(plane).enumerate() {
                let (scale, shift) = (self.scale[c], self.shift[c]);
                images.extend(pixels.iter().map(|&p| p as f32 * scale + shift));
            }
        }
        Normalised {
            shape: [items.len(), channels, height, width],
            images,
            labels: items.iter().map(|item| item.label as i64).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_per_channel() {
        let normalisation = Normalisation {
            mean: vec![0.5, 0.0],
            std: vec![0.5, 1.0],
        };
        let normaliser = Normaliser::new([2, 1, 2], &normalisation);
        let items = [ImageItem {
            pixels: vec![0, 255, 0, 255],
            label: 3,
        }];
        let batch = normaliser.batch(&items);
        assert_eq!(batch.shape, [1, 2, 1, 2]);
        let expected = [-1.0, 1.0, 0.0, 1.0];
        for (v, e) in batch.images.iter().zip(expected) {
            assert!((v - e).abs() < 1e-6, "{:?}", batch.images);
        }
        assert_eq!(batch.labels, vec![3]);
    }
}
