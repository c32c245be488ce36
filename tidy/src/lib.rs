//! The repository's own rules, read from its sources, manifests and Markdown, with no Burn in
//! them, so that they build in seconds, run first in CI (`cargo test -p tidy`) and bind a
//! contributor to either Burn crate alike (as rust-analyzer keeps its rules in `xtask`'s tidy):
//!
//! - `layers`: every library's modules stand bottom-up, no file imports one that imports it
//!   back, docs/architecture.md's tables say what the code does, every path dependency points
//!   up its folder table;
//! - `docs`: every Rust block in the docs compiled or saying why not, reasons rather than issue
//!   numbers, no removed name where users read, every link and heading found, every page of the
//!   guide in its index, each package's README its own;
//! - `surface`: each library's public names within its limit.

#[cfg(test)]
mod docs;
#[cfg(test)]
mod layers;
#[cfg(test)]
mod surface;

/// The repository's root: the folder above this crate's.
#[cfg(test)]
fn repository() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tidy/ is a folder of the repository")
}
