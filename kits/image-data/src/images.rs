//! Images held in memory as bytes, and the per-channel normalisation applied when batching.

use std::sync::Arc;

/// Images to read by index: what a trainer wraps in its Burn's `Dataset` (Burn 0.21's returns an
/// `Option`, 0.22's a `Result`).
///
/// ```
/// use image_data::{ImageSet, Images};
///
/// let images = ImageSet::new([1, 1, 1], vec![7, 9], vec![0, 1]);
/// assert_eq!(images.get(1).unwrap().pixels, vec![9]);
/// assert!(images.get(2).is_none());
/// ```
pub trait Images: Send + Sync {
    /// Image `index`, or `None` past the end.
    fn get(&self, index: usize) -> Option<ImageItem>;

    /// How many images there are.
    fn len(&self) -> usize;

    /// Whether there are none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T: Images + ?Sized> Images for Arc<T> {
    fn get(&self, index: usize) -> Option<ImageItem> {
        self.as_ref().get(index)
    }

    fn len(&self) -> usize {
        self.as_ref().len()
    }
}

/// One image: its pixels (channels × height × width bytes, row-major) and its class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageItem {
    /// Pixel values 0-255, channel-major.
    pub pixels: Vec<u8>,
    /// The class index.
    pub label: u8,
}

/// Images of one shape and their labels, held in memory as bytes (Fashion-MNIST's 60 000
/// training images take 47 MB this way, four times less than as `f32`).
#[derive(Debug, Clone)]
pub struct ImageSet {
    shape: [usize; 3],
    pixels: Vec<u8>,
    labels: Vec<u8>,
}

impl ImageSet {
    /// Images of `shape` (channels, height, width): `pixels` holds them one after the other.
    ///
    /// # Panics
    ///
    /// If `pixels` does not hold exactly one image of `shape` per label.
    pub fn new(shape: [usize; 3], pixels: Vec<u8>, labels: Vec<u8>) -> Self {
        assert_eq!(
            pixels.len(),
            labels.len() * shape.iter().product::<usize>(),
            "one image of {shape:?} per label"
        );
        ImageSet {
            shape,
            pixels,
            labels,
        }
    }

    /// Channels, height, width.
    pub fn shape(&self) -> [usize; 3] {
        self.shape
    }

    /// Every label, in order.
    pub fn labels(&self) -> &[u8] {
        &self.labels
    }
}

impl Images for ImageSet {
    fn get(&self, index: usize) -> Option<ImageItem> {
        let size = self.shape.iter().product::<usize>();
        let label = *self.labels.get(index)?;
        Some(ImageItem {
            pixels: self.pixels[index * size..(index + 1) * size].to_vec(),
            label,
        })
    }

    fn len(&self) -> usize {
        self.labels.len()
    }
}

/// Per-channel mean and standard deviation of pixel values scaled to 0-1: a pixel `p` becomes
/// `(p / 255 − mean) / std`.
#[derive(Debug, Clone, PartialEq)]
pub struct Normalisation {
    /// Mean per channel.
    pub mean: Vec<f32>,
    /// Standard deviation per channel.
    pub std: Vec<f32>,
}
