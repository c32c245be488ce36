//! A run that runs out of device memory, as both trainers end it: the error that stops it
//! ([`RanOutOfMemory`]), the exit status that tells it from the other errors ([`EXIT_STATUS`],
//! [`exit_status`]) and the size a suggested `--memory-budget` is written in ([`budget_size`]).
//!
//! Each trainer runs its steps under `burn_checkpoint_core`'s out-of-memory watch
//! ([`OutOfMemory::catch`](burn_checkpoint_core::memory::OutOfMemory::catch)) and turns a failure
//! into a [`RanOutOfMemory`] naming where the run was; what it keeps and what it suggests are its
//! own (docs/trainer.md, docs/burn-0.22-train.md).

use std::fmt;

use burn_checkpoint_core::memory::{OutOfMemory, mib};

/// The exit status of a run stopped by a failed allocation (1: any other error, 2: a flag
/// error, clap's).
pub const EXIT_STATUS: u8 = 3;

/// A step or validation batch that failed to allocate on the device.
#[derive(Debug)]
pub struct RanOutOfMemory {
    /// What the watch caught.
    pub failure: Box<OutOfMemory>,
    /// Where the run was: `epoch 2, training step 5`, `epoch 2, validation batch 3`.
    pub during: String,
    /// The bytes in use when that step started: what the run holds between steps (weights,
    /// optimizer state), which a budget (`--memory-budget`) does not count.
    pub base_bytes: u64,
}

impl RanOutOfMemory {
    /// The bytes a step had room for: what the device had reserved when it refused an
    /// allocation, less what was held before the step. `None` where the meter gave no reserved
    /// bytes (the host's).
    pub fn room_bytes(&self) -> Option<u64> {
        let reserved = self.failure.reserved_bytes?;
        Some(reserved.saturating_sub(self.base_bytes))
    }
}

impl fmt::Display for RanOutOfMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let requested = self
            .failure
            .requested_bytes
            .map_or("an allocation".to_string(), |bytes| {
                format!("an allocation of {:.1} MiB", mib(bytes as usize))
            });
        write!(
            f,
            "{} ran out of device memory: {requested} failed ({}: {})",
            self.during, self.failure.thread, self.failure.message
        )
    }
}

impl std::error::Error for RanOutOfMemory {}

/// The exit status of a run refused before its first step ([`Refused`]): a flag's value the run
/// could not use (as clap's own flag errors).
pub const REFUSED_STATUS: u8 = 2;

/// A run refused before its first step: an output it could not write, an input it could not
/// read, a flag's value outside the run. What it says is the whole message.
#[derive(Debug)]
pub struct Refused(pub String);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// The process's exit status for a run that ended with `error`: [`EXIT_STATUS`] where a
/// [`RanOutOfMemory`] is in its chain, [`REFUSED_STATUS`] where it was [`Refused`] before its
/// first step, 1 otherwise.
///
/// ```
/// use app_kit::out_of_memory::{Refused, exit_status};
///
/// assert_eq!(exit_status(&anyhow::anyhow!("--depth 11 is not a DenseNet-BC depth")), 1);
/// let refused = anyhow::Error::new(Refused("--json /: a directory".into()));
/// assert_eq!(exit_status(&refused), 2);
/// ```
pub fn exit_status(error: &anyhow::Error) -> u8 {
    if error.downcast_ref::<RanOutOfMemory>().is_some() {
        EXIT_STATUS
    } else if error.downcast_ref::<Refused>().is_some() {
        REFUSED_STATUS
    } else {
        1
    }
}

/// `bytes` as the trainers' size flags take it (`--memory-budget`): whole MiB, rounded down (a
/// budget never above `bytes`), or bytes below one MiB.
///
/// ```
/// use app_kit::out_of_memory::budget_size;
///
/// assert_eq!(budget_size((5 << 20) + 1), "5MiB");
/// assert_eq!(budget_size(1000), "1000");
/// ```
pub fn budget_size(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{}MiB", bytes >> 20)
    } else {
        bytes.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_failed_allocation_has_its_own_status() {
        let failure: Box<OutOfMemory> = serde_json::from_value(serde_json::json!({
            "report": burn_checkpoint_core::memory::StepReport::default(),
            "at": "not recorded",
            "requested_bytes": 4194304,
            "in_use_bytes": 1048576,
            "reserved_bytes": 3145728,
            "thread": "DSD-4-0",
            "message": "can't allocate buffer of size: 4194304",
            "step_message": "CallError",
        }))
        .unwrap();
        let stopped = RanOutOfMemory {
            failure,
            during: "epoch 2, training step 1".to_string(),
            base_bytes: 1 << 20,
        };
        assert_eq!(stopped.room_bytes(), Some(2 << 20));
        assert_eq!(
            stopped.to_string(),
            "epoch 2, training step 1 ran out of device memory: an allocation of 4.0 MiB failed \
             (DSD-4-0: can't allocate buffer of size: 4194304)"
        );
        // Under the context the run adds, the status is still the failure's.
        let error = anyhow::Error::new(stopped).context("training stopped");
        assert_eq!(exit_status(&error), EXIT_STATUS);
    }
}
