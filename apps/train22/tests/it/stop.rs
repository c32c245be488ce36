//! A run the trainer loses nothing of: stopped (SIGINT, SIGTERM, burn-train's dashboard,
//! `--stop-after`) at a step boundary, the methods that finished written as they finish and the
//! one stopped never reported as a result; saved at each epoch's end and resumed to the weights
//! the uninterrupted run trains, bit for bit; a save refused where it would lose or mix runs.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use app_kit::table::MethodRow;
use burn_checkpoint_22::memory::Meter;
use burn_checkpoint_22_train::stop::{Interrupted, SIGINT_STATUS, SIGTERM_STATUS, StopRequest};
use burn_checkpoint_22_train::trainer::Trained;

use crate::trainer::{gpt_flags, options};

/// The methods a run finished, and how it ended.
fn train_until_stopped(extra: &[&str], stop: &StopRequest) -> (Vec<Trained>, anyhow::Result<()>) {
    let _alone = crate::alone();
    let mut trained = Vec::new();
    let outcome = options(extra).train_into(&Meter::Host, stop, &mut trained, &mut |_| Ok(()));
    (trained, outcome)
}

/// `flags`, saved in `save`, and `more`.
fn saving<'a>(flags: &[&'a str], save: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    [flags, &["--save", save], more].concat()
}

fn interrupted(outcome: anyhow::Result<()>) -> Interrupted {
    let error = outcome.expect_err("stopped");
    error
        .downcast_ref::<Interrupted>()
        .unwrap_or_else(|| panic!("not a stop: {error:#}"))
        .clone()
}

/// What a stopped-and-resumed run must give: the uninterrupted run's methods, accuracies and
/// weights, bit for bit, and every step measured once.
fn assert_same_run(resumed: &[Trained], whole: &[Trained]) {
    assert_eq!(resumed.len(), whole.len());
    for (resumed, whole) in resumed.iter().zip(whole) {
        assert_eq!(resumed.row.method, whole.row.method);
        assert!(
            resumed.parameters == whole.parameters,
            "{}: resumed weights differ from the uninterrupted run's",
            whole.row.method
        );
        assert_eq!(resumed.row.valid_accuracy, whole.row.valid_accuracy);
        assert_eq!(resumed.step_peaks.len(), whole.step_peaks.len());
    }
}

#[test]
fn a_run_stopped_twice_and_resumed_trains_the_uninterrupted_runs_weights() {
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("save");
    let save = save.to_str().unwrap();
    let flags = ["--checkpoint", "plain,regions", "--epochs", "3"];
    let (whole, outcome) = train_until_stopped(&flags, &StopRequest::new());
    outcome.expect("trains");
    let with = |more: &[&'static str]| saving(&flags, save, more);
    // After one epoch of plain's three; after plain's last two and regions' first; to the end.
    let (trained, outcome) =
        train_until_stopped(&with(&["--stop-after", "1"]), &StopRequest::new());
    let stopped = interrupted(outcome);
    assert!(trained.is_empty(), "plain did not finish");
    assert_eq!((stopped.epochs_done, stopped.status), (Some(1), 0));
    assert!(
        stopped
            .to_string()
            .contains("during --checkpoint plain after 1 of 3")
    );
    let (trained, outcome) = train_until_stopped(
        &with(&["--resume", "--stop-after", "3"]),
        &StopRequest::new(),
    );
    let stopped = interrupted(outcome);
    assert_eq!(
        (stopped.method.as_str(), stopped.epochs_done),
        ("regions", Some(1))
    );
    assert_same_run(&trained, &whole[..1]);
    let (resumed, outcome) = train_until_stopped(&with(&["--resume"]), &StopRequest::new());
    outcome.expect("finishes");
    assert_same_run(&resumed, &whole);
    assert_eq!(
        resumed[0].row, trained[0].row,
        "plain read back as it finished"
    );
}

#[test]
fn a_gpt_with_dropout_resumes_to_the_same_masks() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("text");
    std::fs::write(&text, include_bytes!("../../../../README.md")).unwrap();
    let save = dir.path().join("save");
    let (text, save) = (text.to_str().unwrap(), save.to_str().unwrap());
    let mut flags = gpt_flags(text);
    flags.extend(["--dropout", "0.1", "--checkpoint", "plain,regions"]);
    let (whole, outcome) = train_until_stopped(&flags, &StopRequest::new());
    outcome.expect("trains");
    let with = |more: &[&'static str]| saving(&flags, save, more);
    let (_, outcome) = train_until_stopped(&with(&["--stop-after", "3"]), &StopRequest::new());
    assert_eq!(
        interrupted(outcome).epochs_done,
        Some(1),
        "regions after 1 of 2"
    );
    let (resumed, outcome) = train_until_stopped(&with(&["--resume"]), &StopRequest::new());
    outcome.expect("finishes");
    assert_same_run(&resumed, &whole);
}

#[test]
fn a_stop_from_the_dashboard_is_said_and_no_result() {
    let stop = StopRequest::new();
    let dashboard = stop.interrupter();
    let pressed = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(2));
        // What burn-train's dashboard does on `q`, then `s`.
        dashboard.stop(Some("Stopping training from user input."));
    });
    let (trained, outcome) = train_until_stopped(
        &["--checkpoint", "plain,balanced", "--epochs", "10000"],
        &stop,
    );
    pressed.join().unwrap();
    let stopped = interrupted(outcome);
    assert!(trained.is_empty(), "a stopped method is no result");
    assert_eq!(stopped.method, "plain");
    assert_eq!(stopped.status, SIGINT_STATUS);
    assert!(stopped.reason.contains("dashboard"), "{stopped}");
    assert!(
        stopped
            .to_string()
            .contains("--save DIR keeps a run's epochs"),
        "{stopped}"
    );
}

