//! A training step's device memory as a user sees it: bytes in use and bytes reserved by
//! cubecl's memory manager (what `nvidia-smi` shows), measured with the library's
//! [`Meter`] over consecutive steps of one process (see [`child`](crate::child) for one
//! process per method).

use std::time::Instant;

use burn_checkpoint::memory::{Measure, MemoryMeter, Meter};
use serde::{Deserialize, Serialize};

/// A method's steps on a device, after warm-up steps (the first steps allocate the optimizer's
/// state and tune kernels).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepFigures {
    /// Bytes in use when a step begins (the model, the optimizer's state), absolute.
    pub base: u64,
    /// The most bytes in use during a step, above `base`.
    pub in_use_peak: u64,
    /// Bytes in use between forward and backward, above `base`.
    pub held: u64,
    /// The most bytes reserved during a step (absolute: the pages the memory manager holds).
    pub reserved_peak: u64,
    /// Bytes reserved after the last step.
    pub reserved_after: u64,
    /// The median step time, seconds.
    pub seconds: f64,
}

impl StepFigures {
    /// The least reserved a step can need: what is live at its peak.
    pub fn live_peak(&self) -> u64 {
        self.base + self.in_use_peak
    }
}

/// Runs `warm_up` then `steps` steps of `step`, each given the step's [`Measure`] (its
/// [`now`](Measure::now) between forward and backward is the bytes held; `step` returns it).
pub fn measure_steps(
    meter: &Meter,
    warm_up: usize,
    steps: usize,
    mut step: impl FnMut(&Measure) -> u64,
) -> StepFigures {
    let mut figures = StepFigures::default();
    let mut times = Vec::new();
    for index in 0..warm_up + steps {
        let started = Instant::now();
        // Settles the device: what is in use now is the step's start.
        let measure = meter.start();
        let base = meter.in_use();
        let held = step(&measure);
        let peak = measure.finish();
        let elapsed = started.elapsed().as_secs_f64();
        if index >= warm_up {
            times.push(elapsed);
            figures.base = figures.base.max(base);
            figures.in_use_peak = figures.in_use_peak.max(peak.in_use);
            figures.held = figures.held.max(held);
            figures.reserved_peak = figures.reserved_peak.max(peak.reserved.unwrap_or(0));
        }
    }
    figures.reserved_after = meter.reserved().unwrap_or(0);
    times.sort_by(f64::total_cmp);
    figures.seconds = times.get(times.len() / 2).copied().unwrap_or(f64::NAN);
    figures
}
