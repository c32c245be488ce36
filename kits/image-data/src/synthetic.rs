//! CIFAR-shaped random images (3×32×32, 10 classes), generated from the seed on demand: for
//! memory and time measurements, whose cost does not depend on what the pixels show. Nothing
//! is learnable in them (labels are as random as pixels).

use crate::seeds::{SplitMix, mix};
use crate::{ImageItem, Images, Normalisation};

/// Images in the synthetic training split (CIFAR-10's size).
pub const TRAIN_LEN: usize = 50_000;
/// Images in the synthetic validation split.
pub const VALID_LEN: usize = 10_000;
/// Channels, height, width.
pub const SHAPE: [usize; 3] = [3, 32, 32];

/// Random images: item `i` is a function of the seed and `i` only.
#[derive(Debug, Clone)]
pub struct SyntheticImages {
    len: usize,
    seed: u64,
}

impl SyntheticImages {
    /// `len` images drawn from `seed`.
    pub fn new(len: usize, seed: u64) -> Self {
        SyntheticImages { len, seed }
    }
}

/// Uniform bytes have mean 127.5 / 255 and standard deviation ≈ 0.2887 on the 0-1 scale.
pub fn normalisation() -> Normalisation {
    Normalisation {
        mean: vec![0.5; 3],
        std: vec![0.2887; 3],
    }
}

impl Images for SyntheticImages {
    fn get(&self, index: usize) -> Option<ImageItem> {
        if index >= self.len {
            return None;
        }
        let mut rng = SplitMix::new(mix(self.seed, index as u64));
        let size = SHAPE.iter().product::<usize>();
        let mut pixels = Vec::with_capacity(size);
        while pixels.len() < size {
            pixels.extend(rng.next_u64().to_le_bytes());
        }
        pixels.truncate(size);
        Some(ImageItem {
            pixels,
            label: rng.below(10) as u8,
        })
    }

    fn len(&self) -> usize {
        self.len
    }
}
