//! A sweep's figure: step time against peak memory.

use std::error::Error;

use burn_checkpoint_core::memory::mib;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::{Point, Sweep};

impl crate::figure::Figure for Sweep {
    /// Step time against peak memory: the planner's points joined by a line, hand cuts labelled.
    fn draw<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<(), Box<dyn Error>>
    where
        DB::ErrorType: 'static,
    {
        let x = |p: &Point| mib(p.peak_bytes as usize);
        let right = self.points.iter().map(x).fold(0.0, f64::max) * 1.1;
        let top = self.points.iter().map(|p| p.cpu_s).fold(0.0, f64::max) * 1.05;
        let bottom = self.points.iter().map(|p| p.cpu_s).fold(f64::MAX, f64::min) * 0.9;
        // The title's first part (the model and the step): the whole title is the table's.
        let caption = self.title.split(':').next().unwrap_or(&self.title);
        let mut chart = ChartBuilder::on(area)
            .caption(caption, ("sans-serif", 18))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(64)
            .build_cartesian_2d(0.0..right, bottom..top)?;
        chart
            .configure_mesh()
            .x_desc("peak step memory (MiB)")
            .y_desc("CPU time per step (s)")
            .label_style(("sans-serif", 14))
            .draw()?;
        let planner: Vec<(f64, f64)> = self
            .points
            .iter()
            .filter(|p| p.kind == "planner")
            .map(|p| (x(p), p.cpu_s))
            .collect();
        chart
            .draw_series(LineSeries::new(planner.clone(), BLUE.stroke_width(2)))?
            .label("planner (one point per budget)")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 18, y)], BLUE.stroke_width(2)));
        chart.draw_series(
            planner
                .iter()
                .map(|&point| Circle::new(point, 4, BLUE.filled())),
        )?;
        for p in self.points.iter().filter(|p| p.kind == "hand") {
            let at = (x(p), p.cpu_s);
            chart.draw_series([EmptyElement::at(at)
                + TriangleMarker::new((0, 0), 6, RED.filled())
                + Text::new(p.method.clone(), (6, -14), ("sans-serif", 13))])?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()?;
        Ok(())
    }
}
