//! The trainers' table, one row per method (the reference demo's form: Method | # devices |
//! Batch | Memory | Time per step, and the accuracy reached): the trainer for Burn 0.21 prints
//! one row, the one for Burn 0.22 one per method it trained. A device's rows add the bytes its
//! memory manager reserved, and a planned row (`--memory-budget`) the plan's predicted peak and
//! the peak of the step the planner checked it on.
//!
//! ```
//! use app_kit::table::{MethodRow, PlanPeaks, markdown};
//!
//! let row = MethodRow {
//!     method: "regions".into(),
//!     devices: 1,
//!     batch: 64,
//!     peak_step_bytes: 3 << 20,
//!     reserved_bytes: None,
//!     plan_peaks: None,
//!     median_step_seconds: 0.25,
//!     valid_accuracy: 0.5,
//! };
//! let planned = MethodRow {
//!     method: "regions, planned for 4.0 MiB".into(),
//!     plan_peaks: Some(PlanPeaks { predicted_bytes: 7 << 19, checked_bytes: 4 << 20 }),
//!     ..row.clone()
//! };
//! let table = markdown(&[row, planned]);
//! assert!(table.contains("| regions | 1 | 64 | 3.0 MiB | - | 0.250 s | 50.00% |"));
//! assert!(table.contains("| 3.0 MiB | 3.5 / 4.0 MiB | 0.250 s |"));
//! ```

use burn_checkpoint_core::memory::mib;
use serde::{Deserialize, Serialize};

/// One method's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MethodRow {
    /// The method, as the table names it.
    pub method: String,
    /// Devices trained on.
    pub devices: usize,
    /// Images per step.
    pub batch: usize,
    /// The largest step's peak memory above its start, in bytes.
    pub peak_step_bytes: usize,
    /// On a device, the most bytes its memory manager held during a step; `None` on the host.
    pub reserved_bytes: Option<usize>,
    /// Where the steps ran under the budget planner's plan: its predicted peak and the checked
    /// step's, measured as the budget is (on a device, the bytes reserved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_peaks: Option<PlanPeaks>,
    /// The median step time, in seconds.
    pub median_step_seconds: f64,
    /// The last validation's accuracy, as a fraction.
    pub valid_accuracy: f64,
}

/// A planned row's peaks: what the plan predicted, and what the step it was checked on peaked at
/// (in bytes, as the budget counts them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanPeaks {
    /// The plan's predicted peak.
    pub predicted_bytes: u64,
    /// The checked step's peak.
    pub checked_bytes: u64,
}

/// The rows as a markdown table; a Reserved column when any row has a device's figure, a Plan
/// column (predicted / checked peak) when any row was planned.
pub fn markdown(rows: &[MethodRow]) -> String {
    let reserved = rows.iter().any(|row| row.reserved_bytes.is_some());
    let planned = rows.iter().any(|row| row.plan_peaks.is_some());
    let mut head = String::new();
    if reserved {
        head += " Reserved |";
    }
    if planned {
        head += " Plan: predicted / checked |";
    }
    let rule = "---|".repeat(usize::from(reserved) + usize::from(planned));
    let mut table = format!(
        "| Method | # devices | Batch | Memory |{head} Time per step | Valid accuracy |\n\
         |---|---|---|---|{rule}---|---|\n"
    );
    for row in rows {
        let mut extra = match (reserved, row.reserved_bytes) {
            (false, _) => String::new(),
            (true, Some(bytes)) => format!(" {:.1} MiB |", mib(bytes)),
            (true, None) => " - |".to_string(),
        };
        extra += &match (planned, row.plan_peaks) {
            (false, _) => String::new(),
            (true, Some(peaks)) => format!(
                " {:.1} / {:.1} MiB |",
                mib(peaks.predicted_bytes as usize),
                mib(peaks.checked_bytes as usize)
            ),
            (true, None) => " - |".to_string(),
        };
        table += &format!(
            "| {} | {} | {} | {:.1} MiB |{extra} {:.3} s | {:.2}% |\n",
            row.method,
            row.devices,
            row.batch,
            mib(row.peak_step_bytes),
            row.median_step_seconds,
            100.0 * row.valid_accuracy
        );
    }
    table
}
