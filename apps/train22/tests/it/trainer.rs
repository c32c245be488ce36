//! The trainer for Burn 0.22 users, through burn-train's Learner: every method trains the same
//! weights from the same seed, bit for bit, run after run; bad settings are refused with what
//! to write instead.

use app_kit::out_of_memory::exit_status;
use app_kit::table::MethodRow;
use burn_checkpoint_22::memory::Meter;
use burn_checkpoint_22_train::run::run;
use burn_checkpoint_22_train::stop::StopRequest;
use burn_checkpoint_22_train::trainer::{Options, Trained};
use clap::Parser;

/// DenseNet-BC-22 (three layers a block: each layer's output is an input of two later layers'
/// regions) on synthetic CIFAR-shaped images, two epochs of three steps.
pub fn options(extra: &[&str]) -> Options {
    let mut args = vec![
        "train22",
        "--data",
        "synthetic",
        "--depth",
        "22",
        "--growth-rate",
        "4",
        "--batch-size",
        "8",
        "--limit",
        "3",
        "--valid-limit",
        "2",
        "--epochs",
        "2",
    ];
    args.extend_from_slice(extra);
    Options::try_parse_from(args).expect("valid options")
}

fn train(extra: &[&str]) -> Vec<Trained> {
    try_train(extra).expect("trains")
}

fn try_train(extra: &[&str]) -> anyhow::Result<Vec<Trained>> {
    // One allocator counts every thread, and a step's measure resets its peak.
    let _alone = crate::alone();
    options(extra).train_all(&Meter::Host)
}

/// Every method after the first trained the first one's weights, to the same accuracy.
fn assert_like_the_first(methods: &[Trained]) {
    let (first, others) = methods.split_first().expect("a method");
    for other in others {
        assert!(
            other.parameters == first.parameters,
            "{}: trained weights differ from {}'s",
            other.row.method,
            first.row.method
        );
        assert_eq!(other.row.valid_accuracy, first.row.valid_accuracy);
    }
}

#[test]
fn every_method_trains_the_same_weights_run_after_run() {
    let methods = train(&["--checkpoint", "plain,balanced,regions,regions-save"]);
    let names: Vec<_> = methods.iter().map(|t| t.row.method.as_str()).collect();
    assert_eq!(names, ["plain", "balanced", "regions", "regions-save"]);
    let plain = &methods[0];
    assert_eq!(plain.step_peaks.len(), 6, "2 epochs of 3 steps");
    assert!(plain.step_peaks.iter().all(|&peak| peak > 0), "measured");
    assert_like_the_first(&methods);
    let again = train(&["--checkpoint", "regions"]);
    assert!(again[0].parameters == methods[2].parameters, "run to run");
    // Training moved the weights: a seed alone would pass the comparisons above.
    let other_seed = train(&["--checkpoint", "plain", "--seed", "2"]);
    assert!(other_seed[0].parameters != plain.parameters);
}

/// The GPT (two blocks) on a text: the repository's README, written to a file.
fn gpt(extra: &[&str]) -> anyhow::Result<Vec<Trained>> {
    let text = tempfile::NamedTempFile::new().expect("a temporary file");
    std::fs::write(text.path(), include_bytes!("../../../../README.md")).expect("written");
    let mut args = gpt_flags(text.path().to_str().expect("a UTF-8 path"));
    args.extend_from_slice(extra);
    try_train(&args)
}

/// The GPT of these tests (two blocks of width 32, two heads, context 32) on the text at `path`.
pub fn gpt_flags(path: &str) -> Vec<&str> {
    vec![
        "--model",
        "gpt",
        "--text",
        path,
        "--blocks",
        "2",
        "--d-model",
        "32",
        "--heads",
        "2",
        "--context",
        "32",
    ]
}

#[test]
fn the_gpt_trains_the_same_weights_with_and_without_regions() {
    let methods = gpt(&["--checkpoint", "plain,balanced,regions,regions-save"]).expect("trains");
    let plain = &methods[0];
    assert_eq!(plain.step_peaks.len(), 6, "2 epochs of 3 steps");
    assert!(plain.row.valid_accuracy > 0.0, "some next bytes predicted");
    assert_like_the_first(&methods);
    let planned = gpt(&["--checkpoint", "regions", "--memory-budget", "1GiB"]).expect("trains");
    assert!(
        planned[0].parameters == plain.parameters,
        "the plan changes no bit"
    );
    // Dropout in the attention: the regions are seeded, their masks drawn from seeds of their
    // own, so regions train another run than plain, and the same one every time.
    let dropout = |method| {
        gpt(&["--checkpoint", method, "--dropout", "0.1"]).expect("trains")[0]
            .parameters
            .clone()
    };
    let seeded = dropout("regions");
    assert!(seeded == dropout("regions"), "run to run");
    assert!(seeded != dropout("plain"), "the documented exception");
    let message = |extra: &[&str]| format!("{:#}", gpt(extra).expect_err("refused"));
    assert!(message(&["--heads", "3"]).contains("not a multiple of --heads"));
    assert!(message(&["--dropout", "1"]).contains("below 1"));
    assert!(message(&["--context", "100000"]).contains("at least 2 are needed"));
    let no_text = try_train(&["--model", "gpt"]).expect_err("no text");
    assert!(no_text.to_string().contains("--text FILE"), "{no_text}");
}

