//! What a timeline's recording keeps besides the report ([`Drawn`]), the timeline it finishes
//! into, and what was live at the step's peak ([`at_peak`]).

use std::time::Instant;

use super::super::device::Usage;
use super::super::offloaded as offload;
use super::super::report::StepReport;
use super::super::sampler::Sampler;
use super::super::timeline::{
    self, AtPeak, Holding, Live, MAX_POINTS, Phase, Point, Span, Timeline,
};

/// What a timeline's recording keeps besides the report.
pub(super) struct Drawn {
    /// Each read of the meter (the sampler's readings join them at the end).
    pub(super) points: Vec<Point>,
    pub(super) spans: Vec<Span>,
    pub(super) sampler: Option<Sampler>,
    /// The open region's forward span; the open window's span, with the bytes in use when it
    /// opened; the last recompute's span and its region's slot.
    pub(super) open_span: Option<usize>,
    pub(super) window_span: Option<(usize, u64)>,
    pub(super) recompute_span: Option<(usize, usize)>,
    /// When backward was first seen (the first recompute), in seconds.
    pub(super) backward_at: Option<f64>,
    /// When the meter was read last, and the time before (seconds since the start).
    pub(super) reads: (f64, f64),
    /// Where the step was at its highest read so far, to say what was live then.
    pub(super) peak: PeakPlace,
    /// Every interval between two reads: the later read's time, where the step was meanwhile
    /// and its place. The sampler's highest reading, where it is above every read's (a device
    /// meter, which keeps no peak, read between the events), falls in one of them. Kept only for
    /// such a meter (`polled`): on the host, whose peak is exact, it would be the step's bytes.
    pub(super) intervals: Vec<(f64, String, PeakPlace)>,
    pub(super) polled: bool,
}

/// Where the step was when a read saw a new peak: what [`at_peak`] needs.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct PeakPlace {
    /// The read that saw the peak, and the read before it: the peak fell between them.
    pub(super) seconds: f64,
    pub(super) after: f64,
    /// Region instances whose forward had closed by then (the first ones: slots are in order).
    pub(super) closed: usize,
    /// The region whose forward was running (its slot, the bytes in use when it opened).
    pub(super) forward: Option<(usize, u64)>,
    /// The region whose backward window was open (its slot, the bytes when it opened).
    pub(super) window: Option<(usize, u64)>,
}

impl Drawn {
    /// The timeline of the step `report` reported: the reads' points with the sampler's
    /// `samples` (bounded), the spans closed at the end, the step's phases and the copies
    /// logged, and what was live at the peak.
    pub(super) fn finish(
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
pub(super) fn at_peak(
    report: &StepReport,
    place: PeakPlace,
    start_bytes: i64,
    seconds: f64,
) -> AtPeak {
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
