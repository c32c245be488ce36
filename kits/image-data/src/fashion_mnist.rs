//! Fashion-MNIST (Zalando, 28×28 grayscale, 10 classes) from its four IDX files, as Debian's
//! `dataset-fashion-mnist` package installs them.

use std::path::{Path, PathBuf};

use crate::idx::read_idx;
use crate::{DataError, FASHION_MNIST_INSTALL, ImageSet, Normalisation};

/// Where Debian's `dataset-fashion-mnist` package puts the files.
pub const DEFAULT_DIR: &str = "/usr/share/datasets/fashion-mnist";

/// The training images, training labels, test images and test labels, gzip-compressed.
pub const FILES: [&str; 4] = [
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
];

/// Side of the images.
const SIDE: usize = 28;
/// Classes (T-shirt/top, trouser, pullover, dress, coat, sandal, shirt, sneaker, bag, boot).
const CLASSES: u8 = 10;

/// The training set's pixel mean and standard deviation (0-1 scale).
pub fn normalisation() -> Normalisation {
    Normalisation {
        mean: vec![0.2860],
        std: vec![0.3530],
    }
}

fn hint(dir: &Path) -> String {
    format!(
        ". Install Fashion-MNIST with `{FASHION_MNIST_INSTALL}` (it goes to {DEFAULT_DIR}), or \
         give --data-dir a directory holding {} (now: {})",
        FILES.join(", "),
        dir.display()
    )
}

/// The training (60 000) and test (10 000) sets in `dir`. Each file may also be present
/// uncompressed, without `.gz`.
pub fn load(dir: &Path) -> Result<(ImageSet, ImageSet), DataError> {
    crate::check_directory(
        "Fashion-MNIST",
        dir,
        format!("a directory holding {}", FILES.join(", ")),
        hint(dir),
    )?;
    let train = split(dir, FILES[0], FILES[1])?;
    let test = split(dir, FILES[2], FILES[3])?;
    Ok((train, test))
}

/// The path of `name` in `dir`, or of its uncompressed twin when only that one exists.
fn locate(dir: &Path, name: &str, expected: &str) -> Result<PathBuf, DataError> {
    let gz = dir.join(name);
    if gz.is_file() {
        return Ok(gz);
    }
    let plain = dir.join(name.trim_end_matches(".gz"));
    if plain.is_file() {
        return Ok(plain);
    }
    Err(DataError::Missing {
        what: "Fashion-MNIST file",
        path: gz,
        expected: expected.to_string(),
        hint: hint(dir),
    })
}

fn split(dir: &Path, images_name: &str, labels_name: &str) -> Result<ImageSet, DataError> {
    let images_path = locate(dir, images_name, "the IDX images (gzip)")?;
    let labels_path = locate(dir, labels_name, "the IDX labels (gzip)")?;
    let images = read_idx(&images_path, 3, &hint(dir))?;
    let labels = read_idx(&labels_path, 1, &hint(dir))?;
    let corrupt = |path: &Path, expected: &str, found: String| DataError::Corrupt {
        path: path.to_path_buf(),
        expected: expected.to_string(),
        found,
        hint: hint(dir),
    };
    if images.dims[1..] != [SIDE, SIDE] {
        return Err(corrupt(
            &images_path,
            "Fashion-MNIST image file",
            format!("images of {:?}, expected 28×28", &images.dims[1..]),
        ));
    }
    if images.dims[0] == 0 {
        return Err(corrupt(
            &images_path,
            "Fashion-MNIST image file",
            "0 images, expected at least one".to_string(),
        ));
    }
    if images.dims[0] != labels.dims[0] {
        return Err(corrupt(
            &labels_path,
            "Fashion-MNIST label file",
            format!(
                "{} labels for the {} images of {}",
                labels.dims[0],
                images.dims[0],
                images_path.display()
            ),
        ));
    }
    if let Some(bad) = labels.data.iter().find(|&&l| l >= CLASSES) {
        return Err(corrupt(
            &labels_path,
            "Fashion-MNIST label file",
            format!("label {bad}, expected 0 to {}", CLASSES - 1),
        ));
    }
    Ok(ImageSet::new([1, SIDE, SIDE], images.data, labels.data))
}
