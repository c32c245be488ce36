//! What backward runs again of a region's code ([`Recompute`]): a region's body, or a scan's
//! step `t`, on the module with the parameters the forward used replaced by the given leaves, the
//! step's seed applied and the seeds its nested regions drew replayed. Built by one function for
//! every way into a region, and run both by backward and by the first instance's check (in
//! forward), so that the check sees exactly what backward will differentiate.

use std::fmt;
use std::sync::Arc;

use burn::backend::DispatchTensor;
use burn::module::{Module, ParamId};
use burn::tensor::Device;
use burn_checkpoint_core::RegionName;

use crate::check;
use crate::params;
use crate::retag;
use crate::seed::Seed;
use crate::state::{self, KeptRun};
use crate::tensors;

/// The code a [`Recompute`] runs: step `t` on the module as its recompute sees it and the step's
/// tensors (the parameters' leaves split off).
type Code = dyn Fn(usize, Vec<DispatchTensor>) -> Vec<DispatchTensor> + Send + Sync;

/// A region's code as backward runs it again, on dispatch tensors: step `t` (a region has one
/// step, 0) takes its inputs (a scan's step: its carry, then its input), then the leaves of the
/// parameters its forward used, and gives its outputs (a scan's step: its output, then its
/// carry). Type-erased so that one graph node type serves every region.
#[derive(Clone)]
pub(crate) struct Recompute {
    code: Arc<Code>,
    /// Each step's seed.
    seeds: Arc<[Seed]>,
    device: Device,
}

impl fmt::Debug for Recompute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Recompute({} steps)", self.seeds.len())
    }
}

/// What each step of a region's forward drew, for its recompute to replay: its seed, and the
/// seeds of the regions nested in it, in order; and (a region's one step) the runs of the regions
/// its policy kept by name.
pub(crate) struct Drawn {
    pub(crate) seeds: Vec<Seed>,
    pub(crate) nested_seeds: Vec<Vec<u64>>,
    pub(crate) kept: Vec<KeptRun>,
}

impl Recompute {
    /// `code(module, tensors, t)` as backward runs step `t` again: `module` with its parameters
    /// `param_ids` replaced by the last `param_ids.len()` tensors given (other trainable ones
    /// untracked, its running statistics a copy, every tensor tagged with the caller's
    /// checkpointing strategy), under a recompute frame replaying what `drawn` says, the step's
    /// seed applied to `device` first.
    pub(crate) fn new<M, F>(
        module: &M,
        param_ids: Vec<ParamId>,
        drawn: Drawn,
        device: Device,
        code: F,
    ) -> Self
    where
        M: Module + Sync + 'static,
        F: Fn(&M, Vec<DispatchTensor>, usize) -> Vec<DispatchTensor> + Send + Sync + 'static,
    {
        let template = module.clone();
        let Drawn {
            seeds,
            nested_seeds,
            kept,
        } = drawn;
        let seeds: Arc<[Seed]> = seeds.into();
        let (step_seeds, step_device) = (seeds.clone(), device.clone());
        let code = move |t: usize, mut tensors: Vec<DispatchTensor>| {
            let strategy = retag::strategy_of(&tensors);
            let leaves = tensors.split_off(tensors.len() - param_ids.len());
            // Its caller's frozen parameters and running statistics carry the caller's strategy:
            // a region nested in a `SaveComputeBound` one recomputes under Balanced.
            let module = retag::all_tagged(
                params::for_recompute(template.clone(), &param_ids, leaves),
                strategy,
            );
            state::recomputing(&nested_seeds[t], &kept, || {
                step_seeds[t].apply(&step_device);
                code(&module, tensors, t)
            })
        };
        Recompute {
            code: Arc::new(code),
            seeds,
            device,
        }
    }

    /// Step `t` run again in backward. The generator is left where backward leaves it for a
    /// kept region too (not where the forward left it, which is unknowable): the stream after
    /// backward does not depend on the plan.
    pub(crate) fn in_backward(
        &self,
        t: usize,
        tensors: Vec<DispatchTensor>,
    ) -> Vec<DispatchTensor> {
        let outputs = (self.code)(t, tensors);
        self.seeds[t].apply_after_recompute(&self.device);
        outputs
    }

    /// The first instance's check: step `t` run again in forward, on untracked copies of
    /// `tensors` (the step's inputs, then the values of the parameters it used), as backward will
    /// run it, compared with `outputs`, what the forward's run of the step gave (see
    /// [`check::same_values`]). The generator is left where the forward's run left it.
    pub(crate) fn check<'t>(
        &self,
        name: &RegionName,
        t: usize,
        tensors: impl IntoIterator<Item = &'t DispatchTensor>,
        outputs: &[DispatchTensor],
    ) {
        let untracked = tensors.into_iter().cloned().map(tensors::untracked);
        let again = (self.code)(t, untracked.collect());
        check::same_values(name, outputs, &again);
    }
}
