//! A data-parallel run that runs out of device memory: the trainer's two workers on
//! one wgpu device listed twice (`--devices wgpu,wgpu`), its buffers capped as in
//! `out_of_memory` (`running_out` holds what the two binaries share).
//!
//! The same stop as on one device (the error, exit status 3, the report of the epochs done, the
//! save as it was), with two differences: the workers' regions run on their own threads, which
//! the first step's recording (the calling thread's) would not see, so no step is recorded; and
//! a budget plan runs on one device, so the suggestion says what a data-parallel run can change
//! instead of a `--memory-budget` it would refuse.

mod common;
mod running_out;

use densenet_bc::train::RanOutOfMemory;
use running_out::{capped_device, epoch_2_runs_out_of_memory_on, suggestion};

#[test]
fn a_data_parallel_step_out_of_device_memory_stops_the_run_and_says_what_it_can_change() {
    if !capped_device() {
        return;
    }
    let (error, printed) = epoch_2_runs_out_of_memory_on("wgpu,wgpu");
    let failure = error.downcast_ref::<RanOutOfMemory>().unwrap();
    assert_eq!(failure.failure.at, "not recorded", "{error:#}");
    assert!(!printed.contains("held MiB"), "{printed}");
    let said = suggestion(&printed);
    assert!(
        said.contains("cannot take --memory-budget")
            && said.contains("lower --batch-size (each of the 2 devices takes 2 of the 4 images)")
            && said.contains("--memory-budget"),
        "{said}"
    );
}
