//! The recording's tests: a meter set by hand, the hooks called as the Burn crates call them.

use std::sync::atomic::{AtomicU64, Ordering};

use super::drawn::{PeakPlace, at_peak};
use super::*;
use crate::memory::device::Usage;
use crate::memory::failure::OutOfMemory;
use crate::memory::failure::{RETURNED, fail_on_the_device_thread, one_failing_test_at_a_time};
use crate::memory::meter::Reader;
use crate::memory::timeline::{Holding, MAX_POINTS, Timeline};

/// Bytes the test sets by hand; the peak is what it was set to at most since the reset.
static IN_USE: AtomicU64 = AtomicU64::new(0);
static PEAK: AtomicU64 = AtomicU64::new(0);

struct Hand;

impl MemoryMeter for Hand {
    fn in_use(&self) -> u64 {
        IN_USE.load(Ordering::Relaxed)
    }
    fn peak(&self) -> Option<u64> {
        Some(PEAK.load(Ordering::Relaxed))
    }
    fn reset_peak(&self) {
        PEAK.store(self.in_use(), Ordering::Relaxed);
    }
    fn raise_peak(&self, bytes: u64) {
        PEAK.fetch_max(bytes, Ordering::Relaxed);
    }
    fn describe(&self) -> String {
        "bytes set by the test".into()
    }
}

fn set(bytes: u64) {
    IN_USE.store(bytes, Ordering::Relaxed);
    PEAK.fetch_max(bytes, Ordering::Relaxed);
}

/// The hand-set bytes are the process's, and so are the failures a watch sees: one test at
/// a time, with the failure module's own.
fn alone() -> std::sync::MutexGuard<'static, ()> {
    one_failing_test_at_a_time()
}

#[test]
fn each_recomputing_region_has_its_backward_window() {
    let _alone = alone();
    set(0);
    PEAK.store(0, Ordering::Relaxed);
    let ((), report) = StepReport::measure(Hand, || {
        // Forward: two regions hold 10 and 20 bytes; the head peaks at 60.
        for (index, held) in [(0, 10), (1, 30)] {
            top_level_opened(&"r", index, None);
            set(held);
            top_level_closed();
        }
        set(60);
        set(40);
        // Backward: r#1 recomputes and peaks at 55, r#0 (two recomputes, one window) at 45
        // then 50, then the step's end at 5.
        recompute(1, || set(55), |_| 1);
        set(20);
        recompute(0, || set(45), |_| 1);
        recompute(0, || set(50), |_| 1);
        set(5);
    });
    assert_eq!(report.peak_bytes, 60);
    assert_eq!(report.outside_windows_peak_bytes, Some(60));
    let windows: Vec<u64> = report
        .regions
        .iter()
        .map(|r| r.backward_peak_bytes)
        .collect();
    assert_eq!(windows, [50, 55]);
}

/// A step that runs no region peaks "in the step", not "before the first region" it never had;
/// one with regions still says where its peak fell among them.
#[test]
fn a_step_without_regions_peaks_in_the_step() {
    let _alone = alone();
    set(0);
    PEAK.store(0, Ordering::Relaxed);
    let ((), plain) = StepReport::measure(Hand, || {
        set(70);
        set(10);
    });
    assert_eq!(
        (plain.peak_bytes, plain.peak_at.as_str()),
        (70, "in the step (no region ran)")
    );
    set(0);
    PEAK.store(0, Ordering::Relaxed);
    let ((), early) = StepReport::measure(Hand, || {
        set(70);
        set(10);
        top_level_opened(&"r", 0, None);
        set(20);
        top_level_closed();
    });
    assert_eq!(early.peak_at, "before the first region");
}

