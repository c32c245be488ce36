//! The `train` binary end to end, on tiny settings: synthetic and Fashion-MNIST runs, the same
//! losses with and without checkpointing, resume equivalence, an interrupted save, and the
//! errors a user meets first.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use burn::backend::Flex;
use burn::module::{Module, ModuleVisitor, Param};
use burn::record::Recorder;
use burn::tensor::Tensor;
use densenet_bc::data::fashion_mnist;
use densenet_bc::train::runner::{MODEL_FILE, recorder};
use densenet_bc::train::{EpochReport, Report};
use densenet_bc::{DenseNet, DenseNetConfig};

/// A DenseNet-BC-10 with growth 4 on a few small batches: seconds per run.
const TINY: &[&str] = &[
    "--depth",
    "10",
    "--growth-rate",
    "4",
    "--batch-size",
    "4",
    "--limit",
    "3",
    "--valid-limit",
    "2",
];

fn train(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_train"))
        .args(args)
        .output()
        .expect("the train binary runs")
}

/// Runs the trainer, expecting success, and returns its report.
fn train_ok(args: &[&str], report: &Path) -> Report {
    let mut all: Vec<&str> = args.to_vec();
    let report_arg = report.to_str().unwrap();
    all.extend(["--report", report_arg]);
    let output = train(&all);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "train {all:?} failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stdout.contains("| Method | # devices | Batch | Memory | Time per step |"),
        "{stdout}"
    );
    serde_json::from_slice(&std::fs::read(report).unwrap()).expect("a JSON report")
}

