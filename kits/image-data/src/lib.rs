//! The example trainers' images, without Burn: Fashion-MNIST (IDX files), CIFAR-10 (binary
//! version) and synthetic CIFAR-shaped images as byte images in memory, the CIFAR augmentation,
//! the per-channel normalisation a batch gets, and the seeds every random choice derives from.
//!
//! Both trainers read their data through this crate: the one for Burn 0.21 (`apps/densenet-bc`)
//! and the one for Burn 0.22 (`apps/train22`). Each wraps [`Images`] in its Burn's `Dataset`
//! (the trait differs between the two releases) and a [`Normalised`] batch in its tensors.
//!
//! ```
//! use image_data::{Images, ImageSet, Normalisation, Normaliser};
//!
//! // Two 1×1×2 images: [0, 255] labelled 3 and [255, 0] labelled 1.
//! let images = ImageSet::new([1, 1, 2], vec![0, 255, 255, 0], vec![3, 1]);
//! assert_eq!(images.len(), 2);
//! let items = vec![images.get(0).unwrap(), images.get(1).unwrap()];
//! let unit = Normalisation { mean: vec![0.5], std: vec![0.5] };
//! let batch = Normaliser::new(images.shape(), &unit).batch(&items);
//! assert_eq!(batch.shape, [2, 1, 1, 2]);
//! assert_eq!(batch.images, vec![-1.0, 1.0, 1.0, -1.0]);
//! assert_eq!(batch.labels, vec![3, 1]);
//! ```

mod augment;
pub mod cifar;
mod error;
pub mod fashion_mnist;
pub mod idx;
mod images;
mod normalise;
pub mod seeds;
pub mod synthetic;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use augment::{Augmented, crop_and_flip};
pub use error::{DataError, FASHION_MNIST_INSTALL};
pub use images::{ImageItem, ImageSet, Images, Normalisation};
pub use normalise::{Normalised, Normaliser};

/// Where the trainer's images come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum DataSource {
    /// Fashion-MNIST, 1×28×28, from Debian's `dataset-fashion-mnist` (or `--data-dir`).
    FashionMnist,
    /// CIFAR-10, 3×32×32, binary version, from `--data-dir`; trained with random crops and flips.
    Cifar10,
    /// Random CIFAR-shaped images: for measuring memory and time, nothing to learn.
    Synthetic,
}

impl DataSource {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            DataSource::FashionMnist => "fashion-mnist",
            DataSource::Cifar10 => "cifar10",
            DataSource::Synthetic => "synthetic",
        }
    }
}

/// A training and a validation split, and what a model and a batcher need to know about them.
#[derive(Clone)]
pub struct Splits {
    /// The training images (before augmentation).
    pub train: Arc<dyn Images>,
    /// The validation images (the data set's test split).
    pub valid: Arc<dyn Images>,
    /// Channels, height, width.
    pub shape: [usize; 3],
    /// Number of classes.
    pub classes: usize,
    /// Per-channel normalisation.
    pub normalisation: Normalisation,
    /// Whether training images get random crops (padding 4) and flips.
    pub augment: bool,
}

/// Checks that `dir` is a readable directory: a missing path, a file and an unreadable
/// directory each get their own error, naming the path and what was `expected` there.
fn check_directory(
    what: &'static str,
    dir: &Path,
    expected: String,
    hint: String,
) -> Result<(), DataError> {
    match std::fs::metadata(dir) {
        Err(source) if source.kind() == std::io::ErrorKind::NotFound => Err(DataError::Missing {
            what,
            path: dir.to_path_buf(),
            expected,
            hint,
        }),
        Err(source) => Err(DataError::Unreadable {
            path: dir.to_path_buf(),
            expected,
            source,
        }),
        Ok(meta) if !meta.is_dir() => Err(DataError::NotADirectory {
            what,
            path: dir.to_path_buf(),
            expected,
            hint,
        }),
        Ok(_) => std::fs::read_dir(dir)
            .map(drop)
            .map_err(|source| DataError::Unreadable {
                path: dir.to_path_buf(),
                expected,
                source,
            }),
    }
}

/// Reads (or, for synthetic data, describes) `source`'s splits. `dir` overrides the default
/// location; CIFAR-10 has none and needs it. Synthetic images are drawn from `seed`.
pub fn load(source: DataSource, dir: Option<&Path>, seed: u64) -> Result<Splits, DataError> {
    match source {
        DataSource::FashionMnist => {
            let dir = dir.map_or_else(
                || PathBuf::from(fashion_mnist::DEFAULT_DIR),
                Path::to_path_buf,
            );
            let (train, valid) = fashion_mnist::load(&dir)?;
            Ok(Splits {
                shape: train.shape(),
                train: Arc::new(train),
                valid: Arc::new(valid),
                classes: 10,
                normalisation: fashion_mnist::normalisation(),
                augment: false,
            })
        }
        DataSource::Cifar10 => {
            let dir = dir.ok_or_else(|| {
                DataError::Usage(format!(
                    "CIFAR-10 needs --data-dir: the directory holding {} and {} (the binary \
                     version, https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz, extracted)",
                    cifar::TRAIN_FILES.join(", "),
                    cifar::TEST_FILE
                ))
            })?;
            let (train, valid) = cifar::load(dir)?;
            Ok(Splits {
                shape: train.shape(),
                train: Arc::new(train),
                valid: Arc::new(valid),
                classes: 10,
                normalisation: cifar::normalisation(),
                augment: true,
            })
        }
        DataSource::Synthetic => {
            if let Some(dir) = dir {
                return Err(DataError::Usage(format!(
                    "synthetic data reads no files, but --data-dir {} was given",
                    dir.display()
                )));
            }
            Ok(Splits {
                train: Arc::new(synthetic::SyntheticImages::new(synthetic::TRAIN_LEN, seed)),
                valid: Arc::new(synthetic::SyntheticImages::new(synthetic::VALID_LEN, !seed)),
                shape: synthetic::SHAPE,
                classes: 10,
                normalisation: synthetic::normalisation(),
                augment: false,
            })
        }
    }
}

// The readers on files written here, as users call them (last: they use every module).
#[cfg(test)]
mod readers_tests;
