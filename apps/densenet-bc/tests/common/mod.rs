//! What the trainer's test binaries share: the tiny settings and a directory's files.

use std::path::{Path, PathBuf};

/// A DenseNet-BC-10 with growth 4 on a few small batches: seconds per run.
pub const TINY: &[&str] = &[
    "--depth",
    "10",
    "--growth-rate",
    "4",
    "--batch-size",
    "4",
    "--limit",
    "3",
    "--valid-limit",
    "2",
];

/// Every file under `dir` (its path below `dir`) with its bytes, sorted.
pub fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(next) = stack.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                files.push((path.strip_prefix(dir).unwrap().to_path_buf(), bytes));
            }
        }
    }
    files.sort();
    files
}
