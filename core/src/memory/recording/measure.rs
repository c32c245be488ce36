//! The entries that record a step ([`StepReport::measure`], [`Timeline::measure`] and their
//! `try_` forms): a recording started, the step run, the report (and timeline) finished, on every
//! exit path.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::time::{Duration, Instant};

use super::super::failure::{
    AfterFailure, OutOfMemory, Watch, outcome_message, read_after_failure,
};
use super::super::meter::MemoryMeter;
use super::super::offloaded as offload;
use super::super::report::StepReport;
use super::super::sampler::Sampler;
use super::super::timeline::{MAX_POINTS, Point, Timeline};
use super::drawn::{Drawn, PeakPlace};
use super::{NO_REGION_YET, ON, RECORDING, Recording, with};
use crate::names::RegionId;

/// How often a timeline's sampler reads the meter between the region events.
const SAMPLING: Duration = Duration::from_micros(200);

impl StepReport {
    /// Runs `step` (one training step: forward, backward, optimizer) on this thread and measures
    /// it with `meter`, region by region; regions run as the code says (or as the plan a
    /// [`Plan::run`](crate::planner::Plan::run) around it says). A measurement nested in another
    /// records into the outermost, and returns an empty report.
    ///
    /// What it costs: a read of the meter and a clock at each top-level region's opening and
    /// closing and around each region's recompute, and a map update per tracked op outside
    /// regions. Without a recording each of those hooks is one thread-local flag read.
    ///
    /// See the Burn crates' guides for a step with regions; without any:
    ///
    /// ```
    /// use burn_checkpoint_core::memory::{HostMeter, StepReport};
    ///
    /// let (sum, report) = StepReport::measure(HostMeter, || (0..10).sum::<u32>());
    /// assert_eq!(sum, 45);
    /// assert!(report.regions.is_empty());
    /// ```
    pub fn measure<R>(meter: impl MemoryMeter, step: impl FnOnce() -> R) -> (R, StepReport) {
        let (result, report, _) = record(Box::new(meter), false, step);
        (result, report)
    }

    /// [`StepReport::measure`] for a step that may run out of memory: where an allocation fails
    /// while `step` runs, the step's panic becomes an [`OutOfMemory`] (boxed: it holds a report)
    /// with the report of the
    /// step so far (each region instance and what it held then, what was made outside regions,
    /// where the step was, the bytes asked for, in use and reserved) and both messages: the
    /// backend's and the step's own. Any other panic is resumed as it was.
    ///
    /// A `Result`, not the panic resumed after a printed report: a training loop can save what
    /// it has, tell the user what would fit and exit with a code of its own (docs/trainer.md),
    /// where a panic leaves it only unwinding. The backend's panics are still printed by the
    /// process's hook as they happen (the watch chains to it); the device stays usable (on
    /// cubecl's runtimes, docs/gpu.md).
    ///
    /// How the failure is seen: cubecl's runtimes panic on their device thread with "can't
    /// allocate buffer of size: N", and the step's own thread fails later, at a read, with a
    /// message that does not say memory. While a step runs here, a panic hook watches every
    /// thread's panics for an allocation failure (chained to the hook it replaced, and put back
    /// when the last watched step ends). A step that *returns* although an allocation failed
    /// while it ran is a failure too: on wgpu with fusion the device thread can go on, and the
    /// step's values are computed without the buffer. A host backend cannot be caught: Rust's
    /// allocator aborts the process.
    ///
    /// ```
    /// use burn_checkpoint_core::memory::{HostMeter, StepReport};
    ///
    /// // A panic that is no allocation failure is resumed: the caller sees it as it was.
    /// let caught = std::panic::catch_unwind(|| {
    ///     StepReport::try_measure(HostMeter, || panic!("a bug, not memory"))
    /// });
    /// assert!(caught.is_err());
    /// ```
    pub fn try_measure<R>(
        meter: impl MemoryMeter,
        step: impl FnOnce() -> R,
    ) -> Result<(R, StepReport), Box<OutOfMemory>> {
        record_or_out_of_memory(Box::new(meter), false, step)
            .map(|(result, report, _)| (result, report))
    }
}

