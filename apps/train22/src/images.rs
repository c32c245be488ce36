//! image-data's images on Burn 0.22: a burn-dataset `Dataset` (0.22's returns a `Result`) and a
//! batcher that puts a normalised batch on the loader's device.

use std::sync::Arc;

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::{Dataset, DatasetError};
use burn::tensor::{Device, Int, Tensor, TensorData};
use image_data::{ImageItem, Images, Normalisation, Normaliser};

/// image-data's images as a burn-dataset `Dataset`.
///
/// ```
/// use std::sync::Arc;
/// use burn::data::dataset::Dataset;
/// use burn_checkpoint_22_train::images::ImageDataset;
/// use image_data::ImageSet;
///
/// let images = ImageDataset(Arc::new(ImageSet::new([1, 1, 1], vec![7], vec![2])));
/// assert_eq!(images.get(0).unwrap().label, 2);
/// ```
#[derive(Clone)]
pub struct ImageDataset(pub Arc<dyn Images>);

impl Dataset<ImageItem> for ImageDataset {
    fn get(&self, index: usize) -> Result<ImageItem, DatasetError> {
        // burn-dataset 0.22's contract: an index past the end panics.
        let len = self.0.len();
        Ok(self
            .0
            .get(index)
            .unwrap_or_else(|| panic!("image {index} of {len}")))
    }

    fn len(&self) -> usize {
        self.0.len()
    }
}

/// A batch on a device: normalised images `[batch, channels, height, width]` and their classes.
#[derive(Clone, Debug)]
pub struct ImageBatch {
    /// The images.
    pub images: Tensor<4>,
    /// Each image's class.
    pub labels: Tensor<1, Int>,
}

/// Normalises and stacks images (image-data's [`Normaliser`]) on the loader's device.
///
/// ```
/// use burn::data::dataloader::batcher::Batcher;
/// use burn::tensor::Device;
/// use burn_checkpoint_22_train::images::{ImageBatch, ImageBatcher};
/// use image_data::{ImageItem, Normalisation};
///
/// let unit = Normalisation { mean: vec![0.5], std: vec![0.5] };
/// let batcher = ImageBatcher::new([1, 1, 2], &unit);
/// let item = ImageItem { pixels: vec![0, 255], label: 4 };
/// let batch: ImageBatch = batcher.batch(vec![item], &Device::flex());
/// assert_eq!(batch.images.dims(), [1, 1, 1, 2]);
/// ```
#[derive(Clone, Debug)]
pub struct ImageBatcher(Normaliser);

impl ImageBatcher {
    /// A batcher for images of `shape` (channels, height, width).
    pub fn new(shape: [usize; 3], normalisation: &Normalisation) -> Self {
        ImageBatcher(Normaliser::new(shape, normalisation))
    }
}

impl Batcher<ImageItem, ImageBatch> for ImageBatcher {
    fn batch(&self, items: Vec<ImageItem>, device: &Device) -> ImageBatch {
        let batch = self.0.batch(&items);
        ImageBatch {
            labels: Tensor::from_data(TensorData::new(batch.labels, [batch.shape[0]]), device),
            images: Tensor::from_data(TensorData::new(batch.images, batch.shape), device),
        }
    }
}
