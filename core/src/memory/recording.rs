//! The recording of one measured step on this thread ([`StepReport::measure`]): the Burn crates'
//! region machinery reports to it through the hooks below as the step runs (a top-level region
//! opens and closes, backward recomputes for a region, an op outside regions makes a tensor).
//!
//! Off, every hook is one read of a thread-local flag: nothing is measured in the hot path.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::time::Instant;

use super::failure::{AfterFailure, OutOfMemory, Watch, outcome_message, read_after_failure};
use super::meter::MemoryMeter;
use super::offloaded as offload;
use super::report::{RegionRecord, StepReport};
use crate::op_kind::OpKind;
use crate::treatment::Treatment;

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static RECORDING: RefCell<Option<Recording>> = const { RefCell::new(None) };
}

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
}

impl Recording {
    /// Settles the meter (one device sync) and reads it: the bytes in use and the meter's peak
    /// (at least those in use); the most bytes reserved is kept.
    fn read(&mut self) -> (u64, u64) {
        self.meter.settle();
        if let Some(now) = self.meter.reserved() {
            self.reserved = Some(self.reserved.map_or(now, |seen| seen.max(now)));
        }
        let in_use = self.meter.in_use();
        (in_use, self.meter.peak().unwrap_or(in_use).max(in_use))
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
        if peak > self.peak {
            self.peak = peak;
            self.report.peak_at = std::mem::replace(&mut self.now, next);
        } else {
            self.now = next;
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
        record(Box::new(meter), step)
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
        record_or_out_of_memory(Box::new(meter), step)
    }
}

/// Records the step `f` runs on this thread, measured with `meter`; nested calls record into
/// the outermost.
fn record<R>(meter: Box<dyn MemoryMeter>, f: impl FnOnce() -> R) -> (R, StepReport) {
    let Some(off) = start(meter) else {
        return (f(), StepReport::default());
    };
    let result = f();
    let report = finish(true);
    drop(off);
    (result, report)
}

/// Turns the recording off on every exit path, panics included.
struct Off;

impl Drop for Off {
    fn drop(&mut self) {
        ON.with(|on| on.set(false));
        RECORDING.with(|recording| recording.borrow_mut().take());
    }
}

/// Starts recording with `meter`; `None` inside a recording already.
fn start(meter: Box<dyn MemoryMeter>) -> Option<Off> {
    if ON.with(Cell::get) {
        return None;
    }
    // On a device, the step's reserved peak is its own, not what earlier steps left in pools.
    meter.release();
    meter.settle();
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
            start: Instant::now(),
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
        }
        AtFailure {
            at: recording.now.clone(),
            read,
        }
    })
    .expect("recording until `Off` drops")
}

/// The report of the step recorded so far; `settled`: the step finished, and the meter is
/// settled (a device synced) and read at its end.
fn finish(settled: bool) -> StepReport {
    with(|recording| {
        if settled {
            recording.event("the end".to_string());
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
        // The regions reset the meter's peak to measure their own: give the step's back to
        // whoever measures around this one.
        recording.meter.raise_peak(recording.peak);
        report
    })
    .expect("recording until `Off` drops")
}

/// [`StepReport::try_measure`]: `record`, with the step's panic caught and, when an allocation
/// failed while it ran, turned into the report so far.
fn record_or_out_of_memory<R>(
    meter: Box<dyn MemoryMeter>,
    f: impl FnOnce() -> R,
) -> Result<(R, StepReport), Box<OutOfMemory>> {
    let watch = Watch::start();
    let Some(off) = start(meter) else {
        // Nested: the outermost measurement catches.
        return Ok((f(), StepReport::default()));
    };
    let outcome = catch_unwind(AssertUnwindSafe(f));
    let Some(seen) = watch.first_seen() else {
        return match outcome {
            Ok(result) => {
                let report = finish(true);
                drop(off);
                Ok((result, report))
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
    let report = finish(false);
    drop(off);
    Err(OutOfMemory::of(report, at.at, seen, at.read, step_message))
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
        recording.offloaded_at_open = offload::offloaded_bytes();
        // The peak inside the region, from here.
        recording.meter.reset_peak();
    });
}

/// The open top-level region closes.
pub fn top_level_closed() {
    with(|recording| {
        let Some((slot, opened_bytes, opened)) = recording.open.take() else {
            return;
        };
        let (in_use, peak) = recording.read();
        let region = &mut recording.report.regions[slot];
        region.held_bytes = in_use as i64 - opened_bytes as i64;
        region.forward_peak_bytes = peak.saturating_sub(opened_bytes);
        region.forward_seconds = opened.elapsed().as_secs_f64();
        region.offloaded_bytes =
            offload::offloaded_bytes().saturating_sub(recording.offloaded_at_open) as u64;
        recording.last_closed = Some(slot);
        recording.closed_bytes = in_use;
        let label = format!("forward, after {}", recording.id(slot));
        recording.event_at(label, peak);
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
        if recording.window != Some(slot) {
            // The peak read so far is the previous window's: this region's window starts here.
            recording.window = Some(slot);
            recording.meter.reset_peak();
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
}