/// Runs the trainer, expecting failure, and returns its standard error.
fn train_err(args: &[&str]) -> String {
    let output = train(args);
    assert!(!output.status.success(), "train {args:?} should fail");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn tiny(extra: &[&str]) -> Vec<String> {
    TINY.iter().chain(extra).map(|s| s.to_string()).collect()
}

fn args(owned: &[String]) -> Vec<&str> {
    owned.iter().map(String::as_str).collect()
}

/// Every epoch's figures but the timings.
fn results(report: &Report) -> Vec<EpochReport> {
    report
        .epochs
        .iter()
        .map(|e| EpochReport {
            images_per_second: 0.0,
            seconds: 0.0,
            ..e.clone()
        })
        .collect()
}

fn fashion_mnist_present() -> bool {
    let present = Path::new(fashion_mnist::DEFAULT_DIR).is_dir();
    if !present {
        println!(
            "skipped: {} is absent (apt-get install dataset-fashion-mnist)",
            fashion_mnist::DEFAULT_DIR
        );
    }
    present
}

#[test]
fn synthetic_run_reports_every_figure() {
    let dir = tempfile::tempdir().unwrap();
    let owned = tiny(&["--data", "synthetic", "--epochs", "2"]);
    let report = train_ok(&args(&owned), &dir.path().join("report.json"));
    assert_eq!(report.method, "regions (dense layer)");
    assert_eq!(
        report.backend,
        "Checkpointed<Autodiff<Flex, BalancedCheckpointing>>"
    );
    assert_eq!((report.device_count, report.batch_size), (1, 4));
    assert_eq!(report.epochs.len(), 2);
    assert_eq!(report.steps_measured, 6);
    for epoch in &report.epochs {
        assert_eq!((epoch.steps, epoch.valid_images), (3, 8));
        assert!(epoch.train_loss.is_finite() && epoch.train_loss > 0.0);
        assert!((0.0..=1.0).contains(&epoch.valid_accuracy));
    }
    // The schedule: the rate is divided by 10 at half the epochs.
    assert_eq!(report.epochs[0].lr, 0.1);
    assert!((report.epochs[1].lr - 0.01).abs() < 1e-12);
    // The binary installs the counting allocator: a step allocates its activations.
    assert!(
        report.peak_step_bytes > 100_000,
        "{}",
        report.peak_step_bytes
    );
    assert!(report.median_step_seconds > 0.0);
}

#[test]
fn fashion_mnist_run_learns_the_format() {
    if !fashion_mnist_present() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let owned = tiny(&["--data", "fashion-mnist", "--epochs", "1"]);
    let report = train_ok(&args(&owned), &dir.path().join("report.json"));
    assert_eq!(report.data, "fashion-mnist");
    assert_eq!(report.epochs[0].steps, 3);
    assert_eq!(report.epochs[0].valid_images, 8);
    assert!(report.epochs[0].train_loss.is_finite());
}

#[test]
fn checkpoint_modes_give_the_same_losses() {
    let dir = tempfile::tempdir().unwrap();
    let run = |mode: &str| {
        let owned = tiny(&["--data", "synthetic", "--epochs", "2", "--checkpoint", mode]);
        let report = train_ok(&args(&owned), &dir.path().join(format!("{mode}.json")));
        assert_eq!(report.checkpoint, mode);
        report
    };
    let none = run("none");
    assert_eq!(none.backend, "Autodiff<Flex>");
    for mode in ["balanced", "regions", "regions-save-compute"] {
        let other = run(mode);
        // Bitwise: the regions recompute the same ops on the same values.
        assert_eq!(results(&other), results(&none), "--checkpoint {mode}");
    }
}

#[test]
fn two_devices_train_data_parallel_with_every_mode() {
    let dir = tempfile::tempdir().unwrap();
    let run = |mode: &str| {
        let owned = tiny(&[
            "--data",
            "synthetic",
            "--epochs",
            "2",
            "--devices",
            "cpu,cpu",
            "--checkpoint",
            mode,
        ]);
        train_ok(&args(&owned), &dir.path().join(format!("{mode}.json")))
    };
    let none = run("none");
    assert_eq!((none.device_count, none.batch_size), (2, 4));
    assert_eq!(none.devices, ["cpu", "cpu"]);
    for epoch in &none.epochs {
        assert_eq!((epoch.steps, epoch.valid_images), (3, 8));
        assert!(epoch.train_loss.is_finite() && epoch.train_loss > 0.0);
        // Each worker counts its shard's right answers.
        let accuracy = epoch.train_accuracy.expect("counted on the workers");
        assert!((0.0..=1.0).contains(&accuracy));
    }
    // Regions on every worker change what is stored, not a bit of the results.
    let regions = run("regions");
    assert_eq!(results(&regions), results(&none));
    assert!(regions.peak_step_bytes > 0);

    // Not the single-device figures (BatchNorm normalises each shard by its own statistics),
    // but the same start: the same weights see the same images.
    let owned = tiny(&[
        "--data",
        "synthetic",
        "--epochs",
        "2",
        "--checkpoint",
        "none",
    ]);
    let single = train_ok(&args(&owned), &dir.path().join("single.json"));
    let (one, two) = (single.epochs[0].train_loss, none.epochs[0].train_loss);
    assert!((one - two).abs() < 0.5, "1 device {one}, 2 devices {two}");
}

#[test]
fn a_data_parallel_run_resumes_as_it_would_have_gone_on() {
    let dir = tempfile::tempdir().unwrap();
    let (whole, parts) = (dir.path().join("whole"), dir.path().join("parts"));
    let path = |p: &PathBuf| p.to_str().unwrap().to_string();
    let common = [
        "--data",
        "synthetic",
        "--epochs",
        "2",
        "--devices",
        "cpu,cpu",
    ];

    let owned = tiny(&[&common[..], &["--save", &path(&whole)]].concat());
    let uninterrupted = train_ok(&args(&owned), &dir.path().join("whole.json"));
    let owned = tiny(&[&common[..], &["--save", &path(&parts), "--stop-after", "1"]].concat());
    train_ok(&args(&owned), &dir.path().join("first.json"));
    let owned = tiny(&[&common[..], &["--save", &path(&parts), "--resume"]].concat());
    let resumed = train_ok(&args(&owned), &dir.path().join("resumed.json"));

    assert_eq!(results(&resumed), results(&uninterrupted));
    assert!(
        saved_weights(&whole, 2) == saved_weights(&parts, 2),
        "the final weights differ"
    );
}

/// Every tensor of the model saved after `epoch` (parameters and BatchNorm statistics), in the
/// module's order. Compared as values: the files differ anyway, parameter ids being random per
/// process.
fn saved_weights(save: &Path, epoch: usize) -> Vec<Vec<f32>> {
    type B = Flex;
    struct Collect(Vec<Vec<f32>>);
    impl ModuleVisitor<B> for Collect {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            self.0
                .push(param.val().into_data().to_vec::<f32>().unwrap());
        }
    }
    let path = save.join(format!("epoch-{epoch:04}")).join(MODEL_FILE);
    let device = Default::default();
    let record = recorder()
        .load(std::fs::read(path).unwrap(), &device)
        .unwrap();
    let model: DenseNet<B> = DenseNetConfig::new(10)
        .with_growth_rate(4)
        .init(&device)
        .load_record(record);
    let mut collect = Collect(Vec::new());
    model.visit(&mut collect);
    collect.0
}

