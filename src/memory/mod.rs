//! Measuring memory: the counting global allocator for the CPU, device memory on CUDA, the
//! [`Meter`] a step is read with, and the memory report of one training step region by region
//! ([`StepReport::measure`]). The report's format, the allocator and the recording are
//! burn-checkpoint-core's, shared with the crate for Burn 0.22 (same JSON); the planner that
//! reads reports is [`planner`](crate::planner).
//!
//! Install the allocator in a binary or test (one global allocator per program), then read the
//! bytes in use and the peak since the last reset:
//!
//! ```
//! use burn_checkpoint::memory::{CountingAllocator, allocated, peak, reset_peak};
//!
//! #[global_allocator]
//! static ALLOCATOR: CountingAllocator = CountingAllocator;
//!
//! reset_peak();
//! let before = allocated();
//! let buffer = vec![0u8; 1 << 20];
//! assert!(peak() - before >= 1 << 20);
//! drop(buffer);
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
//! use burn_checkpoint::{Checkpointed, checkpoint_named};
//!
//! type B = Checkpointed<Autodiff<NdArray>>;
//! let device = Default::default();
//! let w = Tensor::<B, 2>::ones([16, 16], &device).require_grad();
//! let x = Tensor::<B, 2>::ones([8, 16], &device);
//!
//! let (_, report) = StepReport::measure(Meter::Host, || {
//!     let mut h = x.clone();
//!     for _ in 0..3 {
//!         h = checkpoint_named("block", || relu(h.clone().matmul(w.clone())));
//!     }
//!     h.sum().backward()
//! });
//! assert_eq!(report.regions.len(), 3);
//! assert_eq!(report.regions[2].id(), "block#2");
//! assert!(report.regions.iter().all(|region| region.recomputed_ops > 0));
//! println!("{report}"); // a table; `serde_json::to_string(&report)` for JSON
//! ```
//!
//! On cubecl devices (features `cuda`, `wgpu`), [`device`] reads cubecl's count of device bytes in
//! use and reserved, and samples their peaks.

#[cfg(any(feature = "cuda", feature = "wgpu"))]
pub mod device;
mod meter;

pub use burn_checkpoint_core::memory::{
    CountingAllocator, MemoryMeter, NameTotals, RegionRecord, StepReport, allocated, mib,
    offloaded_bytes, offloaded_peak, peak, raise_peak, reset_offloaded_peak, reset_peak,
};
pub use meter::{Measure, Meter, Peak};
