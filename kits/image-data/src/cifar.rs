//! CIFAR-10 in its binary version (`cifar-10-binary.tar.gz`, extracted): `data_batch_1.bin` …
//! `data_batch_5.bin` and `test_batch.bin`, each record one label byte and 3 072 pixel bytes
//! (red, green, blue planes of 32×32).

use std::path::{Path, PathBuf};

use crate::{DataError, ImageSet, Normalisation};

/// The training files, in order, and the test file.
pub const TRAIN_FILES: [&str; 5] = [
    "data_batch_1.bin",
    "data_batch_2.bin",
    "data_batch_3.bin",
    "data_batch_4.bin",
    "data_batch_5.bin",
];
/// The test file.
pub const TEST_FILE: &str = "test_batch.bin";
/// The directory the archive extracts to, looked for inside `--data-dir` too.
pub const ARCHIVE_DIR: &str = "cifar-10-batches-bin";

const SIDE: usize = 32;
const PIXELS: usize = 3 * SIDE * SIDE;
const RECORD: usize = 1 + PIXELS;
const CLASSES: u8 = 10;

const HINT: &str = ". Download the binary version (https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz), \
                    extract it and give --data-dir the extracted directory";

/// The usual per-channel statistics of CIFAR-10's training set (0-1 scale).
pub fn normalisation() -> Normalisation {
    Normalisation {
        mean: vec![0.4914, 0.4822, 0.4465],
        std: vec![0.2470, 0.2435, 0.2616],
    }
}

/// The training (50 000) and test (10 000) sets from `dir`, or from `dir/cifar-10-batches-bin`.
pub fn load(dir: &Path) -> Result<(ImageSet, ImageSet), DataError> {
    let dir = locate(dir)?;
    let mut train = (Vec::new(), Vec::new());
    for name in TRAIN_FILES {
        read_file(&dir.join(name), &mut train)?;
    }
    let mut test = (Vec::new(), Vec::new());
    read_file(&dir.join(TEST_FILE), &mut test)?;
    Ok((
        ImageSet::new([3, SIDE, SIDE], train.0, train.1),
        ImageSet::new([3, SIDE, SIDE], test.0, test.1),
    ))
}

/// `dir` when it holds the files, else its `cifar-10-batches-bin` when that one does.
fn locate(dir: &Path) -> Result<PathBuf, DataError> {
    let nested = dir.join(ARCHIVE_DIR);
    if !dir.join(TEST_FILE).exists() && nested.join(TEST_FILE).exists() {
        return Ok(nested);
    }
    crate::check_directory(
        "CIFAR-10",
        dir,
        format!(
            "a directory holding {} and {TEST_FILE}",
            TRAIN_FILES.join(", ")
        ),
        HINT.to_string(),
    )?;
    Ok(dir.to_path_buf())
}

/// Appends the pixels and labels of one file's records.
fn read_file(path: &Path, (pixels, labels): &mut (Vec<u8>, Vec<u8>)) -> Result<(), DataError> {
    let expected = format!("CIFAR-10 binary file (records of 1 label byte + {PIXELS} pixel bytes)");
    let bytes = std::fs::read(path).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => DataError::Missing {
            what: "CIFAR-10 file",
            path: path.to_path_buf(),
            expected: expected.clone(),
            hint: HINT.to_string(),
        },
        _ => DataError::Unreadable {
            path: path.to_path_buf(),
            expected: expected.clone(),
            source,
        },
    })?;
    let corrupt = |found: String| DataError::Corrupt {
        path: path.to_path_buf(),
        expected: expected.clone(),
        found,
        hint: HINT.to_string(),
    };
    if bytes.is_empty() || !bytes.len().is_multiple_of(RECORD) {
        return Err(corrupt(format!(
            "{} bytes, not a whole number of {RECORD}-byte records (truncated?)",
            bytes.len()
        )));
    }
    for (i, record) in bytes.chunks_exact(RECORD).enumerate() {
        if record[0] >= CLASSES {
            return Err(corrupt(format!(
                "record {i} has label {}, expected 0 to {}",
                record[0],
                CLASSES - 1
            )));
        }
        labels.push(record[0]);
        pixels.extend_from_slice(&record[1..]);
    }
    Ok(())
}
