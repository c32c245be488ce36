//! A step's memory timeline on real regions (Burn 0.22): the highest point is the step's
//! report's peak, exactly (the counting allocator); a chain's forwards run in order, their
//! recomputes in reverse, each inside its backward window; what was live at the peak sums to it;
//! plain autodiff against regions, the peak difference attributed by region adds up; an
//! offloading region's copies out and back are spans.

use crate::common;

use burn::tensor::{Device, Distribution, Tensor};
use burn_checkpoint_22::Region;
use burn_checkpoint_22::memory::timeline::{Phase, Span};
use burn_checkpoint_22::memory::{Meter, Timeline};
use common::Block;

const BLOCKS: usize = 6;

fn step(blocks: &[Block], x: &Tensor<2>, regions: bool) -> Timeline {
    let ((), timeline) = Timeline::measure(Meter::Host, || {
        let mut h = x.clone();
        for block in blocks {
            h = match regions {
                true => Region::named("block").run(block, h, |block, h| block.body(h)),
                false => block.body(h),
            };
        }
        drop(h.powf_scalar(2.0).mean().backward());
    });
    timeline
}

fn spans(timeline: &Timeline, phase: Phase) -> Vec<&Span> {
    timeline.spans.iter().filter(|s| s.phase == phase).collect()
}

#[test]
fn a_chains_timeline_peaks_where_its_report_does_and_runs_its_regions_in_order() {
    let _alone = common::alone();
    let device = Device::flex().autodiff();
    device.seed(3);
    let blocks: Vec<Block> = (0..BLOCKS).map(|_| Block::new(128, &device)).collect();
    let x = Tensor::<2>::random([512, 128], Distribution::Default, &device);
    // Warm-up: the backend's first allocations are not a step's.
    step(&blocks, &x, true);
    let timeline = step(&blocks, &x, true);
    assert_eq!(timeline.highest(), timeline.report.peak_bytes as i64);

    let labels = |spans: &[&Span]| spans.iter().map(|s| s.label()).collect::<Vec<_>>();
    let forwards = spans(&timeline, Phase::RegionForward);
    let recomputes = spans(&timeline, Phase::Recompute);
    let windows = spans(&timeline, Phase::RegionBackward);
    // Indices go on from the warm-up's: the names' counters are the thread's.
    let first = forwards[0].index.expect("a region's span");
    let order: Vec<String> = (first..first + BLOCKS as u64)
        .map(|i| format!("block#{i}"))
        .collect();
    let reverse: Vec<String> = order.iter().rev().cloned().collect();
    assert_eq!(labels(&forwards), order);
    assert_eq!(
        labels(&recomputes),
        reverse,
        "one span per instance, in reverse"
    );
    assert_eq!(labels(&windows), reverse);
    assert!(forwards.windows(2).all(|w| w[0].end <= w[1].start));
    for (recompute, window) in recomputes.iter().zip(&windows) {
        assert!(window.start <= recompute.start && recompute.end <= window.end);
    }
    let backward = spans(&timeline, Phase::Backward);
    assert_eq!(backward.len(), 1);
    assert!(forwards.iter().all(|f| f.end <= backward[0].start));

    let at_peak = &timeline.at_peak;
    let parts: i64 = at_peak.regions.iter().map(|l| l.bytes).sum::<i64>() + at_peak.outside;
    assert_eq!(parts, at_peak.bytes);

    // Plain autodiff against regions: the difference, by region and outside, adds up.
    step(&blocks, &x, false);
    let plain = step(&blocks, &x, false);
    assert_eq!(plain.highest(), plain.report.peak_bytes as i64);
    let difference = timeline.compare(&plain);
    println!(
        "{BLOCKS} blocks: peak {} bytes with regions, {} plain; the difference {difference:?}",
        timeline.report.peak_bytes, plain.report.peak_bytes
    );
    assert!(difference.bytes < 0, "regions peak lower: {difference:?}");
    let attributed: i64 = difference.by_region.values().sum::<i64>() + difference.outside;
    assert_eq!(attributed, difference.bytes);

    // Offloading regions: each block's input copied to host memory in forward, given back in
    // backward, a span each.
    let ((), offloaded) = Timeline::measure(Meter::Host, || {
        let mut h = x.clone();
        for block in &blocks {
            h = Region::named("block")
                .offloaded()
                .run(block, h, |block, h| block.body(h));
        }
        drop(h.powf_scalar(2.0).mean().backward());
    });
    let copies = |phase| spans(&offloaded, phase).len();
    assert_eq!(copies(Phase::OffloadOut), BLOCKS, "{:?}", offloaded.spans);
    assert_eq!(copies(Phase::OffloadBack), BLOCKS, "{:?}", offloaded.spans);
    let (first_out, last_back) = (
        spans(&offloaded, Phase::OffloadOut)[0].start,
        spans(&offloaded, Phase::OffloadBack)[BLOCKS - 1].start,
    );
    assert!(first_out < last_back);
}
