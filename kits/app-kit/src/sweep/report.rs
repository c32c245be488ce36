//! A sweep as a table: read back from JSON, written as Markdown with the checks of what its plans
//! were asked to do, and as JSON beside its figure.

use std::path::Path;

use burn_checkpoint_core::memory::mib;

use super::{Point, Sweep};

impl Sweep {
    /// A sweep written earlier as JSON (to draw its figure again).
    pub fn read(path: &Path) -> Sweep {
        let text =
            std::fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let mut sweep: Sweep = serde_json::from_slice(&text)
            .unwrap_or_else(|e| panic!("{} is not a sweep: {e}", path.display()));
        for point in &mut sweep.points {
            if point.kind.is_empty() {
                // Written before points had a kind: a plan is what has a budget.
                point.kind = if point.budget_bytes.is_some() {
                    "planner"
                } else {
                    "hand"
                }
                .into();
            }
        }
        sweep
    }

    /// The sweep as markdown: hand cuts, then the planner's points.
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "{}\n\nMedian of {} interleaved steps per point; the planner's cost: a {}-step \
             profile ({:.1} s), {:.3} s of solving for the whole sweep, and the check steps \
             listed. Host copies: the most bytes offloading regions held in host memory at once \
             (on the CPU also part of the peak).\n\n{}\n\n| Method | Budget | Predicted | Peak | Host \
             copies | Peak / budget | CPU time | Wall time | Best hand cut within budget | × its \
             time | Planned on | Plan | Check steps |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
            self.title,
            self.steps,
            self.profile_steps,
            self.profile_seconds,
            self.solve_seconds,
            self.checks()
        );
        let size = |bytes: Option<u64>| {
            bytes.map_or("".to_string(), |b| format!("{:.1} MiB", mib(b as usize)))
        };
        for p in &self.points {
            out += &format!(
                "| {} | {} | {} | {:.1} MiB | {} | {} | {:.3} s | {:.3} s | {} | {} | {} | {} | {} |\n",
                p.method,
                size(p.budget_bytes),
                size(p.predicted_peak_bytes),
                mib(p.peak_bytes as usize),
                size(Some(p.offloaded_peak_bytes).filter(|&b| b > 0)),
                p.budget_bytes.map_or("".to_string(), |b| format!(
                    "{:.3}",
                    p.peak_bytes as f64 / b as f64
                )),
                p.cpu_s,
                p.wall_s,
                p.best_hand.clone().unwrap_or_default(),
                p.time_vs_best_hand
                    .map_or("".to_string(), |r| format!("{r:.3}")),
                p.planned_on.clone().unwrap_or_default(),
                p.plan.clone().unwrap_or_default(),
                p.check_steps.map_or("".to_string(), |n| n.to_string()),
            );
        }
        out
    }

    /// What the plans were asked to do, as measured: every peak within its budget + 3%, peaks not
    /// rising as the budget falls (by more than 0.1 %: a step's own noise), and the CPU time
    /// against the fastest hand cut whose peak fits the same budget (within 3%).
    pub fn checks(&self) -> String {
        let plans: Vec<&Point> = self.points.iter().filter(|p| p.kind == "planner").collect();
        if plans.is_empty() {
            return "No plans.".into();
        }
        fn worst(ratios: Vec<(f64, &Point)>) -> (f64, &Point) {
            ratios
                .into_iter()
                .max_by(|a, b| a.0.total_cmp(&b.0))
                .expect("a plan")
        }
        let budget = |p: &Point| mib(p.budget_bytes.unwrap_or(0) as usize);
        let (over, at) = worst(
            plans
                .iter()
                .map(|p| (p.peak_bytes as f64 / p.budget_bytes.unwrap_or(1) as f64, *p))
                .collect(),
        );
        let mut out = format!(
            "- Peak within budget + 3 %: **{}** (the most: {over:.3}× the budget, at {:.1} MiB).\n",
            if over <= 1.03 { "yes" } else { "no" },
            budget(at)
        );
        // A rise of at most 0.1 % is the same plan measured twice: a step's peak moves by a few
        // KiB from one step to the next.
        let rises: Vec<String> = plans
            .windows(2)
            .filter(|pair| pair[1].peak_bytes > pair[0].peak_bytes + pair[0].peak_bytes / 1000)
            .map(|pair| {
                format!(
                    "{:.1} → {:.1} MiB at the {:.1} MiB budget",
                    mib(pair[0].peak_bytes as usize),
                    mib(pair[1].peak_bytes as usize),
                    budget(pair[1])
                )
            })
            .collect();
        out += &format!(
            "- Peak non-increasing as the budget falls (within 0.1 %): **{}**{}.\n",
            if rises.is_empty() { "yes" } else { "no" },
            if rises.is_empty() {
                format!(
                    " ({:.1} → {:.1} MiB)",
                    mib(plans[0].peak_bytes as usize),
                    mib(plans[plans.len() - 1].peak_bytes as usize)
                )
            } else {
                format!(" (rises: {})", rises.join("; "))
            }
        );
        let timed: Vec<(f64, &Point)> = plans
            .iter()
            .filter_map(|p| Some((p.time_vs_best_hand?, *p)))
            .collect();
        out += &if timed.is_empty() {
            "- Time: no hand cut fits any plan's budget.".to_string()
        } else {
            let had = timed.len();
            let (slowest, at) = worst(timed);
            format!(
                "- CPU time within 3 % of the fastest hand cut that fits the budget: **{}** \
                 ({had} of {} plans had such a cut; the most: {slowest:.3}× \"{}\", at {:.1} MiB).",
                if slowest <= 1.03 { "yes" } else { "no" },
                plans.len(),
                at.best_hand.clone().unwrap_or_default(),
                budget(at)
            )
        };
        out
    }

    /// Writes `<out>.md`, `<out>.json`, `<out>.svg` and `<out>.png`.
    pub fn write(&self, out: &Path) {
        crate::output::write_table(out, &self.markdown(), self);
        match crate::figure::write(self, out) {
            Ok(()) => eprintln!("plotted: {0}.svg, {0}.png", out.display()),
            Err(e) => eprintln!("{e}"),
        }
    }
}
