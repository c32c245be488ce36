//! Timelines in the Chrome trace event format ([`Trace`]): what Perfetto (ui.perfetto.dev) and
//! chrome://tracing open. Each run is a process: a counter track of its bytes (in use, and
//! reserved on a device), a track of the step's forward and backward, one each for its regions'
//! forwards, recomputes and backward windows, and one for offload copies.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Phase, Span, Timeline};

/// The tracks of a run's process, as threads: `(tid, name)`.
const TRACKS: [(u32, &str); 5] = [
    (1, "step: forward, backward"),
    (2, "regions: forward"),
    (3, "regions: recompute"),
    (4, "regions: backward window"),
    (5, "offload copies"),
];

/// Timelines as a Chrome trace (the JSON object format: `{"traceEvents": [...]}`), one process
/// per run, times in microseconds since each step began. Serialise it with serde (`serde_json`)
/// and open the file in ui.perfetto.dev or chrome://tracing (docs/memory-timeline.md).
///
/// ```
/// use burn_checkpoint_core::memory::{CountingAllocator, HostMeter, Timeline};
/// use burn_checkpoint_core::memory::timeline::Trace;
///
/// #[global_allocator]
/// static ALLOCATOR: CountingAllocator = CountingAllocator;
///
/// let (_, timeline) = Timeline::measure(HostMeter, || vec![1u8; 1 << 20].len());
/// let trace = Trace::of(&[("plain", &timeline)]);
/// let counters = trace.events.iter().filter(|e| e.ph == "C").count();
/// assert_eq!(counters, timeline.points.len(), "a counter event per point");
/// let json = serde_json::to_string(&trace).unwrap();
/// assert!(json.starts_with(r#"{"traceEvents":["#));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// The events, each run's metadata first, then its counters, slices and instants.
    #[serde(rename = "traceEvents")]
    pub events: Vec<TraceEvent>,
    /// How a viewer shows times (`"ms"`; the events' own unit is always microseconds).
    #[serde(rename = "displayTimeUnit")]
    pub display_time_unit: String,
}

/// One event of a [`Trace`], as the format names its fields.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceEvent {
    /// What it is: a region instance (`block#2`), a phase, `bytes` for the counter.
    pub name: String,
    /// Its category: the span's phase (`region-forward`, `recompute`...), `memory`, `peak`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cat: String,
    /// Its kind: `M` metadata, `C` a counter, `X` a slice with a duration, `i` an instant.
    pub ph: String,
    /// When, in microseconds since the step began.
    pub ts: f64,
    /// A slice's duration, in microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dur: Option<f64>,
    /// The run (a process per run, from 1).
    pub pid: u32,
    /// The track (a thread per track; 0 for a process's metadata and its counter).
    pub tid: u32,
    /// An instant's scope (`t`: its track).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s: Option<String>,
    /// What it carries: a counter's values, a slice's bytes, a name for metadata.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub args: BTreeMap<String, TraceArg>,
}

/// An argument of a [`TraceEvent`]: a number (bytes) or a text (a name).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TraceArg {
    /// Bytes, an index.
    Number(i64),
    /// A name, a place.
    Text(String),
}

impl Trace {
    /// The trace of `runs`, each a label and its step's timeline, overlaid as processes on one
    /// time axis (each from its own step's start).
    pub fn of(runs: &[(&str, &Timeline)]) -> Trace {
        let mut events = Vec::new();
        for (n, (label, timeline)) in runs.iter().enumerate() {
            run_events(n as u32 + 1, label, timeline, &mut events);
        }
        Trace {
            events,
            display_time_unit: "ms".into(),
        }
    }
}

impl Timeline {
    /// This timeline alone as a trace, its process named `label` ([`Trace::of`]).
    pub fn trace(&self, label: &str) -> Trace {
        Trace::of(&[(label, self)])
    }
}

/// Seconds as the format's microseconds.
fn micros(seconds: f64) -> f64 {
    (seconds * 1e6).max(0.0)
}

