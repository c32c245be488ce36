//! The trainers' table, one row per method (the reference demo's form: Method | # devices |
//! Batch | Memory | Time per step, and the accuracy reached): the trainer for Burn 0.21 prints
//! one row, the one for Burn 0.22 one per method it trained.
//!
//! ```
//! use app_kit::table::{MethodRow, markdown};
//!
//! let row = MethodRow {
//!     method: "regions".into(),
//!     devices: 1,
//!     batch: 64,
//!     peak_step_bytes: 3 << 20,
//!     reserved_bytes: None,
//!     median_step_seconds: 0.25,
//!     valid_accuracy: 0.5,
//! };
//! let table = markdown(&[row]);
//! assert!(table.contains("| regions | 1 | 64 | 3.0 MiB | 0.250 s | 50.00% |"));
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
    /// The median step time, in seconds.
    pub median_step_seconds: f64,
    /// The last validation's accuracy, as a fraction.
    pub valid_accuracy: f64,
}

/// The rows as a markdown table; a Reserved column when any row has a device's figure.
pub fn markdown(rows: &[MethodRow]) -> String {
    let reserved = rows.iter().any(|row| row.reserved_bytes.is_some());
    let (head, rule) = if reserved {
        (" Reserved |", "---|")
    } else {
        ("", "")
    };
    let mut table = format!(
        "| Method | # devices | Batch | Memory |{head} Time per step | Valid accuracy |\n\
         |---|---|---|---|{rule}---|---|\n"
    );
    for row in rows {
        let reserved = match (reserved, row.reserved_bytes) {
            (false, _) => String::new(),
            (true, Some(bytes)) => format!(" {:.1} MiB |", mib(bytes)),
            (true, None) => " - |".to_string(),
        };
        table += &format!(
            "| {} | {} | {} | {:.1} MiB |{reserved} {:.3} s | {:.2}% |\n",
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
