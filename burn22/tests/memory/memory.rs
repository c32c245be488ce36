//! Memory a region saves, measured by a counting allocator: the bytes held between forward and
//! backward and the step's peak, plain autodiff against one region per block.

use crate::common;

use burn::tensor::{Device, Distribution, Tensor};
use burn_checkpoint_22::memory::Meter;
use burn_checkpoint_22::memory::{OffloadedBytes, StepReport};
use burn_checkpoint_22::{Region, ScanPlan, Schedule, Segments, checkpoint};
use burn_checkpoint_core::memory::mib;
use common::Block;

/// Bytes held after `forward` (the graph's saved activations, up to its loss) and the step's
/// peak through backward, both above what was allocated before the step.
fn held_and_peak(forward: impl FnOnce() -> Tensor<1>) -> (usize, usize) {
    let measure = Meter::Host.start();
    let loss = forward();
    let held = measure.now();
    let grads = loss.backward();
    let peak = measure.finish().in_use;
    drop(grads);
    (held as usize, peak as usize)
}

/// [`held_and_peak`] of a stack of blocks, plain or a region each.
fn step(blocks: &[Block], x: &Tensor<2>, regions: bool) -> (usize, usize) {
    held_and_peak(|| {
        let mut h = x.clone();
        for block in blocks {
            h = if regions {
                checkpoint(block, h, |block, h| block.body(h))
            } else {
                block.body(h)
            };
        }
        h.powf_scalar(2.0).mean()
    })
}

#[test]
fn regions_hold_a_fraction_of_plain_autodiffs_activations() {
    let _alone = common::alone();
    let device = Device::flex().autodiff();
    device.seed(1);
    let (depth, width, batch) = (8, 128, 1024);
    let blocks: Vec<Block> = (0..depth).map(|_| Block::new(width, &device)).collect();
    let x = Tensor::<2>::random([batch, width], Distribution::Default, &device);
    // Warm up both: first allocations of the backend's pools are not the step's.
    step(&blocks, &x, false);
    step(&blocks, &x, true);
    let (plain_held, plain_peak) = step(&blocks, &x, false);
    let (region_held, region_peak) = step(&blocks, &x, true);
    println!(
        "{depth} blocks {width}→{}→{width}, batch {batch}: held after forward {:.1} MiB plain, \
         {:.1} MiB regions ({:.2}×); step peak {:.1} MiB plain, {:.1} MiB regions ({:.2}×)",
        4 * width,
        mib(plain_held),
        mib(region_held),
        region_held as f64 / plain_held as f64,
        mib(plain_peak),
        mib(region_peak),
        region_peak as f64 / plain_peak as f64,
    );
    // A block's activations are 4·width + a few width per row; a region keeps its input only.
    assert!(
        (region_held as f64) < 0.25 * plain_held as f64,
        "regions held {region_held} bytes after forward, plain {plain_held}"
    );
    assert!(
        (region_peak as f64) < 0.6 * plain_peak as f64,
        "regions peaked at {region_peak} bytes, plain at {plain_peak}"
    );
}

/// [`held_and_peak`] of a recurrent loop over `block` (the carry added to each step's input,
/// then the block): written out, or one scan under `schedule`.
fn recurrent_step(
    block: &Block,
    xs: &Tensor<3>,
    h0: &Tensor<2>,
    schedule: Option<Schedule>,
) -> (usize, usize) {
    let step = |block: &Block, h: Tensor<2>, x: Tensor<2>| {
        let h = block.body(h + x);
        (h.clone(), h)
    };
    held_and_peak(|| {
        let (ys, last) = match schedule {
            Some(schedule) => {
                Region::named("rnn")
                    .schedule(schedule)
                    .scan(block, h0.clone(), xs.clone(), 1, step)
            }
            None => {
                let mut h = h0.clone();
                let mut ys = Vec::new();
                for t in 0..xs.dims()[1] {
                    let (y, next) = step(block, h, xs.clone().narrow(1, t, 1).squeeze_dim(1));
                    ys.push(y);
                    h = next;
                }
                (Tensor::stack(ys, 1), h)
            }
        };
        ys.powf_scalar(2.0).mean() + last.mean()
    })
}

