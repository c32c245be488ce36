//! A step's memory over time, as data: the bytes in use (and reserved, on a device) from its
//! start to its end, each region instance's phases as spans on the same time axis, and what was
//! live at the peak, by region. Recorded with the step's report by
//! [`Timeline::measure`](Timeline::measure) (the recording's hooks, `recording/`); two
//! timelines compared by [`Timeline::compare`]. Its JSON is the same for both Burn crates
//! (docs/memory-timeline.md has the schema); [`Trace`] writes timelines in the Chrome trace event
//! format, which Perfetto and chrome://tracing open.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::report::StepReport;

mod trace;

pub use trace::{Trace, TraceArg, TraceEvent};

/// The JSON schema's version this crate writes and reads.
pub const TIMELINE_SCHEMA: u32 = 1;

/// The most points a timeline keeps, whatever the step's length: past it, neighbouring points
/// merge (the higher of their highs kept, so the peak is never lost).
pub const MAX_POINTS: usize = 2048;

/// The version of a timeline's JSON schema: this crate's ([`TIMELINE_SCHEMA`]) by default, and
/// reading any other is an error naming it, not a timeline read wrong.
///
/// ```
/// use burn_checkpoint_core::memory::Timeline;
///
/// let error = serde_json::from_str::<Timeline>(r#"{"schema": 7}"#).unwrap_err();
/// assert!(error.to_string().contains("schema 7"), "{error}");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Schema(u32);

impl Default for Schema {
    fn default() -> Self {
        Schema(TIMELINE_SCHEMA)
    }
}

impl<'de> Deserialize<'de> for Schema {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match u32::deserialize(deserializer)? {
            TIMELINE_SCHEMA => Ok(Schema(TIMELINE_SCHEMA)),
            other => Err(serde::de::Error::custom(format!(
                "a memory timeline of schema {other}: this version reads schema {TIMELINE_SCHEMA}"
            ))),
        }
    }
}

/// One step's memory over time, its regions' phases and what was live at its peak.
///
/// Bytes are those of the step's [`MemoryMeter`](super::MemoryMeter) above what was in use when
/// the step began, as in [`StepReport`]; times are seconds since it began. Made by
/// [`Timeline::measure`]; see the Burn crates' guides for a step with regions.
///
/// ```
/// use burn_checkpoint_core::memory::{CountingAllocator, HostMeter, Timeline};
///
/// #[global_allocator]
/// static ALLOCATOR: CountingAllocator = CountingAllocator;
///
/// let (len, timeline) = Timeline::measure(HostMeter, || vec![0u8; 1 << 20].len());
/// assert_eq!(len, 1 << 20);
/// // The highest point is the report's peak.
/// assert_eq!(timeline.highest(), timeline.report.peak_bytes as i64);
/// assert!(timeline.report.peak_bytes >= 1 << 20);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Timeline {
    /// The schema's version: [`TIMELINE_SCHEMA`] (reading another version is an error that
    /// says so).
    pub schema: Schema,
    /// The step's report, recorded with the timeline (the same hooks, the same reads).
    pub report: StepReport,
    /// The bytes over the step, in time order, at most [`MAX_POINTS`].
    pub points: Vec<Point>,
    /// The step's phases and its regions', as spans on the time axis, in the order they began.
    pub spans: Vec<Span>,
    /// What was live when the step reached its peak.
    pub at_peak: AtPeak,
}

/// The bytes at one time of a step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Seconds since the step began.
    pub seconds: f64,
    /// Bytes in use then, above the step's start (negative where the step freed what was there
    /// before it).
    pub in_use: i64,
    /// The most bytes in use since the point before, above the start: the counting allocator's
    /// exact peak on the host; on a device the bytes read then (a device keeps no peak).
    pub high: i64,
    /// On a device, the bytes its memory manager held then (absolute, its pools' pages);
    /// `None` on the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved: Option<u64>,
}

/// What a span of a step is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// The step's forward: from its start until backward is first seen (the first recompute,
    /// or the Burn 0.21 decorator's `backward`).
    Forward,
    /// The step's backward, and what follows it (the optimizer), to the step's end.
    Backward,
    /// A top-level region instance's forward, from its opening to its closing.
    RegionForward,
    /// A region instance's recompute in backward (consecutive recomputes of the instance, one
    /// op's each on Burn 0.21, make one span).
    Recompute,
    /// A region instance's backward window: from its first recompute to the next instance's
    /// (or the step's end): its recompute and its backward.
    RegionBackward,
    /// A copy of a region's operands to host memory (an offloading region's forward).
    OffloadOut,
    /// A host copy given back (an offloading region's backward read it again).
    OffloadBack,
}

/// One phase of a step, on its time axis.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Span {
    /// What it is.
    pub phase: Phase,
    /// The region's name (`None` for the step's own phases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The region instance's index among its name's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u64>,
    /// Seconds since the step began.
    pub start: f64,
    /// Seconds since the step began (`start` for a copy, which is an instant here).
    pub end: f64,
    /// Bytes the span moved, where it says (an offload copy's); 0 otherwise.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bytes: u64,
}

fn is_zero(bytes: &u64) -> bool {
    *bytes == 0
}

impl Span {
    /// `name#index` for a region's span, the phase's name for the step's.
    pub fn label(&self) -> String {
        match (&self.region, self.index) {
            (Some(name), Some(index)) => format!("{name}#{index}"),
            (Some(name), None) => name.clone(),
            _ => format!("{:?}", self.phase).to_lowercase(),
        }
    }
}

