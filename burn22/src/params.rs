//! A region's module as its two runs see it: the forward runs on stand-ins of its parameters
//! (untracked, lazily initialised ones initialised at their first use, as without a region), and
//! tells which trainable parameters the body used ([`Trainable`]); the recompute runs on the
//! module with those parameters replaced by its leaves; a region kept by name runs on leaves of
//! the node's stand-ins. Also its running statistics' pending updates applied, and its lazy
//! parameters drawn. A leaf.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use burn::backend::DispatchTensor;
use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::tensor::Tensor;

/// What the forward's stand-ins learnt: for each float parameter stood in for, in visit order,
/// whether the body used it and its value.
pub(crate) struct Used(Vec<Entry>);

struct Entry {
    id: ParamId,
    /// Whether the body used the parameter (its stand-in was initialised).
    used: Box<dyn Fn() -> bool>,
    /// The parameter's value (initialised by then if the body used it), as a dispatch tensor.
    value: Box<dyn Fn() -> DispatchTensor>,
}

/// `module` as the region's forward runs it: each float parameter that may need a gradient is
/// replaced by a lazy stand-in (same id, no gradient) whose first use by the body takes the
/// parameter's value without autodiff tracking; a parameter Burn has not initialised yet is
/// initialised then, drawing from the device's generator exactly where the body without a region
/// would. Parameters already known to need no gradient (frozen ones, running statistics) stay as
/// they are.
pub(crate) fn for_forward<M: Module>(module: &M) -> (M, Used) {
    let mut stand_in = StandIn(Vec::new());
    let mapped = module.clone().map(&mut stand_in);
    (mapped, Used(stand_in.0))
}

impl Used {
    /// Every parameter stood in for, used or not.
    pub(crate) fn ids(&self) -> HashSet<ParamId> {
        self.0.iter().map(|entry| entry.id).collect()
    }

    /// The trainable parameters the body used so far, in visit order: the region's parameters
    /// (the parents of its node besides its inputs).
    pub(crate) fn trainable(&self) -> Trainable {
        let (ids, values) = self
            .0
            .iter()
            .filter(|entry| (entry.used)())
            .map(|entry| (entry.id, (entry.value)()))
            .filter(|(_, value)| Tensor::<1>::from_dispatch(value.clone()).is_require_grad())
            .unzip();
        Trainable { ids, values }
    }
}

/// A region's parameters: which ones, and their values (tracked), in the same order.
pub(crate) struct Trainable {
    pub(crate) ids: Vec<ParamId>,
    pub(crate) values: Vec<DispatchTensor>,
}

struct StandIn(Vec<Entry>);

impl ModuleMapper for StandIn {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        // An initialised parameter says whether it needs a gradient; a lazy one cannot without
        // drawing its value now, out of the body's order: it gets a stand-in either way.
        if param.is_initialized() && !param.val().is_require_grad() {
            return param;
        }
        let (id, device, shape) = (param.id, param.lazy_device(), param.lazy_shape());
        let original = param.clone();
        let stand_in = Param::uninitialized(
            id,
            move |_, _| original.val().set_require_grad(false),
            device,
            false,
            shape,
        );
        let probe = stand_in.clone();
        self.0.push(Entry {
            id,
            used: Box::new(move || probe.is_initialized()),
            value: Box::new(move || param.val().into_dispatch()),
        });
        stand_in
    }
}

/// `template` as the region's recompute runs it: the trainable parameters the forward used
/// (`ids`) replaced by `leaves`, in order; other trainable parameters untracked (the body did not
/// use them); running statistics of its own (`Module::train` copies them: the recompute's updates
/// are dropped). Parameters the forward left uninitialised stay undrawn: zeros stand in for them
/// (a body that uses one now runs another path than its forward, which the recompute check
/// reports on a region name's first instance).
pub(crate) fn for_recompute<M: Module>(
    template: M,
    ids: &[ParamId],
    leaves: Vec<DispatchTensor>,
) -> M {
    let module = template.map(&mut Undrawn).train();
    let mut replace = Replace(ids.iter().copied().zip(leaves).collect());
    let module = module.map(&mut replace);
    assert!(
        replace.0.is_empty(),
        "a checkpoint region's recompute lost {} of its module's parameters",
        replace.0.len()
    );
    module
}

/// Zeros for the parameters still uninitialised, so that `Module::train` (which reads every
/// parameter) draws nothing from the generator.
struct Undrawn;

