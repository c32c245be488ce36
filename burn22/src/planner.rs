//! The budget planner: "fit this step in N bytes" (burn-checkpoint-core's, the same solver and
//! JSON as the crate for Burn 0.21's).
//!
//! A [`Profile`] measures a training step once per treatment its meter allows (every top-level
//! region kept, then keeping its compute-bound outputs, then recomputed; on a device also
//! offloaded); [`Profile::plan`] chooses a
//! treatment per region instance so that the step's peak fits a byte budget at the least
//! predicted step time; [`Profile::fit`] checks the choice on real steps; a [`Plan`] applies it to
//! later steps without code changes ([`Plan::run`]), and is saved and loaded as JSON. Profiled
//! on each [`Base`] (a device from [`autodiff_on`]), each profile with its step in
//! [`Candidates`], [`Candidates::fit`] plans on the one whose plan for a budget is fastest: run
//! the plan on `autodiff_on(plan.base, device)`.
//!
//! ```
//! use burn::nn::{Linear, LinearConfig};
//! use burn::tensor::{Device, Tensor};
//! use burn_checkpoint_22::Region;
//! use burn_checkpoint_22::memory::{CountingAllocator, Meter};
//! use burn_checkpoint_22::planner::{Plan, Profile, Treatment};
//!
//! #[global_allocator]
//! static ALLOCATOR: CountingAllocator = CountingAllocator;
//!
//! let device = Device::flex().autodiff();
//! let blocks: Vec<Linear> = (0..6).map(|_| LinearConfig::new(128, 128).init(&device)).collect();
//! let x = Tensor::<2>::ones([128, 128], &device);
//! let mut step = || {
//!     let mut h = x.clone();
//!     for block in &blocks {
//!         h = Region::named("block").run(block, h, |block, h| {
//!             block.forward(h).tanh().exp().tanh()
//!         });
//!     }
//!     let _grads = h.sum().backward();
//! };
//! let profile = Profile::measure(Meter::Host, &Treatment::ALL, &mut step).unwrap();
//! let budget = (profile.smallest_peak() + profile.largest_peak()) / 2;
//! let fitted = profile.fit(Meter::Host, budget, &mut step).unwrap();
//! assert!(fitted.measured_peak_bytes <= budget);
//!
//! // Saved, loaded, and run on later steps.
//! let json = serde_json::to_string(&fitted.plan).unwrap();
//! let plan: Plan = serde_json::from_str(&json).unwrap();
//! plan.run(step);
//! ```

use burn::tensor::Device;

// The names both crates re-export, listed once in the core.
pub use burn_checkpoint_core::engine::planner::*;

/// The autodiff device a plan's [`Base`] asks for, over `device` (an inner device:
/// `Device::flex()`, a wgpu or CUDA device): `device.autodiff()`, with
/// `.gradient_checkpointing()` (Burn's Balanced) on [`Base::Balanced`]. The one line that runs a
/// plan on its base, and that profiles a step on each base for [`Candidates`].
///
/// ```
/// use burn::tensor::{Device, Tensor};
/// use burn_checkpoint_22::planner::{Base, autodiff_on};
///
/// let device = autodiff_on(Base::Balanced, Device::flex());
/// let x = Tensor::<1>::from_floats([1.0, 2.0], &device).require_grad();
/// let gradients = x.clone().exp().sum().backward();
/// assert!(x.grad(&gradients).is_some());
/// ```
pub fn autodiff_on(base: Base, device: Device) -> Device {
    match base {
        Base::Plain => device.autodiff(),
        Base::Balanced => device.autodiff().gradient_checkpointing(),
    }
}
