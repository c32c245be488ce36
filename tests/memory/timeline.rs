//! A step's memory timeline on real regions (Burn 0.21): the highest point is the step's
//! report's peak, exactly (the counting allocator); a chain's forwards run in order, their
//! recomputes in reverse, each inside its backward window; what was live at the peak sums to it;
//! plain autodiff against regions, the peak difference attributed by region adds up.
//!
//! Runs alone (`common::alone`): the allocator counts every thread of the process.

use crate::common;

use burn::tensor::Tensor;
use burn::tensor::activation::relu;
use burn::tensor::backend::AutodiffBackend;
use burn_checkpoint::Region;
use burn_checkpoint::memory::timeline::{Phase, Span};
use burn_checkpoint::memory::{Meter, Timeline};
use common::{Ckpt, Plain, data};

const BLOCKS: usize = 6;
const WIDTH: usize = 128;
const BATCH: usize = 1024;

/// One step of `BLOCKS` blocks `relu(h·W)·0.5 + h`, each a region named "block" with `regions`.
fn step<B: AutodiffBackend>(regions: bool) -> Timeline {
    let device = Default::default();
    let weights: Vec<Tensor<B, 2>> = (0..BLOCKS as u64)
        .map(|i| Tensor::from_data(data([WIDTH, WIDTH], 10 + i), &device).require_grad())
        .collect();
    let x = Tensor::<B, 2>::from_data(data([BATCH, WIDTH], 1), &device);
    let body = |h: Tensor<B, 2>, w: &Tensor<B, 2>| relu(h.clone().matmul(w.clone())) * 0.5 + h;
    let ((), timeline) = Timeline::measure(Meter::Host, || {
        let mut h = x.clone();
        for w in &weights {
            h = match regions {
                true => Region::named("block").run(|| body(h.clone(), w)),
                false => body(h, w),
            };
        }
        drop(h.sum().backward());
    });
    timeline
}

fn spans(timeline: &Timeline, phase: Phase) -> Vec<&Span> {
    timeline.spans.iter().filter(|s| s.phase == phase).collect()
}

#[test]
fn a_chains_timeline_peaks_where_its_report_does_and_runs_its_regions_in_order() {
    let _alone = common::alone();
    // Warm-up: the backend's first allocations are not a step's.
    step::<Ckpt>(true);
    let timeline = step::<Ckpt>(true);
    assert_eq!(timeline.highest(), timeline.report.peak_bytes as i64);
    assert!(
        timeline.points.len() > 2 * BLOCKS,
        "a point per read at least"
    );

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
    assert_eq!(at_peak.bytes, timeline.report.peak_bytes as i64);
    let parts: i64 = at_peak.regions.iter().map(|l| l.bytes).sum::<i64>() + at_peak.outside;
    assert_eq!(parts, at_peak.bytes);

    // Plain autodiff against regions: the difference, by region and outside, adds up.
    step::<Plain>(false);
    let plain = step::<Plain>(false);
    assert_eq!(plain.highest(), plain.report.peak_bytes as i64);
    let difference = timeline.compare(&plain);
    println!(
        "{BLOCKS} blocks, width {WIDTH}, batch {BATCH}: peak {} bytes with regions, {} plain; \
         the difference {difference:?}",
        timeline.report.peak_bytes, plain.report.peak_bytes
    );
    assert!(difference.bytes < 0, "regions peak lower: {difference:?}");
    let attributed: i64 = difference.by_region.values().sum::<i64>() + difference.outside;
    assert_eq!(attributed, difference.bytes);
}
