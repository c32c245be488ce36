//! Unit tests of the crate, last: the data readers on files written here. Good files load with
//! the right shapes and values; missing, truncated and corrupt ones give errors naming the path,
//! what was expected and how to get the data.

use std::io::Write;
use std::path::Path;

use crate::{DataError, DataSource, Images, cifar, fashion_mnist, load};
use flate2::Compression;
use flate2::write::GzEncoder;

fn idx(dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut bytes = vec![0, 0, 0x08, dims.len() as u8];
    for d in dims {
        bytes.extend(d.to_be_bytes());
    }
    bytes.extend(data);
    bytes
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::fast());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// A Fashion-MNIST directory with `n` training and `n` test images; image `i`'s pixels are all
/// `i`, its label `i % 10`.
fn write_fashion_mnist(dir: &Path, n: u32) {
    let pixels: Vec<u8> = (0..n).flat_map(|i| vec![i as u8; 28 * 28]).collect();
    let labels: Vec<u8> = (0..n).map(|i| (i % 10) as u8).collect();
    for (images, labels_file) in [(0, 1), (2, 3)] {
        std::fs::write(
            dir.join(fashion_mnist::FILES[images]),
            gzip(&idx(&[n, 28, 28], &pixels)),
        )
        .unwrap();
        std::fs::write(
            dir.join(fashion_mnist::FILES[labels_file]),
            gzip(&idx(&[n], &labels)),
        )
        .unwrap();
    }
}

fn error(dir: &Path) -> String {
    match fashion_mnist::load(dir) {
        Ok(_) => panic!("{} should not load", dir.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn fashion_mnist_files_load() {
    let dir = tempfile::tempdir().unwrap();
    write_fashion_mnist(dir.path(), 12);
    let splits = load(DataSource::FashionMnist, Some(dir.path()), 0).unwrap();
    assert_eq!(splits.shape, [1, 28, 28]);
    assert_eq!((splits.train.len(), splits.valid.len()), (12, 12));
    let item = splits.train.get(11).unwrap();
    assert_eq!(item.label, 1);
    assert!(item.pixels.iter().all(|&p| p == 11));
    assert!(!splits.augment);
}

#[test]
fn uncompressed_fashion_mnist_files_load_too() {
    let dir = tempfile::tempdir().unwrap();
    write_fashion_mnist(dir.path(), 3);
    let name = fashion_mnist::FILES[1];
    let gz = std::fs::read(dir.path().join(name)).unwrap();
    let mut plain = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(gz.as_slice()), &mut plain)
        .unwrap();
    std::fs::remove_file(dir.path().join(name)).unwrap();
    std::fs::write(dir.path().join(name.trim_end_matches(".gz")), plain).unwrap();
    let (train, _) = fashion_mnist::load(dir.path()).unwrap();
    assert_eq!(train.labels(), &[0, 1, 2]);
}

#[test]
fn missing_fashion_mnist_names_the_path_and_the_install_command() {
    let dir = tempfile::tempdir().unwrap();
    let absent = dir.path().join("absent");
    let message = error(&absent);
    assert!(message.contains(absent.to_str().unwrap()), "{message}");
    assert!(
        message.contains("apt-get install dataset-fashion-mnist"),
        "{message}"
    );
    assert!(message.contains("train-images-idx3-ubyte.gz"), "{message}");

    write_fashion_mnist(dir.path(), 2);
    let gone = dir.path().join(fashion_mnist::FILES[3]);
    std::fs::remove_file(&gone).unwrap();
    let message = error(dir.path());
    assert!(message.contains(gone.to_str().unwrap()), "{message}");
    assert!(
        message.contains("apt-get install dataset-fashion-mnist"),
        "{message}"
    );
}

#[test]
fn corrupt_fashion_mnist_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let images = dir.path().join(fashion_mnist::FILES[0]);
    let labels = dir.path().join(fashion_mnist::FILES[1]);

    // A download cut short: the gzip stream ends early.
    write_fashion_mnist(dir.path(), 40);
    let gz = std::fs::read(&images).unwrap();
    std::fs::write(&images, &gz[..gz.len() / 2]).unwrap();
    let message = error(dir.path());
    assert!(message.contains(images.to_str().unwrap()), "{message}");
    assert!(message.contains("cannot be decompressed"), "{message}");
    assert!(
        message.contains("apt-get install dataset-fashion-mnist"),
        "{message}"
    );

    // Whole gzip, truncated IDX inside.
    let pixels = vec![0u8; 28 * 28 * 40 - 5];
    std::fs::write(&images, gzip(&idx(&[40, 28, 28], &pixels))).unwrap();
    let message = error(dir.path());
    assert!(message.contains("truncated"), "{message}");
    assert!(message.contains("28, 28"), "{message}");

    // Not an IDX file of bytes: a wrong magic number.
    std::fs::write(&images, gzip(b"\x1f\x00\x00\x00 this is not IDX")).unwrap();
    let message = error(dir.path());
    assert!(message.contains("magic number 1f 00 00 00"), "{message}");
    assert!(message.contains(images.to_str().unwrap()), "{message}");

    // Images of another size, labels that do not match, a label out of range.
    write_fashion_mnist(dir.path(), 4);
    std::fs::write(&images, gzip(&idx(&[4, 32, 32], &[0; 4 * 32 * 32]))).unwrap();
    assert!(error(dir.path()).contains("expected 28×28"));
    write_fashion_mnist(dir.path(), 4);
    std::fs::write(&labels, gzip(&idx(&[3], &[0, 1, 2]))).unwrap();
    assert!(error(dir.path()).contains("3 labels for the 4 images"));
    std::fs::write(&labels, gzip(&idx(&[4], &[0, 1, 2, 10]))).unwrap();
    assert!(error(dir.path()).contains("label 10, expected 0 to 9"));
}

#[test]
fn a_data_dir_that_is_a_file_or_unreadable_is_not_called_missing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fashion-mnist.tar");
    std::fs::write(&file, b"not a directory").unwrap();
    let message = error(&file);
    assert!(message.contains("is not a directory"), "{message}");
    assert!(!message.contains("does not exist"), "{message}");
    assert!(message.contains(file.to_str().unwrap()), "{message}");
    let message = cifar_error(&file);
    assert!(message.contains("is not a directory"), "{message}");

    // A path through a file cannot be read at all (a permission error reads the same way; the
    // tests may run as root, who reads everything).
    let through = file.join("inside");
    let message = error(&through);
    assert!(message.starts_with("cannot read"), "{message}");
    assert!(message.contains(through.to_str().unwrap()), "{message}");
}

