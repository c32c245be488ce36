//! The recording of one measured step on this thread ([`StepReport::measure`]): the Burn crates'
//! region machinery reports to it through the hooks below as the step runs (a top-level region
//! opens and closes, backward recomputes for a region, an op outside regions makes a tensor).
//!
//! Off, every hook is one read of a thread-local flag: nothing is measured in the hot path.
//!
//! A [`Timeline`] is recorded by the same hooks and reads: each read of the meter is a point
//! (its high the meter's peak since the read before), the hooks' times are the regions' spans,
//! and a sampler thread reads the meter between them.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::time::{Duration, Instant};

use super::device::Usage;
use super::failure::{AfterFailure, OutOfMemory, Watch, outcome_message, read_after_failure};
use super::meter::MemoryMeter;
use super::offloaded as offload;
use super::report::{RegionRecord, StepReport};
use super::sampler::{Sampled, Sampler};
use super::timeline::{self, AtPeak, Holding, Live, MAX_POINTS, Phase, Point, Span, Timeline};
use crate::names::RegionId;
use crate::op_kind::OpKind;
use crate::treatment::Treatment;

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static RECORDING: RefCell<Option<Recording>> = const { RefCell::new(None) };
}

/// How often a timeline's sampler reads the meter between the region events.
const SAMPLING: Duration = Duration::from_micros(200);

struct Recording {
    meter: Box<dyn MemoryMeter>,
    start_bytes: u64,
    start: Instant,
    report: StepReport,
    /// The top-level region open now: its slot in `report.regions`, bytes and time at opening.
    open: Option<(usize, u64, Instant)>,
    /// Bytes in the offload store when the step began, and when the open region opened.
    offloaded_at_start: usize,
    offloaded_at_open: usize,
    /// The slot of the last top-level region closed (outside ops are counted after it).
    last_closed: Option<usize>,
    /// Bytes in use when it closed (when the step began, before the first region).
    closed_bytes: u64,
    /// Where the step is now, for the peak's place.
    now: String,
    /// The highest peak seen so far (absolute bytes) and whether backward has begun.
    peak: u64,
    /// The most bytes reserved seen so far, on a device.
    reserved: Option<u64>,
    backward: bool,
    /// The region whose backward window is open (backward recomputed for it last), whose
    /// `backward_peak_bytes` the peaks read now raise; `None`: outside every window.
    window: Option<usize>,
    /// The highest peak read outside the windows (absolute bytes).
    outside_windows: u64,
    /// The most bytes in use read since the open top-level region opened (absolute).
    open_high: u64,
    /// The timeline recorded with the report, if asked for.
    timeline: Option<Drawn>,
}

/// What a timeline's recording keeps besides the report.
struct Drawn {
    /// Each read of the meter (the sampler's readings join them at the end).
    points: Vec<Point>,
    spans: Vec<Span>,
    sampler: Option<Sampler>,
    /// The open region's forward span; the open window's span, with the bytes in use when it
    /// opened; the last recompute's span and its region's slot.
    open_span: Option<usize>,
    window_span: Option<(usize, u64)>,
    recompute_span: Option<(usize, usize)>,
    /// When backward was first seen (the first recompute), in seconds.
    backward_at: Option<f64>,
    /// When the meter was read last, and the time before (seconds since the start).
    reads: (f64, f64),
    /// Where the step was at its highest read so far, to say what was live then.
    peak: PeakPlace,
    /// Every interval between two reads: the later read's time, where the step was meanwhile
    /// and its place. The sampler's highest reading, where it is above every read's (a device
    /// meter, which keeps no peak, read between the events), falls in one of them. Kept only for
    /// such a meter (`polled`): on the host, whose peak is exact, it would be the step's bytes.
    intervals: Vec<(f64, String, PeakPlace)>,
    polled: bool,
}

