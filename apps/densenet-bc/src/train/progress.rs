//! What the trainer shows while it runs: an indicatif bar per epoch (loss, accuracy, images/s,
//! ETA) on standard error, hidden when that is not a terminal, and one line per epoch on
//! standard output.

use std::io::Write;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};

use super::report::EpochReport;

/// The bar of an epoch's `steps` training steps.
pub fn epoch_bar(epoch: usize, epochs: usize, steps: usize) -> ProgressBar {
    let bar = ProgressBar::new(steps as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "epoch {prefix} [{bar:30.cyan/blue}] {pos}/{len} {msg} ETA {eta}",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    bar.set_prefix(format!("{}/{epochs}", epoch + 1));
    bar
}

/// The bar of a validation pass over `batches` batches.
pub fn valid_bar(batches: usize) -> ProgressBar {
    let bar = ProgressBar::new(batches as u64);
    bar.set_style(
        ProgressStyle::with_template("validation [{bar:30}] {pos}/{len} ETA {eta}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    bar
}

/// The running figures shown on an epoch's bar.
pub fn step_message(mean_loss: f64, accuracy: Option<f64>, images_per_second: f64) -> String {
    format!(
        "loss {mean_loss:.4} acc {} {images_per_second:.0} img/s",
        percent(accuracy, 1)
    )
}

/// A fraction as a percentage, or `n/a`.
fn percent(fraction: Option<f64>, decimals: usize) -> String {
    fraction.map_or("n/a".into(), |f| format!("{:.decimals$}%", 100.0 * f))
}

/// The line printed when an epoch ends.
pub fn epoch_line(epochs: usize, report: &EpochReport) -> String {
    format!(
        "epoch {}/{epochs}: lr {} | train loss {:.4} acc {} | valid loss {:.4} acc {:.2}% ({} images) | {:.0} img/s | {:.1} s",
        report.epoch,
        report.lr,
        report.train_loss,
        percent(report.train_accuracy, 2),
        report.valid_loss,
        100.0 * report.valid_accuracy,
        report.valid_images,
        report.images_per_second,
        report.seconds
    )
}

/// Where the run's lines go (standard output in the binary), each flushed as it is written: a
/// closed pipe or a full disk is an error the run handles, not a panic.
pub struct Console<'a> {
    out: &'a mut dyn Write,
}

impl<'a> Console<'a> {
    /// Lines to `out`.
    pub fn new(out: &'a mut dyn Write) -> Self {
        Console { out }
    }

    /// Writes `text` and a newline, flushed.
    pub fn line(&mut self, text: &str) -> anyhow::Result<()> {
        writeln!(self.out, "{text}")
            .and_then(|()| self.out.flush())
            .context("cannot write to standard output")
    }
}
