//! Items to batches: pixels normalised to `f32`, stacked to `[batch, channels, height, width]`.

use burn::data::dataloader::batcher::Batcher;
use burn::tensor::backend::Backend;
use burn::tensor::{Device, TensorData};

use super::{ImageItem, Normalisation};

/// A batch in host memory: the step that uses it moves it to its device(s). Kept off the device
/// here so that one loader can feed any backend, and a data-parallel step can split it first.
#[derive(Debug, Clone)]
pub struct HostBatch {
    /// Normalised images, `[batch, channels, height, width]`, `f32`.
    pub images: TensorData,
    /// Class indices, `[batch]`, `i64`.
    pub labels: TensorData,
}

impl HostBatch {
    /// Images in the batch.
    pub fn len(&self) -> usize {
        self.labels.shape[0]
    }

    /// Whether the batch holds no image.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Normalises and stacks images of one shape.
#[derive(Debug, Clone)]
pub struct ImageBatcher {
    shape: [usize; 3],
    scale: Vec<f32>,
    shift: Vec<f32>,
}

impl ImageBatcher {
    /// A batcher for images of `shape` (channels, height, width).
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
        ImageBatcher {
            shape,
            scale,
            shift,
        }
    }

    /// The batch of `items`.
    pub fn host_batch(&self, items: &[ImageItem]) -> HostBatch {
        let [channels, height, width] = self.shape;
        let plane = height * width;
        let mut images = Vec::with_capacity(items.len() * channels * plane);
        for item in items {
            for (c, pixels) in item.pixels.chunks_exact(plane).enumerate() {
                let (scale, shift) = (self.scale[c], self.shift[c]);
                images.extend(pixels.iter().map(|&p| p as f32 * scale + shift));
            }
        }
        let labels: Vec<i64> = items.iter().map(|item| item.label as i64).collect();
        HostBatch {
            images: TensorData::new(images, [items.len(), channels, height, width]),
            labels: TensorData::new(labels, [items.len()]),
        }
    }
}

impl<B: Backend> Batcher<B, ImageItem, HostBatch> for ImageBatcher {
    fn batch(&self, items: Vec<ImageItem>, _device: &Device<B>) -> HostBatch {
        self.host_batch(&items)
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
        let batcher = ImageBatcher::new([2, 1, 2], &normalisation);
        let items = [ImageItem {
            pixels: vec![0, 255, 0, 255],
            label: 3,
        }];
        let batch = batcher.host_batch(&items);
        assert_eq!(batch.images.shape.as_slice(), &[1, 2, 1, 2]);
        let values = batch.images.to_vec::<f32>().unwrap();
        let expected = [-1.0, 1.0, 0.0, 1.0];
        for (v, e) in values.iter().zip(expected) {
            assert!((v - e).abs() < 1e-6, "{values:?}");
        }
        assert_eq!(batch.labels.to_vec::<i64>().unwrap(), vec![3]);
    }
}
