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
    write_to(figure, &stem.with_extension("svg"))?;
    write_to(figure, &stem.with_extension("png"))
}

/// Writes the figure to `path` (960×600), as SVG or PNG by its extension (`.svg`, `.png`); the
/// font as [`write()`] says.
pub fn write_to(figure: &impl Figure, path: &Path) -> Result<(), String> {
    register_font()?;
    let drawn = match path.extension().and_then(|e| e.to_str()) {
        Some("svg") => draw_on(
            &SVGBackend::new(path, (960, 600)).into_drawing_area(),
            figure,
        ),
        Some("png") => draw_on(
            &BitMapBackend::new(path, (960, 600)).into_drawing_area(),
            figure,
        ),
        _ => {
            return Err(format!(
                "cannot draw {}: a figure is written as .svg or .png",
                path.display()
            ));
        }
    };
    drawn.map_err(|e| format!("cannot draw {}: {e}", path.display()))
}

/// Sets the family `sans-serif` to DejaVu Sans, once for the program (plotters keeps registered
/// fonts for its whole run).
fn register_font() -> Result<(), String> {
    static REGISTERED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            let font = FONT_PATHS
                .iter()
                .find_map(|path| std::fs::read(path).ok())
                .ok_or_else(|| {
                    format!(
                        "no plot: DejaVu Sans not found at {} (Debian: apt-get install \
                         fonts-dejavu-core)",
                        FONT_PATHS.join(", ")
                    )
                })?;
            plotters::style::register_font("sans-serif", FontStyle::Normal, Box::leak(font.into()))
                .map_err(|_| "DejaVu Sans is not a font plotters can read".to_string())
        })
        .clone()
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
