//! A run that runs out of device memory, on a real failure: Burn's wgpu (Mesa's
//! lavapipe in CI) with every buffer capped by cubecl's own memory configuration, so that the
//! device thread refuses an allocation as a full device does ("can't allocate buffer of size: N",
//! a panic on cubecl's device thread; bench-kit's `allocation_failure` test pins that down).
//!
//! The first epoch trains in a process of its own (on the CPU: a resume may change devices) and
//! is saved; the second runs here on one wgpu device, in this process, whose device has its
//! buffers capped before its first tensor (`running_out`, shared with the data-parallel case in
//! `out_of_memory_parallel`). The run must stop with the failure's error and exit status, print
//! what the step held and the budget that would fit, write its report, and leave the save as it
//! was.

mod common;
mod running_out;

use app_kit::out_of_memory::budget_size;
use densenet_bc::train::RanOutOfMemory;
use running_out::{capped_device, epoch_2_runs_out_of_memory_on, suggestion};

#[test]
fn a_step_out_of_device_memory_stops_the_run_with_its_report_and_keeps_the_save() {
    if !capped_device() {
        return;
    }
    let (error, printed) = epoch_2_runs_out_of_memory_on("wgpu");
    // The invocation's first step is recorded: the failure comes with what each region held.
    assert!(
        printed.contains("the step was") && printed.contains("held MiB"),
        "{printed}"
    );
    // What would fit: the room (what the device had reserved when it refused, less what was
    // held before the step) as the budget.
    let failure = error.downcast_ref::<RanOutOfMemory>().unwrap();
    let room = failure
        .room_bytes()
        .expect("a device's meter reads reserved bytes");
    let said = suggestion(&printed);
    assert!(
        said.contains(&format!("--memory-budget {}", budget_size(room))),
        "{said}"
    );
}
