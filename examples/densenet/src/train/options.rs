//! The trainer's settings, as command-line flags (clap derive: `--help` is these doc comments).

use std::path::PathBuf;

use clap::Parser;
use serde::{Deserialize, Serialize};

use crate::data::DataSource;
use crate::{Cut, RegionPolicy};

/// Trains DenseNet-BC on Fashion-MNIST, CIFAR-10 or synthetic images, with or without gradient
/// checkpointing regions, and reports accuracy, the peak memory of a training step and the time
/// per step.
///
/// Defaults follow the reference "memory-efficient DenseNet" demo (DenseNet-BC-100, growth 12,
/// batch 64, SGD lr 0.1 with Nesterov momentum 0.9 and weight decay 1e-4, the rate divided by 10
/// at 50% and 75% of the epochs), with checkpoint regions on.
#[derive(Parser, Debug, Clone)]
#[command(name = "train", version)]
pub struct TrainOptions {
    /// The data set. fashion-mnist: Debian's dataset-fashion-mnist package (or --data-dir);
    /// cifar10: the binary version in --data-dir, trained with random crops and flips;
    /// synthetic: random CIFAR-shaped images, for memory and time measurements.
    #[arg(long, value_enum, default_value = "fashion-mnist")]
    pub data: DataSource,

    /// Where the data set's files are. Fashion-MNIST: default /usr/share/datasets/fashion-mnist.
    /// CIFAR-10: required, the directory holding data_batch_1.bin … test_batch.bin (or the
    /// cifar-10-batches-bin directory inside it).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// What is kept between forward and backward. none: plain Autodiff, everything;
    /// balanced: Burn's BalancedCheckpointing (cheap ops recomputed); regions: burn-checkpoint
    /// regions around each dense layer, on top of balanced (least memory); regions-save-compute:
    /// the same regions keeping convolution outputs (recomputes only cheap ops).
    #[arg(long, value_enum, default_value = "regions")]
    pub checkpoint: CheckpointMode,

    /// The reference demo's flag: the same as --checkpoint regions.
    #[arg(long, conflicts_with = "checkpoint")]
    pub efficient: bool,

    /// Images per training step (on all devices together) and per validation batch.
    #[arg(long, default_value_t = 64, value_parser = positive())]
    pub batch_size: usize,

    /// The devices, comma-separated: cpu, or cuda:0,cuda:1,… (CUDA needs the `cuda` feature).
    /// Several devices train data-parallel.
    #[arg(long, default_value = "cpu", value_name = "LIST")]
    pub devices: String,

    /// Epochs to train in total (with --resume: including those already done).
    #[arg(long, default_value_t = 300, value_parser = positive())]
    pub epochs: usize,

    /// Initial learning rate, above 0 (divided by 10 at 50% and at 75% of the epochs).
    #[arg(long, default_value_t = 0.1, value_parser = learning_rate)]
    pub lr: f64,

    /// SGD momentum (Nesterov), from 0 (off) to below 1.
    #[arg(long, default_value_t = 0.9, value_parser = momentum)]
    pub momentum: f64,

    /// L2 weight decay, 0 (off) or more.
    #[arg(long, default_value_t = 1e-4, value_parser = weight_decay)]
    pub weight_decay: f64,

    /// DenseNet-BC depth, 6n + 4 (10, 16, 22, 40, 100, …): three dense blocks of n layers.
    #[arg(long, default_value_t = 100)]
    pub depth: usize,

    /// Channels each dense layer adds (k).
    #[arg(long, default_value_t = 12, value_parser = positive())]
    pub growth_rate: usize,

    /// Seed of everything random: initial weights, shuffling, augmentation, synthetic images.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Save the model and optimizer state to DIR after every epoch (atomically: an interrupted
    /// save leaves the previous epoch's state loadable).
    #[arg(long, value_name = "DIR")]
    pub save: Option<PathBuf>,

    /// Continue the run saved in --save DIR from its last complete epoch, with the same results
    /// as an uninterrupted run (the other settings must match the saved run's).
    #[arg(long, requires = "save")]
    pub resume: bool,

    /// Write the final table, the settings and every epoch's figures to FILE as JSON.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,