/// The trainable parameters: batch norm's running statistics left out.
pub fn trainable(trained: &Trained) -> Vec<&(String, Vec<f32>)> {
    let statistic = |name: &str| name.ends_with("running_mean") || name.ends_with("running_var");
    trained
        .parameters
        .iter()
        .filter(|(name, _)| !statistic(name))
        .collect()
}

#[test]
fn regions_train_the_same_weights_on_two_devices() {
    let two = ["--devices", "2", "--limit", "4"];
    let plain = train(&[&["--checkpoint", "plain"][..], &two].concat());
    for _ in 0..2 {
        let regions = train(&[&["--checkpoint", "regions"][..], &two].concat());
        assert_eq!(regions[0].row.devices, 2);
        assert_eq!(
            regions[0].step_peaks.len(),
            8,
            "2 epochs of 4 steps, 2 a device"
        );
        assert!(trainable(&regions[0]) == trainable(&plain[0]));
    }
    // Burn's own run is the same run after run, running statistics included: the workers take
    // their steps in lockstep. (With regions those statistics can differ in their last bits:
    // docs/burn-0.22-train.md, "Its multi-device strategy shares batch norm's running
    // statistics".)
    let again = train(&[&["--checkpoint", "plain"][..], &two].concat());
    assert!(again[0].parameters == plain[0].parameters);
    let one = train(&["--checkpoint", "plain", "--limit", "4"]);
    assert!(
        trainable(&one[0]) != trainable(&plain[0]),
        "two devices: half the updates"
    );
}

#[test]
fn a_budget_plan_trains_the_same_weights_and_an_unmeetable_one_says_the_floor() {
    let plain = train(&["--checkpoint", "plain"]);
    let planned = train(&[
        "--checkpoint",
        "regions",
        "--memory-budget",
        "1GiB",
        "--memory-report",
    ]);
    // The base is the planner's choice (whichever plan is predicted faster): the row says
    // when it is not the method's Balanced.
    let row = &planned[0].row.method;
    assert!(
        row == "regions, planned for 1024.0 MiB"
            || row == "regions, planned for 1024.0 MiB (on plain autodiff)",
        "{row}"
    );
    assert!(
        planned[0].parameters == plain[0].parameters,
        "the plan changes no bit"
    );
    // A method that cannot run stops the run; the methods before it keep their row, in the
    // table printed and in --json (the command's `run`, as `train22` runs it).
    let json = tempfile::NamedTempFile::new().unwrap();
    let options = options(&[
        "--checkpoint",
        "plain,regions",
        "--memory-budget",
        "1KiB",
        "--json",
        json.path().to_str().unwrap(),
    ]);
    let mut out = Vec::new();
    let error = {
        let _alone = crate::alone();
        run(&options, &Meter::Host, &StopRequest::new(), &mut out).expect_err("1 KiB cannot be met")
    };
    let message = format!("{error:#}");
    assert!(
        message.contains("cannot be met: the smallest peak"),
        "{message}"
    );
    // The budget as given, not rounded to "0.0 MiB".
    assert!(
        message.contains("--memory-budget 1.0 KiB") && message.contains("a budget of 1.0 KiB"),
        "{message}"
    );
    assert_eq!(
        exit_status(&error),
        2,
        "refused as settings are, not a failed allocation"
    );
    let printed = String::from_utf8(out).unwrap();
    assert!(printed.contains("| plain | 1 | 8 |"), "{printed}");
    let rows: Vec<MethodRow> =
        serde_json::from_slice(&std::fs::read(json.path()).unwrap()).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].method, "plain");
    assert_eq!(
        rows[0].valid_accuracy, plain[0].row.valid_accuracy,
        "the same run"
    );
}