#[test]
fn a_scan_holds_its_carries_and_outputs_not_its_steps_activations() {
    let _alone = common::alone();
    let device = Device::flex().autodiff();
    device.seed(2);
    let (steps, width, batch) = (36, 64, 256);
    let block = Block::new(width, &device);
    let xs = Tensor::<3>::random([batch, steps, width], Distribution::Default, &device);
    let h0 = Tensor::<2>::zeros([batch, width], &device);
    let schedules = [
        None,
        Some(Schedule::EveryStep),
        Some(Schedule::Snapshots(6)),
    ];
    for schedule in schedules {
        recurrent_step(&block, &xs, &h0, schedule);
    }
    let [plain, every_step, snapshots] =
        schedules.map(|schedule| recurrent_step(&block, &xs, &h0, schedule));
    println!(
        "{steps} steps of a {width}→{}→{width} block, batch {batch}: held after forward {:.1} MiB \
         plain, {:.1} MiB scan every step, {:.1} MiB scan 6 snapshots; step peak {:.1}, {:.1}, \
         {:.1} MiB",
        4 * width,
        mib(plain.0),
        mib(every_step.0),
        mib(snapshots.0),
        mib(plain.1),
        mib(every_step.1),
        mib(snapshots.1),
    );
    // A step's activations are about 11·width a row; a scan holds the outputs (width a row a
    // step) and the carries it stores (width a row each).
    assert!(
        (every_step.0 as f64) < 0.4 * plain.0 as f64,
        "every step: {every_step:?}, plain {plain:?}"
    );
    assert!(
        snapshots.0 < every_step.0,
        "snapshots {snapshots:?}, every step {every_step:?}"
    );
    assert!((every_step.1 as f64) < 0.6 * plain.1 as f64);
}

#[test]
fn the_memory_report_counts_a_scan_as_one_region_holding_its_carries_and_its_recomputes() {
    let _alone = common::alone();
    let device = Device::flex().autodiff();
    device.seed(3);
    let block = Block::new(16, &device);
    let xs = Tensor::<3>::random([8, 12, 16], Distribution::Default, &device);
    let h0 = Tensor::<2>::zeros([8, 16], &device);
    let held = |schedule| {
        let (_, report) = StepReport::measure(Meter::Host, || {
            recurrent_step(&block, &xs, &h0, Some(schedule));
        });
        // One region instance (its index counts on: the thread's second scan is `rnn#1`).
        let names: Vec<&str> = report.regions.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["rnn"], "{report}");
        // Each step run again in backward (12 differentiated, more advanced under snapshots)
        // is a recompute of the scan's region: its outputs and carry, 12 steps' at least.
        let region = &report.regions[0];
        assert!(region.recompute_seconds > 0.0, "{report}");
        assert!(region.recomputed_bytes >= 12 * 2 * 8 * 16 * 4, "{report}");
        region.held_bytes
    };
    let (every_step, snapshots) = (held(Schedule::EveryStep), held(Schedule::Snapshots(3)));
    // 12 steps: 11 carries of 8×16 floats stored, or 3 (and the last step's): 7 fewer.
    assert!(
        every_step - snapshots >= 7 * 8 * 16 * 4,
        "held: every step {every_step}, 3 snapshots {snapshots}"
    );
}

