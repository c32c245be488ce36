//! A step's memory timeline ([`Timeline`]) as a picture and as a file: several runs of the same
//! step overlaid on one time axis (plain against regions, two plans), each region name's phases
//! in a lane of its own, each run's peak marked with what held it, and the peak differences
//! attributed by region. What both trainers' `--memory-timeline FILE` writes
//! ([`TimelineArgs`]).

use std::collections::BTreeMap;
use std::error::Error;
use std::path::{Path, PathBuf};

use burn_checkpoint_core::memory::timeline::{Phase, Trace};
use burn_checkpoint_core::memory::{Timeline, mib};
use plotters::coord::Shift;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::figure::{self, Figure};

/// The most region names that get a lane each; the others share the last lane.
const LANES: usize = 10;

/// What the lanes' bars are, written above them (a picture read without the docs).
const KEY: &str = "lanes, in each run's colour: a region's forward light, its recompute dark, its \
                   backward window outlined; the step row: forward light, backward darker; a black \
                   outline: an offload copy";

/// The key's height above the lanes, in pixels.
const KEY_HEIGHT: u32 = 18;

/// One run's timeline, named (by its method: `plain`, `regions`, a plan).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// What the run was (the trainer's method).
    pub label: String,
    /// Its step's timeline.
    pub timeline: Timeline,
}

/// Runs of one step to draw on one axis: what a `--memory-timeline` file holds (its JSON is
/// `{"title": ..., "runs": [{"label": ..., "timeline": {...}}]}`, each timeline in the core's
/// schema: docs/memory-timeline.md).
///
/// ```
/// use app_kit::timeline::{Overlay, Run};
/// use burn_checkpoint_core::memory::Timeline;
///
/// let overlay = Overlay {
///     title: "DenseNet-BC, step 2".into(),
///     runs: vec![Run { label: "plain".into(), timeline: Timeline::default() }],
/// };
/// let json = serde_json::to_string(&overlay).unwrap();
/// assert_eq!(serde_json::from_str::<Overlay>(&json).unwrap(), overlay);
/// assert!(overlay.differences().is_empty(), "one run: nothing to compare");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Overlay {
    /// The picture's title (the model and the step).
    pub title: String,
    /// The runs, the first the one the others are compared with.
    pub runs: Vec<Run>,
}

impl Overlay {
    /// Each run after the first against the first: `(label, its peak less the first's, by
    /// region name and outside)`, as lines of text.
    pub fn differences(&self) -> Vec<String> {
        let Some(first) = self.runs.first() else {
            return Vec::new();
        };
        self.runs[1..]
            .iter()
            .map(|run| {
                let difference = run.timeline.compare(&first.timeline);
                let mut parts: Vec<(String, i64)> = difference.by_region.into_iter().collect();
                parts.push(("outside regions".into(), difference.outside));
                parts.retain(|(_, bytes)| *bytes != 0);
                parts.sort_by_key(|(_, bytes)| bytes.abs());
                parts.reverse();
                let parts: Vec<String> = parts
                    .iter()
                    .map(|(name, bytes)| format!("{name} {}", signed_mib(*bytes)))
                    .collect();
                format!(
                    "{}: peak {} than {} ({})",
                    run.label,
                    signed_mib(difference.bytes),
                    first.label,
                    parts.join(", ")
                )
            })
            .collect()
    }

