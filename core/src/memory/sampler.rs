//! A thread that reads a step's bytes every period while it runs: its peaks (what a
//! [`Measure`](super::Measure) reports on a device, which keeps no peak of its own) and, for a
//! [`Timeline`](super::Timeline), the bytes over time, bounded.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::device::Usage;

/// One reading: seconds since the sampler started and what it read then.
pub(crate) type Sample = (f64, Usage);

/// What a sampler gives when it stops.
#[derive(Debug, Default)]
pub(crate) struct Sampled {
    /// The most bytes in use and reserved seen (absolute).
    pub peak: Usage,
    /// Every reading (merged two by two when the room it was given filled), if asked for.
    pub series: Vec<Sample>,
}

/// Reads `read` from a background thread every period until stopped. A reading falls between
/// two of the device's commands, so a peak shorter than the period can be missed: the figures
/// are lower bounds, exact for peaks that last a kernel or more.
pub(crate) struct Sampler {
    stop: Arc<AtomicBool>,
    /// Gives what was read, the last reading taken after the stop.
    thread: Option<JoinHandle<Sampled>>,
}

impl Sampler {
    /// Starts reading every `period`; with `series`, keeping at most that many readings, timed
    /// from `since` (the room is allocated here, before the step: the thread allocates nothing
    /// while it runs, so that it does not count in the host bytes it reads).
    pub(crate) fn start(
        read: impl Fn() -> Usage + Send + 'static,
        period: Duration,
        series: Option<usize>,
        since: Instant,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let mut kept: Vec<Sample> = Vec::with_capacity(series.unwrap_or(0).max(2));
        let room = series.map(|n| n.max(2));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut peak = Usage::default();
                // Each kept reading stands for `stride` readings (the highest of them), doubled
                // at each halving, so that early and late readings are as dense.
                let (mut stride, mut taken) = (1usize, 0usize);
                let mut highest: Option<Sample> = None;
                loop {
                    // Read once more after the stop: what the step ends with counts too.
                    let stopped = stop.load(Ordering::Relaxed);
                    let now = read();
                    peak.in_use = peak.in_use.max(now.in_use);
                    peak.reserved = peak.reserved.max(now.reserved);
                    if let Some(room) = room {
                        let reading = (since.elapsed().as_secs_f64(), now);
                        if highest.is_none_or(|(_, h)| now.in_use > h.in_use) {
                            highest = Some(reading);
                        }
                        taken += 1;
                        if taken == stride || stopped {
                            if kept.len() == room {
                                halve(&mut kept);
                                stride *= 2;
                            }
                            // The highest reading of the stride, at the stride's last time.
                            let (_, usage) = highest.take().unwrap_or(reading);
                            kept.push((reading.0, usage));
                            taken = 0;
                        }
                    }
                    if stopped {
                        return Sampled { peak, series: kept };
                    }
                    std::thread::sleep(period);
                }
            })
        };
        Sampler {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops reading; what was read since the start (absolute bytes, not above it).
    pub(crate) fn finish(mut self) -> Sampled {
        self.stop_thread().unwrap_or_default()
    }

    fn stop_thread(&mut self) -> Option<Sampled> {
        self.stop.store(true, Ordering::Relaxed);
        // A reader that panicked has nothing to give: the peaks are then unknown, read as 0.
        self.thread.take().and_then(|thread| thread.join().ok())
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

/// Merges neighbouring readings two by two in place (no allocation): the pair's higher reading
/// at the pair's later time, so that a peak stays; an odd last reading stays as it is.
fn halve(kept: &mut Vec<Sample>) {
    let half = kept.len() / 2;
    for i in 0..half {
        let (a, b) = (kept[2 * i], kept[2 * i + 1]);
        kept[i] = if a.1.in_use > b.1.in_use {
            (b.0, a.1)
        } else {
            b
        };
    }
    let odd = kept.len() % 2 == 1;
    if odd {
        kept[half] = kept[kept.len() - 1];
    }
    kept.truncate(half + usize::from(odd));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halving_keeps_the_highest_reading_and_the_order() {
        let usage = |in_use| Usage {
            in_use,
            reserved: 0,
        };
        let mut kept: Vec<Sample> = (0..9).map(|i| (i as f64, usage(i * 10))).collect();
        kept[4].1.in_use = 1000;
        let capacity = kept.capacity();
        halve(&mut kept);
        assert_eq!(kept.len(), 5);
        assert_eq!(kept.capacity(), capacity, "in place");
        assert_eq!(kept.iter().map(|s| s.1.in_use).max(), Some(1000));
        assert!(kept.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(kept[4].0, 8.0, "the last reading stays");
    }
}