#[test]
fn resumed_run_equals_an_uninterrupted_one() {
    let dir = tempfile::tempdir().unwrap();
    let (whole, parts) = (dir.path().join("whole"), dir.path().join("parts"));
    let path = |p: &PathBuf| p.to_str().unwrap().to_string();
    let common = ["--data", "synthetic", "--epochs", "3"];

    let owned = tiny(&[&common[..], &["--save", &path(&whole)]].concat());
    let uninterrupted = train_ok(&args(&owned), &dir.path().join("whole.json"));

    let owned = tiny(&[&common[..], &["--save", &path(&parts), "--stop-after", "1"]].concat());
    let first = train_ok(&args(&owned), &dir.path().join("first.json"));
    assert_eq!(first.epochs.len(), 1);
    let owned = tiny(&[&common[..], &["--save", &path(&parts), "--resume"]].concat());
    let resumed = train_ok(&args(&owned), &dir.path().join("resumed.json"));

    assert_eq!(results(&resumed), results(&uninterrupted));
    assert_eq!(
        resumed.steps_measured, 6,
        "the resumed run trained epochs 2 and 3 only"
    );
    // Epochs 2 and 3 losses equal: the optimizer state was restored too.
    assert!(
        saved_weights(&whole, 3) == saved_weights(&parts, 3),
        "the final weights differ"
    );
    // Only the last epoch is kept.
    assert!(!parts.join("epoch-0001").exists());
}

#[test]
fn an_interrupted_save_leaves_the_previous_epoch_loadable() {
    let dir = tempfile::tempdir().unwrap();
    let (save, reference) = (dir.path().join("save"), dir.path().join("reference"));
    let path = |p: &PathBuf| p.to_str().unwrap().to_string();
    let common = ["--data", "synthetic", "--epochs", "2"];
    let owned = tiny(&[&common[..], &["--save", &path(&reference)]].concat());
    train_ok(&args(&owned), &dir.path().join("reference.json"));
    let owned = tiny(&[&common[..], &["--save", &path(&save), "--stop-after", "1"]].concat());
    train_ok(&args(&owned), &dir.path().join("first.json"));

    // Epoch 2's save fails half-way: the model is written, then the optimizer state cannot be
    // (a directory stands where its temporary file goes), as a full disk or a kill would stop it.
    let epoch2 = save.join("epoch-0002");
    std::fs::create_dir_all(epoch2.join("optimizer.mpk.tmp")).unwrap();
    let owned = tiny(&[&common[..], &["--save", &path(&save), "--resume"]].concat());
    let stderr = train_err(&args(&owned));
    assert!(stderr.contains("cannot save epoch 2"), "{stderr}");
    assert!(stderr.contains("optimizer.mpk.tmp"), "{stderr}");
    assert!(epoch2.join("model.mpk").exists(), "the save got half-way");
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(save.join("state.json")).unwrap()).unwrap();
    assert_eq!(state["epochs_done"], 1);

    // A kill while writing leaves a truncated temporary file too; neither matters.
    std::fs::remove_dir(epoch2.join("optimizer.mpk.tmp")).unwrap();
    std::fs::write(epoch2.join("optimizer.mpk.tmp"), b"\x82\xa4trun").unwrap();
    let resumed = train_ok(&args(&owned), &dir.path().join("resumed.json"));
    assert_eq!(resumed.epochs.len(), 2);
    assert!(
        saved_weights(&save, 2) == saved_weights(&reference, 2),
        "resuming from epoch 1 gives the uninterrupted weights"
    );
}