/// What was live when a step reached its peak: each region instance's share and the rest.
/// The shares and `outside` sum to `bytes`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AtPeak {
    /// Seconds since the step began: when the sampler read the most bytes between the read
    /// that saw the peak and the read before (the allocator's peak falls between them), or that
    /// read's time where the sampler did not read there.
    pub seconds: f64,
    /// The peak, above the step's start ([`StepReport::peak_bytes`]).
    pub bytes: i64,
    /// Where the step was ([`StepReport::peak_at`]).
    pub at: String,
    /// The region instances holding bytes then, in the order they opened.
    pub regions: Vec<Live>,
    /// The rest: what the step held outside regions (activations autodiff keeps outside them,
    /// gradients, the loss) and what its start did not hold.
    pub outside: i64,
}

/// A region instance's share of a peak.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Live {
    /// The region's name.
    pub region: String,
    /// The instance's index among its name's.
    pub index: u64,
    /// What it held then.
    pub holding: Holding,
    /// Its bytes.
    pub bytes: i64,
}

/// Why a region instance held bytes at a peak.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Holding {
    /// What its forward left until backward: its stored inputs and what its policy kept
    /// ([`RegionRecord::held_bytes`](super::RegionRecord::held_bytes)).
    Stored,
    /// It was running its forward: what it had made since it opened.
    Forward,
    /// Backward was in its window (its recompute, then its backward, until the next region's
    /// recompute): what it stored, and what the step had made since the window opened (the
    /// recomputed activations, and the gradients its backward makes).
    Backward,
}

/// Two steps' peaks side by side ([`Timeline::compare`]): the difference, and where it comes
/// from by region name (every instance of a name summed) and outside regions. The parts sum to
/// the difference.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PeakDifference {
    /// The first step's peak less the second's.
    pub bytes: i64,
    /// By region name: the first step's share less the second's (a name in one step only
    /// counts 0 in the other).
    pub by_region: BTreeMap<String, i64>,
    /// What outside regions held, the first's less the second's.
    pub outside: i64,
}

impl Timeline {
    /// The highest point: the most bytes in use above the start, as the report's peak.
    pub fn highest(&self) -> i64 {
        self.points.iter().map(|p| p.high).max().unwrap_or(0)
    }

    /// The region names of its spans, in the order they first appear (a lane each).
    pub fn region_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for name in self.spans.iter().filter_map(|s| s.region.as_deref()) {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    }

    /// How this step's peak differs from `other`'s, by region name and outside regions.
    ///
    /// ```
    /// use burn_checkpoint_core::memory::Timeline;
    ///
    /// let same = Timeline::default().compare(&Timeline::default());
    /// assert_eq!(same.bytes, 0);
    /// ```
    pub fn compare(&self, other: &Timeline) -> PeakDifference {
        let mut by_region: BTreeMap<String, i64> = BTreeMap::new();
        for (sign, at_peak) in [(1, &self.at_peak), (-1, &other.at_peak)] {
            for live in &at_peak.regions {
                *by_region.entry(live.region.clone()).or_default() += sign * live.bytes;
            }
        }
        PeakDifference {
            bytes: self.at_peak.bytes - other.at_peak.bytes,
            by_region,
            outside: self.at_peak.outside - other.at_peak.outside,
        }
    }
}

/// Merges neighbouring points until at most `max` are left: each pair becomes one at the later
/// time and bytes in use, with the higher high and reserved (the peak stays).
pub(crate) fn bound(points: &mut Vec<Point>, max: usize) {
    while points.len() > max.max(1) {
        let merged: Vec<Point> = points
            .chunks(2)
            .map(|pair| {
                let last = pair[pair.len() - 1];
                Point {
                    high: pair.iter().map(|p| p.high).max().unwrap_or(last.high),
                    reserved: pair.iter().filter_map(|p| p.reserved).max(),
                    ..last
                }
            })
            .collect();
        *points = merged;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(seconds: f64, high: i64) -> Point {
        Point {
            seconds,
            in_use: high / 2,
            high,
            reserved: None,
        }
    }

    #[test]
    fn bounding_merges_points_and_keeps_the_peak() {
        let mut points: Vec<Point> = (0..10_001)
            .map(|i| point(i as f64, if i == 7_777 { 1 << 40 } else { i }))
            .collect();
        bound(&mut points, MAX_POINTS);
        assert!(points.len() <= MAX_POINTS);
        assert!(points.len() > MAX_POINTS / 2);
        assert_eq!(points.iter().map(|p| p.high).max(), Some(1 << 40));
        assert!(points.windows(2).all(|w| w[0].seconds < w[1].seconds));
        assert_eq!(points.last().unwrap().seconds, 10_000.0, "the end stays");
    }

    #[test]
    fn a_comparisons_parts_sum_to_the_difference() {
        let at_peak = |regions: &[(&str, u64, i64)], outside: i64| AtPeak {
            bytes: regions.iter().map(|r| r.2).sum::<i64>() + outside,
            regions: regions
                .iter()
                .map(|&(region, index, bytes)| Live {
                    region: region.into(),
                    index,
                    holding: Holding::Stored,
                    bytes,
                })
                .collect(),
            outside,
            ..AtPeak::default()
        };
        let plain = Timeline {
            at_peak: at_peak(&[], 100),
            ..Timeline::default()
        };
        let regions = Timeline {
            at_peak: at_peak(&[("a", 0, 5), ("a", 1, 7), ("b", 0, 3)], 40),
            ..Timeline::default()
        };
        let difference = plain.compare(&regions);
        assert_eq!(difference.bytes, 100 - 55);
        assert_eq!(difference.by_region["a"], -12);
        assert_eq!(difference.by_region["b"], -3);
        assert_eq!(difference.outside, 60);
        let parts: i64 = difference.by_region.values().sum::<i64>() + difference.outside;
        assert_eq!(parts, difference.bytes);
    }
}