/// Where the step was when a read saw a new peak: what [`at_peak`] needs.
#[derive(Clone, Copy, Debug, Default)]
struct PeakPlace {
    /// The read that saw the peak, and the read before it: the peak fell between them.
    seconds: f64,
    after: f64,
    /// Region instances whose forward had closed by then (the first ones: slots are in order).
    closed: usize,
    /// The region whose forward was running (its slot, the bytes in use when it opened).
    forward: Option<(usize, u64)>,
    /// The region whose backward window was open (its slot, the bytes when it opened).
    window: Option<(usize, u64)>,
}

impl Recording {
    /// Settles the meter (one device sync) and reads it: the bytes in use and the meter's peak
    /// since the read before (at least those in use); the most bytes reserved is kept. A
    /// timeline gets the read as a point.
    fn read(&mut self) -> (u64, u64) {
        self.meter.settle();
        let reserved = self.meter.reserved();
        if let Some(now) = reserved {
            self.reserved = Some(self.reserved.map_or(now, |seen| seen.max(now)));
        }
        let in_use = self.meter.in_use();
        let high = self.meter.peak().unwrap_or(in_use).max(in_use);
        // Each read's peak is the interval's since the read before: the next starts here.
        self.meter.reset_peak();
        self.open_high = self.open_high.max(high);
        let (start, seconds) = (self.start_bytes as i64, self.seconds());
        if let Some(drawn) = &mut self.timeline {
            drawn.reads = (drawn.reads.1, seconds);
            drawn.points.push(Point {
                seconds,
                in_use: in_use as i64 - start,
                high: high as i64 - start,
                reserved,
            });
        }
        (in_use, high)
    }