/// `train22` with `extra` after a tiny run's flags, its temporary folders in `tmp`.
fn train22(extra: &[&str], tmp: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_train22"));
    command
        .args([
            "--data",
            "synthetic",
            "--depth",
            "10",
            "--growth-rate",
            "4",
            "--batch-size",
            "8",
            "--limit",
            "2",
            "--valid-limit",
            "1",
        ])
        .args(extra)
        .env("TMPDIR", tmp)
        .stdout(Stdio::null());
    command
}

/// The status of `train22` given `signal` once its first method started and `ready()` holds
/// (polled for a minute), and its stderr; it must end within a minute of the signal.
fn signalled(
    signal: &str,
    extra: &[&str],
    tmp: &Path,
    ready: impl Fn() -> bool,
) -> (Option<i32>, String) {
    let mut child = train22(extra, tmp)
        .stderr(Stdio::piped())
        .spawn()
        .expect("train22 starts");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    while !said.contains("--checkpoint plain (1 of") {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "ended early: {said}"
        );
        said.push_str(&line);
    }
    // Into the first epoch's steps, and what the caller waits for.
    std::thread::sleep(Duration::from_secs(3));
    let waited = Instant::now();
    while !ready() {
        assert!(waited.elapsed() < Duration::from_secs(60), "never ready");
        std::thread::sleep(Duration::from_millis(100));
    }
    let sent = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("{signal}: still running a minute later");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    (status.code(), said + &rest)
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

fn rows(path: &Path) -> Vec<MethodRow> {
    serde_json::from_slice(&std::fs::read(path).expect("--json written")).expect("rows")
}

#[test]
fn a_signal_stops_the_run_at_a_step_saved_and_its_temporary_folder_removed() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let (json, save) = (dir.path().join("rows.json"), dir.path().join("save"));
    let (json, save) = (json.to_str().unwrap(), save.to_str().unwrap());
    for (signal, status) in [("-INT", SIGINT_STATUS), ("-TERM", SIGTERM_STATUS)] {
        let flags = [
            "--checkpoint",
            "plain",
            "--epochs",
            "100000",
            "--json",
            json,
        ];
        let (code, stderr) = signalled(signal, &flags, &tmp, || true);
        assert_eq!(code, Some(status.into()), "{signal}: {stderr}");
        assert!(
            stderr.contains("the run stopped (SIG") && stderr.contains("during --checkpoint plain"),
            "{stderr}"
        );
        assert!(!Path::new(json).exists(), "no method finished: no row");
        assert!(entries(&tmp).is_empty(), "left behind: {:?}", entries(&tmp));
    }
    // Saved: the epochs before the signal resume.
    let flags = [
        "--checkpoint",
        "plain",
        "--epochs",
        "100000",
        "--save",
        save,
    ];
    let state = Path::new(save).join("state.json");
    let (code, stderr) = signalled("-INT", &flags, &tmp, || state.exists());
    assert_eq!(code, Some(SIGINT_STATUS.into()), "{stderr}");
    assert!(
        stderr.contains("go on with the same flags and --resume"),
        "{stderr}"
    );
    let state: serde_json::Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    let done = state["methods"][0]["epochs_done"].as_u64().unwrap();
    assert!(done > 0, "epochs saved before the signal: {state}");
    assert!(entries(&tmp).is_empty(), "left behind: {:?}", entries(&tmp));
}

#[test]
fn rows_are_written_as_methods_finish_and_a_save_is_never_mixed() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().to_path_buf();
    let (json, save) = (dir.path().join("rows.json"), dir.path().join("save"));
    let (json, save) = (json.to_str().unwrap(), save.to_str().unwrap());
    let run = |extra: &[&str]| {
        let flags = [
            &[
                "--checkpoint",
                "plain,balanced",
                "--save",
                save,
                "--json",
                json,
            ],
            extra,
        ];
        train22(&flags.concat(), &tmp)
            .stderr(Stdio::piped())
            .output()
            .unwrap()
    };
    let stopped = run(&["--stop-after", "1"]);
    let stderr = String::from_utf8_lossy(&stopped.stderr);
    assert_eq!(stopped.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("the run stopped (--stop-after 1) before --checkpoint balanced"));
    let first = rows(Path::new(json));
    assert_eq!(first.len(), 1, "plain's row, written as it finished");
    // A new run would replace the saved one; another seed would not be the same run; a changed
    // record would not be the saved weights.
    let refused = |extra: &[&str], says: &str| {
        let output = run(extra);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains(says), "{extra:?}: {stderr}");
    };
    refused(&[], "holds a saved run: pass --resume");
    refused(&["--resume", "--seed", "2"], "--seed 2 (saved run: 1)");
    let model = Path::new(save).join("plain/epoch-0001/model.bpk");
    let good = std::fs::read(&model).unwrap();
    std::fs::write(&model, b"damaged").unwrap();
    refused(&["--resume"], "changed or damaged");
    std::fs::write(&model, good).unwrap();
    let resumed = run(&["--resume"]);
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(0), "{stderr}");
    let both = rows(Path::new(json));
    assert_eq!(both.len(), 2);
    assert_eq!(both[0], first[0], "plain read back, not trained again");
}
