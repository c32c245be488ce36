//! Writing a benchmark's figure as SVG and PNG with plotters.

use std::error::Error;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

/// Where bitmap text comes from: plotters lays out text with a TTF font it is given.
const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

/// A chart that can draw itself on any plotters backend.
pub trait Figure {
    /// Draws the chart on `area`, which is blank.
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<(), Box<dyn Error>>
    where
        DB::ErrorType: 'static;
}

/// Writes `<stem>.svg` and `<stem>.png` (960×600) with the font family `sans-serif` set to
/// DejaVu Sans; without it (Debian: `fonts-dejavu-core`, installed by `scripts/setup`) the error
/// says what to install.
pub fn write(figure: &impl Figure, stem: &Path) -> Result<(), String> {
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
    draw_on(
        &SVGBackend::new(&svg, (960, 600)).into_drawing_area(),
        figure,
    )
    .map_err(|e| format!("cannot draw {}: {e}", svg.display()))?;
    let png = stem.with_extension("png");
    draw_on(
        &BitMapBackend::new(&png, (960, 600)).into_drawing_area(),
        figure,
    )
    .map_err(|e| format!("cannot draw {}: {e}", png.display()))
}

fn draw_on<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    figure: &impl Figure,
) -> Result<(), Box<dyn Error>>
where
    DB::ErrorType: 'static,
{
    area.fill(&WHITE)?;
    figure.draw(area)?;
    area.present()?;
    Ok(())
}
