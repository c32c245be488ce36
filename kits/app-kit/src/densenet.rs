//! The size of the DenseNet-BC every DenseNet benchmark of both Burn crates trains, as its
//! command line and its title give it: [`DenseNetShape`].

use serde::{Deserialize, Serialize};

/// A DenseNet-BC's size: `--depth --growth` (flatten it into a benchmark's arguments; the batch
/// is each benchmark's own, one size or a list). No Burn in it: each crate builds its model from
/// the fields. The trainers' `--growth-rate` (the reference demo's) is an alias.
///
/// ```
/// use app_kit::densenet::DenseNetShape;
/// use clap::Parser;
///
/// #[derive(Parser)]
/// struct Args {
///     #[command(flatten)]
///     shape: DenseNetShape,
/// }
///
/// let args = Args::parse_from(["bench", "--depth", "40"]);
/// assert_eq!((args.shape.depth, args.shape.growth), (40, 12));
/// assert_eq!(args.shape.describe(), "DenseNet-BC-40 (growth 12)");
/// let args = Args::parse_from(["bench", "--growth-rate", "24"]);
/// assert_eq!(args.shape.growth, 24);
/// ```
#[derive(clap::Args, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DenseNetShape {
    /// DenseNet-BC depth, 6n + 4 (10, 16, 22, 40, 100, 250, …): three dense blocks of n layers.
    #[arg(long, default_value_t = 100)]
    pub depth: usize,
    /// Growth rate: channels each dense layer adds (also `--growth-rate`, the trainers' word).
    #[arg(long, alias = "growth-rate", default_value_t = 12, value_parser = crate::args::positive())]
    pub growth: usize,
}

impl DenseNetShape {
    /// The shape as the benchmarks' titles give it: `DenseNet-BC-100 (growth 12)`.
    pub fn describe(&self) -> String {
        format!("DenseNet-BC-{} (growth {})", self.depth, self.growth)
    }
}
