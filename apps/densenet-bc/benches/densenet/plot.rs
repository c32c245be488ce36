//! The benchmark's plot: peak step memory against batch size, one line per method, as SVG and
//! PNG (plotters).

use std::error::Error;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::Row;

use bench_kit::figure;
use burn_checkpoint_core::memory::mib;

/// Peak step memory against batch size, one line per method.
struct MemoryByBatch<'a> {
    rows: &'a [Row],
    title: &'a str,
}

/// Writes `<stem>.svg` and `<stem>.png`. Both need DejaVu Sans to lay out their text (Debian:
/// `fonts-dejavu-core`); without it the error says what to install.
pub fn write(rows: &[Row], title: &str, stem: &Path) -> Result<(), String> {
    figure::write(&MemoryByBatch { rows, title }, stem)
}

impl figure::Figure for MemoryByBatch<'_> {
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<(), Box<dyn Error>>
    where
        DB::ErrorType: 'static,
    {
        let Self { rows, title } = *self;
        let mut methods: Vec<&str> = Vec::new();
        for row in rows {
            if !methods.contains(&row.method.as_str()) {
                methods.push(&row.method);
            }
        }
        let batches = rows.iter().map(|r| r.batch as f64);
        let (low, high) = batches.fold((f64::MAX, f64::MIN), |(l, h), b| (l.min(b), h.max(b)));
        // A single batch size still gets an x range.
        let (low, high) = (low * 0.9, high * 1.1);
        let top = rows.iter().map(|r| mib(r.peak_bytes)).fold(0.0, f64::max) * 1.1;
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 22))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(72)
            .build_cartesian_2d(low..high, 0.0..top)?;
        chart
            .configure_mesh()
            .x_desc("batch size")
            .y_desc("peak step memory (MiB)")
            .label_style(("sans-serif", 16))
            .draw()?;
        for (i, method) in methods.iter().enumerate() {
            let colour = Palette99::pick(i).to_rgba();
            let points: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.method == *method)
                .map(|r| (r.batch as f64, mib(r.peak_bytes)))
                .collect();
            chart
                .draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))?
                .label(*method)
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 20, y)], colour.stroke_width(2))
                });
            chart.draw_series(
                points
                    .into_iter()
                    .map(|p| Circle::new(p, 4, colour.filled())),
            )?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .label_font(("sans-serif", 16))
            .draw()?;
        Ok(())
    }
}
