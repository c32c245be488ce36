//! The recording of one measured step on this thread ([`StepReport::measure`]): the Burn crates'
//! region machinery reports to it through the hooks below as the step runs (a top-level region
//! opens and closes, backward recomputes for a region, an op outside regions makes a tensor).
//!
//! Off, every hook is one read of a thread-local flag: nothing is measured in the hot path.
//!
//! A [`Timeline`](super::Timeline) is recorded by the same hooks and reads: each read of the
//! meter is a point (its high the meter's peak since the read before), the hooks' times are the
//! regions' spans, and a sampler thread reads the meter between them.
//!
//! Three files: here the recording and the hooks; `measure` the entries ([`StepReport::measure`],
//! [`Timeline::measure`](super::Timeline::measure) and their `try_` forms) that start and finish
//! one; `drawn` what a timeline's recording keeps and what was live at its peak.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::time::Instant;

use super::meter::MemoryMeter;
use super::offloaded as offload;
use super::report::{RegionRecord, StepReport};
use super::sampler::Sampled;
use super::timeline::{Phase, Point, Span};
use crate::op_kind::OpKind;
use crate::treatment::Treatment;
use drawn::{Drawn, PeakPlace};

mod drawn;
mod measure;
#[cfg(test)]
mod tests;

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static RECORDING: RefCell<Option<Recording>> = const { RefCell::new(None) };
}

/// Where a step is before its first region opens (a site, and the peak's place).
const NO_REGION_YET: &str = "before the first region";

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
            None => NO_REGION_YET.to_string(),
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
