//! What a step cost: the figures the benchmark reports.

use std::time::Duration;

/// Timings and counts of the last [`DataParallel::step`](super::DataParallel::step).
///
/// Durations measured on workers are the slowest worker's. The exchange starts only once every
/// worker has finished its backward pass, so `all_reduce` is communication, not waiting for a
/// straggler.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct StepStats {
    /// All-reduce calls each worker made (one per bucket).
    pub all_reduce_calls: usize,
    /// Bytes each worker sent into all-reduce (gradients, buffer updates and padding).
    pub all_reduce_bytes: usize,
    /// Time in all-reduce calls.
    pub all_reduce: Duration,
    /// Forward, backward and packing the gradients into buckets.
    pub compute: Duration,
    /// Unpacking the averaged gradients and the optimizer step.
    pub update: Duration,
    /// The whole step, as the caller waited for it.
    pub step: Duration,
}

impl StepStats {
    /// The share of the step spent in all-reduce calls, between 0 and 1.
    pub fn all_reduce_share(&self) -> f64 {
        if self.step.is_zero() {
            0.0
        } else {
            self.all_reduce.as_secs_f64() / self.step.as_secs_f64()
        }
    }
}
