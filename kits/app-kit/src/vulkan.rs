//! Whether a Vulkan adapter is there for Burn's wgpu backend, as the tests of both Burn crates
//! ask it: [`adapter`], and [`claim`], the device for one test at a time. The probe (a first
//! tensor on the default wgpu device) is each Burn version's; the environment it needs
//! ([`runtime_dir`], for the tests that configure a device before its first tensor too), what a
//! missing adapter means and the one lock are here, once.

use std::sync::{Mutex, MutexGuard, OnceLock};

/// Runs `probe` (a first tensor on wgpu's default device: it starts the runtime, and panics
/// without an adapter) once the environment Mesa's lavapipe needs is set, and says whether it
/// found an adapter. Without one, under CI (`CI` set) it panics: CI installs lavapipe, so its
/// absence is a broken setup; elsewhere it prints that the wgpu tests are skipped, and why.
///
/// Call it once per process, before any wgpu thread starts (it sets `XDG_RUNTIME_DIR` where
/// none is set), and keep its answer (a `OnceLock`).
///
/// ```
/// // A probe that finds no adapter, outside CI: skipped, with a message.
/// if std::env::var_os("CI").is_none() {
///     assert!(!app_kit::vulkan::adapter(|| panic!("no adapter")));
/// }
/// assert!(app_kit::vulkan::adapter(|| ()));
/// ```
pub fn adapter(probe: impl FnOnce() + std::panic::UnwindSafe) -> bool {
    runtime_dir();
    match std::panic::catch_unwind(probe) {
        Ok(()) => true,
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
}

/// The wgpu device for one test at a time, or `None` without a Vulkan adapter ([`adapter`] of
/// `probe`, asked once per process: skipped with a message, or under CI a panic). One at a
/// time because of autotune: a kernel is tuned once per process, synchronously, but a thread that
/// asks for a kernel another thread is tuning runs the first candidate instead of the fastest,
/// and candidates sum in different orders: two tests side by side would differ in the last bits
/// from run to run.
///
/// ```
/// let first = app_kit::vulkan::claim(|| ());
/// assert!(first.is_some());
/// drop(first); // the next test's turn
/// assert!(app_kit::vulkan::claim(|| unreachable!("asked once")).is_some());
/// ```
pub fn claim(probe: impl FnOnce() + std::panic::UnwindSafe) -> Option<MutexGuard<'static, ()>> {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let available = *AVAILABLE.get_or_init(|| adapter(probe));
    available.then(|| {
        ONE_AT_A_TIME
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    })
}

/// Sets `XDG_RUNTIME_DIR` (to the temporary folder) where none is set: Mesa's lavapipe warns
/// without a runtime directory, and any writable one will do. Call it before any wgpu thread
/// starts: [`adapter`] does; a test that configures a device before its first tensor calls it
/// first itself.
///
/// ```
/// app_kit::vulkan::runtime_dir();
/// assert!(std::env::var_os("XDG_RUNTIME_DIR").is_some());
/// ```
pub fn runtime_dir() {
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        // SAFETY: the caller calls it before any wgpu thread starts, the only other threads
        // that read the environment here.
        unsafe { std::env::set_var("XDG_RUNTIME_DIR", std::env::temp_dir()) };
    }
}
