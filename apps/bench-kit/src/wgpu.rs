//! Burn's wgpu backend as the tests use it: a cubecl runtime (the memory manager, autotune and
//! fusion code that CUDA runs too) on whatever Vulkan adapter the machine has; in CI, Mesa's
//! lavapipe, a Vulkan driver on the CPU (Debian's `mesa-vulkan-drivers`, installed by
//! `scripts/setup`).

use std::sync::{Mutex, MutexGuard, OnceLock};

use burn::backend::wgpu::{CubeBackend, WgpuDevice, WgpuRuntime};
use burn::tensor::Tensor;

/// Burn's wgpu backend without fusion (with the `fusion` feature, `burn::backend::Wgpu` fuses).
pub type Unfused = CubeBackend<WgpuRuntime, f32, i32, u32>;

/// The wgpu device for one test at a time, or `None` where there is no Vulkan adapter (the test is
/// skipped, with a message; under CI, `CI` set, it fails instead: CI installs lavapipe, so its
/// absence is a broken setup).
///
/// One at a time because of autotune: a kernel is tuned once per process, synchronously, but a
/// thread that asks for a kernel another thread is tuning runs the first candidate instead of the
/// fastest, and candidates sum in different orders: two tests side by side would differ in the
/// last bits from run to run.
pub fn claim() -> Option<MutexGuard<'static, ()>> {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    available().then(|| ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Whether a Vulkan adapter is there (see [`claim`]).
pub fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        // Mesa's lavapipe warns without a runtime directory; any writable one will do.
        if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
            // SAFETY: set once, before any wgpu thread starts (the first wgpu test asks first).
            unsafe { std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir()) };
        }
        // The default device's first tensor starts its runtime (and panics without an adapter).
        let found = std::panic::catch_unwind(|| {
            let device = WgpuDevice::default();
            Tensor::<Unfused, 1>::zeros([1], &device).into_data()
        });
        match found {
            Ok(_) => true,
            Err(_) if std::env::var_os("CI").is_some() => {
                panic!("no Vulkan adapter: CI installs Mesa's lavapipe (scripts/setup)")
            }
            Err(_) => {
                eprintln!(
                    "skipping the wgpu tests: no Vulkan adapter (Debian: apt-get install \
                     mesa-vulkan-drivers, or run scripts/setup)"
                );
                false
            }
        }
    })
}
