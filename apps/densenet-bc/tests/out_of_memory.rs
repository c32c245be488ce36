//! A run that runs out of device memory (issue 49), on a real failure: Burn's wgpu (Mesa's
//! lavapipe in CI) with every buffer capped by cubecl's own memory configuration, so that the
//! device thread refuses an allocation as a full device does ("can't allocate buffer of size: N",
//! a panic on cubecl's device thread; bench-kit's `allocation_failure` test pins that down).
//!
//! The first epoch trains in a process of its own (on the CPU: a resume may change devices) and
//! is saved; the second runs here on wgpu, in this process, whose device has its buffers capped
//! before its first tensor (cubecl takes a device's options once per process, hence a binary of its own). The run
//! must stop with the failure's error and exit status, print what the step held and the budget
//! that would fit, write its report, and leave the save as it was.

use std::panic::catch_unwind;
use std::path::{Path, PathBuf};
use std::process::Command;

use burn::backend::wgpu::WgpuDevice;
use clap::Parser;
use densenet_bc::train::{EXIT_STATUS, RanOutOfMemory, Report, TrainOptions, exit_status, run};

mod common;
use common::{TINY, tree};

/// The tiny settings, two epochs of synthetic images (the devices may change on a resume).
const RUN: &[&str] = &["--data", "synthetic", "--epochs", "2"];

/// Every buffer this process's device may allocate: the batch's images (48 KiB) fit, the first
/// convolution's output (128 KiB) does not.
const CAP: u64 = 64 << 10;

/// The files under `dir` and their bytes, but the lock a run holds (its content is the holder's
/// process id).
fn saved_files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = tree(dir);
    files.retain(|(path, _)| path.file_name().is_some_and(|name| name != "train.lock"));
    files
}

/// A size as `--memory-budget` takes it, as the trainer writes it: whole MiB rounded down, or
/// bytes below one.
fn budget(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{}MiB", bytes >> 20)
    } else {
        bytes.to_string()
    }
}

#[test]
fn a_step_out_of_device_memory_stops_the_run_with_its_report_and_keeps_the_save() {
    // Mesa's lavapipe warns without a runtime directory; any writable one will do. cubecl's
    // least autotuning: a cold process tunes every kernel it meets (minutes on lavapipe), and
    // what this test checks does not depend on which kernel runs.
    // SAFETY: before any wgpu thread starts (this binary's only test).
    unsafe {
        if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
            std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir());
        }
        std::env::set_var("CUBECL_AUTOTUNE_LEVEL", "minimal");
    }
    // The device the trainer's `--devices wgpu` opens, capped before its first tensor.
    if catch_unwind(|| bench_kit::wgpu::cap_buffers(CAP, &WgpuDevice::DefaultDevice)).is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "no Vulkan adapter: CI installs Mesa's lavapipe (scripts/setup)"
        );
        eprintln!("skipped: no Vulkan adapter");
        return;
    }
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
            .chain(&["--devices", "wgpu", "--resume", "--save", save_arg])
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

    // What was printed: the failure with the recorded step's regions (the invocation's first
    // step), then what would fit.
    println!("{printed}");
    assert!(
        printed.contains("out of memory: an allocation of")
            && printed.contains("the step was")
            && printed.contains("held MiB"),
        "{printed}"
    );
    let suggestion = printed
        .lines()
        .find(|line| line.starts_with("what would fit: "))
        .unwrap_or_else(|| panic!("no suggestion in:\n{printed}"));
    // The room: what the device had reserved when it refused, less what was held before.
    let room = failure
        .room_bytes()
        .expect("a device's meter reads reserved bytes");
    assert!(
        suggestion.contains(&format!("--memory-budget {}", budget(room))),
        "{suggestion}"
    );

    // The report of the epochs done is written; the save is as epoch 1 left it.
    let written: Report = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(written.epochs.len(), 1);
    assert_eq!(saved_files(&save), before, "the save changed");
}
