//! Offload: a region's stored inputs held in host memory between forward and backward, uploaded
//! when its backward runs, counted in burn-checkpoint-core's offload store (which the memory
//! report reads).

use std::fmt;
use std::sync::Arc;

use burn::backend::tensor::FloatTensor;
use burn::backend::{Backend, TensorMetadata};
use burn::tensor::{TensorData, read_sync};
use burn_checkpoint_core::engine::{host_copy_dropped, host_copy_made};

/// A tensor a region node keeps for its recompute: on the device, or copied to host memory.
pub(crate) enum Stored<B: Backend> {
    /// The primitive itself (a parameter's is the parameter's buffer: nothing is copied).
    Device(FloatTensor<B>),
    /// A copy in host memory; the device buffer was given up (if nothing else held it).
    Host(Arc<HostCopy<B>>),
}

/// Values read back from the device, counted in the offload store while they live.
pub(crate) struct HostCopy<B: Backend> {
    data: TensorData,
    device: B::Device,
}

impl<B: Backend> Drop for HostCopy<B> {
    fn drop(&mut self) {
        host_copy_dropped(self.data.bytes().len());
    }
}

impl<B: Backend> Stored<B> {
    /// `tensor` copied to host memory: the copy is complete when this returns (a synchronous
    /// read, which on a GPU waits for the device).
    pub(crate) fn to_host(tensor: FloatTensor<B>) -> Self {
        let device = tensor.device();
        // The whole device first, not only this tensor: on wgpu with fusion, a read that
        // flushed only this tensor's work left later gradients wrong by 1e-4 (the region's
        // forward queued behind it; burn22/tests/wgpu.rs caught it when the forward moved
        // ahead of the node's construction). A read waits for
        // the device anyway.
        B::sync(&device)
            .unwrap_or_else(|error| panic!("offloading a region's input to host memory: {error}"));
        let data = read_sync(B::float_into_data(tensor))
            .unwrap_or_else(|error| panic!("offloading a region's input to host memory: {error}"));
        host_copy_made(data.bytes().len());
        Stored::Host(Arc::new(HostCopy { data, device }))
    }

    /// The tensor on its device again (an upload from a host copy: the same bits).
    pub(crate) fn load(&self) -> FloatTensor<B> {
        match self {
            Stored::Device(tensor) => tensor.clone(),
            Stored::Host(copy) => B::float_from_data(copy.data.clone(), &copy.device),
        }
    }
}

impl<B: Backend> Clone for Stored<B> {
    fn clone(&self) -> Self {
        match self {
            Stored::Device(tensor) => Stored::Device(tensor.clone()),
            Stored::Host(copy) => Stored::Host(copy.clone()),
        }
    }
}

impl<B: Backend> fmt::Debug for Stored<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stored::Device(_) => f.write_str("Stored::Device"),
            Stored::Host(copy) => write!(f, "Stored::Host({} bytes)", copy.data.bytes().len()),
        }
    }
}
