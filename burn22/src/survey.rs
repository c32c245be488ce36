//! What a module says about its region before the region runs, read in one visit ([`Survey`]):
//! does it hold a parameter with autodiff, does it hold a layer that draws random numbers in
//! training. A leaf.

use burn::module::{Flag, Module, ModuleVisitor, Param};
use burn::tensor::Tensor;

/// A module as one visit sees it, before its region runs.
pub(crate) struct Survey {
    /// Whether it holds a float parameter on a device with autodiff (initialised or not): its
    /// region may have gradients to give even when its inputs have none.
    pub(crate) on_autodiff: bool,
    /// An enabled training flag of a layer that always draws.
    drawing: bool,
    /// The dropouts and Gaussian noises met, in visit order: which, and whether enabled.
    rated: Vec<(&'static str, bool)>,
}

impl Survey {
    /// `module`, visited once.
    pub(crate) fn of(module: &impl Module) -> Self {
        let mut visitor = Visitor {
            containers: Vec::new(),
            survey: Survey {
                on_autodiff: false,
                drawing: false,
                rated: Vec::new(),
            },
        };
        module.visit(&mut visitor);
        visitor.survey
    }

    /// Whether `module` (the one surveyed) holds a layer that draws random numbers in training:
    /// an enabled training flag (`Param<Flag>`) of any module but batch norm's, which is
    /// deterministic, and but a dropout of probability 0 or a Gaussian noise of deviation 0,
    /// which draw nothing (burn-nn 0.22.1's `Dropout` and `GaussianNoise` return their input
    /// then). Burn's dropout, Gaussian noise and randomized ReLU carry such a flag; a module of
    /// the user's that carries one counts too (a region seeds itself without need rather than
    /// recompute other masks).
    pub(crate) fn stochastic(&self, module: &impl Module) -> bool {
        if self.drawing {
            return true;
        }
        if !self.rated.iter().any(|&(_, enabled)| enabled) {
            return false;
        }
        // Burn's visitors see no constants: a module's `Debug` (derived, field by field in visit
        // order, a parameter shown by its id) is the one public view of a dropout's probability.
        // Every dropout and noise the visitor met must be found there, in the same order, or the
        // rule cannot tell and the region is seeded.
        let rates = rates(&format!("{module:?}"));
        rates.len() != self.rated.len()
            || rates
                .iter()
                .zip(&self.rated)
                .any(|(&(name, rate), &(met, enabled))| name != met || (enabled && rate != 0.0))
    }
}

struct Visitor {
    /// The container types entered, innermost last (`Struct:Dropout` for a dropout's flag).
    containers: Vec<String>,
    survey: Survey,
}

impl ModuleVisitor for Visitor {
    fn enter_module(&mut self, _name: &str, container_type: &str) {
        self.containers.push(container_type.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.containers.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        self.survey.on_autodiff |= param.lazy_device().is_autodiff();
    }

    fn visit_flag(&mut self, flag: &Param<Flag>) {
        let container = self.containers.last().map(String::as_str);
        match RATED
            .iter()
            .find(|layer| Some(layer.container) == container)
        {
            Some(layer) => self.survey.rated.push((layer.name, flag.is_enabled())),
            None if container == Some("Struct:BatchNorm") => {}
            None => self.survey.drawing |= flag.is_enabled(),
        }
    }
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
