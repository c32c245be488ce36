//! The devices a [`Meter`](super::Meter) reads on Burn 0.21: cubecl runtimes (CUDA with the
//! `cuda` feature, wgpu with `wgpu`), whose memory manager counts, per stream, the bytes in use
//! and the bytes it has reserved from the device, but keeps no peak of either (a
//! [`Measure`](super::Measure) samples them).

use burn_checkpoint_core::engine::{DeviceMemory, Usage};

#[cfg(any(feature = "cuda", feature = "wgpu"))]
use burn::cubecl::{Runtime, client::ComputeClient, stream_id::StreamId};

/// A device whose memory [`Meter::device`](super::Meter::device) reads: one of the cubecl runtimes
/// this build has (`cuda`, `wgpu` features; none without them). Made from the backend's device by
/// [`Meter::device`](super::Meter::device).
///
/// ```
/// # #[cfg(feature = "wgpu")] {
/// use burn::backend::wgpu::WgpuDevice;
/// use burn_checkpoint::memory::Meter;
///
/// let meter = Meter::device(WgpuDevice::default()).expect("cubecl counts wgpu's bytes");
/// assert!(meter.is_device());
/// # }
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum MeteredDevice {
    /// A CUDA device: the calling thread's stream's bytes.
    #[cfg(feature = "cuda")]
    Cuda(burn::backend::cuda::CudaDevice),
    /// A wgpu device (Vulkan, Metal, ...; Mesa's lavapipe on the CPU).
    #[cfg(feature = "wgpu")]
    Wgpu(burn::backend::wgpu::WgpuDevice),
}

#[cfg(feature = "cuda")]
impl From<burn::backend::cuda::CudaDevice> for MeteredDevice {
    fn from(device: burn::backend::cuda::CudaDevice) -> Self {
        MeteredDevice::Cuda(device)
    }
}

#[cfg(feature = "wgpu")]
impl From<burn::backend::wgpu::WgpuDevice> for MeteredDevice {
    fn from(device: burn::backend::wgpu::WgpuDevice) -> Self {
        MeteredDevice::Wgpu(device)
    }
}

/// The calling thread's stream's counts (cubecl allocates per stream).
#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn read<R: Runtime>(client: &ComputeClient<R>) -> Option<Usage> {
    client.memory_usage().ok().map(|usage| Usage {
        in_use: usage.bytes_in_use,
        reserved: usage.bytes_reserved,
    })
}

/// A reader of the calling thread's stream that another thread can call.
#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn stream_reader<R: Runtime>(device: &R::Device) -> impl Fn() -> Usage + Send + 'static {
    let mut client = R::client(device);
    // SAFETY: the reader only reads the memory usage of the caller's stream; it submits nothing
    // that allocates or runs on it.
    unsafe { client.set_stream(StreamId::current()) };
    move || read(&client).unwrap_or_default()
}

impl DeviceMemory for MeteredDevice {
    fn usage(&self) -> Option<Usage> {
        match *self {
            #[cfg(feature = "cuda")]
            MeteredDevice::Cuda(ref device) => {
                read(&burn::cubecl::cuda::CudaRuntime::client(device))
            }
            #[cfg(feature = "wgpu")]
            MeteredDevice::Wgpu(ref device) => {
                read(&burn::cubecl::wgpu::WgpuRuntime::client(device))
            }
        }
    }

    // Without a cubecl feature there is no device: the match below has no arm, and what follows
    // it is unreachable.
    #[allow(unreachable_code, unused_variables)]
    fn reader(&self) -> impl Fn() -> Usage + Send + 'static {
        // One closure type whichever runtime: the match picks the reader inside a box.
        let reader: Box<dyn Fn() -> Usage + Send> = match *self {
            #[cfg(feature = "cuda")]
            MeteredDevice::Cuda(ref device) => {
                Box::new(stream_reader::<burn::cubecl::cuda::CudaRuntime>(device))
            }
            #[cfg(feature = "wgpu")]
            MeteredDevice::Wgpu(ref device) => {
                Box::new(stream_reader::<burn::cubecl::wgpu::WgpuRuntime>(device))
            }
        };
        reader
    }

    fn sync(&self) {
        // A failed device fails the step's own next read; the meter reads what ran. The fused
        // backends' sync runs the calling thread's fusion queue, then waits for the device.
        match *self {
            #[cfg(feature = "cuda")]
            MeteredDevice::Cuda(ref device) => {
                let _ = <burn::backend::Cuda as burn::tensor::backend::Backend>::sync(device);
            }
            #[cfg(feature = "wgpu")]
            MeteredDevice::Wgpu(ref device) => {
                let _ = <burn::backend::Wgpu as burn::tensor::backend::Backend>::sync(device);
            }
        }
    }

    fn cleanup(&self) {
        match *self {
            #[cfg(feature = "cuda")]
            MeteredDevice::Cuda(ref device) => {
                <burn::backend::Cuda as burn::tensor::backend::Backend>::memory_cleanup(device)
            }
            #[cfg(feature = "wgpu")]
            MeteredDevice::Wgpu(ref device) => {
                <burn::backend::Wgpu as burn::tensor::backend::Backend>::memory_cleanup(device)
            }
        }
    }

    fn capacity(&self) -> Option<u64> {
        match *self {
            #[cfg(feature = "cuda")]
            MeteredDevice::Cuda(ref device) => cuda_capacity(device.index),
            // wgpu exposes no size of a device's memory.
            #[cfg(feature = "wgpu")]
            MeteredDevice::Wgpu(_) => None,
        }
    }

    fn describe(&self) -> String {
        match *self {
            #[cfg(feature = "cuda")]
            MeteredDevice::Cuda(_) => "CUDA device bytes in use and reserved (cubecl)".into(),
            #[cfg(feature = "wgpu")]
            MeteredDevice::Wgpu(_) => "wgpu device bytes in use and reserved (cubecl)".into(),
        }
    }
}

/// The driver's size of CUDA device `index` (`cuDeviceTotalMem`); `None` where the driver has
/// no such device. Needs no context: nothing is allocated on the device. The driver library is
/// loaded already (cubecl-cuda loaded it to make the device the meter reads: `Meter::device`
/// refuses a device without counts), which cudarc's dynamic loading needs, or it panics.
#[cfg(feature = "cuda")]
fn cuda_capacity(index: usize) -> Option<u64> {
    use cudarc::driver::result;
    result::init().ok()?;
    let device = result::device::get(i32::try_from(index).ok()?).ok()?;
    // SAFETY: `device` was just returned by `cuDeviceGet`.
    let bytes = unsafe { result::device::total_mem(device) }.ok()?;
    Some(bytes as u64)
}