/// A chain of three regions, forward then backward in reverse, as a timeline: the highest
/// point is the report's peak, the spans nest and order as the step ran, and what was live
/// at the peak sums to it.
#[test]
fn a_timeline_orders_the_regions_phases_and_says_what_the_peak_held() {
    let _alone = alone();
    set(0);
    PEAK.store(0, Ordering::Relaxed);
    let ((), timeline) = Timeline::measure(Hand, || {
        // Forward: each region holds 10 bytes and peaks 5 above that inside.
        for index in 0..3u64 {
            top_level_opened(&"block", index, None);
            set(10 * index + 15);
            set(10 * (index + 1));
            top_level_closed();
        }
        set(40);
        // Backward: block#2, #1, #0 recompute (two ops each); block#1's peaks at 70.
        for (slot, high) in [(2usize, 50u64), (1, 70), (0, 45)] {
            recompute(slot, || set(high), |_| 1);
            recompute(slot, || set(high - 5), |_| 1);
            set(10 * slot as u64);
        }
    });
    let report = &timeline.report;
    assert_eq!(report.peak_bytes, 70);
    assert_eq!(
        timeline.highest(),
        70,
        "the highest point is the report's peak"
    );
    assert!(
        timeline
            .points
            .windows(2)
            .all(|w| w[0].seconds <= w[1].seconds)
    );

    let of = |phase: Phase| -> Vec<&Span> {
        timeline.spans.iter().filter(|s| s.phase == phase).collect()
    };
    let labels = |spans: &[&Span]| spans.iter().map(|s| s.label()).collect::<Vec<_>>();
    let forwards = of(Phase::RegionForward);
    let recomputes = of(Phase::Recompute);
    let windows = of(Phase::RegionBackward);
    assert_eq!(labels(&forwards), ["block#0", "block#1", "block#2"]);
    assert_eq!(
        labels(&recomputes),
        ["block#2", "block#1", "block#0"],
        "one span each"
    );
    assert_eq!(labels(&windows), ["block#2", "block#1", "block#0"]);
    for pair in forwards.windows(2) {
        assert!(pair[0].end <= pair[1].start, "forwards in order: {pair:?}");
    }
    for (recompute, window) in recomputes.iter().zip(&windows) {
        assert!(window.start <= recompute.start && recompute.end <= window.end);
    }
    let (step_forward, step_backward) = (of(Phase::Forward), of(Phase::Backward));
    assert_eq!((step_forward.len(), step_backward.len()), (1, 1));
    assert!(forwards.iter().all(|s| s.end <= step_forward[0].end));
    assert_eq!(step_backward[0].start, windows[0].start);

    // At the peak block#1 recomputed: block#0 still stored, block#2 done.
    let at_peak = &timeline.at_peak;
    assert_eq!(at_peak.bytes, 70);
    assert_eq!(at_peak.at, "backward, recomputing block#1");
    let live: Vec<(String, Holding, i64)> = at_peak
        .regions
        .iter()
        .map(|l| (format!("{}#{}", l.region, l.index), l.holding, l.bytes))
        .collect();
    // block#1's window opened at 20 bytes (block#2's backward done): it holds its 10 and
    // the 50 its recompute made.
    assert_eq!(
        live,
        [
            ("block#0".into(), Holding::Stored, 10),
            ("block#1".into(), Holding::Backward, 60),
        ]
    );
    assert_eq!(at_peak.outside, 0);
    let parts: i64 = at_peak.regions.iter().map(|l| l.bytes).sum::<i64>() + at_peak.outside;
    assert_eq!(parts, at_peak.bytes);

    // The JSON round-trips.
    let json = serde_json::to_string(&timeline).unwrap();
    assert_eq!(serde_json::from_str::<Timeline>(&json).unwrap(), timeline);
}

#[test]
fn a_forward_peak_is_the_open_regions_and_a_long_step_stays_bounded() {
    let _alone = alone();
    set(0);
    PEAK.store(0, Ordering::Relaxed);
    let ((), timeline) = Timeline::measure(Hand, || {
        for index in 0..(2 * MAX_POINTS as u64) {
            top_level_opened(&"cell", index, None);
            // cell#100 peaks at 10 000 inside its forward; each holds 1 byte.
            set(if index == 100 { 10_000 } else { index + 2 });
            set(index + 1);
            top_level_closed();
        }
    });
    assert!(
        timeline.points.len() <= MAX_POINTS,
        "{}",
        timeline.points.len()
    );
    assert_eq!(timeline.highest(), 10_000);
    assert_eq!(timeline.report.peak_bytes, 10_000);
    let at_peak = &timeline.at_peak;
    assert_eq!(
        at_peak.regions.len(),
        101,
        "cell#0..#99 stored, cell#100 running"
    );
    let open = at_peak.regions.last().unwrap();
    assert_eq!(
        (open.index, open.holding, open.bytes),
        (100, Holding::Forward, 9_900)
    );
    assert!(
        at_peak.regions[..100]
            .iter()
            .all(|l| l.holding == Holding::Stored)
    );
    let parts: i64 = at_peak.regions.iter().map(|l| l.bytes).sum::<i64>() + at_peak.outside;
    assert_eq!(parts, 10_000);
}

