//! The planner's check: does a third treatment (save-compute-bound) help the planner on Burn 0.22?
//! One profile of DenseNet-BC with a region per dense layer (keep, save-compute-bound,
//! recompute-all); for each budget from the roof to the floor, the plan from all three treatments
//! and the plan from keep and recompute-all only (the same profile without its save-compute-bound
//! step), both measured in the same rounds, interleaved (their order alternating): peak step memory
//! and median step time. The plans are the solver's, not checked on a step (no `fit`): a peak may
//! pass its budget by the prediction's error.
//!
//! `cargo run --release --manifest-path kits/models22/Cargo.toml --example three_treatments --
//! [DEPTH] [BATCH] [BUDGETS] [ROUNDS]` (default 100 16 10 5). Flex, host meter.

use std::time::{Duration, Instant};

use burn::tensor::{Device, Tensor};
use burn_checkpoint_22::memory::{CountingAllocator, Meter};
use burn_checkpoint_22::planner::{Plan, Profile, Treatment};
use burn_checkpoint_22_models::{Cut, densenet, initialised};
use burn_checkpoint_core::memory::mib;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// A plan's treatments, counted: `30 keep, 18 recompute-all`.
fn counts(plan: &Plan) -> String {
    let counts = plan.counts();
    counts
        .values()
        .flat_map(|by_treatment| by_treatment.iter())
        .map(|(treatment, count)| format!("{count} {treatment}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn main() {
    let arg = |index: usize, default: usize| {
        std::env::args()
            .nth(index)
            .map(|a| a.parse().expect("DEPTH BATCH BUDGETS ROUNDS: numbers"))
            .unwrap_or(default)
    };
    let (depth, batch, budgets, rounds) = (arg(1, 100), arg(2, 16), arg(3, 10), arg(4, 5));
    let device = Device::flex().autodiff();
    device.seed(1);
    let model = initialised(densenet::DenseNet::new(depth, 12, 3, 10, &device));
    device.seed(2);
    let images = densenet::images(batch, &device).into_data();
    let step = || {
        let images = Tensor::<4>::from_data(images.clone(), &device);
        drop(model.loss(images, Cut::Regions).backward());
    };
    let measure = |plan: &Plan| {
        let meter = Meter::Host.start();
        let clock = Instant::now();
        plan.run(step);
        let time = clock.elapsed();
        (meter.finish().in_use, time)
    };

    let three = Profile::measure(Meter::Host, &Treatment::ALL, &mut || step()).expect("a profile");
    let mut two = three.clone();
    two.steps
        .retain(|step| step.treatment != Treatment::SaveComputeBound);
    let (floor, roof) = (three.smallest_peak(), three.largest_peak());
    let plans: Vec<(u64, Plan, Plan)> = (0..budgets)
        .map(|k| {
            let budget = floor + (roof - floor) * k as u64 / (budgets as u64 - 1).max(1);
            let budget = budget + budget / 100;
            let plan = |profile: &Profile| profile.plan(budget).expect("within the profile");
            (budget, plan(&three), plan(&two))
        })
        .collect();

    // Every plan once per round, interleaved, the pair's order alternating from round to round
    // (the same plan measured twice in a row differed by 10 %); the first round warms up.
    let mut samples = vec![(0u64, Vec::<Duration>::new()); 2 * plans.len()];
    for round in 0..=rounds {
        for (index, (_, with_three, with_two)) in plans.iter().enumerate() {
            let mut pair = [(0, with_three), (1, with_two)];
            if round % 2 == 1 {
                pair.reverse();
            }
            for (offset, plan) in pair {
                let (peak, time) = measure(plan);
                let sample = &mut samples[2 * index + offset];
                sample.0 = sample.0.max(peak);
                if round > 0 {
                    sample.1.push(time);
                }
            }
        }
    }
    let median = |times: &[Duration]| {
        let mut times = times.to_vec();
        times.sort();
        times[times.len() / 2].as_secs_f64()
    };
    println!(
        "DenseNet-BC-{depth} (k=12), batch {batch}, Flex: the planner with three treatments \
         against two, one profile, median of {rounds} interleaved rounds\n"
    );
    println!("| Budget | Three: plan | peak | time | Two: plan | peak | time | time three / two |");
    println!("|---|---|---|---|---|---|---|---|");
    for (index, (budget, with_three, with_two)) in plans.iter().enumerate() {
        let (peak3, times3) = &samples[2 * index];
        let (peak2, times2) = &samples[2 * index + 1];
        let (time3, time2) = (median(times3), median(times2));
        println!(
            "| {:.1} MiB | {} | {:.1} MiB{} | {time3:.3} s | {} | {:.1} MiB{} | {time2:.3} s | {:.3} |",
            mib(*budget as usize),
            counts(with_three),
            mib(*peak3 as usize),
            if peak3 <= budget { "" } else { " (over)" },
            counts(with_two),
            mib(*peak2 as usize),
            if peak2 <= budget { "" } else { " (over)" },
            time3 / time2
        );
    }
}
