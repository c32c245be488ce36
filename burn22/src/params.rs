//! A module's trainable parameters out of it and back in: the region node's parents, and the
//! module the body runs with.

use burn::backend::DispatchTensor;
use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::tensor::Tensor;

/// The module's trainable parameters (those that require a gradient) in visit order. Running
/// statistics and frozen parameters are not among them: they stay in the module.
pub(crate) fn trainable(module: &impl Module) -> Vec<DispatchTensor> {
    let mut collect = Collect(Vec::new());
    module.visit(&mut collect);
    collect.0
}

/// `module` with its trainable parameters replaced by `tensors`, in visit order (their ids
/// kept, so that Burn's optimizers still find them).
pub(crate) fn with_trainable<M: Module>(module: M, tensors: Vec<DispatchTensor>) -> M {
    let mut replace = Replace(tensors.into_iter());
    let module = module.map(&mut replace);
    assert!(
        replace.0.next().is_none(),
        "a module gave more trainable parameters than it took back"
    );
    module
}

struct Collect(Vec<DispatchTensor>);

impl ModuleVisitor for Collect {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let value = param.val();
        if value.is_require_grad() {
            self.0.push(value.into_dispatch());
        }
    }
}

struct Replace(std::vec::IntoIter<DispatchTensor>);

impl ModuleMapper for Replace {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        if !param.val().is_require_grad() {
            // Running statistics come here too (Burn maps them as parameters and writes the
            // result back into their shared state): returned as they are, nothing changes.
            return param;
        }
        let next = self
            .0
            .next()
            .expect("a module took back more trainable parameters than it gave");
        param.map(|_| Tensor::from_dispatch(next))
    }
}
