//! Device memory on CUDA: cubecl's memory manager counts the bytes in use on a stream but keeps
//! no peak, so [`DevicePeak`] samples the count from a thread while a step runs.
//!
//! ```no_run
//! use burn_checkpoint::memory::cuda::{DevicePeak, in_use};
//! use std::time::Duration;
//!
//! let device = burn::backend::cuda::CudaDevice::default();
//! let before = in_use(&device);
//! let sampler = DevicePeak::start(&device, Duration::from_micros(200));
//! // ... a training step on `device`, from this thread ...
//! let peak_above_before = sampler.finish().saturating_sub(before);
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use burn::backend::cuda::CudaDevice;
use burn::cubecl::Runtime;
use burn::cubecl::client::ComputeClient;
use burn::cubecl::cuda::CudaRuntime;
use burn::cubecl::stream_id::StreamId;

/// Bytes in use on `device` by the calling thread's stream (cubecl allocates per stream).
pub fn in_use(device: &CudaDevice) -> u64 {
    usage(&CudaRuntime::client(device))
}

fn usage(client: &ComputeClient<CudaRuntime>) -> u64 {
    client.memory_usage().map_or(0, |usage| usage.bytes_in_use)
}

/// The most bytes in use on a device stream, sampled from a background thread. A sample is
/// taken between two of the stream's commands, so a peak shorter than the period can be
/// missed: the figure is a lower bound, exact for peaks that last a kernel or more.
pub struct DevicePeak {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    client: ComputeClient<CudaRuntime>,
    sampler: Option<JoinHandle<()>>,
}

impl DevicePeak {
    /// Starts sampling the calling thread's stream on `device` every `period`.
    pub fn start(device: &CudaDevice, period: Duration) -> Self {
        let mut client = CudaRuntime::client(device);
        // SAFETY: the sampler only reads the memory usage of the caller's stream; it submits
        // nothing that allocates or runs on it.
        unsafe { client.set_stream(StreamId::current()) };
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(usage(&client)));
        let sampler = {
            let (stop, peak, client) = (stop.clone(), peak.clone(), client.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    peak.fetch_max(usage(&client), Ordering::Relaxed);
                    std::thread::sleep(period);
                }
            })
        };
        DevicePeak {
            stop,
            peak,
            client,
            sampler: Some(sampler),
        }
    }

    /// Stops sampling; the peak bytes in use seen since [`DevicePeak::start`].
    pub fn finish(mut self) -> u64 {
        self.stop_sampler();
        let last = usage(&self.client);
        self.peak.fetch_max(last, Ordering::Relaxed).max(last)
    }

    fn stop_sampler(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(sampler) = self.sampler.take() {
            let _ = sampler.join();
        }
    }
}

impl Drop for DevicePeak {
    fn drop(&mut self) {
        self.stop_sampler();
    }
}