    fn seconds(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// Reads the meter; if the peak rose since the last event, it rose where the step was.
    fn event(&mut self, next: String) {
        let (_, peak) = self.read();
        self.event_at(next, peak);
    }

    /// [`Recording::event`] with the meter's peak already read there: it belongs to the open
    /// window, if any.
    fn event_at(&mut self, next: String, peak: u64) {
        match self.window {
            Some(slot) => {
                let region = &mut self.report.regions[slot];
                region.backward_peak_bytes = region
                    .backward_peak_bytes
                    .max(peak.saturating_sub(self.start_bytes));
            }
            None => self.outside_windows = self.outside_windows.max(peak),
        }
        // Where the step was, for the timeline's breakdown of the peak.
        let place = self.timeline.as_ref().map(|drawn| PeakPlace {
            seconds: drawn.reads.1,
            after: drawn.reads.0,
            closed: self.last_closed.map_or(0, |slot| slot + 1),
            forward: self.open.map(|(slot, opened, _)| (slot, opened)),
            window: drawn
                .window_span
                .and_then(|(_, opened)| Some((self.window?, opened))),
        });
        if let (Some(place), Some(drawn)) = (place, &mut self.timeline) {
            if drawn.polled {
                drawn
                    .intervals
                    .push((place.seconds, self.now.clone(), place));
            }
            if peak > self.peak {
                drawn.peak = place;
            }
        }
        if peak > self.peak {
            self.peak = peak;
            self.report.peak_at = std::mem::replace(&mut self.now, next);
        } else {
            self.now = next;
        }
    }

    /// Takes in the sampler's readings (a timeline's): the most bytes reserved, and, where its
    /// highest reading is above every read's, that peak, dated in the interval between the two
    /// reads it fell between (where the step was then). A device meter keeps no peak: without
    /// this a step without regions, read at its start and end only, would peak at its end.
    fn take_in(&mut self, sampled: &Sampled) {
        if let Some(reserved) = &mut self.reserved {
            *reserved = (*reserved).max(sampled.peak.reserved);
        }
        if sampled.peak.in_use <= self.peak {
            return;
        }
        self.peak = sampled.peak.in_use;
        let highest = sampled.series.iter().max_by_key(|(_, usage)| usage.in_use);
        let (Some(&(at, _)), Some(drawn)) = (highest, &mut self.timeline) else {
            return;
        };
        // The first read at or after the reading closes its interval (the last read, the
        // step's end, closes every one).
        let interval = drawn.intervals.iter().find(|(read, _, _)| *read >= at);
        if let Some((_, was, place)) = interval.or(drawn.intervals.last()) {
            self.report.peak_at = was.clone();
            drawn.peak = *place;
        }
    }

    fn id(&self, slot: usize) -> String {
        self.report.regions[slot].id()
    }

    /// Where the step is between regions in forward: before the first, or after which name.
    fn site(&self) -> String {
        match self.last_closed {
            None => "before the first region".to_string(),
            Some(slot) => format!("after {}", self.report.regions[slot].name),
        }
    }

    /// Forward left `in_use` bytes in use where it leaves the outside of regions (a region opens,
    /// or backward begins): what it holds outside regions grew by the difference there.
    fn leave_outside(&mut self, in_use: u64) {
        let grown = in_use as i64 - self.closed_bytes as i64;
        *self
            .report
            .held_outside_by_site
            .entry(self.site())
            .or_default() += grown;
    }
}

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
            now: "before the first region".to_string(),
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

impl Drawn {
    /// The timeline of the step `report` reported: the reads' points with the sampler's
    /// `samples` (bounded), the spans closed at the end, the step's phases and the copies
    /// logged, and what was live at the peak.
    fn finish(
        mut self,
        report: &StepReport,
        samples: Vec<(f64, Usage)>,
        began: Instant,
        start_bytes: u64,
    ) -> Timeline {
        let end = began.elapsed().as_secs_f64();
        for span in [self.open_span, self.window_span.map(|(span, _)| span)]
            .into_iter()
            .flatten()
        {
            self.spans[span].end = end;
        }
        let step = |phase, start, end| Span {
            phase,
            region: None,
            index: None,
            start,
            end,
            bytes: 0,
        };
        // The step's phases, known where a recompute marked backward's start.
        if let Some(backward) = self.backward_at {
            self.spans.push(step(Phase::Forward, 0.0, backward));
            self.spans.push(step(Phase::Backward, backward, end));
        }
        for (at, bytes) in offload::take_copies() {
            let Some(since) = at.checked_duration_since(began) else {
                continue;
            };
            let phase = match bytes > 0 {
                true => Phase::OffloadOut,
                false => Phase::OffloadBack,
            };
            let seconds = since.as_secs_f64();
            self.spans.push(Span {
                bytes: bytes.unsigned_abs(),
                ..step(phase, seconds, seconds)
            });
        }
        self.spans.sort_by(|a, b| a.start.total_cmp(&b.start));
        let start = start_bytes as i64;
        let device = report.reserved_peak_bytes.is_some();
        // When the peak was: the sampler's highest reading between the read that saw it and
        // the read before, if it read there.
        let peak_seconds = samples
            .iter()
            .filter(|(seconds, _)| (self.peak.after..=self.peak.seconds).contains(seconds))
            .max_by_key(|(_, usage)| usage.in_use)
            .map_or(self.peak.seconds, |(seconds, _)| *seconds);
        self.points
            .extend(samples.into_iter().map(|(seconds, usage)| Point {
                seconds,
                in_use: usage.in_use as i64 - start,
                high: usage.in_use as i64 - start,
                reserved: device.then_some(usage.reserved),
            }));
        self.points.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
        timeline::bound(&mut self.points, MAX_POINTS);
        Timeline {
            report: report.clone(),
            points: self.points,
            spans: self.spans,
            at_peak: at_peak(report, self.peak, start, peak_seconds),
            ..Timeline::default()
        }
    }
}

/// What was live at the step's peak, seen at `place` and dated `seconds`: each region
/// instance's share by where the step was (a region's forward running, a backward window open,
/// which regions had closed and which backward had passed), and the rest outside regions.
fn at_peak(report: &StepReport, place: PeakPlace, start_bytes: i64, seconds: f64) -> AtPeak {
    let peak = report.peak_bytes as i64;
    // Bytes above the start from an absolute reading.
    let above = |bytes: u64| bytes as i64 - start_bytes;
    let mut regions = Vec::new();
    for (slot, record) in report.regions.iter().enumerate() {
        let (holding, bytes) = match (place.forward, place.window) {
            (Some((open, opened)), _) if open == slot => (Holding::Forward, peak - above(opened)),
            _ if slot >= place.closed => continue,
            // Backward runs the regions in reverse: those after the open window are done.
            (_, Some((window, _))) if slot > window => continue,
            (_, Some((window, opened))) if slot == window => {
                (Holding::Backward, record.held_bytes + peak - above(opened))
            }
            // A region whose forward freed more than it made (its input's last use) stores
            // nothing: what it freed was counted outside, where the remainder below has it.
            _ if record.held_bytes <= 0 => continue,
            _ => (Holding::Stored, record.held_bytes),
        };
        // No share below nothing: a window or forward that freed more than it made holds 0.
        let bytes = bytes.max(0);
        regions.push(Live {
            region: record.name.clone(),
            index: record.index,
            holding,
            bytes,
        });
    }
    let outside = peak - regions.iter().map(|live| live.bytes).sum::<i64>();
    AtPeak {
        seconds,
        bytes: peak,
        at: report.peak_at.clone(),
        regions,
        outside,
    }
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

fn with<T>(f: impl FnOnce(&mut Recording) -> T) -> Option<T> {
    if !ON.with(Cell::get) {
        return None;
    }
    RECORDING.with(|recording| recording.borrow_mut().as_mut().map(f))
}

/// A top-level region (not nested in another) opens; `treatment` says how a plan has it run
/// (`None`: as written).
pub fn top_level_opened(name: &dyn fmt::Display, index: u64, treatment: Option<Treatment>) {
    with(|recording| {
        let slot = recording.report.regions.len();
        recording.report.regions.push(RegionRecord {
            name: name.to_string(),
            index,
            // A plan's as-written is the code's run, as no plan: one way to say it.
            treatment: treatment.filter(|&t| t != Treatment::AsWritten),
            ..RegionRecord::default()
        });
        let label = format!("forward, in {}", recording.id(slot));
        let (in_use, peak) = recording.read();
        if !recording.backward {
            recording.leave_outside(in_use);
        }
        recording.event_at(label, peak);
        recording.open = Some((slot, in_use, Instant::now()));
        recording.open_high = in_use;
        recording.offloaded_at_open = offload::offloaded_bytes();
        let seconds = recording.seconds();
        let record = &recording.report.regions[slot];
        let span = Span {
            phase: Phase::RegionForward,
            region: Some(record.name.clone()),
            index: Some(record.index),
            start: seconds,
            end: seconds,
            bytes: 0,
        };
        if let Some(drawn) = &mut recording.timeline {
            drawn.open_span = Some(drawn.spans.len());
            drawn.spans.push(span);
        }
    });
}

/// The open top-level region closes.
pub fn top_level_closed() {
    with(|recording| {
        let Some((slot, opened_bytes, opened)) = recording.open else {
            return;
        };
        let (in_use, peak) = recording.read();
        // The peak read now fell inside the region: it is open for the event.
        let label = format!("forward, after {}", recording.id(slot));
        recording.event_at(label, peak);
        recording.open = None;
        let forward_peak = recording.open_high;
        let region = &mut recording.report.regions[slot];
        region.held_bytes = in_use as i64 - opened_bytes as i64;
        region.forward_peak_bytes = forward_peak.saturating_sub(opened_bytes);
        region.forward_seconds = opened.elapsed().as_secs_f64();
        region.offloaded_bytes =
            offload::offloaded_bytes().saturating_sub(recording.offloaded_at_open) as u64;
        recording.last_closed = Some(slot);
        recording.closed_bytes = in_use;
        let seconds = recording.seconds();
        if let Some(drawn) = &mut recording.timeline
            && let Some(span) = drawn.open_span.take()
        {
            drawn.spans[span].end = seconds;
        }
    });
}

/// The slot of the top-level region open now, for what its recompute will report to
/// [`recompute`].
pub fn current_region() -> Option<usize> {
    with(|recording| recording.open.map(|(slot, ..)| slot)).flatten()
}

/// Runs a recompute (one op's, or a whole region body's) for the region in `slot` (from
/// [`current_region`] when the region ran), measuring its time; `bytes` sizes its output.
pub fn recompute<T>(slot: usize, f: impl FnOnce() -> T, bytes: impl FnOnce(&T) -> u64) -> T {
    if !ON.with(Cell::get) {
        return f();
    }
    with(|recording| {
        if slot >= recording.report.regions.len() {
            return;
        }
        let label = format!("backward, recomputing {}", recording.id(slot));
        let (in_use, peak) = recording.read();
        if !recording.backward {
            // Backward begins: what forward holds after the last region (the head, the loss).
            recording.leave_outside(in_use);
            recording.backward = true;
        }
        recording.event_at(label, peak);
        // The peak read so far was the previous window's: this region's window starts here.
        let opens = recording.window != Some(slot);
        recording.window = Some(slot);
        let seconds = recording.seconds();
        let record = &recording.report.regions[slot];
        let span = |phase| Span {
            phase,
            region: Some(record.name.clone()),
            index: Some(record.index),
            start: seconds,
            end: seconds,
            bytes: 0,
        };
        let (window, recompute) = (span(Phase::RegionBackward), span(Phase::Recompute));
        if let Some(drawn) = &mut recording.timeline {
            drawn.backward_at.get_or_insert(seconds);
            if opens {
                if let Some((previous, _)) = drawn.window_span {
                    drawn.spans[previous].end = seconds;
                }
                drawn.window_span = Some((drawn.spans.len(), in_use));
                drawn.spans.push(window);
            }
            // Recomputes of one instance in a row (an op's each on Burn 0.21) are one span.
            if drawn.recompute_span.is_none_or(|(of, _)| of != slot) {
                drawn.recompute_span = Some((slot, drawn.spans.len()));
                drawn.spans.push(recompute);
            }
        }
    });
    let started = Instant::now();
    let output = f();
    // A device runs behind the host: the recompute's time is until its work has run, which the
    // read after it waits for.
    let read = with(|recording| recording.read());
    let elapsed = started.elapsed();
    let size = bytes(&output);
    with(|recording| {
        // A recipe left by a step recorded earlier (its graph never went backward).
        let Some(region) = recording.report.regions.get_mut(slot) else {
            return;
        };
        region.recomputed_bytes += size;
        region.recompute_seconds += elapsed.as_secs_f64();
        region.recomputed_ops += 1;
        let label = format!("backward, after recomputing {}", recording.id(slot));
        if let Some((_, peak)) = read {
            recording.event_at(label, peak);
        }
        let seconds = recording.seconds();
        if let Some(drawn) = &mut recording.timeline
            && let Some((_, span)) = drawn.recompute_span
        {
            drawn.spans[span].end = seconds;
        }
    });
    output
}

/// A tracked op outside every region made `bytes` (kind `kind`).
pub fn made_outside(kind: OpKind, bytes: u64) {
    with(|recording| {
        if recording.open.is_some() {
            // Inside a top-level region a plan keeps: its bytes are the region's.
            return;
        }
        *recording.report.outside_by_kind.entry(kind).or_default() += bytes;
        let site = match recording.last_closed {
            Some(_) if recording.backward => "backward".to_string(),
            _ => recording.site(),
        };
        *recording.report.outside_by_site.entry(site).or_default() += bytes;
    });
}

/// Whether a step is being recorded on this thread.
pub fn on() -> bool {
    ON.with(Cell::get)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::super::failure::{RETURNED, fail_on_the_device_thread, one_failing_test_at_a_time};
    use super::*;
    use crate::memory::Reader;

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
        let other = std::panic::catch_unwind(|| {
            StepReport::try_measure(Hand, || panic!("a bug, not memory"))
        });
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
}