#[test]
fn resume_checks_the_settings_and_save_protects_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("save");
    let save = save.to_str().unwrap();
    let owned = tiny(&[
        "--data",
        "synthetic",
        "--epochs",
        "2",
        "--save",
        save,
        "--stop-after",
        "1",
    ]);
    train_ok(&args(&owned), &dir.path().join("first.json"));

    let stderr = train_err(&args(&tiny(&[
        "--data",
        "synthetic",
        "--epochs",
        "2",
        "--save",
        save,
    ])));
    assert!(
        stderr.contains("holds a saved run: pass --resume"),
        "{stderr}"
    );
    let mut changed = tiny(&[
        "--data",
        "synthetic",
        "--epochs",
        "2",
        "--save",
        save,
        "--resume",
    ]);
    changed[3] = "6".into(); // --growth-rate
    let stderr = train_err(&args(&changed));
    assert!(
        stderr.contains("--growth-rate 6 (saved run: 4)"),
        "{stderr}"
    );
    let empty = dir.path().join("empty");
    let stderr = train_err(&args(&tiny(&[
        "--data",
        "synthetic",
        "--save",
        empty.to_str().unwrap(),
        "--resume",
    ])));
    assert!(stderr.contains("nothing to resume"), "{stderr}");
}

#[test]
fn first_errors_are_clear() {
    let missing = "/nonexistent/fashion-mnist";
    let stderr = train_err(&args(&tiny(&["--data-dir", missing])));
    assert!(stderr.contains(missing), "{stderr}");
    assert!(
        stderr.contains("apt-get install dataset-fashion-mnist"),
        "{stderr}"
    );
    assert!(stderr.contains("train-images-idx3-ubyte.gz"), "{stderr}");

    let stderr = train_err(&args(&tiny(&["--data", "cifar10"])));
    assert!(stderr.contains("CIFAR-10 needs --data-dir"), "{stderr}");
    let stderr = train_err(&args(&tiny(&[
        "--data",
        "synthetic",
        "--devices",
        "cpu,cpu,cpu",
    ])));
    assert!(
        stderr.contains("--batch-size 4 does not divide among 3 devices"),
        "{stderr}"
    );
    let stderr = train_err(&["--data", "synthetic", "--depth", "12"]);
    assert!(stderr.contains("6n + 4"), "{stderr}");
    let stderr = train_err(&["--data", "synthetic", "--devices", "tpu"]);
    assert!(stderr.contains("`tpu`"), "{stderr}");
    #[cfg(not(feature = "cuda"))]
    {
        let stderr = train_err(&args(&tiny(&[
            "--data",
            "synthetic",
            "--devices",
            "cuda:0",
        ])));
        assert!(stderr.contains("--features cuda"), "{stderr}");
    }
    let help = train(&["--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--data",
        "--data-dir",
        "--checkpoint",
        "--efficient",
        "--batch-size",
        "--devices",
        "--epochs",
        "--lr",
        "--depth",
        "--growth-rate",
        "--seed",
        "--save",
        "--resume",
        "--report",
        "--limit",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}");
    }
}