    /// Training batches per epoch (a different random subset each epoch), for quick runs.
    #[arg(long, value_name = "N", value_parser = positive())]
    pub limit: Option<usize>,

    /// Validation batches per evaluation (a fixed random subset of the test split); default: all.
    #[arg(long, value_name = "N", value_parser = positive())]
    pub valid_limit: Option<usize>,

    /// Stop after this many epochs of this invocation, the state saved for --resume: to train
    /// in sessions (e.g. under a job time limit).
    #[arg(long, value_name = "N", value_parser = positive())]
    pub stop_after: Option<usize>,

    /// Data loader worker threads. With more than 1, burn's loader delivers the workers' batches
    /// in the order they finish, so the batch order (and the exact results) vary between runs.
    #[arg(long, default_value_t = 1, value_parser = positive())]
    pub workers: usize,
}

/// A parser of counts that must be at least 1.
fn positive() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(1..)
}

/// A finite number, or why `text` is not one.
fn finite(text: &str) -> Result<f64, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number"))?;
    if value.is_finite() {
        Ok(value)
    } else {
        Err(format!("{value} is not a finite number"))
    }
}

/// `--lr`: finite and above 0 (0 would not train, a negative rate climbs the loss).
fn learning_rate(text: &str) -> Result<f64, String> {
    let lr = finite(text)?;
    if lr > 0.0 {
        Ok(lr)
    } else {
        Err(format!(
            "the learning rate must be above 0 (a rate of {lr} does not descend the loss)"
        ))
    }
}

/// `--momentum`: in [0, 1); at 1 or above the velocity never decays and SGD diverges.
fn momentum(text: &str) -> Result<f64, String> {
    let momentum = finite(text)?;
    if (0.0..1.0).contains(&momentum) {
        Ok(momentum)
    } else {
        Err(format!(
            "momentum must be at least 0 (0 turns it off) and below 1, not {momentum}"
        ))
    }
}

/// `--weight-decay`: 0 (off) or more; a negative decay would grow the weights.
fn weight_decay(text: &str) -> Result<f64, String> {
    let decay = finite(text)?;
    if decay >= 0.0 {
        Ok(decay)
    } else {
        Err(format!(
            "weight decay must be at least 0 (0 turns it off), not {decay}"
        ))
    }
}

impl TrainOptions {
    /// The checkpoint mode, `--efficient` included.
    pub fn checkpoint_mode(&self) -> CheckpointMode {
        if self.efficient {
            CheckpointMode::Regions
        } else {
            self.checkpoint
        }
    }
}

/// What a training step keeps between forward and backward.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum CheckpointMode {
    /// Plain `Autodiff<I>`: every activation backward needs is held.
    None,
    /// Burn's `Autodiff<I, BalancedCheckpointing>`: cheap (memory-bound) ops are recomputed.
    Balanced,
    /// `Checkpointed<Autodiff<I, BalancedCheckpointing>>`, each dense layer a region.
    Regions,
    /// As `Regions`, the regions keeping convolution and pooling outputs (`SaveComputeBound`).
    RegionsSaveCompute,
}

impl CheckpointMode {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            CheckpointMode::None => "none",
            CheckpointMode::Balanced => "balanced",
            CheckpointMode::Regions => "regions",
            CheckpointMode::RegionsSaveCompute => "regions-save-compute",
        }
    }

    /// The method, as the report's table names it.
    pub fn method(self) -> &'static str {
        match self {
            CheckpointMode::None => "plain Autodiff",
            CheckpointMode::Balanced => "Burn BalancedCheckpointing",
            CheckpointMode::Regions => "regions (dense layer)",
            CheckpointMode::RegionsSaveCompute => "regions (dense layer, SaveComputeBound)",
        }
    }

    /// Where the model puts its regions, and what they keep.
    pub fn cut(self) -> (Cut, RegionPolicy) {
        match self {
            CheckpointMode::None | CheckpointMode::Balanced => {
                (Cut::None, RegionPolicy::RecomputeAll)
            }
            CheckpointMode::Regions => (Cut::Layer, RegionPolicy::RecomputeAll),
            CheckpointMode::RegionsSaveCompute => (Cut::Layer, RegionPolicy::SaveComputeBound),
        }
    }
}

/// One device of `--devices`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeviceSpec {
    /// The CPU (burn-flex).
    Cpu,
    /// A CUDA GPU, by index.
    Cuda(usize),
}

