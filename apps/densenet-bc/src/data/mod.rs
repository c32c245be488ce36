//! The trainer's data: image-data's Fashion-MNIST, CIFAR-10 and synthetic images (shared with
//! the trainer for Burn 0.22) as burn-dataset `Dataset`s, and a batcher for burn's `DataLoader`.

mod batcher;

use std::sync::Arc;

use burn::data::dataset::Dataset;

pub use batcher::{HostBatch, ImageBatcher};
pub use image_data::{
    Augmented, DataError, DataSource, FASHION_MNIST_INSTALL, ImageItem, ImageSet, Images,
    Normalisation, Splits, cifar, crop_and_flip, fashion_mnist, idx, load, synthetic,
};

/// image-data's images as a burn-dataset `Dataset` (the trait is Burn's, the images are not).
///
/// ```
/// use std::sync::Arc;
/// use burn::data::dataset::Dataset;
/// use densenet_bc::data::{ImageDataset, ImageSet};
///
/// let images = ImageDataset(Arc::new(ImageSet::new([1, 1, 1], vec![7], vec![2])));
/// assert_eq!(images.get(0).unwrap().label, 2);
/// ```
#[derive(Clone)]
pub struct ImageDataset(pub Arc<dyn Images>);

impl Dataset<ImageItem> for ImageDataset {
    fn get(&self, index: usize) -> Option<ImageItem> {
        self.0.get(index)
    }

    fn len(&self) -> usize {
        self.0.len()
    }
}
