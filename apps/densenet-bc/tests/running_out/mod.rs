//! The body the two out-of-memory test binaries share (`out_of_memory`: one device;
//! `out_of_memory_parallel`: the device listed twice, data-parallel). A binary each: cubecl takes
//! a device's memory options once per process, and after a failed allocation the process's
//! device fails its next read too ("CallError"), so a second run in the same process could not
//! start.

use std::panic::catch_unwind;
use std::path::{Path, PathBuf};
use std::process::Command;

use burn::backend::wgpu::WgpuDevice;
use clap::Parser;
use densenet_bc::train::{EXIT_STATUS, RanOutOfMemory, Report, TrainOptions, exit_status, run};

use crate::common::{TINY, tree};

/// The tiny settings, two epochs of synthetic images (the devices may change on a resume).
const RUN: &[&str] = &["--data", "synthetic", "--epochs", "2"];

/// Every buffer this process's device may allocate: the batch's images (48 KiB) fit, the first
/// convolution's output (128 KiB) does not.
pub const CAP: u64 = 64 << 10;

/// The files under `dir` and their bytes, but the lock a run holds (its content is the holder's
/// process id).
fn saved_files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = tree(dir);
    files.retain(|(path, _)| path.file_name().is_some_and(|name| name != "train.lock"));
    files
}

/// Epoch 1 on the CPU in a `train` process of its own, saved; epoch 2 here on `devices` (this
/// process's capped wgpu device), which must stop at its first step with the failure's error
/// and exit status, write the report of epoch 1 and leave the save as it was. Returns the error
/// and what the run printed.
pub fn epoch_2_runs_out_of_memory_on(devices: &str) -> (anyhow::Error, String) {
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("save");
    let report = dir.path().join("report.json");
    let save_arg = save.to_str().unwrap();

    // Epoch 1, in a process of its own on the CPU (seconds, where lavapipe takes a minute),
    // saved.
    let first = Command::new(env!("CARGO_BIN_EXE_train"))
        .args(TINY)
        .args(RUN)
        .args(["--devices", "cpu", "--stop-after", "1", "--save", save_arg])
        .output()
        .unwrap();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let before = saved_files(&save);

    // Epoch 2 here, on the capped device. cubecl's device thread panics a dozen times once an
    // allocation failed: one line each (under RUST_BACKTRACE=1 the default hook would print a
    // backtrace for each).
    let options = TrainOptions::try_parse_from(
        ["train"]
            .iter()
            .chain(TINY)
            .chain(RUN)
            .chain(&["--devices", devices, "--resume", "--save", save_arg])
            .chain(&["--report", report.to_str().unwrap()]),
    )
    .unwrap();
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|info| {
        let thread = std::thread::current();
        let message = info.payload_as_str().unwrap_or("").lines().next();
        eprintln!(
            "panic on {}: {}",
            thread.name().unwrap_or("?"),
            message.unwrap_or("")
        );
    }));
    let mut out = Vec::new();
    let outcome = run(&options, &mut out);
    std::panic::set_hook(default_hook);
    let printed = String::from_utf8(out).unwrap();
    println!("--devices {devices}:\n{printed}");
    // cubecl's device thread goes on after a failed allocation, and on wgpu with fusion the
    // step returns values computed without the buffer (without the watch this run finished,
    // epoch 2's validation loss 10.3 against epoch 1's 2.3): the watch stops it all the same.
    let error = outcome.expect_err("a step of batch 4 cannot allocate on the capped device");

    // The error: the failure's own status, where it happened, what is kept.
    assert_eq!(exit_status(&error), EXIT_STATUS, "{error:#}");
    let failure = error
        .downcast_ref::<RanOutOfMemory>()
        .expect("the failure under the run's context");
    assert_eq!(failure.during, "epoch 2, training step 1", "{error:#}");
    let requested = failure
        .failure
        .requested_bytes
        .expect("cubecl names the bytes");
    assert!(requested > CAP, "{error:#}");
    let said = format!("{error:#}");
    assert!(
        said.contains("training stopped after epoch 1: a step ran out of memory")
            && said.contains("epoch 1 is saved in")
            && said.contains("can't allocate buffer of size"),
        "{said}"
    );
    assert!(
        printed.contains("out of memory: an allocation of"),
        "{printed}"
    );

    // The report of the epochs done is written; the save is as epoch 1 left it.
    let written: Report = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(written.epochs.len(), 1);
    assert_eq!(saved_files(&save), before, "the save changed");
    (error, printed)
}

/// The line of `printed` that says what would fit.
pub fn suggestion(printed: &str) -> &str {
    printed
        .lines()
        .find(|line| line.starts_with("what would fit: "))
        .unwrap_or_else(|| panic!("no suggestion in:\n{printed}"))
}

/// Caps this process's wgpu device (the one the trainer's `--devices wgpu` opens) before its
/// first tensor; `false` where there is no Vulkan adapter (outside CI: the test is skipped).
pub fn capped_device() -> bool {
    app_kit::vulkan::runtime_dir();
    // cubecl's least autotuning: a cold process tunes every kernel it meets (minutes on
    // lavapipe), and what this test checks does not depend on which kernel runs.
    // SAFETY: before any wgpu thread starts (each binary's only test).
    unsafe { std::env::set_var("CUBECL_AUTOTUNE_LEVEL", "minimal") };
    // The device the trainer's `--devices wgpu` opens, capped before its first tensor.
    if catch_unwind(|| bench_kit::wgpu::cap_buffers(CAP, &WgpuDevice::DefaultDevice)).is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "no Vulkan adapter: CI installs Mesa's lavapipe (scripts/setup)"
        );
        eprintln!("skipped: no Vulkan adapter");
        return false;
    }
    true
}