impl Timeline {
    /// Runs `step` on this thread as [`StepReport::measure`] does and records its timeline with
    /// its report ([`Timeline::report`]): every read of the meter at a region event is a point,
    /// a thread reads the meter between them every 200 µs (the counting allocator on the host,
    /// the device's counts on a device), the region hooks' times are the spans, and what was
    /// live at the peak is kept. Nested in another measurement, it records into the outermost
    /// and returns an empty timeline.
    ///
    /// What it costs beyond the report: a point per read, a span per region phase, and the
    /// sampling thread (benches/timeline.rs measures the step's time with it against without).
    ///
    /// ```
    /// use burn_checkpoint_core::memory::{CountingAllocator, HostMeter, Timeline};
    ///
    /// #[global_allocator]
    /// static ALLOCATOR: CountingAllocator = CountingAllocator;
    ///
    /// let (_, timeline) = Timeline::measure(HostMeter, || {
    ///     let big = vec![1u8; 4 << 20];
    ///     std::thread::sleep(std::time::Duration::from_millis(5));
    ///     big.len()
    /// });
    /// assert!(timeline.highest() >= 4 << 20);
    /// assert!(timeline.points.len() > 2, "the sampler read between the start and the end");
    /// ```
    pub fn measure<R>(meter: impl MemoryMeter, step: impl FnOnce() -> R) -> (R, Timeline) {
        let (result, _, timeline) = record(Box::new(meter), true, step);
        (result, timeline.unwrap_or_default())
    }

    /// [`Timeline::measure`] for a step that may run out of memory, as
    /// [`StepReport::try_measure`]: the failure carries the timeline up to it
    /// ([`OutOfMemory::timeline`]).
    ///
    /// ```
    /// use burn_checkpoint_core::memory::{HostMeter, Timeline};
    ///
    /// let (sum, _) = Timeline::try_measure(HostMeter, || 2 + 2).expect("no failure");
    /// assert_eq!(sum, 4);
    /// ```
    pub fn try_measure<R>(
        meter: impl MemoryMeter,
        step: impl FnOnce() -> R,
    ) -> Result<(R, Timeline), Box<OutOfMemory>> {
        record_or_out_of_memory(Box::new(meter), true, step)
            .map(|(result, _, timeline)| (result, timeline.unwrap_or_default()))
    }
}

/// What a recording gives: the step's result, its report, its timeline if asked for.
type Recorded<R> = (R, StepReport, Option<Timeline>);

/// Records the step `f` runs on this thread, measured with `meter`, with its timeline if
/// `timeline`; nested calls record into the outermost.
fn record<R>(meter: Box<dyn MemoryMeter>, timeline: bool, f: impl FnOnce() -> R) -> Recorded<R> {
    let Some(off) = start(meter, timeline) else {
        return (f(), StepReport::default(), None);
    };
    let result = f();
    let (report, timeline) = finish(true);
    drop(off);
    (result, report, timeline)
}

/// Turns the recording off on every exit path, panics included.
struct Off;

impl Drop for Off {
    fn drop(&mut self) {
        ON.with(|on| on.set(false));
        offload::log_copies(false);
        RECORDING.with(|recording| recording.borrow_mut().take());
    }
}

/// Starts recording with `meter` (a timeline too, if `timeline`); `None` inside a recording
/// already.
fn start(meter: Box<dyn MemoryMeter>, timeline: bool) -> Option<Off> {
    if ON.with(Cell::get) {
        return None;
    }
    // A recorded step numbers its region instances from 0 (`block#0` is its first block,
    // whatever ran on this thread before), as a planned step does.
    RegionId::restart_indices();
    // On a device, the step's reserved peak is its own, not what earlier steps left in pools.
    meter.release();
    meter.settle();
    // The timeline's room and sampler before the step's start is read: what they allocate is
    // not the step's.
    let began = Instant::now();
    let drawn = timeline.then(|| {
        offload::log_copies(true);
        Drawn {
            points: Vec::with_capacity(256),
            spans: Vec::with_capacity(256),
            sampler: meter
                .reader()
                .map(|read| Sampler::start(read, SAMPLING, Some(2 * MAX_POINTS), began)),
            open_span: None,
            window_span: None,
            recompute_span: None,
            backward_at: None,
            reads: (0.0, 0.0),
            peak: PeakPlace::default(),
            intervals: Vec::with_capacity(256),
            polled: meter.peak().is_none(),
        }
    });
    meter.reset_peak();
    offload::reset_offloaded_peak();
    let start_bytes = meter.in_use();
    let start_reserved = meter.reserved();
    RECORDING.with(|recording| {
        *recording.borrow_mut() = Some(Recording {
            report: StepReport {
                meter: meter.describe(),
                peak_at: "the start".to_string(),
                ..StepReport::default()
            },
            meter,
            start_bytes,
            start: began,
            open: None,
            offloaded_at_start: offload::offloaded_bytes(),
            offloaded_at_open: 0,
            last_closed: None,
            closed_bytes: start_bytes,
            now: NO_REGION_YET.to_string(),
            peak: start_bytes,
            reserved: start_reserved,
            backward: false,
            window: None,
            outside_windows: start_bytes,
            open_high: start_bytes,
            timeline: drawn,
        })
    });
    ON.with(|on| on.set(true));
    Some(Off)
}

