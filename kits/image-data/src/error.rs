//! What can go wrong reading a data set: every error names the file or directory, what was
//! expected there, and how to get the data.

use std::path::PathBuf;

/// The command that installs Fashion-MNIST on Debian and Ubuntu.
pub const FASHION_MNIST_INSTALL: &str = "apt-get install dataset-fashion-mnist";

/// A data set that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// A file or directory the data set needs does not exist.
    #[error("{what} not found: {} does not exist (expected {expected}){hint}", path.display())]
    Missing {
        /// The data set, for the message.
        what: &'static str,
        /// The path that was looked for.
        path: PathBuf,
        /// What should be there.
        expected: String,
        /// How to get the data, starting with a separator (empty when there is nothing to say).
        hint: String,
    },
    /// A path that should be a directory is a file (or something else).
    #[error("{what}: {} is not a directory (expected {expected}){hint}", path.display())]
    NotADirectory {
        /// The data set, for the message.
        what: &'static str,
        /// The path given.
        path: PathBuf,
        /// What should be there.
        expected: String,
        /// How to get the data, starting with a separator (empty when there is nothing to say).
        hint: String,
    },
    /// A file or directory exists but cannot be read (permissions, I/O error, bad compression).
    #[error("cannot read {}: {source} (expected {expected})", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// What the file should hold.
        expected: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A file was read but its contents are not what the format says.
    #[error("{} is not a valid {expected}: {found}{hint}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The format expected.
        expected: String,
        /// What was found instead.
        found: String,
        /// How to get a good copy, starting with a separator (empty when there is nothing to say).
        hint: String,
    },
    /// The command line asks for something the data source cannot give.
    #[error("{0}")]
    Usage(String),
}
