//! Measuring memory: the counting global allocator for the CPU, device memory on CUDA, the
//! [`Meter`] a step is read with, and the memory report of one training step region by region
//! ([`StepReport::measure`]). The report's format, the allocator and the recording are
//! burn-checkpoint-core's, shared with the crate for Burn 0.22 (same JSON); the planner that
//! reads reports is [`planner`](crate::planner).
//!
//! Install the allocator in a binary or test (one global allocator per program), then measure
//! with a [`Meter`]: [`Meter::start`] gives a [`Measure`], whose [`Measure::finish`] is the
//! step's [`Peak`] above its start:
//!
//! ```
//! use burn_checkpoint::memory::{CountingAllocator, Meter};
//!
//! #[global_allocator]
//! static ALLOCATOR: CountingAllocator = CountingAllocator;
//!
//! let measure = Meter::Host.start();
//! let buffer = vec![0u8; 1 << 20];
//! drop(buffer);
//! assert!(measure.finish().in_use >= 1 << 20);
//! ```
//!
//! The counts cover every thread of the process: measure with nothing else running.
//!
//! A [`StepReport`] measures one training step: what each top-level region instance holds, what
//! its recompute costs, what is made outside regions, where the peak is. What it costs: a read of
//! the meter and a clock at each top-level region's opening and closing and around each
//! recomputed op, and a map update per tracked op outside regions; without a recording each of
//! those hooks is one thread-local flag read.
//!
//! ```
//! use burn::backend::{Autodiff, NdArray};
//! use burn::tensor::{Tensor, activation::relu};
//! use burn_checkpoint::memory::{Meter, StepReport};
//! use burn_checkpoint::{Checkpointed, Region};
//!
//! type B = Checkpointed<Autodiff<NdArray>>;
//! let device = Default::default();
//! let w = Tensor::<B, 2>::ones([16, 16], &device).require_grad();
//! let x = Tensor::<B, 2>::ones([8, 16], &device);
//!
//! let (_, report) = StepReport::measure(Meter::Host, || {
//!     let mut h = x.clone();
//!     for _ in 0..3 {
//!         h = Region::named("block").run(|| relu(h.clone().matmul(w.clone())));
//!     }
//!     h.sum().backward()
//! });
//! assert_eq!(report.regions.len(), 3);
//! assert_eq!(report.regions[2].id(), "block#2");
//! assert!(report.regions.iter().all(|region| region.recomputed_ops > 0));
//! println!("{report}"); // a table; `serde_json::to_string(&report)` for JSON
//! ```
//!
//! A [`Timeline`] records the same step over time with its report (the same hooks): the bytes
//! in use from start to end, each region instance's forward, recompute and backward as spans, and
//! what was live at the peak, by region; two timelines compare their peaks by region
//! ([`Timeline::compare`]). The trainers draw them (`--memory-timeline step.svg`;
//! docs/memory-timeline.md):
//!
//! ```
//! use burn::backend::{Autodiff, NdArray};
//! use burn::tensor::{Tensor, activation::relu};
//! use burn_checkpoint::memory::timeline::Phase;
//! use burn_checkpoint::memory::{Meter, Timeline};
//! use burn_checkpoint::{Checkpointed, Region};
//!
//! type B = Checkpointed<Autodiff<NdArray>>;
//! let device = Default::default();
//! let w = Tensor::<B, 2>::ones([16, 16], &device).require_grad();
//! let x = Tensor::<B, 2>::ones([8, 16], &device);
//!
//! let (_, timeline) = Timeline::measure(Meter::Host, || {
//!     let mut h = x.clone();
//!     for _ in 0..3 {
//!         h = Region::named("block").run(|| relu(h.clone().matmul(w.clone())));
//!     }
//!     h.sum().backward()
//! });
//! assert_eq!(timeline.highest(), timeline.report.peak_bytes as i64);
//! let recomputes = timeline.spans.iter().filter(|s| s.phase == Phase::Recompute);
//! let order: Vec<String> = recomputes.map(|s| s.label()).collect();
//! assert_eq!(order, ["block#2", "block#1", "block#0"], "backward runs them in reverse");
//! ```
//!
//! On cubecl devices (features `cuda`, `wgpu`), `Meter::device(device)` reads cubecl's count of
//! device bytes in use and reserved; a [`Measure`] samples their peaks.

mod device;

// The names both crates re-export, listed once in the core.
pub use burn_checkpoint_core::engine::memory::*;
pub use device::MeteredDevice;

/// Where the memory of a step is measured: the host's allocator ([`Meter::Host`]) or a cubecl
/// device's memory manager ([`Meter::device`]). What [`StepReport::measure`], the
/// [`planner`](crate::planner) and [`Meter::start`] read. burn-checkpoint-core's one meter, with
/// this crate's devices.
///
/// ```
/// use burn_checkpoint::memory::{MemoryMeter, Meter};
///
/// // Reads 0 unless `CountingAllocator` is the program's global allocator.
/// let meter = Meter::Host;
/// assert!(meter.describe().contains("allocator"));
/// assert!(!meter.is_device());
/// ```
pub type Meter = burn_checkpoint_core::memory::Meter<MeteredDevice>;

/// One step's memory being measured: [`Meter::start`] gives it, [`Measure::finish`] the step's
/// [`Peak`] above its start.
///
/// ```
/// use burn_checkpoint::memory::{CountingAllocator, Meter};
///
/// #[global_allocator]
/// static ALLOCATOR: CountingAllocator = CountingAllocator;
///
/// let measure = Meter::Host.start();
/// let buffer = vec![1u8; 1 << 20];
/// assert!(measure.now() >= 1 << 20, "held now, above the start");
/// drop(buffer);
/// assert!(measure.finish().in_use >= 1 << 20, "the peak above the start");
/// ```
pub type Measure = burn_checkpoint_core::memory::Measure<MeteredDevice>;