impl std::fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceSpec::Cpu => write!(f, "cpu"),
            DeviceSpec::Cuda(index) => write!(f, "cuda:{index}"),
        }
    }
}

/// Parses `--devices`: `cpu`, `cuda` (= `cuda:0`), `cuda:N`, comma-separated.
pub fn parse_devices(list: &str) -> Result<Vec<DeviceSpec>, String> {
    let devices = list
        .split(',')
        .map(|item| {
            let item = item.trim();
            match item.split_once(':') {
                None if item == "cpu" => Ok(DeviceSpec::Cpu),
                None if item == "cuda" => Ok(DeviceSpec::Cuda(0)),
                Some(("cuda", index)) => index.parse().map(DeviceSpec::Cuda).map_err(|_| {
                    format!("`{item}` in --devices: the CUDA index must be a number, as in cuda:0")
                }),
                _ => Err(format!(
                    "`{item}` in --devices is not a device: use cpu, or cuda:0,cuda:1,…"
                )),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    let first = devices[0];
    if devices
        .iter()
        .any(|d| std::mem::discriminant(d) != std::mem::discriminant(&first))
    {
        return Err(format!(
            "--devices {list} mixes kinds of device; give only cpu or only cuda:N devices"
        ));
    }
    Ok(devices)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_device_lists() {
        assert_eq!(parse_devices("cpu").unwrap(), vec![DeviceSpec::Cpu]);
        assert_eq!(
            parse_devices("cuda:0, cuda:3").unwrap(),
            vec![DeviceSpec::Cuda(0), DeviceSpec::Cuda(3)]
        );
        assert_eq!(parse_devices("cuda").unwrap(), vec![DeviceSpec::Cuda(0)]);
        assert!(parse_devices("gpu").unwrap_err().contains("`gpu`"));
        assert!(parse_devices("cuda:x").unwrap_err().contains("number"));
        assert!(parse_devices("cpu,cuda:0").unwrap_err().contains("mixes"));
        assert!(parse_devices("").is_err());
    }

    #[test]
    fn efficient_is_regions_and_conflicts_with_checkpoint() {
        let options = TrainOptions::try_parse_from(["train", "--efficient"]).unwrap();
        assert_eq!(options.checkpoint_mode(), CheckpointMode::Regions);
        let options = TrainOptions::try_parse_from(["train", "--checkpoint", "none"]).unwrap();
        assert_eq!(options.checkpoint_mode(), CheckpointMode::None);
        assert!(
            TrainOptions::try_parse_from(["train", "--efficient", "--checkpoint", "none"]).is_err()
        );
        assert!(TrainOptions::try_parse_from(["train", "--resume"]).is_err());
    }

    #[test]
    fn hyperparameters_outside_their_range_are_refused() {
        let parse = |flag: &str, value: &str| {
            TrainOptions::try_parse_from(["train", &format!("{flag}={value}")])
                .map(|o| (o.lr, o.momentum, o.weight_decay))
                .map_err(|e| e.to_string())
        };
        for (flag, value, says) in [
            ("--lr", "nan", "not a finite number"),
            ("--lr", "inf", "not a finite number"),
            ("--lr", "-1", "above 0"),
            ("--lr", "0", "above 0"),
            ("--lr", "fast", "not a number"),
            ("--momentum", "nan", "not a finite number"),
            ("--momentum", "-0.5", "at least 0"),
            ("--momentum", "1", "below 1"),
            ("--momentum", "1.5", "below 1"),
            ("--weight-decay", "nan", "not a finite number"),
            ("--weight-decay", "-1e-4", "at least 0"),
        ] {
            let error = parse(flag, value).expect_err(&format!("{flag} {value}"));
            assert!(error.contains(says), "{flag} {value}: {error}");
            assert!(error.contains(flag), "{flag} {value}: {error}");
        }
        assert_eq!(parse("--lr", "0.05").unwrap().0, 0.05);
        assert_eq!(parse("--momentum", "0").unwrap().1, 0.0);
        assert_eq!(parse("--momentum", "0.99").unwrap().1, 0.99);
        assert_eq!(parse("--weight-decay", "0").unwrap().2, 0.0);
    }
}
