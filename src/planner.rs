//! The budget planner: "fit this step in N bytes".
//!
//! A [`Profile`] measures a training step once per [`Treatment`] (every
//! top-level region kept, keeping its compute-bound outputs, recomputing everything);
//! [`Profile::plan`] chooses a treatment per region instance so that the step's peak fits a byte
//! budget at the least predicted step time; [`Profile::fit`] checks the choice on real steps (and
//! plans again below an overshoot); a [`Plan`] applies it to later steps without code changes, and
//! is saved and loaded as JSON. Profiled on each [`Base`] (the backend type under the regions),
//! each profile with its step in [`Candidates`], [`Candidates::fit`] plans on the one whose plan
//! for a budget is fastest. How it predicts and solves: `docs/memory-budget.md`. The planner is
//! burn-checkpoint-core's, shared with the crate for Burn 0.22.
//!
//! Profile a step, plan for a budget between the smallest and the largest peak these regions
//! reach:
//!
//! ```
//! use burn::backend::{Autodiff, NdArray};
//! use burn::tensor::{Tensor, activation::relu};
//! use burn_checkpoint::memory::{CountingAllocator, Meter};
//! use burn_checkpoint::planner::{Profile, Treatment};
//! use burn_checkpoint::{Checkpointed, Region};
//!
//! #[global_allocator]
//! static ALLOCATOR: CountingAllocator = CountingAllocator;
//!
//! type B = Checkpointed<Autodiff<NdArray>>;
//! let device = Default::default();
//! let w = Tensor::<B, 2>::ones([256, 256], &device).require_grad();
//! let x = Tensor::<B, 2>::ones([256, 256], &device);
//! let step = || {
//!     let mut h = x.clone();
//!     for _ in 0..6 {
//!         h = Region::named("block").run(|| relu(relu(h.clone().matmul(w.clone())) + 1.0));
//!     }
//!     let _ = h.sum().backward();
//! };
//! let profile = Profile::measure(Meter::Host, &Treatment::ALL, step).unwrap();
//! let (floor, roof) = (profile.smallest_peak(), profile.largest_peak());
//! let plan = profile.plan((floor + roof) / 2).unwrap();
//! assert!(plan.predicted_peak_bytes <= (floor + roof) / 2);
//! assert!(profile.plan(floor / 2).is_err());
//! ```
//!
//! Fit a budget and check it on real steps (the profile is three steps, the check at least one;
//! each trains the model):
//!
//! ```
//! use burn::backend::{Autodiff, NdArray};
//! use burn::tensor::{Tensor, activation::relu};
//! use burn_checkpoint::memory::{CountingAllocator, Meter};
//! use burn_checkpoint::planner::{Profile, Treatment};
//! use burn_checkpoint::{Checkpointed, Region};
//!
//! #[global_allocator]
//! static ALLOCATOR: CountingAllocator = CountingAllocator;
//!
//! type B = Checkpointed<Autodiff<NdArray>>;
//! let device = Default::default();
//! let w = Tensor::<B, 2>::ones([128, 128], &device).require_grad();
//! let x = Tensor::<B, 2>::ones([128, 128], &device);
//! let mut step = || {
//!     let mut h = x.clone();
//!     for _ in 0..4 {
//!         h = Region::named("block").run(|| relu(relu(h.clone().matmul(w.clone())) + 1.0));
//!     }
//!     let _ = h.sum().backward();
//! };
//! let profile = Profile::measure(Meter::Host, &Treatment::ALL, &mut step).unwrap();
//! let budget = (profile.smallest_peak() + profile.largest_peak()) / 2;
//! let fitted = profile.fit(Meter::Host, budget, step).unwrap();
//! assert!(fitted.measured_peak_bytes <= budget);
//! ```
//!
//! A plan made by hand, saved, loaded and run:
//!
//! ```
//! use burn::backend::{Autodiff, NdArray};
//! use burn::tensor::{Tensor, activation::relu};
//! use burn_checkpoint::planner::{Plan, Treatment};
//! use burn_checkpoint::{Checkpointed, Region};
//!
//! type B = Checkpointed<Autodiff<NdArray>>;
//! let device = Default::default();
//! let w = Tensor::<B, 2>::ones([16, 16], &device).require_grad();
//! let x = Tensor::<B, 2>::ones([8, 16], &device);
//!
//! // The first block kept (as if it were no region), the second recomputed.
//! let plan = Plan::new()
//!     .with("block", 0, Treatment::Keep)
//!     .with("block", 1, Treatment::RecomputeAll);
//! let json = serde_json::to_string(&plan).unwrap();
//! let plan: Plan = serde_json::from_str(&json).unwrap();
//!
//! for _step in 0..2 {
//!     plan.run(|| {
//!         let mut h = x.clone();
//!         for _ in 0..2 {
//!             h = Region::named("block").run(|| relu(h.clone().matmul(w.clone())));
//!         }
//!         let _ = h.sum().backward();
//!     });
//! }
//! ```

// The names both crates re-export, listed once in the core.
pub use burn_checkpoint_core::engine::planner::*;
