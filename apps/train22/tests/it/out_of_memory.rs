//! A `train22` run that runs out of device memory, on wgpu's real failure (Mesa's lavapipe in
//! CI): a wgpu device of the test's own whose buffers are capped by wgpu's own limits
//! (`max_buffer_size`; `wgpu_device_of_its_own`), so that cubecl refuses an
//! allocation above the cap as a full device refuses one (its `BufferTooBig`: "can't allocate
//! buffer of size: N"). The run must stop at its first step with the failure's error and exit
//! status, print the core's report (the first step is recorded: what each region held) and the
//! budget that would fit, write the step's timeline up to the failure (`--memory-timeline`), and
//! leave the user's files where they were.
//!
//! `cargo test --manifest-path apps/train22/Cargo.toml --features wgpu --test it out_of_memory`

use app_kit::out_of_memory::{EXIT_STATUS, RanOutOfMemory, budget_size, exit_status};
use app_kit::timeline::Overlay;
use burn::tensor::Device;
use burn_checkpoint_22::memory::MemoryMeter;
use burn_checkpoint_22_train::devices::{Devices, wgpu_device_of_its_own};
use burn_checkpoint_22_train::run::run;
use burn_checkpoint_22_train::stop::StopRequest;
use burn_checkpoint_22_train::trainer::Options;
use clap::Parser;

/// Every buffer the capped device may allocate: the weights, a batch of 4 synthetic images (48
/// KiB) and DenseNet-BC-10's first convolution's output (4 × 24 × 32 × 32 floats: 384 KiB) fit,
/// the first dense layer's bottleneck (4 × 48 × 32 × 32 floats: 768 KiB) does not.
const CAP: u64 = 512 << 10;

/// A wgpu device of its own on the default adapter (lavapipe here), its buffers capped at
/// [`CAP`]: the other tests' devices are untouched by its failures. `None` where there is no
/// adapter.
fn capped_device() -> Option<Device> {
    app_kit::vulkan::runtime_dir();
    wgpu_device_of_its_own(None, |limits| {
        limits.max_buffer_size = CAP;
        limits.max_storage_buffer_binding_size = CAP;
    })
    .ok()
}

#[test]
fn a_step_out_of_device_memory_stops_the_run_with_its_report_and_keeps_the_users_files() {
    let _alone = crate::alone();
    let Some(capped) = capped_device() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "no Vulkan adapter: CI installs Mesa's lavapipe (scripts/setup)"
        );
        eprintln!("skipped: no Vulkan adapter");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let artifacts = dir.path().join("artifacts");
    std::fs::create_dir(&artifacts).unwrap();
    let mine = artifacts.join("notes.txt");
    std::fs::write(&mine, "the user's own file").unwrap();
    let json = dir.path().join("rows.json");
    let timeline = dir.path().join("step.json");
    let mut options = Options::try_parse_from([
        "train22",
        "--data",
        "synthetic",
        "--depth",
        "10",
        "--batch-size",
        "4",
        "--limit",
        "2",
        "--valid-limit",
        "1",
        "--checkpoint",
        "regions",
        "--artifact-dir",
        artifacts.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--memory-timeline",
        timeline.to_str().unwrap(),
    ])
    .unwrap();
    options.devices = Devices::of(vec![capped]);
    let meter = options.devices.meter();
    assert!(meter.reserved().is_some(), "{}", meter.describe());

    let mut out = Vec::new();
    let error = run(&options, &meter, &StopRequest::new(), &mut out)
        .expect_err("a step cannot allocate on the device");
    let printed = String::from_utf8(out).unwrap();
    println!("{printed}\nerror: {error:#}");

    assert_eq!(exit_status(&error), EXIT_STATUS, "{error:#}");
    let stopped = error
        .downcast_ref::<RanOutOfMemory>()
        .expect("the failure under the run's context");
    assert_eq!(stopped.during, "epoch 1, training step 1", "{error:#}");
    let requested = stopped
        .failure
        .requested_bytes
        .expect("cubecl names the bytes");
    assert!(requested > CAP, "{error:#}");
    assert!(
        format!("{error:#}").contains("training with --checkpoint regions stopped"),
        "{error:#}"
    );
    // The core's report: the failure, and (the first step is recorded) what each region held.
    assert!(
        printed.contains("out of memory: an allocation of"),
        "{printed}"
    );
    assert!(printed.contains("held MiB"), "{printed}");
    // What would fit: the room (reserved when it refused, less what was held before the step).
    let room = stopped
        .room_bytes()
        .expect("a device's meter reads reserved bytes");
    let suggestion = printed
        .lines()
        .find(|line| line.starts_with("what would fit: "))
        .unwrap_or_else(|| panic!("no suggestion in:\n{printed}"));
    assert!(
        suggestion.contains(&format!("--memory-budget {}", budget_size(room))),
        "{suggestion}"
    );
    // The user's files are where they were; no method finished, so no rows were written.
    assert_eq!(
        std::fs::read_to_string(&mine).unwrap(),
        "the user's own file"
    );
    assert!(!json.exists(), "no finished method's rows to write");
    // Asked for, the step's timeline up to the failure: on the device, its pools' bytes.
    let written: Overlay =
        serde_json::from_str(&std::fs::read_to_string(&timeline).unwrap()).unwrap();
    let labels: Vec<&str> = written.runs.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(labels, ["out of memory at epoch 1, training step 1"]);
    let drawn = &written.runs[0].timeline;
    assert!(!drawn.points.is_empty());
    assert!(
        drawn.points.iter().all(|p| p.reserved.is_some()),
        "a device's"
    );
    assert!(printed.contains("memory timeline: "), "{printed}");
}
