//! The trainer on wgpu devices (Mesa's lavapipe in CI: `--features wgpu`), DenseNet-BC-10 on
//! synthetic images: the same seed trains the same weights run after run, with and without
//! regions, on one device and on two; regions and plain autodiff train weights that agree within
//! float reassociation (Burn's fusion fuses a recompute with other neighbours than its forward:
//! app-kit's `agreement`); the memory column is the first device's pools, in use and reserved,
//! and a budget is planned and checked there.
//!
//! `cargo test --manifest-path apps/train22/Cargo.toml --features wgpu --test it devices`

use app_kit::agreement::Agreement;
use app_kit::out_of_memory::Refused;
use burn::tensor::{Device, DeviceKind, Tensor};
use burn_checkpoint_22::memory::MemoryMeter;
use burn_checkpoint_22_train::devices::Devices;
use burn_checkpoint_22_train::trainer::{Options, Trained};

use crate::trainer::{options, trainable};

/// DenseNet-BC-10 (a dense layer a block), one epoch of `steps` steps of 8 images, on `devices`
/// (`--devices`' words), with the flags `extra`.
fn train_on(devices: &str, steps: &str, extra: &[&str]) -> Vec<Trained> {
    train_on_these(None, devices, steps, extra)
}

/// The same, on `these` devices where given (made once, so that their kernels are compiled once
/// for several runs).
fn train_on_these(
    these: Option<&Devices>,
    devices: &str,
    steps: &str,
    extra: &[&str],
) -> Vec<Trained> {
    let options = options_on(these, devices, steps, extra);
    let meter = options.devices.meter();
    assert!(meter.describe().contains("Wgpu"), "{}", meter.describe());
    options.train_all(&meter).expect("trains on wgpu")
}

/// The options of [`train_on_these`].
fn options_on(these: Option<&Devices>, devices: &str, steps: &str, extra: &[&str]) -> Options {
    let small = [
        "--depth",
        "10",
        "--epochs",
        "1",
        "--limit",
        steps,
        "--valid-limit",
        "1",
        "--devices",
        devices,
    ];
    let mut options = options(&[&small[..], extra].concat());
    match these {
        Some(these) => options.devices = these.clone(),
        None => {
            // Each adapter by its name (lavapipe's `llvmpipe`), not as Burn's device kind.
            let described = options.devices.describe();
            assert!(
                described.starts_with("wgpu: ") && !described.contains("DefaultDevice"),
                "{described}"
            );
        }
    }
    options
}

/// Every parameter's values, in order.
fn values(parameters: &[&(String, Vec<f32>)]) -> Vec<Vec<f32>> {
    parameters.iter().map(|(_, v)| v.clone()).collect()
}

/// The wgpu device for one test at a time (app-kit's claim: the adapter asked once a process);
/// `None` without a Vulkan adapter (outside CI).
fn claim() -> Option<std::sync::MutexGuard<'static, ()>> {
    app_kit::vulkan::claim(|| {
        Tensor::<1>::zeros([1], &Device::wgpu(DeviceKind::DefaultDevice)).into_data();
    })
}

#[test]
fn densenet_trains_on_wgpu_the_same_run_every_run() {
    let _alone = crate::alone();
    let Some(_device) = claim() else {
        return;
    };
    let run = || train_on("wgpu", "2", &["--checkpoint", "plain,regions"]);
    let first = run();
    let again = run();
    for (method, again) in first.iter().zip(&again) {
        assert!(
            method.parameters == again.parameters,
            "{}: another run trained other weights",
            method.row.method
        );
        assert_eq!(method.row.valid_accuracy, again.row.valid_accuracy);
        let reserved = method.row.reserved_bytes.expect("a device's pools");
        assert!(reserved >= method.row.peak_step_bytes, "{:?}", method.row);
        assert!(method.row.peak_step_bytes > 0, "{:?}", method.row);
    }
    let all = |trained: &Trained| values(&trained.parameters.iter().collect::<Vec<_>>());
    Agreement::Reassociation
        .check(&all(&first[1]), &all(&first[0]))
        .expect("regions train plain autodiff's weights");
}

/// `--memory-timeline` on a device: each run's timeline peaks at least where the table's step
/// peaked — plain autodiff's too, which has no region events to read the device at (its
/// timeline once peaked at the step's end, 0.2 MiB against 123.6 MiB). The table's peak and the
/// timeline's are the same step's, read by two samplers (every 100 and 200 µs), each a lower
/// bound of a peak that may last less: within a quarter (0.84 to 1.01 measured on lavapipe).
#[test]
fn each_runs_timeline_peaks_where_the_tables_step_did() {
    let _alone = crate::alone();
    let Some(_device) = claim() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("wgpu.json");
    let file = file.to_str().unwrap();
    let trained = train_on(
        "wgpu",
        "2",
        &[
            "--checkpoint",
            "plain,balanced,regions",
            "--memory-timeline",
            file,
            "--timeline-step",
            "2",
        ],
    );
    for method in &trained {
        let timeline = method.timeline.as_ref().expect("step 2's timeline");
        let (table, drawn) = (
            method.row.peak_step_bytes as f64,
            timeline.report.peak_bytes,
        );
        println!(
            "{}: the timeline peaks at {drawn} bytes, the table's step at {table} ({:.2}×)",
            method.row.method,
            drawn as f64 / table
        );
        assert!(
            drawn as f64 >= 0.75 * table && table > 0.0,
            "{}: the timeline peaks at {drawn} bytes, the table's step at {table}",
            method.row.method
        );
        assert!(
            timeline.highest() as f64 >= 0.75 * table,
            "{}",
            method.row.method
        );
        assert_eq!(
            timeline.at_peak.bytes, drawn as i64,
            "{}",
            method.row.method
        );
        // Step 2's region instances numbered within the step (its three dense layers
        // DenseLayer#0 to #2), not on from the steps before.
        let mut indices: Vec<u64> = timeline.spans.iter().filter_map(|s| s.index).collect();
        indices.sort();
        indices.dedup();
        let expected: Vec<u64> = match method.row.method.as_str() {
            "regions" => vec![0, 1, 2],
            _ => vec![],
        };
        assert_eq!(indices, expected, "{}", method.row.method);
    }
}