#[test]
fn an_offloaded_scan_keeps_its_carries_in_host_memory_and_gives_the_same_gradients() {
    let _alone = common::alone();
    let device = Device::flex().autodiff();
    device.seed(4);
    let block = Block::new(16, &device);
    let xs = Tensor::<3>::random([8, 12, 16], Distribution::Default, &device).require_grad();
    let h0 = Tensor::<2>::zeros([8, 16], &device);
    let step = |block: &Block, h: Tensor<2>, x: Tensor<2>| {
        let h = block.body(h + x);
        (h.clone(), h)
    };
    let run = |offloaded: bool| {
        let region = Region::named("rnn").schedule(Schedule::Snapshots(4));
        let region = if offloaded {
            region.offloaded()
        } else {
            region
        };
        let before = OffloadedBytes::now().in_use;
        let (ys, last) = region.scan(&block, h0.clone(), xs.clone(), 1, step);
        let in_host_memory = OffloadedBytes::now().in_use - before;
        let grads = (ys.powf_scalar(2.0).mean() + last.mean()).backward();
        let after = OffloadedBytes::now().in_use - before;
        let gradient = "a gradient";
        let values = vec![
            xs.grad(&grads).expect(gradient).into_data(),
            block
                .up
                .weight
                .val()
                .grad(&grads)
                .expect(gradient)
                .into_data(),
            block
                .down
                .weight
                .val()
                .grad(&grads)
                .expect(gradient)
                .into_data(),
        ];
        (values, in_host_memory, after)
    };
    let (kept, none_offloaded, _) = run(false);
    let (offloaded, in_host_memory, after) = run(true);
    assert_eq!(none_offloaded, 0);
    // The carries the plan's forward stores, 8×16 floats each, in host memory from forward to
    // backward, and freed after.
    let stored = ScanPlan::new(Schedule::Snapshots(4), 12, 0)
        .stored_in_forward()
        .len();
    assert!(stored >= 2);
    assert_eq!(in_host_memory, (stored * 8 * 16 * 4) as u64);
    assert_eq!(after, 0);
    assert_eq!(kept, offloaded);
}

#[test]
fn checkpoint_sequential_is_one_region_for_all_its_segments() {
    let _alone = common::alone();
    let device = Device::flex().autodiff();
    device.seed(5);
    let blocks: Vec<Block> = (0..8).map(|_| Block::new(16, &device)).collect();
    let x = Tensor::<2>::random([8, 16], Distribution::Default, &device).require_grad();
    let (_, report) = StepReport::measure(Meter::Host, || {
        let y = Region::named("stack").sequential(&blocks, Segments::Count(4), x.clone());
        y.sum().backward()
    });
    // One instance for the 3 segments before the last (a region each before 2026-12-03): its
    // recompute is theirs, 3 steps of 2 blocks.
    let names: Vec<String> = report.regions.iter().map(|r| r.id()).collect();
    assert_eq!(names, ["stack#0"], "{report}");
    let region = &report.regions[0];
    assert!(region.recompute_seconds > 0.0, "{report}");
    assert!(region.recomputed_bytes >= 3 * 8 * 16 * 4, "{report}");
}

/// A plan may run a scan under another schedule than its code's (`Treatment::Scan`): profiled
/// under every step's carry and under 2 snapshots, a budget between their peaks is met by the
/// snapshots, which the plan chooses and the fitted step measures within it.
#[test]
fn the_planner_chooses_among_a_scans_schedules() {
    use burn_checkpoint_22::planner::{Profile, Treatment};

    let _alone = common::alone();
    let device = Device::flex().autodiff();
    device.seed(6);
    let block = Block::new(32, &device);
    let xs = Tensor::<3>::random([16, 24, 32], Distribution::Default, &device).require_grad();
    let h0 = Tensor::<2>::zeros([16, 32], &device);
    let mut step = || {
        recurrent_step(&block, &xs, &h0, Some(Schedule::EveryStep));
    };
    step();
    let every = Treatment::Scan(Schedule::EveryStep);
    let few = Treatment::Scan(Schedule::Snapshots(2));
    let profile = Profile::measure(Meter::Host, &[every, few], &mut step).unwrap();
    println!("{profile}");
    assert_eq!(profile.treatments(), [Treatment::Keep, every, few]);
    let peak = |treatment| profile.step(treatment).peak_bytes;
    assert!(
        peak(few) < peak(every) && peak(every) < peak(Treatment::Keep),
        "{profile}"
    );
    let budget = (peak(few) + peak(every)) / 2;
    let plan = profile.plan(budget).unwrap();
    assert_eq!(
        plan.counts()["rnn"].iter().collect::<Vec<_>>(),
        [(&few, &1)],
        "{plan}"
    );
    let fitted = profile.fit(Meter::Host, budget, &mut step).unwrap();
    assert!(fitted.measured_peak_bytes <= budget, "{}", fitted.plan);
}
