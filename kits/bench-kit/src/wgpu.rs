//! Burn's wgpu backend as the tests use it: a cubecl runtime (the memory manager, autotune and
//! fusion code that CUDA runs too) on whatever Vulkan adapter the machine has; in CI, Mesa's
//! lavapipe, a Vulkan driver on the CPU (Debian's `mesa-vulkan-drivers`, installed by
//! `scripts/setup`).

use std::sync::MutexGuard;

use burn::backend::wgpu::{CubeBackend, WgpuDevice, WgpuRuntime};
use burn::tensor::Tensor;

/// Burn's wgpu backend without fusion (with the `fusion` feature, `burn::backend::Wgpu` fuses).
pub type Unfused = CubeBackend<WgpuRuntime, f32, i32, u32>;

/// The wgpu device for one test at a time, or `None` where there is no Vulkan adapter:
/// [`app_kit::vulkan::claim`] with Burn 0.21's probe.
pub fn claim() -> Option<MutexGuard<'static, ()>> {
    app_kit::vulkan::claim(|| {
        let device = WgpuDevice::default();
        Tensor::<Unfused, 1>::zeros([1], &device).into_data();
    })
}

/// A layout of cubecl's memory pools on wgpu.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Pools {
    /// cubecl's default (`SubSlices`): sliced pages from 32 MiB up, in size classes four times
    /// apart, the largest a quarter of what the device allows a buffer.
    Default,
    /// `ExclusivePages`: a buffer per allocation, in 24 size buckets (what burn-checkpoint's
    /// `exclusive-pools` feature makes the default on every runtime).
    Exclusive,
    /// Sliced pages of 8 MiB for allocations up to 8 MiB, a buffer each above.
    Small,
}

/// Sets cubecl's pools on `device`: before the device's first tensor, in the process's first
/// use of it (cubecl takes a device's options once).
pub fn set_pools(pools: Pools, device: &WgpuDevice) {
    use burn::backend::wgpu::MemoryConfiguration;
    use cubecl_runtime::memory_management::{MemoryPoolOptions, PoolType};
    const MIB: u64 = 1 << 20;
    let memory_config = match pools {
        Pools::Default => return,
        Pools::Exclusive => MemoryConfiguration::ExclusivePages,
        Pools::Small => MemoryConfiguration::Custom {
            pool_options: vec![
                // Below wgpu's offset alignment, as cubecl's own layouts begin.
                MemoryPoolOptions {
                    pool_type: PoolType::ExclusivePages { max_alloc_size: 0 },
                    dealloc_period: None,
                },
                MemoryPoolOptions {
                    pool_type: PoolType::SlicedPages {
                        page_size: 8 * MIB,
                        max_slice_size: 8 * MIB,
                    },
                    dealloc_period: None,
                },
                MemoryPoolOptions {
                    pool_type: PoolType::ExclusivePages {
                        max_alloc_size: 1 << 40,
                    },
                    dealloc_period: Some(1000),
                },
            ],
        },
    };
    configure(memory_config, device);
}

/// Caps every buffer cubecl allocates on `device` at `bytes` (one pool of sliced pages that
/// size, which takes nothing bigger): a larger allocation fails as a full device fails one, a
/// panic on cubecl's device thread ("can't allocate buffer of size: N"). Before the device's
/// first tensor, as [`set_pools`]; panics where there is no adapter.
pub fn cap_buffers(bytes: u64, device: &WgpuDevice) {
    use burn::backend::wgpu::MemoryConfiguration;
    use cubecl_runtime::memory_management::{MemoryPoolOptions, PoolType};
    let pool = MemoryPoolOptions {
        pool_type: PoolType::SlicedPages {
            page_size: bytes,
            max_slice_size: bytes,
        },
        dealloc_period: None,
    };
    configure(
        MemoryConfiguration::Custom {
            pool_options: vec![pool],
        },
        device,
    );
}

fn configure(memory_config: burn::backend::wgpu::MemoryConfiguration, device: &WgpuDevice) {
    use burn::backend::wgpu::graphics::AutoGraphicsApi;
    use burn::backend::wgpu::{RuntimeOptions, init_setup};
    let options = RuntimeOptions {
        memory_config,
        ..RuntimeOptions::default()
    };
    init_setup::<AutoGraphicsApi>(device, options);
}
