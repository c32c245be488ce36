//! The timeline's picture and file on steps recorded through the hooks the Burn crates call
//! (no Burn here): the overlay names its regions, its differences add up, its JSON round-trips.

use app_kit::timeline::{Overlay, Run};
use burn_checkpoint_core::engine::recording::{recompute, top_level_closed, top_level_opened};
use burn_checkpoint_core::memory::timeline::{Trace, TraceArg};
use burn_checkpoint_core::memory::{CountingAllocator, HostMeter, Timeline};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// A step of `blocks` regions named `name`, each holding `held` bytes from its forward to its
/// backward, recorded through the hooks the Burn crates call.
fn step(name: &str, blocks: u64, held: usize) -> Timeline {
    let ((), timeline) = Timeline::measure(HostMeter, || {
        let mut kept = Vec::new();
        for index in 0..blocks {
            top_level_opened(&name, index, None);
            kept.push(vec![1u8; held]);
            top_level_closed();
        }
        for slot in (0..blocks as usize).rev() {
            recompute(slot, || vec![1u8; held], |v| v.len() as u64);
            kept.pop();
        }
    });
    timeline
}

#[test]
fn an_overlay_names_its_regions_and_its_differences_add_up() {
    let overlay = Overlay {
        title: "two steps".into(),
        runs: vec![
            Run {
                label: "wide".into(),
                timeline: step("wide-block", 4, 1 << 20),
            },
            Run {
                label: "narrow".into(),
                timeline: step("narrow-block", 4, 1 << 18),
            },
        ],
    };
    let [wide, narrow] = [&overlay.runs[0].timeline, &overlay.runs[1].timeline];
    assert_eq!(wide.highest(), wide.report.peak_bytes as i64);
    let difference = narrow.compare(wide);
    let parts: i64 = difference.by_region.values().sum::<i64>() + difference.outside;
    assert_eq!(parts, difference.bytes);
    assert!(difference.by_region["wide-block"] < 0, "{difference:?}");
    let lines = overlay.differences();
    assert_eq!(lines.len(), 1);
    assert!(lines[0].starts_with("narrow: peak -"), "{}", lines[0]);

    let dir = std::env::temp_dir().join(format!("app-kit-timeline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["step.svg", "step.png", "step.json", "step.trace.json"] {
        overlay.write(&dir.join(file)).unwrap();
    }
    // The trace: a process per run, named by its label, the regions' spans as slices.
    let trace: Trace =
        serde_json::from_str(&std::fs::read_to_string(dir.join("step.trace.json")).unwrap())
            .unwrap();
    // (Read back, a time can differ in its last digit: serde_json's default float parsing.)
    let names = |trace: &Trace| {
        trace
            .events
            .iter()
            .map(|e| e.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&trace), names(&overlay.trace()));
    let processes: Vec<&TraceArg> = trace
        .events
        .iter()
        .filter(|event| event.name == "process_name")
        .map(|event| &event.args["name"])
        .collect();
    assert_eq!(
        processes,
        [
            &TraceArg::Text("wide".into()),
            &TraceArg::Text("narrow".into())
        ]
    );
    assert!(
        trace
            .events
            .iter()
            .any(|event| event.ph == "X" && event.name == "narrow-block#3"),
        "each region instance a slice"
    );
    let svg = std::fs::read_to_string(dir.join("step.svg")).unwrap();
    for name in ["wide-block", "narrow-block", "narrow: peak"] {
        assert!(svg.contains(name), "{name} not in the picture");
    }
    assert!(std::fs::metadata(dir.join("step.png")).unwrap().len() > 1000);
    let json = std::fs::read_to_string(dir.join("step.json")).unwrap();
    assert_eq!(serde_json::from_str::<Overlay>(&json).unwrap(), overlay);
    assert!(overlay.write(&dir.join("step.pdf")).is_err());
    if std::env::var_os("KEEP_TIMELINE").is_none() {
        std::fs::remove_dir_all(dir).ok();
    }
}

#[test]
fn a_timeline_of_a_step_that_did_not_run_is_an_error_that_says_so() {
    use app_kit::timeline::TimelineArgs;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        timeline: TimelineArgs,
    }
    let path = std::env::temp_dir().join(format!("never-{}.svg", std::process::id()));
    let cli = Cli::try_parse_from([
        "t",
        "--memory-timeline",
        path.to_str().unwrap(),
        "--timeline-step",
        "9",
    ])
    .unwrap();
    let error = cli.timeline.write("a run", Vec::new()).unwrap_err();
    assert!(error.contains("training step 9 did not run"), "{error}");
    assert!(!path.exists(), "nothing written");
    let unasked = Cli::try_parse_from(["t"]).unwrap();
    assert_eq!(unasked.timeline.write("a run", Vec::new()), Ok(Vec::new()));
}