/// `--memory-budget` on a device: both bases profiled there, the plan checked on a step there
/// (reserved bytes, as the budget counts them on a device), and the row says the plan's
/// predicted and checked peaks.
#[test]
fn a_budget_is_planned_and_checked_on_the_wgpu_device() {
    let _alone = crate::alone();
    let Some(_device) = claim() else {
        return;
    };
    let planned = train_on(
        "wgpu",
        "2",
        &["--checkpoint", "regions", "--memory-budget", "1GiB"],
    );
    let row = &planned[0].row;
    assert!(
        row.method.starts_with("regions, planned for 1024.0 MiB"),
        "{row:?}"
    );
    let peaks = row.plan_peaks.expect("a planned row's peaks");
    assert!(
        peaks.predicted_bytes > 0 && peaks.checked_bytes > 0,
        "{peaks:?}"
    );
    assert!(peaks.checked_bytes <= 1 << 30, "{peaks:?}");
    // The whole run's pools, sampled from its first step to its last validation batch: at
    // least its steps' (the table's Reserved), within the budget.
    let (steps, run) = (
        row.reserved_bytes.unwrap(),
        planned[0].run_reserved_bytes.unwrap(),
    );
    assert!(steps as u64 <= run && run <= 1 << 30, "{steps} {run}");
    assert!(planned[0].plan_changes.is_some(), "kept step by step");

    // A budget that binds, a MiB below what that run reserved: the run keeps within it over
    // its steps, updates and validation, or is refused (exit status 2) saying what it would
    // take; never a run that ends well over it.
    let budget = run - (1 << 20);
    let flag = budget.to_string();
    let options = options_on(
        None,
        "wgpu",
        "3",
        &["--checkpoint", "regions", "--memory-budget", &flag],
    );
    match options.train_all(&options.devices.meter()) {
        Ok(kept) => {
            let run = kept[0].run_reserved_bytes.unwrap();
            println!("a budget of {budget} bytes kept: the run reserved {run}");
            assert!(run <= budget, "{run} over {budget}");
        }
        Err(error) => {
            assert!(error.downcast_ref::<Refused>().is_some(), "{error:#}");
            let message = format!("{error:#}");
            println!("a budget of {budget} bytes refused: {message}");
            assert!(
                message.contains("a budget of at least") || message.contains("cannot be met"),
                "{message}"
            );
        }
    }
}

/// A budget below what the device can reach is refused after one checked step, without the
/// planner's retimes, naming one floor: the bytes the plan holding least reserved there.
#[test]
fn a_budget_out_of_reach_is_refused_with_the_floor_a_step_measured() {
    let _alone = crate::alone();
    let Some(_device) = claim() else {
        return;
    };
    let options = options_on(
        None,
        "wgpu",
        "1",
        &["--checkpoint", "regions", "--memory-budget", "1MiB"],
    );
    let error = options.train_all(&options.devices.meter()).unwrap_err();
    let message = format!("{error:#}");
    assert!(
        message
            .contains("a budget of 1.0 MiB cannot be met: the smallest peak these regions reach")
            && message.contains("measured: a step under the plan that holds least, reserved"),
        "{message}"
    );
}

/// Two wgpu devices (`--devices wgpu,wgpu`: two workers on the default adapter, each its own
/// device) through burn-train's multi-device strategy: plain autodiff trains the same weights
/// run after run, running statistics included; regions train the same trainable weights run
/// after run (their batch norm statistics can differ in their last bits on several devices:
/// docs/burn-0.22-train.md), within float reassociation of plain's; `app_kit::repeats(2)` runs of
/// each (`scripts/soak` runs more).
#[test]
fn two_wgpu_devices_train_the_same_run_every_run() {
    let _alone = crate::alone();
    let Some(_device) = claim() else {
        return;
    };
    // Two devices of their own on the default adapter, made once for every run.
    let two = Devices::parse("wgpu,wgpu").expect("two wgpu devices");
    assert_ne!(two.all()[0], two.all()[1]);
    let run = |method| train_on_these(Some(&two), "wgpu,wgpu", "4", &["--checkpoint", method]);
    let plain = run("plain");
    let regions = run("regions");
    assert_eq!(plain[0].row.devices, 2);
    assert_eq!(plain[0].step_peaks.len(), 4, "4 steps, 2 a device");
    for _ in 1..app_kit::repeats(2) {
        let again = run("plain");
        assert!(
            again[0].parameters == plain[0].parameters,
            "plain: another run trained other weights"
        );
        assert_eq!(again[0].row.valid_accuracy, plain[0].row.valid_accuracy);
        let again = run("regions");
        assert!(
            trainable(&again[0]) == trainable(&regions[0]),
            "regions: another run trained other weights"
        );
    }
    Agreement::Reassociation
        .check(
            &values(&trainable(&regions[0])),
            &values(&trainable(&plain[0])),
        )
        .expect("regions train plain autodiff's weights");
}
