//! How Burn 0.21's wgpu backend (cubecl 0.10) fails an allocation, on a real device (Mesa's
//! lavapipe in CI): what the out-of-memory report has to catch. The device's pools are
//! capped at 1 MiB a buffer (a cubecl memory configuration: the largest pool takes nothing
//! bigger), and a 4 MiB tensor asks for more.
//!
//! What it pins down:
//! - the failure is a panic on cubecl's **device thread**, not the caller's, whose message names
//!   the bytes asked for (`can't allocate buffer of size: 4194304`: cubecl-runtime's
//!   `IoError::BufferTooBig`, which the CUDA runtime returns for `CUDA_ERROR_OUT_OF_MEMORY`
//!   too);
//! - the caller's ops are queued without a panic, and the step fails at its next read, with a
//!   message that does not say memory (a handle whose memory does not exist);
//! - the process lives on and the device computes again.
//!
//! So a report must watch every thread's panics while a step runs (a panic hook, chained to the
//! one it replaces and put back after), and tell the step's failure by what the device thread
//! said, not by the caller's message: `StepReport::try_measure` does, and the test then runs a
//! step with regions under it, with the device's meter, whose second region fails so.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;

use bench_kit::wgpu::Unfused;
use burn::backend::Autodiff;
use burn::backend::wgpu::WgpuDevice;
use burn::tensor::{Tensor, TensorData};
use burn_checkpoint::memory::{Meter, StepReport};
use burn_checkpoint::{Checkpointed, Region};
use burn_checkpoint_core::memory::panic_message;

const MIB: u64 = 1 << 20;

/// Every panic raised while the hook is installed: its thread's name and message.
static PANICS: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());

#[test]
fn a_failed_allocation_panics_on_the_device_thread_and_the_step_fails_at_its_next_read() {
    // Before any wgpu thread starts (this binary's only test).
    app_kit::vulkan::runtime_dir();
    let device = WgpuDevice::default();
    // Before the device's first tensor: cubecl takes a device's options once.
    let set_up = catch_unwind(|| bench_kit::wgpu::cap_buffers(MIB, &device));
    if set_up.is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "no Vulkan adapter: CI installs Mesa's lavapipe (scripts/setup)"
        );
        eprintln!("skipped: no Vulkan adapter");
        return;
    }
    let small = || Tensor::<Unfused, 1>::from_floats([1.0, 2.0, 3.0], &device);
    assert_eq!(
        (small() * 2.0).into_data(),
        TensorData::from([2.0f32, 4.0, 6.0])
    );

    // Every panic recorded and said in one line, without the backtraces of the default hook
    // (cubecl's device thread panics a dozen times once an allocation failed); the caller's
    // whole, so that a failing assertion reads as usual. Until the test ends: the step under
    // `try_measure` below chains to it.
    let caller = std::thread::current().id();
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let thread = std::thread::current();
        let message = panic_message(info.payload());
        let (name, said) = match thread.id() == caller {
            true => ("the caller", message.as_str()),
            false => (
                thread.name().unwrap_or("(unnamed)"),
                message.lines().next().unwrap_or(""),
            ),
        };
        eprintln!("panic on {name}: {said}");
        let name = name.to_string();
        if let Ok(mut panics) = PANICS.lock() {
            panics.push((name, message));
        }
    }));
    let mut queued = false;
    let step = catch_unwind(AssertUnwindSafe(|| {
        // 4 MiB: more than any pool takes.
        let big = Tensor::<Unfused, 1>::ones([1 << 20], &device) * 2.0;
        queued = true;
        big.into_data()
    }));
    let panics = PANICS.lock().unwrap().clone();

    assert!(queued, "queuing the ops did not panic on the caller");
    let failed = step.expect_err("the step's read fails");
    let read = panic_message(&*failed);
    assert!(
        !read.contains("can't allocate"),
        "the caller's message: {read}"
    );
    let allocation = panics
        .iter()
        .find(|(_, message)| message.contains("can't allocate buffer of size: 4194304"))
        .unwrap_or_else(|| panic!("no panic names the allocation: {panics:?}"));
    assert_ne!(allocation.0, "the caller", "{panics:?}");
    // The device computes again.
    assert_eq!(
        (small() * 2.0).into_data(),
        TensorData::from([2.0f32, 4.0, 6.0])
    );

    // The same failure in a step with regions, measured with the device's meter under
    // `StepReport::try_measure`: the report of the step up to it instead of the panic.
    type B = Checkpointed<Autodiff<Unfused>>;
    let meter = Meter::device(device.clone()).expect("cubecl counts wgpu bytes");
    // 256 KiB: the first region's output fits a page, the second's 16 times more does not.
    let x = Tensor::<B, 1>::ones([1 << 16], &device).require_grad();
    let outcome = StepReport::try_measure(meter, || {
        let y = Region::named("small").run(|| x.clone() * 2.0);
        let z = Region::named("big").run(|| y.clone().repeat_dim(0, 16) * 3.0);
        let _ = z.sum().backward();
    });
    let failure = outcome.expect_err("the step runs out of memory");
    eprintln!("{failure}");
    assert_eq!(failure.requested_bytes, Some(4 << 20), "{failure}");
    assert_ne!(failure.thread, "the caller");
    // The ops are queued: the step's thread sees the failure at its next read, after the region
    // whose op failed has closed (`forward, after big#0` here; `in` where a read is inside).
    assert!(failure.at.contains("big#0"), "{failure}");
    let names: Vec<&str> = failure
        .report
        .regions
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(names, ["small", "big"], "{failure}");
    assert!(failure.report.regions[0].held_bytes >= 1 << 18, "{failure}");
    assert!(failure.in_use_bytes.is_some() && failure.reserved_bytes.is_some());
    // wgpu exposes no size of a device's memory: the report says so rather than guess.
    assert_eq!(failure.capacity_bytes, None, "{failure}");
    assert!(
        failure.to_string().contains("the backend does not say"),
        "{failure}"
    );
    // Nothing is left watching: the device computes again, a panic is a panic.
    assert_eq!(
        (small() * 2.0).into_data(),
        TensorData::from([2.0f32, 4.0, 6.0])
    );
    let _ = std::panic::take_hook();
    std::panic::set_hook(default);
}