    /// Writes the overlay to `path`: a picture (`.svg`, `.png`), a trace Perfetto and
    /// chrome://tracing open (`.trace.json`: the core's [`Trace`], a process per run), or its
    /// JSON (`.json`).
    pub fn write(&self, path: &Path) -> Result<(), String> {
        let json = match path.extension().and_then(|e| e.to_str()) {
            Some("json") if is_trace(path) => {
                serde_json::to_string(&self.trace()).expect("a trace is plain data")
            }
            Some("json") => serde_json::to_string_pretty(self).expect("a timeline is plain data"),
            _ => return figure::write_to(self, path),
        };
        std::fs::write(path, json).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    /// The runs as one trace, each a process named by its label.
    pub fn trace(&self) -> Trace {
        let runs: Vec<(&str, &Timeline)> = self
            .runs
            .iter()
            .map(|run| (run.label.as_str(), &run.timeline))
            .collect();
        Trace::of(&runs)
    }

    /// The region names of every run, in the order they first appear: a lane each (past
    /// [`LANES`], the rest share one).
    fn lanes(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for run in &self.runs {
            for name in run.timeline.region_names() {
                if !names.iter().any(|n| n == name) {
                    names.push(name.to_string());
                }
            }
        }
        if names.len() > LANES {
            names.truncate(LANES - 1);
            names.push("other regions".into());
        }
        names
    }
}

/// `+1.5 MiB`, `-20.0 MiB`.
fn signed_mib(bytes: i64) -> String {
    let sign = if bytes < 0 { "-" } else { "+" };
    format!("{sign}{:.1} MiB", mib(bytes.unsigned_abs() as usize))
}

/// The colour of the `n`th run.
fn colour(n: usize) -> RGBColor {
    const COLOURS: [RGBColor; 5] = [
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
        RGBColor(148, 103, 189),
        RGBColor(255, 127, 14),
    ];
    COLOURS[n % COLOURS.len()]
}

impl Figure for Overlay {
    /// Above, bytes in use over the step (MiB above its start), a line a run, reserved dashed
    /// where the runs were on a device, each peak a dot; below, a lane per region name, each
    /// run's phases in it (forward light, recompute dark, backward window outlined), the step's
    /// backward shaded; the peak differences under the title.
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<(), Box<dyn Error>>
    where
        DB::ErrorType: 'static,
    {
        let right = self
            .runs
            .iter()
            .flat_map(|r| r.timeline.points.iter().map(|p| p.seconds))
            .fold(1e-6, f64::max)
            * 1.02;
        let top = self
            .runs
            .iter()
            .map(|r| mib(r.timeline.highest().max(0) as usize))
            .fold(1e-3, f64::max)
            // Room above the highest curve for the legend.
            * 1.35;
        let differences = self.differences();
        let header = 30 + 18 * differences.len() as u32;
        let (head, body) = area.split_vertically(header);
        head.draw(&Text::new(
            self.title.clone(),
            (16, 6),
            ("sans-serif", 18).into_font(),
        ))?;
        for (i, line) in differences.iter().enumerate() {
            head.draw(&Text::new(
                line.clone(),
                (16, 30 + 18 * i as i32),
                ("sans-serif", 13).into_font(),
            ))?;
        }
        let lanes = self.lanes();
        let row_height = 12 * self.runs.len().max(1) as u32 + 10;
        let body_height = body.dim_in_pixel().1;
        let lanes_height =
            (row_height * (lanes.len() as u32 + 1) + 52 + KEY_HEIGHT).min(body_height / 2);
        let (upper, lower) = body.split_vertically(body_height - lanes_height);

        self.draw_curves(&upper, right, top)?;
        self.draw_lanes(&lower, right, &lanes)
    }
}

impl Overlay {
    /// The curves of bytes in use (and reserved, dashed, on a device), each run's peak a dot,
    /// and the legend: what held each run's peak.
    fn draw_curves<DB: DrawingBackend>(
        &self,
        upper: &DrawingArea<DB, Shift>,
        right: f64,
        top: f64,
    ) -> Result<(), Box<dyn Error>>
    where
        DB::ErrorType: 'static,
    {
        let mut chart = ChartBuilder::on(upper)
            .margin_left(16)
            .margin_right(24)
            .margin_top(8)
            .x_label_area_size(0)
            .y_label_area_size(150)
            .build_cartesian_2d(0.0..right, 0.0..top)?;
        chart
            .configure_mesh()
            .y_desc("MiB in use above the step's start")
            .disable_x_mesh()
            .label_style(("sans-serif", 13))
            .draw()?;
        for (n, run) in self.runs.iter().enumerate() {
            let colour = colour(n);
            let timeline = &run.timeline;
            // The bytes read; the peak (the allocator's exact one on the host, which can fall
            // between two readings) is the dot.
            let line: Vec<(f64, f64)> = timeline
                .points
                .iter()
                .map(|p| (p.seconds, mib(p.in_use.max(0) as usize)))
                .collect();
            let at_peak = &timeline.at_peak;
            let held: String = at_peak
                .regions
                .iter()
                .fold(BTreeMap::<&str, i64>::new(), |mut by_name, live| {
                    *by_name.entry(&live.region).or_default() += live.bytes;
                    by_name
                })
                .into_iter()
                .map(|(name, bytes)| format!("{name} {:.1}, ", mib(bytes.max(0) as usize)))
                .collect();
            chart
                .draw_series(LineSeries::new(line, colour.stroke_width(2)))?
                .label(format!(
                    "{}: peak {:.1} MiB ({held}outside {:.1})",
                    run.label,
                    mib(timeline.highest().max(0) as usize),
                    mib(at_peak.outside.max(0) as usize)
                ))
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 18, y)], colour.stroke_width(2))
                });
            let reserved_base = timeline.points.iter().filter_map(|p| p.reserved).min();
            if let Some(base) = reserved_base {
                // Reserved is absolute: drawn above its lowest reading in the step, dashed.
                let reserved: Vec<(f64, f64)> = timeline
                    .points
                    .iter()
                    .filter_map(|p| Some((p.seconds, mib((p.reserved? - base) as usize))))
                    .collect();
                chart.draw_series(DashedLineSeries::new(
                    reserved,
                    4,
                    4,
                    colour.stroke_width(1),
                ))?;
            }
            let peak = (at_peak.seconds, mib(at_peak.bytes.max(0) as usize));
            chart.draw_series([Circle::new(peak, 5, colour.filled())])?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 13))
            .draw()?;

        Ok(())
    }

    /// The lanes under the curves, with their key: row 0 the step's phases, then a row per
    /// region name, each run a band of every row.
    fn draw_lanes<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        right: f64,
        lanes: &[String],
    ) -> Result<(), Box<dyn Error>>
    where
        DB::ErrorType: 'static,
    {
        let (key, lower) = area.split_vertically(KEY_HEIGHT);
        key.draw(&Text::new(KEY, (16, 2), ("sans-serif", 12).into_font()))?;
        // The lanes: row 0 the step's phases, then a row per region name.
        let rows = lanes.len() + 1;
        let mut lanes_chart = ChartBuilder::on(&lower)
            .margin_left(16)
            .margin_right(24)
            .margin_bottom(8)
            .x_label_area_size(36)
            .y_label_area_size(150)
            .build_cartesian_2d(0.0..right, 0.0..rows as f64)?;
        lanes_chart
            .configure_mesh()
            .x_desc("seconds since the step began")
            .y_labels(0)
            .disable_y_mesh()
            .label_style(("sans-serif", 12))
            .draw()?;
        // Each lane's name left of it, in the label area (pixels of the lanes' area).
        let (left, top) = lower.get_base_pixel();
        for (row, name) in std::iter::once("step")
            .chain(lanes.iter().map(String::as_str))
            .enumerate()
        {
            let (x, y) = lanes_chart.backend_coord(&(0.0, row as f64 + 0.5));
            let mut name = name.to_string();
            if name.chars().count() > 22 {
                name = name.chars().take(21).chain(['…']).collect();
            }
            lower.draw(&Text::new(
                name,
                (x - left - 146, y - top - 6),
                ("sans-serif", 12).into_font(),
            ))?;
        }
        let count = self.runs.len().max(1) as f64;
        for (n, run) in self.runs.iter().enumerate() {
            let colour = colour(n);
            // Each run its band of every row.
            let band = |row: usize| {
                let low = row as f64 + 0.1 + 0.8 * n as f64 / count;
                (low, low + 0.8 / count)
            };
            for span in &run.timeline.spans {
                let row = match &span.region {
                    None => 0,
                    Some(name) => {
                        1 + lanes
                            .iter()
                            .position(|l| l == name)
                            .unwrap_or(lanes.len() - 1)
                    }
                };
                let (low, high) = band(row);
                let end = span.end.max(span.start + right * 1e-3);
                let corners = [(span.start, low), (end, high)];
                let style = match span.phase {
                    Phase::Forward => colour.mix(0.12).filled(),
                    Phase::Backward => colour.mix(0.3).filled(),
                    Phase::RegionForward => colour.mix(0.35).filled(),
                    Phase::Recompute => colour.mix(0.9).filled(),
                    Phase::RegionBackward => colour.stroke_width(1),
                    Phase::OffloadOut | Phase::OffloadBack => BLACK.stroke_width(1),
                };
                lanes_chart.draw_series([Rectangle::new(corners, style)])?;
            }
        }
        Ok(())
    }
}