/// Where a failed step was and the bytes in use and reserved then ([`at_failure`]).
struct AtFailure {
    at: String,
    read: AfterFailure,
}

/// Reads the meter as it is after a failure (a sync could fail again), and gives the region
/// open then what it held when the failure was seen.
fn at_failure() -> AtFailure {
    with(|recording| {
        let read = read_after_failure(&*recording.meter);
        if let Some(now) = read.in_use {
            if let Some((slot, opened_bytes, opened)) = recording.open.take() {
                let region = &mut recording.report.regions[slot];
                region.held_bytes = now as i64 - opened_bytes as i64;
                region.forward_seconds = opened.elapsed().as_secs_f64();
            }
            recording.peak = recording.peak.max(now);
            let (seconds, above) = (
                recording.seconds(),
                now as i64 - recording.start_bytes as i64,
            );
            if let Some(drawn) = &mut recording.timeline {
                drawn.points.push(Point {
                    seconds,
                    in_use: above,
                    high: above,
                    reserved: read.reserved,
                });
            }
        }
        AtFailure {
            at: recording.now.clone(),
            read,
        }
    })
    .expect("recording until `Off` drops")
}

/// The report (and timeline, if recorded) of the step recorded so far; `settled`: the step
/// finished, and the meter is settled (a device synced) and read at its end.
fn finish(settled: bool) -> (StepReport, Option<Timeline>) {
    with(|recording| {
        // The sampler stops before the last read, whose high covers what came after it.
        let sampled = recording
            .timeline
            .as_mut()
            .and_then(|drawn| drawn.sampler.take())
            .map(Sampler::finish);
        if settled {
            recording.event("the end".to_string());
        }
        if let Some(sampled) = &sampled {
            recording.take_in(sampled);
        }
        let mut report = std::mem::take(&mut recording.report);
        report.peak_bytes = recording.peak.saturating_sub(recording.start_bytes);
        // A step that ran no region has no "first region" to be before: its peak is the step's.
        if report.regions.is_empty() && report.peak_at == NO_REGION_YET {
            report.peak_at = "in the step (no region ran)".to_string();
        }
        report.outside_windows_peak_bytes = Some(
            recording
                .outside_windows
                .saturating_sub(recording.start_bytes),
        );
        report.reserved_peak_bytes = recording.reserved;
        if settled {
            report.end_bytes = recording.meter.in_use() as i64 - recording.start_bytes as i64;
        }
        report.seconds = recording.start.elapsed().as_secs_f64();
        report.offloaded_peak_bytes =
            offload::offloaded_peak().saturating_sub(recording.offloaded_at_start) as u64;
        // The reads reset the meter's peak to measure each interval: give the step's back to
        // whoever measures around this one.
        recording.meter.raise_peak(recording.peak);
        let timeline = recording.timeline.take().map(|drawn| {
            let samples = sampled.map(|sampled| sampled.series).unwrap_or_default();
            drawn.finish(&report, samples, recording.start, recording.start_bytes)
        });
        (report, timeline)
    })
    .expect("recording until `Off` drops")
}

/// [`StepReport::try_measure`]: `record`, with the step's panic caught and, when an allocation
/// failed while it ran, turned into the report so far.
fn record_or_out_of_memory<R>(
    meter: Box<dyn MemoryMeter>,
    timeline: bool,
    f: impl FnOnce() -> R,
) -> Result<Recorded<R>, Box<OutOfMemory>> {
    let watch = Watch::start();
    let Some(off) = start(meter, timeline) else {
        // Nested: the outermost measurement catches.
        return Ok((f(), StepReport::default(), None));
    };
    let outcome = catch_unwind(AssertUnwindSafe(f));
    let Some(seen) = watch.first_seen() else {
        return match outcome {
            Ok(result) => {
                let (report, timeline) = finish(true);
                drop(off);
                Ok((result, report, timeline))
            }
            Err(payload) => {
                drop(off);
                drop(watch);
                resume_unwind(payload)
            }
        };
    };
    // Failed, or returned results computed without the buffer.
    let step_message = outcome_message(&outcome);
    let at = at_failure();
    let (report, timeline) = finish(false);
    drop(off);
    let mut failure = OutOfMemory::of(report, at.at, seen, at.read, step_message);
    failure.timeline = timeline.map(Box::new);
    Err(failure)
}
