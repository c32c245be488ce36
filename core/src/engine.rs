//! What only the Burn crates call into the core, apart from what their users read: the hooks
//! their region machinery reports a recorded step to, the plan in force on a thread, a device's
//! memory as they implement it, and the names each crate's `memory` and `planner` re-export,
//! written once here. Hidden from the docs, as serde keeps what its derives call in `__private`.

pub use crate::memory::device::{DeviceMemory, Usage};
pub use crate::memory::meter::Reader;
pub use crate::memory::offloaded::{host_copy_dropped, host_copy_made};
pub use crate::names::method_region_name;
pub use crate::planner::plan::planned;

/// The hooks the region machinery reports a recorded step to (`StepReport::measure`); off, each
/// is one thread-local flag read.
pub mod recording {
    pub use crate::memory::recording::{
        current_region, made_outside, on, recompute, top_level_closed, top_level_opened,
    };
}

/// What each Burn crate's `memory` re-exports, beside its own `Meter`, `Measure` and device.
pub mod memory {
    pub use crate::memory::{
        CountingAllocator, MemoryMeter, NameTotals, OffloadedBytes, OutOfMemory, Peak,
        RegionRecord, StepReport, Timeline, timeline,
    };
}

/// What each Burn crate's `planner` re-exports, beside what it runs a plan on.
pub mod planner {
    pub use crate::Treatment;
    pub use crate::planner::{
        Base, Candidate, Candidates, FitError, Fitted, Plan, PlanError, Profile, ProfileError,
        Step, TreatedStep,
    };
}
