//! A [`SaveComputeBound`](crate::Policy::SaveComputeBound) region's run: its body as Burn's own
//! ops, with its inputs and its module's tensors tagged with Burn's Balanced checkpointing
//! strategy while it runs, and its outputs tagged back. Burn's checkpointing strategy is a tag
//! each autodiff tensor carries (re-tagging keeps the tensor's graph node), and one backward
//! handles a graph that is Balanced only in parts: the region keeps what Balanced keeps, inside
//! the region only.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use burn::backend::{DispatchAutodiffContext, DispatchTensor, GradientCheckpointingStrategy};
use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::tensor::Tensor;
use burn_checkpoint_core::RegionName;
use burn_checkpoint_core::memory::panic_message;

use crate::params;

use GradientCheckpointingStrategy::Balanced;

/// The strategy the region's caller runs with: its tensors', or, when none has autodiff, its
/// module's (`None`: nothing has autodiff).
pub(crate) fn caller_strategy(
    tensors: &[DispatchTensor],
    module: &impl Module,
) -> Option<GradientCheckpointingStrategy> {
    strategy_of(tensors).or_else(|| module_strategy(module))
}

/// The strategy of the first of `tensors` with autodiff.
pub(crate) fn strategy_of(tensors: &[DispatchTensor]) -> Option<GradientCheckpointingStrategy> {
    tensors.iter().find_map(|t| match t.autodiff {
        DispatchAutodiffContext::Enabled(strategy) => Some(strategy),
        DispatchAutodiffContext::Disabled => None,
    })
}

/// `module` with every float tensor with autodiff tagged `strategy` (with `None`, as it is).
/// Running statistics are written back into their state: for a module whose running statistics
/// are its own (a recompute's copy).
pub(crate) fn all_tagged<M: Module>(
    module: M,
    strategy: Option<GradientCheckpointingStrategy>,
) -> M {
    match strategy {
        Some(strategy) => module.map(&mut Tag(strategy)),
        None => module,
    }
}

fn module_strategy(module: &impl Module) -> Option<GradientCheckpointingStrategy> {
    struct First(Option<GradientCheckpointingStrategy>);

    impl ModuleVisitor for First {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if self.0.is_none() {
                self.0 = param.lazy_device().gradient_checkpointing_strategy();
            }
        }
    }

    let mut first = First(None);
    module.visit(&mut first);
    first.0
}

/// `tensor` carrying `strategy` if it has autodiff (as it is otherwise).
pub(crate) fn tagged(
    mut tensor: DispatchTensor,
    strategy: GradientCheckpointingStrategy,
) -> DispatchTensor {
    if let DispatchAutodiffContext::Enabled(_) = tensor.autodiff {
        tensor.autodiff = DispatchAutodiffContext::Enabled(strategy);
    }
    tensor
}

/// `module`'s float tensors tagged Balanced, for the body to run on. Its running statistics
/// (shared state, which Burn maps in place) have their pending updates applied first; when the
/// returned guard drops, panics included, the body's updates are applied and the statistics
/// tagged back to `caller`. A parameter Burn has not initialised yet stays lazy: its first use by
/// the body initialises it, drawing where the same code without the region would.
pub(crate) fn balanced<M: Module>(
    module: &M,
    caller: GradientCheckpointingStrategy,
) -> (M, Restore<M>) {
    params::apply_running_updates(module);
    let tagged = module.clone().map(&mut Tag(Balanced));
    let restore = Restore {
        module: module.clone(),
        caller,
    };
    (tagged, restore)
}

/// Tags a module's running statistics back to the caller's strategy when it drops.
pub(crate) struct Restore<M: Module> {
    module: M,
    caller: GradientCheckpointingStrategy,
}

impl<M: Module> Drop for Restore<M> {
    fn drop(&mut self) {
        // The body's updates are pending under Balanced: applied now, then tagged back. Mapping
        // writes running statistics back into their shared state; the parameters mapped here
        // are copies, dropped with the module.
        params::apply_running_updates(&self.module);
        drop(self.module.clone().map(&mut Tag(self.caller)));
    }
}

/// Tags every float tensor of a module with autodiff: initialised ones now, lazy ones when they
/// are initialised.
struct Tag(GradientCheckpointingStrategy);

impl ModuleMapper for Tag {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let strategy = self.0;
        let tag = move |t: Tensor<D>| {
            if t.is_autodiff() {
                t.with_gradient_checkpointing_strategy(strategy)
            } else {
                t
            }
        };
        if param.is_initialized() {
            return param.map(tag);
        }
        let (id, device, shape) = (param.id, param.lazy_device(), param.lazy_shape());
        Param::uninitialized(id, move |_, _| tag(param.val()), device, true, shape)
    }
}

/// Burn's message when one op takes tensors of two strategies.
const MISMATCH: &str = "Gradient checkpointing strategy mismatch";

/// Runs `body`; Burn's strategy-mismatch panic inside it becomes one that says what happened and
/// what to do (other panics go on as they were).
pub(crate) fn explaining_mismatch<R>(name: &RegionName, body: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(result) => result,
        Err(payload) => {
            let message = panic_message(&*payload);
            if !message.contains(MISMATCH) {
                resume_unwind(payload);
            }
            panic!(
                "checkpoint region {name} (Policy::SaveComputeBound) runs its body with its \
                 inputs and its module's tensors under Burn's Balanced checkpointing, and the \
                 body used an autodiff tensor that is neither (a tensor the closure captures, a \
                 mask made from a stored device, a module's tensor shared with another thread that \
                 another region tagged back), which carries the caller's strategy: pass it as an \
                 input or hold it in the region's module, or use Policy::RecomputeAll. Burn said: \
                 {message}"
            );
        }
    }
}
