//! Device memory on cubecl runtimes (CUDA with the `cuda` feature, wgpu with `wgpu`): cubecl's
//! memory manager counts, per stream, the bytes in use and the bytes it has **reserved** from the
//! device (its pools' pages: what `nvidia-smi` sees, and what decides whether a batch fits), but
//! keeps no peak of either, so [`DevicePeak`] samples them from a thread while a step runs.
//!
//! Private: users read it through [`super::Meter::Cuda`] / [`super::Meter::Wgpu`] and a
//! [`super::Measure`], which wrap [`usage`] and [`DevicePeak`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use burn::cubecl::Runtime;
use burn::cubecl::client::ComputeClient;
use burn::cubecl::stream_id::StreamId;

/// Device bytes on one stream, as cubecl counts them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Bytes of live tensors.
    pub in_use: u64,
    /// Bytes the memory manager holds from the device (pages, used or not).
    pub reserved: u64,
}

/// The calling thread's stream's usage on `device` (cubecl allocates per stream).
pub fn usage<R: Runtime>(device: &R::Device) -> Usage {
    read(&R::client(device))
}

fn read<R: Runtime>(client: &ComputeClient<R>) -> Usage {
    client
        .memory_usage()
        .map_or(Usage::default(), |usage| Usage {
            in_use: usage.bytes_in_use,
            reserved: usage.bytes_reserved,
        })
}

/// The most bytes in use and reserved on a device stream, sampled from a background thread. A
/// sample is taken between two of the stream's commands, so a peak shorter than the period can
/// be missed: the figures are lower bounds, exact for peaks that last a kernel or more.
pub struct DevicePeak<R: Runtime> {
    stop: Arc<AtomicBool>,
    in_use: Arc<AtomicU64>,
    reserved: Arc<AtomicU64>,
    client: ComputeClient<R>,
    sampler: Option<JoinHandle<()>>,
}

impl<R: Runtime> DevicePeak<R> {
    /// Starts sampling the calling thread's stream on `device` every `period`.
    pub fn start(device: &R::Device, period: Duration) -> Self {
        let mut client = R::client(device);
        // SAFETY: the sampler only reads the memory usage of the caller's stream; it submits
        // nothing that allocates or runs on it.
        unsafe { client.set_stream(StreamId::current()) };
        let now = read(&client);
        let stop = Arc::new(AtomicBool::new(false));
        let in_use = Arc::new(AtomicU64::new(now.in_use));
        let reserved = Arc::new(AtomicU64::new(now.reserved));
        let sampler = {
            let (stop, in_use, reserved, client) = (
                stop.clone(),
                in_use.clone(),
                reserved.clone(),
                client.clone(),
            );
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let now = read(&client);
                    in_use.fetch_max(now.in_use, Ordering::Relaxed);
                    reserved.fetch_max(now.reserved, Ordering::Relaxed);
                    std::thread::sleep(period);
                }
            })
        };
        DevicePeak {
            stop,
            in_use,
            reserved,
            client,
            sampler: Some(sampler),
        }
    }

    /// Stops sampling; the peaks seen since [`DevicePeak::start`] (absolute, not above the
    /// start).
    pub fn finish(mut self) -> Usage {
        self.stop_sampler();
        let last = read(&self.client);
        Usage {
            in_use: self.in_use.load(Ordering::Relaxed).max(last.in_use),
            reserved: self.reserved.load(Ordering::Relaxed).max(last.reserved),
        }
    }

    fn stop_sampler(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(sampler) = self.sampler.take() {
            let _ = sampler.join();
        }
    }
}

impl<R: Runtime> Drop for DevicePeak<R> {
    fn drop(&mut self) {
        self.stop_sampler();
    }
}