/// The trainers' flags for a timeline: `--memory-timeline FILE` and `--timeline-step N`.
///
/// ```
/// use app_kit::timeline::TimelineArgs;
/// use clap::Parser;
///
/// #[derive(Parser)]
/// struct Cli {
///     #[command(flatten)]
///     timeline: TimelineArgs,
/// }
///
/// let cli = Cli::try_parse_from(["t", "--memory-timeline", "step.svg"]).unwrap();
/// assert_eq!(cli.timeline.step(), Some(2), "one step after warm-up");
/// assert!(Cli::try_parse_from(["t", "--memory-timeline", "step.pdf"]).is_err());
/// assert_eq!(Cli::try_parse_from(["t"]).unwrap().timeline.step(), None);
/// ```
#[derive(clap::Args, Clone, Debug)]
pub struct TimelineArgs {
    /// Write the memory timeline of one training step (the `--timeline-step`th of each method)
    /// to FILE: a picture (`.svg`, `.png`) with every `--checkpoint` method on one time axis,
    /// the timelines as JSON (`.json`), or a trace that Perfetto (ui.perfetto.dev) and
    /// chrome://tracing open (`.trace.json`, a process per method); a step that runs out of
    /// memory writes its timeline up to the failure
    #[arg(long, value_name = "FILE", value_parser = timeline_file)]
    pub memory_timeline: Option<PathBuf>,
    /// Which training step `--memory-timeline` records (1: the first, which also warms up
    /// caches and pools; the default 2 is one step after)
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = crate::args::positive())]
    pub timeline_step: usize,
    /// Draw the runs of an earlier `--memory-timeline` JSON file first, this run's over them
    /// (the same step of another method or trainer: one picture for runs made apart); may be
    /// given several times
    #[arg(long, value_name = "FILE.json", requires = "memory_timeline")]
    pub timeline_overlay: Vec<PathBuf>,
}

