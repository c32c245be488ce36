//! Items to batches: pixels normalised to `f32`, stacked to `[batch, channels, height, width]`.

use burn::data::dataloader::batcher::Batcher;
use burn::tensor::backend::Backend;
use burn::tensor::{Device, TensorData};

use image_data::{ImageItem, Normalisation, Normaliser};

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

/// Normalises and stacks images of one shape (image-data's [`Normaliser`]) for burn's
/// `DataLoader`.
#[derive(Debug, Clone)]
pub struct ImageBatcher(Normaliser);

impl ImageBatcher {
    /// A batcher for images of `shape` (channels, height, width).
    pub fn new(shape: [usize; 3], normalisation: &Normalisation) -> Self {
        ImageBatcher(Normaliser::new(shape, normalisation))
    }

    /// The batch of `items`.
    pub fn host_batch(&self, items: &[ImageItem]) -> HostBatch {
        let batch = self.0.batch(items);
        HostBatch {
            labels: TensorData::new(batch.labels, [batch.shape[0]]),
            images: TensorData::new(batch.images, batch.shape),
        }
    }
}

impl<B: Backend> Batcher<B, ImageItem, HostBatch> for ImageBatcher {
    fn batch(&self, items: Vec<ImageItem>, _device: &Device<B>) -> HostBatch {
        self.host_batch(&items)
    }
}
