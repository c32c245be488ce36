//! The trainer's settings, as command-line flags (clap derive: `--help` is these doc comments).

use std::path::PathBuf;

use app_kit::args::{Sgd, byte_size, positive};
use app_kit::densenet::DenseNetShape;
use app_kit::timeline::TimelineArgs;
use burn_checkpoint_parallel::NodeArgs;
use clap::Parser;

use crate::Method;
use crate::data::DataSource;

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

    /// What is kept between forward and backward. plain: plain Autodiff, everything;
    /// balanced: Burn's BalancedCheckpointing (cheap ops recomputed); layer: burn-checkpoint
    /// regions around each dense layer, on top of balanced (least memory); layer-save: the same
    /// regions keeping convolution outputs (recomputes only cheap ops); the others as the
    /// benchmark's methods (docs/densenet.md).
    #[arg(long, value_enum, default_value = "layer")]
    pub checkpoint: Method,

    /// The reference demo's flag: the same as --checkpoint layer.
    #[arg(long, conflicts_with = "checkpoint")]
    pub efficient: bool,

    /// Images per training step (on all devices together) and per validation batch.
    #[arg(long, default_value_t = 64, value_parser = positive())]
    pub batch_size: usize,

    /// The devices, comma-separated: cpu, cuda:0,cuda:1,… (the `cuda` feature), or wgpu (the
    /// default adapter), wgpu:0,wgpu:1,… (discrete GPUs; the `wgpu` feature). Several devices,
    /// or one listed several times, train data-parallel.
    #[arg(long, default_value = "cpu", value_name = "LIST")]
    pub devices: String,

    /// Epochs to train in total (with --resume: including those already done).
    #[arg(long, default_value_t = 300, value_parser = positive())]
    pub epochs: usize,

    /// The optimizer: `--lr`, `--momentum`, `--weight-decay`.
    #[command(flatten)]
    pub sgd: Sgd,

    /// The DenseNet-BC: `--depth`, `--growth` (also `--growth-rate`).
    #[command(flatten)]
    pub densenet: DenseNetShape,

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

    /// Before training, profile a step region by region (three steps on a copy of the model,
    /// every dense layer's region kept, saving compute-bound outputs, recomputing all) and print
    /// the memory report; with FILE, also write it (and any plan) there as JSON.
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = None)]
    pub memory_report: Option<Option<PathBuf>>,

    /// Fit each training step in SIZE (6GiB, 512MiB, 1.5GB, or bytes): the budget planner
    /// chooses, for each dense layer's region, keep, save-compute-bound or recompute-all at the
    /// least recompute time, from steps profiled on a copy of the model, and checks the plan on
    /// a step; an error says the smallest peak reachable if SIZE cannot be met. SIZE is the
    /// step's peak above what is held between steps (the weights and optimizer state), the
    /// figure the report's peak step memory gives. Needs a --checkpoint with regions (layer,
    /// layer-save, …) and one device.
    #[arg(long, value_name = "SIZE", value_parser = byte_size)]
    pub memory_budget: Option<u64>,

    /// Train with the largest batch whose step fits in SIZE under a budget plan (found with a
    /// few profiled steps on a copy of the model; replaces --batch-size).
    #[arg(long, value_name = "SIZE", value_parser = byte_size, conflicts_with_all = ["memory_budget", "batch_size", "resume"])]
    pub fit_batch: Option<u64>,

    /// Run the steps under the plan in FILE (written by --save-plan) instead of planning.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["memory_budget", "fit_batch"])]
    pub plan: Option<PathBuf>,

    /// Write the plan --memory-budget or --fit-batch chose to FILE, as JSON (for --plan).
    #[arg(long, value_name = "FILE")]
    pub save_plan: Option<PathBuf>,

    /// Data loader worker threads. With more than 1, burn's loader delivers the workers' batches
    /// in the order they finish, so the batch order (and the exact results) vary between runs.
    #[arg(long, default_value_t = 1, value_parser = positive())]
    pub workers: usize,

    /// Several machines: --nodes, --node-rank, --orchestrator (the `orchestrator` binary's
    /// HOST:PORT), --node-host, --data-port, --collective-timeout; --batch-size is then over all
    /// nodes' devices.
    #[command(flatten)]
    pub cluster: NodeArgs,

    /// A training step's memory over time: `--memory-timeline FILE` (`.svg`, `.png`, `.json`),
    /// `--timeline-step N`, `--timeline-overlay FILE.json` (an earlier method's run drawn too).
    #[command(flatten)]
    pub timeline: TimelineArgs,
}

impl TrainOptions {
    /// The method, `--efficient` included.
    pub fn method(&self) -> Method {
        if self.efficient {
            Method::Layer
        } else {
            self.checkpoint
        }
    }
}

pub use app_kit::devices::{DeviceSpec, parse_devices};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_bytes() {
        let options = TrainOptions::try_parse_from(["train", "--memory-budget", "512MiB"]).unwrap();
        assert_eq!(options.memory_budget, Some(512 << 20));
        let options = TrainOptions::try_parse_from(["train", "--memory-report"]).unwrap();
        assert_eq!(options.memory_report, Some(None));
        assert!(
            TrainOptions::try_parse_from(["train", "--fit-batch", "1GiB", "--batch-size", "8"])
                .is_err(),
            "--fit-batch chooses the batch size"
        );
    }

    #[test]
    fn efficient_is_the_layer_cut_and_conflicts_with_checkpoint() {
        let options = TrainOptions::try_parse_from(["train", "--efficient"]).unwrap();
        assert_eq!(options.method(), Method::Layer);
        let options = TrainOptions::try_parse_from(["train", "--checkpoint", "plain"]).unwrap();
        assert_eq!(options.method(), Method::Plain);
        assert!(
            TrainOptions::try_parse_from(["train", "--efficient", "--checkpoint", "none"]).is_err()
        );
        assert!(TrainOptions::try_parse_from(["train", "--resume"]).is_err());
    }

    #[test]
    fn the_other_trainers_and_benchmarks_words_are_aliases() {
        let options = TrainOptions::try_parse_from(["train", "--checkpoint", "regions-save"]);
        assert_eq!(options.unwrap().method(), Method::LayerSave);
        let options = TrainOptions::try_parse_from(["train", "--growth", "24"]).unwrap();
        assert_eq!(options.densenet.growth, 24);
    }

    #[test]
    fn hyperparameters_outside_their_range_are_refused() {
        let parse = |flag: &str, value: &str| {
            TrainOptions::try_parse_from(["train", &format!("{flag}={value}")])
                .map(|o| (o.sgd.lr, o.sgd.momentum, o.sgd.weight_decay))
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
