//! Buffers of a replica's own: no two threads share a device buffer that one of them may write
//! in place.
//!
//! On a cubecl runtime (CUDA, wgpu) Burn writes an operation's result into its input when no other
//! tensor holds that buffer, and cubecl 0.10 orders the work of its per-thread streams by the
//! stream that *allocated* a buffer only. Two workers that start from clones of one model share
//! every parameter's buffer: when the first has replaced its parameter (the optimizer's step) and
//! dropped the old one, the second finds it unshared and updates it in place, on its own stream,
//! while the first worker's read of it may still be queued on the first's. The result is a run that
//! differs from the next one by whole updates (docs/data-parallel.md). So each worker starts from a
//! copy of the model and of the optimizer's state in buffers of its own.

use burn::module::{Module, ModuleMapper, Param};
use burn::optim::Optimizer;
use burn::record::{DoublePrecisionSettings, Record};
use burn::tensor::Tensor;
use burn::tensor::backend::{AutodiffBackend, Backend};

/// `module` with every float tensor copied into a new buffer on `device`, values, data types,
/// parameter ids and which are trainable unchanged.
///
/// The copy goes through the host (`to_data`, `from_data`): Burn 0.21 has no device-side copy
/// that is certain to allocate. It runs once per worker, when the workers start.
pub(crate) fn module<B: Backend, M: Module<B>>(module: M, device: &B::Device) -> M {
    struct Copy<'a, B: Backend> {
        device: &'a B::Device,
    }
    impl<B: Backend> ModuleMapper<B> for Copy<'_, B> {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
            let (id, tensor, mapper) = param.consume();
            let (dtype, tracked) = (tensor.dtype(), tensor.is_require_grad());
            // The flag first: `from_mapped_value` reads whether the parameter is trainable from it.
            let copy = Tensor::from_data(tensor.into_data(), (self.device, dtype))
                .set_require_grad(tracked);
            Param::from_mapped_value(id, copy, mapper)
        }
    }
    module.map(&mut Copy { device })
}

/// `optimizer` with its state (momenta, moments) copied into new buffers on `device`, through
/// its record at double precision (exact for every float type Burn stores).
pub(crate) fn optimizer<B, M, O>(optimizer: O, device: &B::Device) -> O
where
    B: AutodiffBackend,
    M: burn::module::AutodiffModule<B>,
    O: Optimizer<M, B>,
{
    let item = optimizer.to_record().into_item::<DoublePrecisionSettings>();
    optimizer.load_record(O::Record::from_item(item, device))
}