#[test]
fn bad_settings_say_what_to_write() {
    let error = |extra: &[&str]| match try_train(extra) {
        Ok(_) => panic!("{extra:?} should be refused"),
        Err(e) => e.to_string(),
    };
    assert!(error(&["--depth", "11"]).contains("6n + 4"));
    assert!(error(&["--checkpoint", "plain", "--memory-report"]).contains("add regions"));
    assert!(error(&["--batch-size", "100000"]).contains("more than the"));
    let cifar = Options::try_parse_from(["train22", "--data", "cifar10"]).unwrap();
    let message = cifar.train_all(&Meter::Host).unwrap_err().to_string();
    assert!(message.contains("--data-dir"), "{message}");
    let parse_error = |args: &[&str]| {
        let mut all = vec!["train22"];
        all.extend_from_slice(args);
        Options::try_parse_from(all).unwrap_err().to_string()
    };
    assert!(parse_error(&["--checkpoint", "all"]).contains("possible values"));
    assert!(parse_error(&["--lr", "0"]).contains("above 0"));
    // A negative number is a value, refused as one (not read as a flag).
    assert!(parse_error(&["--lr", "-0.1"]).contains("above 0"));
    assert!(parse_error(&["--momentum", "-0.5"]).contains("at least 0"));
    assert!(parse_error(&["--momentum", "1"]).contains("below 1"));
    assert!(parse_error(&["--batch-size", "0"]).contains("--batch-size"));
    assert!(parse_error(&["--memory-budget", "6 gigs"]).contains("not a unit"));
}

/// The Burn 0.21 trainer's words for the same choices parse here too: `layer`, `layer-save`,
/// `regions-save-compute`, and the benchmarks' `--growth`.
#[test]
fn the_other_trainers_words_are_aliases() {
    let parse = |args: &[&str]| {
        let mut all = vec!["train22"];
        all.extend_from_slice(args);
        Options::try_parse_from(all).expect("parses")
    };
    let names = |options: Options| -> Vec<&'static str> {
        options
            .checkpoint
            .iter()
            .map(|method| method.name())
            .collect()
    };
    assert_eq!(
        names(parse(&["--checkpoint", "none,layer,layer-save"])),
        ["plain", "regions", "regions-save"]
    );
    assert_eq!(
        names(parse(&["--checkpoint", "regions-save-compute"])),
        ["regions-save"]
    );
    assert_eq!(parse(&["--growth", "24"]).densenet.growth, 24);
    assert_eq!(parse(&["--growth-rate", "24"]).densenet.growth, 24);
}

/// What the run could not finish is refused before its first step, each with a message that
/// names the flag and exit status 2: an output that cannot be written (`--json`,
/// `--memory-timeline`, `--artifact-dir`), a `--timeline-overlay` that cannot be read or is of
/// another model, a `--timeline-step` past the run. (Each used to train first, then print
/// "no memory timeline: …" and exit 0, fail writing `--json`, or abort in burn-train.)
#[test]
fn what_the_run_could_not_finish_is_refused_before_its_first_step() {
    use app_kit::timeline::Overlay;

    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let a_file = path("a-file");
    std::fs::write(&a_file, "not a folder").unwrap();
    let gpt = path("gpt.json");
    let overlay = Overlay {
        title: "GPT, 2 blocks of width 64, context 32, batch 8: the memory of training step 2"
            .into(),
        runs: Vec::new(),
    };
    std::fs::write(&gpt, serde_json::to_string(&overlay).unwrap()).unwrap();
    let (missing_json, missing_svg) = (path("none/rows.json"), path("none/step.svg"));
    let (svg, absent) = (path("step.svg"), path("absent.json"));
    let under_a_file = format!("{a_file}/artifacts");
    let cases: [(&[&str], &str); 6] = [
        (&["--json", &missing_json], "--json"),
        (&["--memory-timeline", &missing_svg], "does not exist"),
        (
            &["--memory-timeline", &svg, "--timeline-overlay", &absent],
            "--timeline-overlay",
        ),
        (
            &["--memory-timeline", &svg, "--timeline-overlay", &gpt],
            "a timeline of GPT",
        ),
        (
            &["--memory-timeline", &svg, "--timeline-step", "99"],
            "--timeline-step 99: the run has 6 training steps",
        ),
        (&["--artifact-dir", &under_a_file], "--artifact-dir"),
    ];
    for (flags, says) in cases {
        let started = std::time::Instant::now();
        let error = try_train(flags).expect_err("refused");
        let message = format!("{error:#}");
        assert!(message.contains(says), "{flags:?}: {message}");
        assert_eq!(exit_status(&error), 2, "{flags:?}: {message}");
        println!(
            "{flags:?}: {message} ({:.1} s)",
            started.elapsed().as_secs_f64()
        );
    }
    assert!(!std::path::Path::new(&svg).exists(), "nothing written");
}