fn args<const N: usize>(pairs: [(&str, TraceArg); N]) -> BTreeMap<String, TraceArg> {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

fn metadata(pid: u32, tid: u32, what: &str, arg: (&str, TraceArg)) -> TraceEvent {
    TraceEvent {
        name: what.into(),
        ph: "M".into(),
        pid,
        tid,
        args: args([arg]),
        ..TraceEvent::default()
    }
}

/// The track a span goes on, and its category.
fn track(span: &Span) -> (u32, &'static str) {
    match span.phase {
        Phase::Forward => (1, "forward"),
        Phase::Backward => (1, "backward"),
        Phase::RegionForward => (2, "region-forward"),
        Phase::Recompute => (3, "recompute"),
        Phase::RegionBackward => (4, "region-backward"),
        Phase::OffloadOut => (5, "offload-out"),
        Phase::OffloadBack => (5, "offload-back"),
    }
}

fn run_events(pid: u32, label: &str, timeline: &Timeline, events: &mut Vec<TraceEvent>) {
    events.push(metadata(
        pid,
        0,
        "process_name",
        ("name", TraceArg::Text(label.into())),
    ));
    let sort = TraceArg::Number(i64::from(pid));
    events.push(metadata(pid, 0, "process_sort_index", ("sort_index", sort)));
    for (tid, name) in TRACKS {
        events.push(metadata(
            pid,
            tid,
            "thread_name",
            ("name", TraceArg::Text(name.into())),
        ));
    }
    for point in &timeline.points {
        let mut values = args([(
            "in use above the step's start",
            TraceArg::Number(point.high),
        )]);
        if let Some(reserved) = point.reserved {
            let reserved = i64::try_from(reserved).unwrap_or(i64::MAX);
            values.insert("reserved".into(), TraceArg::Number(reserved));
        }
        events.push(TraceEvent {
            name: "bytes".into(),
            cat: "memory".into(),
            ph: "C".into(),
            ts: micros(point.seconds),
            pid,
            args: values,
            ..TraceEvent::default()
        });
    }
    for span in &timeline.spans {
        let (tid, cat) = track(span);
        let copy = matches!(span.phase, Phase::OffloadOut | Phase::OffloadBack);
        let mut values = BTreeMap::new();
        if span.bytes > 0 {
            let bytes = i64::try_from(span.bytes).unwrap_or(i64::MAX);
            values.insert("bytes".into(), TraceArg::Number(bytes));
        }
        events.push(TraceEvent {
            name: if copy { cat.into() } else { span.label() },
            cat: cat.into(),
            ph: if copy { "i" } else { "X" }.into(),
            ts: micros(span.start),
            dur: (!copy).then(|| micros(span.end) - micros(span.start)),
            pid,
            tid,
            s: copy.then(|| "t".into()),
            args: values,
        });
    }
    let peak = &timeline.at_peak;
    events.push(TraceEvent {
        name: "peak".into(),
        cat: "peak".into(),
        ph: "i".into(),
        ts: micros(peak.seconds),
        pid,
        tid: 1,
        s: Some("t".into()),
        args: args([
            ("bytes above the step's start", TraceArg::Number(peak.bytes)),
            ("at", TraceArg::Text(peak.at.clone())),
        ]),
        ..TraceEvent::default()
    });
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::super::{AtPeak, Point};
    use super::*;

    /// A step of two regions: forward, both recomputed in backward, one offload copy.
    fn timeline() -> Timeline {
        let span = |phase, region: Option<&str>, index, start, end| Span {
            phase,
            region: region.map(String::from),
            index,
            start,
            end,
            bytes: 0,
        };
        Timeline {
            points: (0..=10)
                .map(|i| Point {
                    seconds: f64::from(i) * 0.1,
                    in_use: i64::from(i) << 20,
                    high: i64::from(i) << 20,
                    reserved: Some(64 << 20),
                })
                .collect(),
            spans: vec![
                span(Phase::Forward, None, None, 0.0, 0.5),
                span(Phase::RegionForward, Some("block"), Some(0), 0.1, 0.2),
                span(Phase::RegionForward, Some("block"), Some(1), 0.25, 0.4),
                span(Phase::Backward, None, None, 0.5, 1.0),
                span(Phase::RegionBackward, Some("block"), Some(1), 0.5, 0.75),
                span(Phase::Recompute, Some("block"), Some(1), 0.5, 0.6),
                span(Phase::RegionBackward, Some("block"), Some(0), 0.75, 1.0),
                span(Phase::Recompute, Some("block"), Some(0), 0.75, 0.8),
                Span {
                    bytes: 4096,
                    ..span(Phase::OffloadOut, None, None, 0.2, 0.2)
                },
            ],
            at_peak: AtPeak {
                seconds: 0.7,
                bytes: 9 << 20,
                at: "backward, recomputing block#1".into(),
                ..AtPeak::default()
            },
            ..Timeline::default()
        }
    }

    /// The written file against the format: an object with `traceEvents`; every event a known
    /// phase with a name, a pid and a tid, timestamps in microseconds; counters numeric;
    /// slices with a duration, properly nested on each track; each run a process of its own.
    #[test]
    fn a_trace_is_the_chrome_trace_event_format() {
        let (one, two) = (timeline(), timeline());
        let trace = Trace::of(&[("plain", &one), ("regions", &two)]);
        let json: Value = serde_json::from_str(&serde_json::to_string(&trace).unwrap()).unwrap();
        assert_eq!(json["displayTimeUnit"], "ms");
        let events = json["traceEvents"].as_array().expect("an array of events");
        let mut pids = std::collections::BTreeSet::new();
        let mut slices: BTreeMap<(u64, u64), Vec<(f64, f64)>> = BTreeMap::new();
        for event in events {
            let ph = event["ph"].as_str().expect("a phase");
            assert!(["M", "C", "X", "i"].contains(&ph), "{event}");
            assert!(
                event["name"].is_string() && event["pid"].is_u64(),
                "{event}"
            );
            assert!(event["tid"].is_u64(), "{event}");
            pids.insert(event["pid"].as_u64().unwrap());
            let ts = event["ts"].as_f64().expect("a timestamp");
            assert!(
                (0.0..=1.0e6).contains(&ts),
                "µs since the step began: {event}"
            );
            match ph {
                "C" => assert!(
                    event["args"]
                        .as_object()
                        .unwrap()
                        .values()
                        .all(Value::is_i64),
                    "{event}"
                ),
                "X" => {
                    let dur = event["dur"].as_f64().expect("a slice's duration");
                    assert!(dur >= 0.0, "{event}");
                    let track = (
                        event["pid"].as_u64().unwrap(),
                        event["tid"].as_u64().unwrap(),
                    );
                    slices.entry(track).or_default().push((ts, ts + dur));
                }
                "i" => assert_eq!(event["s"], "t", "{event}"),
                _ => assert!(event["args"].is_object(), "{event}"),
            }
        }
        assert_eq!(
            pids.into_iter().collect::<Vec<_>>(),
            [1, 2],
            "a process per run"
        );
        // Slices on one track follow each other (a viewer nests overlapping ones wrongly).
        for (track, mut spans) in slices {
            spans.sort_by(|a, b| a.0.total_cmp(&b.0));
            for pair in spans.windows(2) {
                assert!(pair[0].1 <= pair[1].0 + 1e-6, "{track:?}: {pair:?}");
            }
        }
        // Times in microseconds: the second region's forward at 0.25 s.
        let second = events
            .iter()
            .find(|e| e["name"] == "block#1" && e["cat"] == "region-forward")
            .unwrap();
        assert_eq!(second["ts"].as_f64(), Some(250_000.0));
        assert_eq!(second["dur"].as_f64().map(f64::round), Some(150_000.0));
        let names: Vec<&str> = events
            .iter()
            .filter(|e| e["name"] == "process_name")
            .map(|e| e["args"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["plain", "regions"]);
        let copy = events.iter().find(|e| e["cat"] == "offload-out").unwrap();
        assert_eq!(
            (copy["ph"].as_str(), copy["args"]["bytes"].as_i64()),
            (Some("i"), Some(4096))
        );
    }
}
