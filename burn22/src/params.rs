//! A region's module as its two runs see it: the forward runs on stand-ins of its parameters
//! (untracked, lazily initialised ones initialised at their first use, as without a region), and
//! tells which trainable parameters the body used; the recompute runs on the module with those
//! parameters replaced by its leaves. Also what a module says about a region before it runs: does
//! it hold a parameter with autodiff, does it hold a layer that draws random numbers; and whether
//! a tensor is one Burn's data parallelism all-reduces.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use burn::backend::{DispatchTensor, DispatchTensorKind};
use burn::module::{Flag, Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::tensor::{Device, Tensor};

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

    /// The trainable parameters the body used, in visit order: their ids and values, which are
    /// the region's parameters (the parents of its node besides its inputs).
    pub(crate) fn trainable(self) -> (Vec<ParamId>, Vec<DispatchTensor>) {
        self.0
            .into_iter()
            .filter(|entry| (entry.used)())
            .map(|entry| (entry.id, (entry.value)()))
            .filter(|(_, value)| Tensor::<1>::from_dispatch(value.clone()).is_require_grad())
            .unzip()
    }
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
    /// The ids and the leaves, in order of first use.
    pub(crate) fn taken(self) -> (Vec<ParamId>, Vec<DispatchTensor>) {
        let mut leaves = self.0.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut *leaves).into_iter().unzip()
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

/// A leaf of `t`'s value, wanting a gradient.
pub(crate) fn leaf(t: DispatchTensor) -> DispatchTensor {
    Tensor::<1>::from_dispatch(t).require_grad().into_dispatch()
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

/// Whether `tensor` is marked for Burn's data parallelism: `ExecutionStrategy::ddp` marks every
/// parameter of a worker's model (`Tensor::set_distributed`) and all-reduces its gradient at its
/// last use in backward.
pub(crate) fn is_distributed(tensor: &DispatchTensor) -> bool {
    // Burn's `is_distributed` panics on a tensor without autodiff.
    matches!(tensor.kind, DispatchTensorKind::Autodiff(_))
        && Tensor::<1>::from_dispatch(tensor.clone()).is_distributed()
}

/// Whether `module` holds a float parameter on a device with autodiff (initialised or not): its
/// region may have gradients to give even when its inputs have none.
pub(crate) fn on_autodiff(module: &impl Module) -> bool {
    struct OnAutodiff(bool);

    impl ModuleVisitor for OnAutodiff {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.0 |= param.lazy_device().is_autodiff();
        }
    }

    let mut visitor = OnAutodiff(false);
    module.visit(&mut visitor);
    visitor.0
}

/// Whether `module` holds a layer that draws random numbers in training: an enabled training
/// flag (`Param<Flag>`) of any module but batch norm's, which is deterministic, and but a dropout
/// of probability 0 or a Gaussian noise of deviation 0, which draw nothing (burn-nn 0.22.1's
/// `Dropout` and `GaussianNoise` return their input then). Burn's dropout, Gaussian noise and
/// randomized ReLU carry such a flag; a module of the user's that carries one counts too (a
/// region seeds itself without need rather than recompute other masks).
pub(crate) fn stochastic(module: &impl Module) -> bool {
    struct Flags {
        /// The container types entered, innermost last (`Struct:Dropout` for a dropout's flag).
        containers: Vec<String>,
        /// An enabled flag of a layer that always draws.
        drawing: bool,
        /// The dropouts and Gaussian noises met, in order: which, and whether enabled.
        rated: Vec<(&'static str, bool)>,
    }

    impl ModuleVisitor for Flags {
        fn enter_module(&mut self, _name: &str, container_type: &str) {
            self.containers.push(container_type.to_string());
        }

        fn exit_module(&mut self, _name: &str, _container_type: &str) {
            self.containers.pop();
        }

        fn visit_flag(&mut self, flag: &Param<Flag>) {
            let container = self.containers.last().map(String::as_str);
            match RATED
                .iter()
                .find(|layer| Some(layer.container) == container)
            {
                Some(layer) => self.rated.push((layer.name, flag.is_enabled())),
                None if container == Some("Struct:BatchNorm") => {}
                None => self.drawing |= flag.is_enabled(),
            }
        }
    }

    let mut flags = Flags {
        containers: Vec::new(),
        drawing: false,
        rated: Vec::new(),
    };
    module.visit(&mut flags);
    if flags.drawing {
        return true;
    }
    if !flags.rated.iter().any(|&(_, enabled)| enabled) {
        return false;
    }
    // Burn's visitors see no constants: a module's `Debug` (derived, field by field in visit
    // order, a parameter shown by its id) is the one public view of a dropout's probability.
    // Every dropout and noise the visitor met must be found there, in the same order, or the rule
    // cannot tell and the region is seeded.
    let rates = rates(&format!("{module:?}"));
    rates.len() != flags.rated.len()
        || rates
            .iter()
            .zip(&flags.rated)
            .any(|(&(name, rate), &(met, enabled))| name != met || (enabled && rate != 0.0))
}

/// A burn-nn layer whose draws depend on a rate: at a rate of 0 it returns its input.
struct RatedLayer {
    /// Its type's name, as `Debug` writes it.
    name: &'static str,
    /// Its container type, as Burn's visitors see it.
    container: &'static str,
    /// Its rate's field, the first `Debug` writes.
    rate: &'static str,
}

const RATED: [RatedLayer; 2] = [
    RatedLayer {
        name: "Dropout",
        container: "Struct:Dropout",
        rate: "prob",
    },
    RatedLayer {
        name: "GaussianNoise",
        container: "Struct:GaussianNoise",
        rate: "std",
    },
];

/// Every dropout and Gaussian noise in a module's `Debug`, in order, with its rate (NaN where it
/// does not parse: read as drawing).
fn rates(debug: &str) -> Vec<(&'static str, f64)> {
    let mut found: Vec<(usize, &'static str, f64)> = Vec::new();
    for layer in &RATED {
        let opening = format!("{} {{ {}: ", layer.name, layer.rate);
        for (at, _) in debug.match_indices(&opening) {
            // The type's name, not the end of another's (`MyDropout {`).
            let after_a_name = debug[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_');
            if after_a_name {
                continue;
            }
            let value = &debug[at + opening.len()..];
            let rate = value[..value.find([',', ' ', '}']).unwrap_or(value.len())]
                .parse::<f64>()
                .unwrap_or(f64::NAN);
            found.push((at, layer.name, rate));
        }
    }
    found.sort_by_key(|&(at, _, _)| at);
    found
        .into_iter()
        .map(|(_, name, rate)| (name, rate))
        .collect()
}

/// A device's tensor `t` without autodiff tracking (same device, same checkpointing strategy):
/// what the forward gives the body.
pub(crate) fn untracked(t: DispatchTensor) -> DispatchTensor {
    Tensor::<1>::from_dispatch(t)
        .set_require_grad(false)
        .into_dispatch()
}

/// The device a dispatch tensor lives on.
pub(crate) fn device_of(t: &DispatchTensor) -> Device {
    Tensor::<1>::from_dispatch(t.clone()).device()
}
