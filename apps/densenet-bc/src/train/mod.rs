//! The example trainer behind the `train` binary: options, the epoch loop, the per-device step
//! runner, memory measurement, save/resume and the report.

pub mod backend;
mod epoch;
pub mod options;
pub mod outputs;
pub mod parallel;
pub mod planning;
pub mod progress;
pub mod report;
pub mod run;
pub mod runner;
pub mod save;

pub use options::{DeviceSpec, TrainOptions, parse_devices};
// A run stopped by a failed allocation: app-kit's, shared with train22.
pub use app_kit::out_of_memory::{EXIT_STATUS, RanOutOfMemory, exit_status};
pub use parallel::Parallel;
pub use report::{EpochReport, Report};
pub use run::run;
pub use runner::{SingleDevice, StepRunner};
