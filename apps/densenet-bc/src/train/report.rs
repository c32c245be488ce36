//! The trainer's results: per-epoch figures, and at the end a table in the reference's form
//! (Method | # devices | Batch | Memory | Time per step) plus accuracy, as markdown and JSON.

use anyhow::Context;
use app_kit::table::{MethodRow, PlanPeaks, markdown};
use burn_checkpoint::planner::{Plan, Profile};
use serde::{Deserialize, Serialize};

/// One epoch's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochReport {
    /// The epoch, from 1.
    pub epoch: usize,
    /// The learning rate used.
    pub lr: f64,
    /// Training steps.
    pub steps: usize,
    /// The mean of the steps' losses.
    pub train_loss: f64,
    /// Training images classified right (by the model before each step), as a fraction; `None`
    /// when the runner's steps do not report it.
    pub train_accuracy: Option<f64>,
    /// Mean loss on the validation images.
    pub valid_loss: f64,
    /// Validation images classified right, as a fraction.
    pub valid_accuracy: f64,
    /// Validation images evaluated.
    pub valid_images: usize,
    /// Training images per second (training steps only).
    pub images_per_second: f64,
    /// Wall time of the epoch, validation included, in seconds.
    pub seconds: f64,
}

/// The whole run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// The method, as the table names it.
    pub method: String,
    /// `--checkpoint`.
    pub checkpoint: String,
    /// The backend type trained on.
    pub backend: String,
    /// The devices.
    pub devices: Vec<String>,
    /// The number of devices.
    pub device_count: usize,
    /// Images per step.
    pub batch_size: usize,
    /// `--data`.
    pub data: String,
    /// DenseNet-BC depth.
    pub depth: usize,
    /// Growth rate.
    pub growth_rate: usize,
    /// Trainable parameters.
    pub parameters: usize,
    /// The largest step peak memory of this invocation, in bytes (the first step left out when
    /// there are more: it also allocates the optimizer state).
    pub peak_step_bytes: usize,
    /// On a device, the most bytes its memory manager held during any step (what `nvidia-smi`
    /// shows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved_bytes: Option<usize>,
    /// How memory was measured.
    pub memory_meter: String,
    /// The median step time of this invocation, in seconds (the first step, a warm-up, left out
    /// when there are more).
    pub median_step_seconds: f64,
    /// Training steps measured (this invocation).
    pub steps_measured: usize,
    /// The last epoch's validation accuracy, as a fraction.
    pub valid_accuracy: f64,
    /// Every epoch's figures (with `--resume`: the saved run's earlier epochs too).
    pub epochs: Vec<EpochReport>,
    /// Wall time of this invocation, in seconds.
    pub wall_seconds: f64,
    /// What `--memory-report`, `--memory-budget`, `--fit-batch` or `--plan` did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planning: Option<Planning>,
}

impl Report {
    /// The table, in markdown (app-kit's, as the trainer for Burn 0.22 prints it).
    pub fn markdown(&self) -> String {
        markdown(&[MethodRow {
            method: self.method.clone(),
            devices: self.device_count,
            batch: self.batch_size,
            peak_step_bytes: self.peak_step_bytes,
            reserved_bytes: self.reserved_bytes,
            plan_peaks: self.planning.as_ref().and_then(Planning::peaks),
            median_step_seconds: self.median_step_seconds,
            valid_accuracy: self.valid_accuracy,
        }])
    }

    /// What the trainer prints at the end: the table and how its figures were measured.
    pub fn summary(&self) -> String {
        format!(
            "\n{}\nwall time {:.1} s; memory: {}; time per step: median of {} steps",
            self.markdown(),
            self.wall_seconds,
            self.memory_meter,
            self.steps_measured
        )
    }

    /// The report as pretty JSON.
    pub fn json(&self) -> anyhow::Result<Vec<u8>> {
        serde_json::to_vec_pretty(self).context("the report serialises")
    }
}

/// What the planning did, for the report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Planning {
    /// The batch size trained with (`--fit-batch` chooses it).
    pub batch_size: usize,
    /// The budget, in bytes (a step's peak above what it starts with).
    pub budget_bytes: Option<u64>,
    /// The plan the steps run under.
    pub plan: Option<Plan>,
    /// The peak of the checked step under the plan, in bytes.
    pub checked_peak_bytes: Option<u64>,
    /// Profiled steps run on the scratch copy (three per profile, plus the checks).
    pub profiled_steps: usize,
    /// Time the planner spent solving, in seconds.
    pub solve_seconds: f64,
    /// The profile of `--memory-report` (at the batch size), or the extrapolated one planned from.
    pub profile: Option<Profile>,
}

impl Planning {
    /// The table's plan column: the plan's predicted peak and its checked step's (none for a
    /// plan read with `--plan`, which is not checked).
    pub fn peaks(&self) -> Option<PlanPeaks> {
        Some(PlanPeaks {
            predicted_bytes: self.plan.as_ref()?.predicted_peak_bytes,
            checked_bytes: self.checked_peak_bytes?,
        })
    }
}
