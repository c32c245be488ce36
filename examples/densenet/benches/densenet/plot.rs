//! The benchmark's plot: peak step memory against batch size, one line per method, as SVG and
//! PNG (plotters).

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::Row;

/// Where PNG text comes from: plotters draws bitmap text with a TTF font it is given.
const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

/// Writes `<stem>.svg` and `<stem>.png`. Both need DejaVu Sans to lay out their text (Debian:
/// `fonts-dejavu-core`); without it the error says what to install.
pub fn write(rows: &[Row], title: &str, stem: &Path) -> Result<(), String> {
    let font = FONT_PATHS
        .iter()
        .find_map(|path| std::fs::read(path).ok())
        .ok_or_else(|| {
            format!(
                "no plot: DejaVu Sans not found at {} (Debian: apt-get install fonts-dejavu-core)",
                FONT_PATHS.join(", ")
            )
        })?;
    // plotters keeps registered fonts for the whole program.
    plotters::style::register_font("sans-serif", FontStyle::Normal, Box::leak(font.into()))
        .map_err(|_| "DejaVu Sans is not a font plotters can read".to_string())?;
    let svg = stem.with_extension("svg");
    draw(
        &SVGBackend::new(&svg, (960, 600)).into_drawing_area(),
        rows,
        title,
    )
    .map_err(|e| format!("cannot draw {}: {e}", svg.display()))?;
    let png = stem.with_extension("png");
    draw(
        &BitMapBackend::new(&png, (960, 600)).into_drawing_area(),
        rows,
        title,
    )
    .map_err(|e| format!("cannot draw {}: {e}", png.display()))
}

fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    rows: &[Row],
    title: &str,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    area.fill(&WHITE)?;
    let mib = |bytes: usize| bytes as f64 / (1024.0 * 1024.0);
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
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], colour.stroke_width(2)));
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
    area.present()
}