impl ModuleMapper for Undrawn {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        if param.is_initialized() {
            return param;
        }
        let zeros = Tensor::zeros(param.lazy_shape(), &param.lazy_device());
        Param::initialized(param.id, zeros)
    }
}

struct Replace(HashMap<ParamId, DispatchTensor>);

impl ModuleMapper for Replace {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        if let Some(leaf) = self.0.remove(&param.id) {
            return param.map(|_| Tensor::from_dispatch(leaf));
        }
        if param.val().is_require_grad() {
            // Trainable, unused by the forward: a recompute must not reach the real parameter
            // (its graph is the one being differentiated).
            return param.map(|value| value.set_require_grad(false));
        }
        // Frozen parameters and running statistics (which Burn maps as parameters and writes
        // back into their shared state): returned as they are, nothing changes.
        param
    }
}

/// `module` as a region kept by name runs it inside a node's forward: each of the node's
/// stand-ins (`ids`) replaced by one whose first use makes a leaf of the stand-in's value (the
/// node's stand-in then counts as used, and a lazy parameter is drawn there, as without
/// regions). The leaves, in the order of first use, are in the returned list once the body ran.
pub(crate) fn with_leaves<M: Module>(module: &M, ids: &HashSet<ParamId>) -> (M, Leaves) {
    let leaves = Leaves::default();
    let mapped = module.clone().map(&mut LeafMapper {
        ids,
        leaves: leaves.clone(),
    });
    (mapped, leaves)
}

/// The leaves a kept region's run made of its parameters: their ids and values, in order.
#[derive(Clone, Default)]
pub(crate) struct Leaves(Arc<Mutex<Vec<(ParamId, DispatchTensor)>>>);

impl Leaves {
    /// The parameters and their leaves, in order of first use.
    pub(crate) fn taken(self) -> Trainable {
        let mut leaves = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (ids, values) = std::mem::take(&mut *leaves).into_iter().unzip();
        Trainable { ids, values }
    }
}

struct LeafMapper<'a> {
    ids: &'a HashSet<ParamId>,
    leaves: Leaves,
}

impl ModuleMapper for LeafMapper<'_> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        if !self.ids.contains(&param.id) {
            return param;
        }
        let (id, device, shape) = (param.id, param.lazy_device(), param.lazy_shape());
        let leaves = self.leaves.clone();
        Param::uninitialized(
            id,
            move |_, _| {
                let leaf = param.val().require_grad();
                leaves
                    .0
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((id, leaf.clone().into_dispatch()));
                leaf
            },
            device,
            true,
            shape,
        )
    }
}

/// The values of `module`'s parameters `ids`, in that order (a recompute's leaves, where the
/// node of a region kept by name is built).
pub(crate) fn values_of(module: &impl Module, ids: &[ParamId]) -> Vec<DispatchTensor> {
    struct Values(HashMap<ParamId, Option<DispatchTensor>>);

    impl ModuleVisitor for Values {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            if let Some(value) = self.0.get_mut(&param.id) {
                *value = Some(param.val().into_dispatch());
            }
        }
    }

    let mut values = Values(ids.iter().map(|&id| (id, None)).collect());
    module.visit(&mut values);
    ids.iter()
        .map(|id| {
            values.0.remove(id).flatten().expect(
                "a checkpoint region kept by name runs with a parameter its forward's run did not \
                 have: the body must depend on its inputs and module only",
            )
        })
        .collect()
}

/// Applies the pending updates of `module`'s running statistics now, drawing nothing. Burn keeps
/// a batch norm's update pending (per thread) until the layer's next use, or until a module is
/// synced: a pending update keeps the checkpointing strategy of the run that made it, which a run
/// under another strategy must not meet. What a later use or sync reads is the same.
pub(crate) fn apply_running_updates(module: &impl Module) {
    // `valid` syncs every running state (shared with `module`); its parameters, copies, would
    // read lazy ones: zeros stand in for those first.
    drop(module.clone().map(&mut Undrawn).valid());
}

/// Initialises `module`'s lazy parameters now, in visit order (Burn draws each from the device's
/// generator at its first use otherwise).
pub(crate) fn initialise(module: &impl Module) {
    struct Touch;

    impl ModuleVisitor for Touch {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            let _ = param.val();
        }
    }

    module.visit(&mut Touch);
}