#[test]
fn an_empty_split_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    write_fashion_mnist(dir.path(), 2);
    let test_images = dir.path().join(fashion_mnist::FILES[2]);
    std::fs::write(&test_images, gzip(&idx(&[0, 28, 28], &[]))).unwrap();
    std::fs::write(
        dir.path().join(fashion_mnist::FILES[3]),
        gzip(&idx(&[0], &[])),
    )
    .unwrap();
    let message = error(dir.path());
    assert!(message.contains("0 images"), "{message}");
    assert!(message.contains(test_images.to_str().unwrap()), "{message}");
}

/// A CIFAR-10 directory whose files each hold `records` records; record `r` of file `f` has
/// label `(f + r) % 10` and pixels equal to `r` in the red plane, 100 in green, 200 in blue.
fn write_cifar(dir: &Path, records: usize) {
    let names = cifar::TRAIN_FILES.iter().chain([&cifar::TEST_FILE]);
    for (f, name) in names.enumerate() {
        let mut bytes = Vec::new();
        for r in 0..records {
            bytes.push(((f + r) % 10) as u8);
            bytes.extend(vec![r as u8; 1024]);
            bytes.extend(vec![100u8; 1024]);
            bytes.extend(vec![200u8; 1024]);
        }
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}

fn cifar_error(dir: &Path) -> String {
    match cifar::load(dir) {
        Ok(_) => panic!("{} should not load", dir.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn cifar_files_load_from_the_dir_or_the_archive_dir() {
    let dir = tempfile::tempdir().unwrap();
    let nested = dir.path().join(cifar::ARCHIVE_DIR);
    std::fs::create_dir(&nested).unwrap();
    write_cifar(&nested, 3);
    let splits = load(DataSource::Cifar10, Some(dir.path()), 0).unwrap();
    assert_eq!(splits.shape, [3, 32, 32]);
    assert_eq!((splits.train.len(), splits.valid.len()), (15, 3));
    assert!(splits.augment);
    // File 2 (data_batch_2), record 1: label 2, red plane 1.
    let item = splits.train.get(4).unwrap();
    assert_eq!(item.label, 2);
    assert_eq!(
        (item.pixels[0], item.pixels[1024], item.pixels[2048]),
        (1, 100, 200)
    );
}

#[test]
fn bad_cifar_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let absent = dir.path().join("absent");
    let message = cifar_error(&absent);
    assert!(message.contains(absent.to_str().unwrap()), "{message}");
    assert!(message.contains("cifar-10-binary.tar.gz"), "{message}");

    write_cifar(dir.path(), 2);
    let third = dir.path().join(cifar::TRAIN_FILES[2]);
    std::fs::remove_file(&third).unwrap();
    let message = cifar_error(dir.path());
    assert!(message.contains(third.to_str().unwrap()), "{message}");

    write_cifar(dir.path(), 2);
    let bytes = std::fs::read(&third).unwrap();
    std::fs::write(&third, &bytes[..bytes.len() - 1]).unwrap();
    let message = cifar_error(dir.path());
    assert!(
        message.contains("not a whole number of 3073-byte records"),
        "{message}"
    );

    write_cifar(dir.path(), 2);
    let mut bytes = std::fs::read(&third).unwrap();
    bytes[3073] = 17;
    std::fs::write(&third, bytes).unwrap();
    let message = cifar_error(dir.path());
    assert!(message.contains("record 1 has label 17"), "{message}");
}

#[test]
fn cifar_needs_a_dir_and_synthetic_takes_none() {
    let usage = |result: Result<_, DataError>| match result {
        Err(DataError::Usage(message)) => message,
        Err(other) => panic!("not a usage error: {other}"),
        Ok(_) => panic!("should fail"),
    };
    assert!(usage(load(DataSource::Cifar10, None, 0)).contains("--data-dir"));
    assert!(usage(load(DataSource::Synthetic, Some(Path::new("/tmp")), 0)).contains("--data-dir"));
}

#[test]
fn synthetic_images_depend_on_the_seed_and_index_only() {
    let a = load(DataSource::Synthetic, None, 7).unwrap();
    let b = load(DataSource::Synthetic, None, 7).unwrap();
    let c = load(DataSource::Synthetic, None, 8).unwrap();
    assert_eq!(a.train.get(123), b.train.get(123));
    assert_ne!(a.train.get(123), c.train.get(123));
    assert_ne!(a.train.get(123), a.train.get(124));
    assert_eq!(a.train.get(0).unwrap().pixels.len(), 3 * 32 * 32);
    assert_eq!((a.train.len(), a.valid.len()), (50_000, 10_000));
}

#[test]
fn the_installed_fashion_mnist_is_complete() {
    let dir = Path::new(fashion_mnist::DEFAULT_DIR);
    if !dir.is_dir() {
        // Under CI (`.ci/run` sets CI) the data set must be there: a skipped test proves nothing.
        assert!(
            std::env::var_os("CI").is_none(),
            "{} is absent under CI: scripts/setup installs it",
            dir.display()
        );
        println!(
            "skipped: {} is absent (scripts/setup installs it)",
            dir.display()
        );
        return;
    }
    let (train, test) = fashion_mnist::load(dir).unwrap();
    assert_eq!((train.len(), test.len()), (60_000, 10_000));
    for class in 0..10 {
        assert_eq!(
            train.labels().iter().filter(|&&l| l == class).count(),
            6_000
        );
        assert_eq!(test.labels().iter().filter(|&&l| l == class).count(), 1_000);
    }
}
