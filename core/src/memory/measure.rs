//! One step's peak, measured with a [`Meter`]: on the host the allocator's own peak; on a device
//! a thread sampling the memory manager's counts, since it keeps no peak of its own.

use std::time::{Duration, Instant};

use super::device::DeviceMemory;
use super::meter::{MemoryMeter, Meter};
use super::sampler::Sampler;

/// How often a device's counts are sampled while a step runs.
const PERIOD: Duration = Duration::from_micros(100);

/// The peak of one step measured with [`Meter::start`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Peak {
    /// The most bytes in use, above those in use when the step began.
    pub in_use: u64,
    /// On a device, the most bytes its memory manager held during the step (absolute: pages
    /// reserved before the step count, as `nvidia-smi` counts them); `None` on the host.
    pub reserved: Option<u64>,
}

impl<D: DeviceMemory> Meter<D> {
    /// Starts measuring a step's peak: on the host the allocator's peak is reset; on a device a
    /// thread samples the bytes in use and reserved (as the calling thread's stream sees them)
    /// every 100 µs.
    ///
    /// ```
    /// use burn_checkpoint_core::engine::{DeviceMemory, Usage};
    /// use burn_checkpoint_core::memory::{CountingAllocator, Meter};
    ///
    /// #[global_allocator]
    /// static ALLOCATOR: CountingAllocator = CountingAllocator;
    /// # #[derive(Clone, Debug)] struct NoCounts;
    /// # impl DeviceMemory for NoCounts {
    /// #     fn usage(&self) -> Option<Usage> { None }
    /// #     fn reader(&self) -> impl Fn() -> Usage + Send + 'static { Usage::default }
    /// #     fn sync(&self) {}
    /// #     fn cleanup(&self) {}
    /// #     fn describe(&self) -> String { String::new() }
    /// # }
    ///
    /// let measure = Meter::<NoCounts>::Host.start();
    /// let buffer = vec![1u8; 1 << 20];
    /// assert!(measure.now() >= 1 << 20);
    /// drop(buffer);
    /// assert!(measure.finish().in_use >= 1 << 20, "the peak above the start");
    /// ```
    pub fn start(&self) -> Measure<D> {
        self.settle();
        let base = self.in_use();
        self.reset_peak();
        let sampler = match self {
            Meter::Host => None,
            Meter::Device(device) => Some(Sampler::start(
                device.reader(),
                PERIOD,
                None,
                Instant::now(),
            )),
        };
        Measure {
            meter: self.clone(),
            base,
            sampler,
        }
    }

    /// What a [`Measure`]'s figures are, for reports.
    pub fn describe_measure(&self) -> String {
        match self {
            Meter::Host => {
                "host bytes allocated (counting allocator), peak of a step above its start".into()
            }
            Meter::Device(device) => format!(
                "{}, sampled every 100 µs: peak of a step above its start; reserved: the most \
                 the memory manager held",
                device.describe()
            ),
        }
    }
}

/// One step's memory being measured ([`Meter::start`]).
pub struct Measure<D> {
    meter: Meter<D>,
    /// Bytes in use when the step began.
    base: u64,
    /// On a device, the thread keeping its peaks.
    sampler: Option<Sampler>,
}

impl<D: DeviceMemory> Measure<D> {
    /// Bytes in use now, above the start (what a step holds at some point of it, e.g. between
    /// forward and backward).
    pub fn now(&self) -> u64 {
        self.meter.settle();
        self.meter.in_use().saturating_sub(self.base)
    }

    /// The peaks since the start.
    pub fn finish(mut self) -> Peak {
        self.meter.settle();
        if let Some(sampler) = self.sampler.take() {
            let usage = sampler.finish().peak;
            return Peak {
                in_use: usage.in_use.saturating_sub(self.base),
                reserved: Some(usage.reserved),
            };
        }
        let peak = self.meter.peak().unwrap_or_else(|| self.meter.in_use());
        Peak {
            in_use: peak.saturating_sub(self.base),
            reserved: None,
        }
    }
}