/// A region whose forward freed more than it made (its input's last use inside it) has no
/// share at the peak, never a negative one; the parts still sum to the peak.
#[test]
fn no_region_has_a_negative_share_at_the_peak() {
    let region = |index: u64, held_bytes: i64| RegionRecord {
        name: "block".into(),
        index,
        held_bytes,
        ..RegionRecord::default()
    };
    let report = StepReport {
        peak_bytes: 100,
        regions: vec![region(0, 60), region(1, -20), region(2, 10)],
        ..StepReport::default()
    };
    let place = PeakPlace {
        seconds: 1.0,
        after: 0.5,
        closed: 3,
        forward: None,
        // block#2's window opened when 130 bytes were in use: its backward freed 40 since.
        window: Some((2, 130)),
    };
    let at_peak = at_peak(&report, place, 0, 1.0);
    let shares: Vec<(u64, Holding, i64)> = at_peak
        .regions
        .iter()
        .map(|l| (l.index, l.holding, l.bytes))
        .collect();
    assert_eq!(
        shares,
        [(0, Holding::Stored, 60), (2, Holding::Backward, 0)]
    );
    assert!(at_peak.outside >= 0, "{}", at_peak.outside);
    let parts: i64 = at_peak.regions.iter().map(|l| l.bytes).sum::<i64>() + at_peak.outside;
    assert_eq!(parts, at_peak.bytes);
}

/// cubecl's failure, as docs/gpu.md measured it on wgpu: the device thread panics naming the
/// bytes, the step's thread fails later with a message that does not say memory. (The same
/// on a real device: kits/bench-kit/tests/allocation_failure.rs.)
#[test]
fn a_step_whose_allocation_fails_on_another_thread_gives_its_report_so_far() {
    let _alone = alone();
    set(0);
    PEAK.store(0, Ordering::Relaxed);
    let outcome = StepReport::try_measure(Hand, || {
        top_level_opened(&"r", 0, None);
        set(10);
        top_level_closed();
        top_level_opened(&"r", 1, None);
        set(25);
        fail_on_the_device_thread(
            "called `Result::unwrap()` on an `Err` value: can't allocate buffer of size: 4096",
        );
        panic!("called `Result::unwrap()` on an `Err` value: CallError");
    });
    let failure = outcome.expect_err("an out-of-memory failure");
    assert_eq!(failure.requested_bytes, Some(4096));
    assert_eq!(failure.thread, "device");
    assert_eq!(failure.at, "forward, in r#1");
    assert_eq!(failure.in_use_bytes, Some(25));
    assert!(failure.step_message.ends_with("CallError"), "{failure}");
    let held: Vec<i64> = failure
        .report
        .regions
        .iter()
        .map(|r| r.held_bytes)
        .collect();
    assert_eq!(held, [10, 15]);
    assert_eq!(failure.report.peak_bytes, 25);
    assert!(!on(), "the recording is off again");

    // With a timeline, the failure carries it up to the failure.
    set(0);
    let failure = Timeline::try_measure(Hand, || {
        top_level_opened(&"r", 0, None);
        set(30);
        fail_on_the_device_thread("can't allocate buffer of size: 4096");
        panic!("CallError");
    })
    .expect_err("an out-of-memory failure");
    let timeline = failure
        .timeline
        .as_ref()
        .expect("the timeline up to the failure");
    assert_eq!(timeline.highest(), 30);
    assert_eq!(timeline.spans[0].label(), "r#0");

    // Another panic is resumed as it was, and the next step measures as before.
    let other =
        std::panic::catch_unwind(|| StepReport::try_measure(Hand, || panic!("a bug, not memory")));
    let payload = other.expect_err("resumed");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"a bug, not memory"));
    let (value, report) = StepReport::try_measure(Hand, || 7).expect("no failure");
    assert_eq!((value, report.regions.len()), (7, 0));
}