impl TimelineArgs {
    /// The training step to record (counted from 1), if a timeline was asked for.
    pub fn step(&self) -> Option<usize> {
        self.memory_timeline.as_ref().map(|_| self.timeline_step)
    }

    /// Writes `runs` (this run's, labelled by method) to `--memory-timeline`, after the runs of
    /// every `--timeline-overlay` file, titled `title`; returns the lines to print: where it was
    /// written and each run's peak against the first's ([`Overlay::differences`]); none where
    /// no timeline was asked for. A run without a recorded step (it stopped before) is left out;
    /// none at all is an error that says so.
    pub fn write(&self, title: &str, runs: Vec<Run>) -> Result<Vec<String>, String> {
        let Some(path) = &self.memory_timeline else {
            return Ok(Vec::new());
        };
        if runs.is_empty() {
            return Err(format!(
                "training step {} did not run (the run had fewer steps): a smaller \
                 --timeline-step, or a larger --limit",
                self.timeline_step
            ));
        }
        let mut overlay = Overlay {
            title: format!(
                "{title}: the memory of training step {}",
                self.timeline_step
            ),
            runs: Vec::new(),
        };
        for earlier in &self.timeline_overlay {
            overlay.runs.extend(read_overlay(earlier)?.runs);
        }
        overlay.runs.extend(runs);
        overlay.write(path)?;
        let written = format!("memory timeline: {}", path.display());
        Ok(std::iter::once(written)
            .chain(overlay.differences())
            .collect())
    }
}

impl TimelineArgs {
    /// Checks before the run's first step what [`write`](TimelineArgs::write) will need:
    /// `--memory-timeline`'s file writable, and each `--timeline-overlay` a timeline JSON file of
    /// the model `title` names (its words before `, batch`), read now.
    ///
    /// ```
    /// use app_kit::timeline::TimelineArgs;
    /// use clap::Parser;
    ///
    /// #[derive(Parser)]
    /// struct Cli {
    ///     #[command(flatten)]
    ///     timeline: TimelineArgs,
    /// }
    ///
    /// let file = std::env::temp_dir().join("step.svg");
    /// let cli = Cli::parse_from(["t", "--memory-timeline", file.to_str().unwrap()]);
    /// assert!(cli.timeline.check("DenseNet-BC-22, batch 32").is_ok());
    /// let cli = Cli::parse_from(["t", "--memory-timeline", "/no/such/folder/step.svg"]);
    /// let refused = cli.timeline.check("DenseNet-BC-22, batch 32").unwrap_err();
    /// assert!(refused.contains("does not exist"), "{refused}");
    /// ```
    pub fn check(&self, title: &str) -> Result<(), String> {
        let Some(path) = &self.memory_timeline else {
            return Ok(());
        };
        crate::output::writable_file("--memory-timeline", path)?;
        let ours = model_of(title);
        for earlier in &self.timeline_overlay {
            let overlay = read_overlay(earlier)?;
            let theirs = model_of(&overlay.title);
            if theirs != ours {
                return Err(format!(
                    "--timeline-overlay {}: a timeline of {theirs}; this run trains {ours}: \
                     overlay the runs of one model",
                    earlier.display()
                ));
            }
        }
        Ok(())
    }
}

/// The model a timeline's title names: its words before `, batch` (or before `: the memory`).
fn model_of(title: &str) -> &str {
    let model = title.split(": the memory").next().unwrap_or(title);
    model.split(", batch").next().unwrap_or(model)
}

/// A `--timeline-overlay` file, read.
fn read_overlay(path: &Path) -> Result<Overlay, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--timeline-overlay {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| {
        format!(
            "--timeline-overlay {}: not a --memory-timeline JSON file: {e}",
            path.display()
        )
    })
}

/// Whether `path` names a trace (`.trace.json`) rather than the timelines' own JSON.
fn is_trace(path: &Path) -> bool {
    path.file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| name.ends_with(".trace.json"))
}

/// A `--memory-timeline` file: `.svg`, `.png`, `.json` or `.trace.json`.
fn timeline_file(text: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(text);
    match path.extension().and_then(|e| e.to_str()) {
        Some("svg" | "png" | "json") => Ok(path),
        _ => Err(format!(
            "`{text}`: a memory timeline is written as .svg, .png, .json or .trace.json (a \
             trace Perfetto opens)"
        )),
    }
}
