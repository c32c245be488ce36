//! The `train22` command: each method of `--checkpoint` trained ([`Options::train_into`]), its
//! row written (`--json`) as it finishes, the table of those that finished printed whatever
//! stopped the run (a failure, a stop request), and a run stopped by a failed allocation told
//! what the step held and what would fit.

use std::io::Write;

use app_kit::out_of_memory::{RanOutOfMemory, budget_size};
use app_kit::save::write_atomic;
use app_kit::table::{MethodRow, markdown};
use app_kit::timeline::Run;
use burn_checkpoint_22::memory::{MemoryMeter, Meter};
use burn_checkpoint_core::memory::{mib, size};

use crate::stop::StopRequest;
use crate::trainer::{Options, PLANNING, Trained};

/// Trains `options`' methods on `meter`'s memory (`stop` stops them at a step boundary),
/// writing `--json`'s rows as each method finishes and to `out` the table of the methods that
/// finished, even when a later one fails or is stopped; a run stopped by a step out of device
/// memory also writes the failure's report and the `--memory-budget` that would fit. Returns
/// the rows, or the error that stopped the run (its exit status: 3 for a failed allocation, 2
/// for settings refused, before the first step or a `--memory-budget` no plan can keep,
/// [`Interrupted`](crate::stop::Interrupted)'s for a stop, 1 otherwise).
///
/// ```no_run
/// use burn_checkpoint_22_train::run::run;
/// use burn_checkpoint_22_train::stop::StopRequest;
/// use burn_checkpoint_22_train::trainer::Options;
/// use clap::Parser;
///
/// let options = Options::parse_from(["train22", "--data", "synthetic", "--limit", "2"]);
/// let meter = options.devices.meter();
/// let rows = run(&options, &meter, &StopRequest::new(), &mut std::io::stdout()).unwrap();
/// assert_eq!(rows[0].method, "regions");
/// ```
pub fn run(
    options: &Options,
    meter: &Meter,
    stop: &StopRequest,
    out: &mut dyn Write,
) -> anyhow::Result<Vec<MethodRow>> {
    let mut trained = Vec::new();
    let mut write_rows = |trained: &[Trained]| -> anyhow::Result<()> {
        let Some(path) = &options.json else {
            return Ok(());
        };
        let rows: Vec<&MethodRow> = trained.iter().map(|t| &t.row).collect();
        write_atomic(path, &serde_json::to_vec_pretty(&rows)?)
    };
    let outcome = options.train_into(meter, stop, &mut trained, &mut write_rows);
    // The timelines of the methods that finished, and of a step that failed to allocate.
    let mut runs: Vec<Run> = trained
        .iter_mut()
        .filter_map(|t| {
            let timeline = t.timeline.take()?;
            Some(Run {
                label: t.row.method.clone(),
                timeline,
            })
        })
        .collect();
    if let Err(error) = &outcome
        && let Some(stopped) = error.downcast_ref::<RanOutOfMemory>()
        && let Some(timeline) = &stopped.failure.timeline
    {
        runs.push(Run {
            label: format!("out of memory at {}", stopped.during),
            timeline: (**timeline).clone(),
        });
    }
    let title = options.title();
    match options.timeline.write(&title, runs) {
        Ok(lines) => lines.iter().try_for_each(|line| writeln!(out, "{line}"))?,
        // The run's own outcome comes first: a picture that cannot be drawn is said, not fatal.
        Err(error) => writeln!(out, "no memory timeline: {error}")?,
    }
    let rows: Vec<MethodRow> = trained.iter().map(|t| t.row.clone()).collect();
    if !rows.is_empty() {
        writeln!(out, "\ntrained on {}", options.devices.describe())?;
        writeln!(out, "\n{}", markdown(&rows))?;
        writeln!(
            out,
            "memory: a training step's peak above its start (forward, loss, backward), {}; time \
             per step: the median over the steps after the first",
            meter.describe()
        )?;
    }
    // On a device the budget is checked on one step of a copy of the model, outside
    // burn-train: what the planned method's pools then held over its whole training (steps,
    // updates, validation), and whether that stayed within the budget.
    for t in &trained {
        if let (Some(budget), Some(_), Some(reserved)) = (
            options.memory_budget,
            t.row.plan_peaks,
            t.run_reserved_bytes,
        ) {
            if reserved <= budget {
                let kept = match t.plan_changes {
                    Some(changes) => format!(
                        " (kept step by step: the plan changed {changes} time(s) between steps)"
                    ),
                    None => String::new(),
                };
                writeln!(
                    out,
                    "{}: the run's pools reserved at most {} (steps, updates, validation), \
                     within the budget{kept}",
                    t.row.method,
                    size(reserved)
                )?;
            } else {
                writeln!(
                    out,
                    "note: {}: the run's pools reserved up to {} (steps, updates, validation), \
                     above the budget of {} that the plan's checked step kept to: burn-train's \
                     threads (its step worker, metrics, data loader) keep pages of their own",
                    t.row.method,
                    size(reserved),
                    size(budget)
                )?;
            }
        }
    }
    if let Err(error) = &outcome
        && let Some(stopped) = error.downcast_ref::<RanOutOfMemory>()
    {
        write!(out, "{}", stopped.failure)?;
        if stopped.during != PLANNING {
            writeln!(out, "what would fit: {}", suggest(stopped.room_bytes()))?;
        }
    }
    outcome.map(|()| rows)
}

/// What would fit after a step ran out of device memory with `room` bytes for a step
/// ([`RanOutOfMemory::room_bytes`]): that room as the budget regions are planned for. Not the
/// plan itself: a device that has just failed an allocation is not to be trusted with the
/// planner's profiled steps; a run started with the flag profiles, plans and checks its plan on
/// a real step (on several devices, the first device's step, and every device runs the plan).
fn suggest(room: Option<u64>) -> String {
    let Some(room) = room else {
        return "not predicted: the meter gave no reserved bytes at the failure".to_string();
    };
    if room == 0 {
        return "the step had no room: what the run holds between steps (the weights, the \
                optimizer's state) filled what the device had reserved when it refused; lower \
                --batch-size or the model's size, or train on a larger device"
            .to_string();
    }
    format!(
        "the step had {:.1} MiB (what the device had reserved when it refused, less what the run \
         holds between steps); run with --checkpoint regions --memory-budget {} and the planner \
         chooses how each region (a dense layer, a GPT block) runs to fit it (it says so if no \
         plan can: then lower --batch-size)",
        mib(room as usize),
        budget_size(room)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_suggestion_is_the_room_as_a_budget() {
        let said = suggest(Some((40 << 20) + 12345));
        assert!(said.contains("the step had 40.0 MiB"), "{said}");
        assert!(
            said.contains("--checkpoint regions --memory-budget 40MiB"),
            "{said}"
        );
        assert!(suggest(None).contains("not predicted"));
        assert!(suggest(Some(0)).contains("no room"));
    }
}