#[test]
fn a_step_caught_unrecorded_gives_the_failure_without_regions() {
    let _alone = alone();
    set(0);
    let failure = OutOfMemory::catch(Hand, || {
        top_level_opened(&"r", 0, None);
        set(40);
        fail_on_the_device_thread("out of device memory allocating 512 bytes");
        panic!("CallError");
    })
    .expect_err("an out-of-memory failure");
    assert_eq!(failure.requested_bytes, Some(512));
    assert_eq!(failure.thread, "device");
    assert_eq!(failure.in_use_bytes, Some(40));
    assert_eq!(failure.step_message, "CallError");
    assert!(failure.report.regions.is_empty(), "nothing recorded");
    assert!(!on(), "no recording was started");
    let shown = failure.to_string();
    assert!(shown.contains("the step was not recorded"), "{shown}");
    assert!(!shown.contains("region "), "no table: {shown}");

    // A step that returns although an allocation failed is a failure too: its values were
    // computed without the buffer.
    let returned = OutOfMemory::catch(Hand, || {
        fail_on_the_device_thread("can't allocate buffer of size: 4096");
        1.0f32
    })
    .expect_err("results computed without the buffer");
    assert_eq!(returned.step_message, RETURNED);
    let recorded = StepReport::try_measure(Hand, || {
        fail_on_the_device_thread("can't allocate buffer of size: 4096");
    })
    .expect_err("the same, recorded");
    assert_eq!(recorded.step_message, RETURNED);

    // Another panic is resumed as it was; the watch ended with the step.
    let other = std::panic::catch_unwind(|| OutOfMemory::catch(Hand, || panic!("a bug")));
    assert!(other.is_err());
    assert_eq!(OutOfMemory::catch(Hand, || 7).expect("no failure"), 7);
}

/// A meter like a device's: no peak of its own, read at the events and by the sampler.
struct Polled;

impl MemoryMeter for Polled {
    fn in_use(&self) -> u64 {
        IN_USE.load(Ordering::Relaxed)
    }
    fn reserved(&self) -> Option<u64> {
        Some(2 * IN_USE.load(Ordering::Relaxed))
    }
    fn describe(&self) -> String {
        "bytes set by the test, polled".into()
    }
    fn reader(&self) -> Option<Reader> {
        Some(Box::new(|| Usage {
            in_use: IN_USE.load(Ordering::Relaxed),
            reserved: 2 * IN_USE.load(Ordering::Relaxed),
        }))
    }
}

/// Holds `bytes` long enough for the sampler (every 200 µs) to read them many times.
fn hold(bytes: u64) {
    set(bytes);
    std::thread::sleep(std::time::Duration::from_millis(20));
}

/// On a meter without a peak of its own (a device's), a step's peak between two reads is
/// the sampler's: a step without regions (read at its start and end only) peaks where it
/// did, not at its end, and so does one between two regions, where the step was then.
#[test]
fn a_polled_meters_peak_between_reads_is_the_samplers() {
    let _alone = alone();
    set(0);
    let ((), plain) = Timeline::measure(Polled, || {
        hold(300);
        hold(20);
    });
    assert_eq!(plain.report.peak_bytes, 300, "{}", plain.report);
    assert_eq!(plain.report.reserved_peak_bytes, Some(600));
    assert_eq!(plain.at_peak.bytes, 300);
    assert!(plain.highest() >= 300);

    set(0);
    let ((), regions) = Timeline::measure(Polled, || {
        top_level_opened(&"block", 0, None);
        hold(10);
        top_level_closed();
        hold(500);
        hold(30);
        top_level_opened(&"block", 1, None);
        hold(40);
        top_level_closed();
    });
    let report = &regions.report;
    assert_eq!(report.peak_bytes, 500, "{report}");
    assert_eq!(report.peak_at, "forward, after block#0", "{report}");
    assert_eq!(regions.at_peak.bytes, 500);
    let stored: i64 = regions.at_peak.regions.iter().map(|live| live.bytes).sum();
    assert_eq!(
        stored + regions.at_peak.outside,
        500,
        "the peak's parts sum to it"
    );
}
