//! The ways to train a DenseNet-BC, named once for the trainer, the benchmark and the tests.

use app_kit::tape::Tape;
use burn_checkpoint::planner::Treatment;

use crate::model::{Cut, DenseNetConfig, RegionPolicy};

app_kit::method_names! {
    /// What a training step keeps between forward and backward: the trainer's `--checkpoint`, the
    /// benchmark's `--methods` and the tests' cases, by the same names.
    ///
    /// ```
    /// use app_kit::tape::Tape;
    /// use densenet_bc::{Cut, DenseNetConfig, Method, RegionPolicy};
    ///
    /// let method = Method::LayerSave;
    /// assert_eq!(method.name(), "layer-save");
    /// assert_eq!(method.tape(), Tape::RegionsOverBalanced);
    /// let config = method.configure(DenseNetConfig::new(40));
    /// assert_eq!((config.cut, config.policy), (Cut::Layer, RegionPolicy::SaveComputeBound));
    /// ```
    pub enum Method {
        /// Plain `Autodiff<I>`: every activation backward needs is held.
        Plain,
        /// Burn's `Autodiff<I, BalancedCheckpointing>`: cheap (memory-bound) ops are recomputed.
        Balanced,
        /// Regions at the reference's cut ([`Cut::Bottleneck`]), on top of Balanced.
        Bottleneck,
        /// A region per dense layer ([`Cut::Layer`]), on top of Balanced: least memory.
        Layer,
        /// As `Layer`, the regions keeping convolution and pooling outputs
        /// ([`RegionPolicy::SaveComputeBound`]).
        LayerSave,
        /// As `Bottleneck`, the regions keeping reductions' outputs
        /// ([`RegionPolicy::SaveReductions`]).
        BottleneckReduce,
        /// As `Layer`, the regions keeping reductions' outputs.
        LayerReduce,
        /// As `Layer`, what the regions store waiting in host memory ([`DenseNetConfig::offload`]).
        LayerOffload,
        /// A region per dense block ([`Cut::Block`]).
        Block,
    }
}

impl Method {
    /// The method as tables name it.
    pub fn label(self) -> &'static str {
        match self {
            Method::Plain => "plain Autodiff",
            Method::Balanced => "Burn BalancedCheckpointing",
            Method::Bottleneck => "regions: bottleneck (the reference's cut)",
            Method::Layer => "regions: layer",
            Method::LayerSave => "regions: layer, SaveComputeBound",
            Method::BottleneckReduce => "regions: bottleneck, SaveReductions",
            Method::LayerReduce => "regions: layer, SaveReductions",
            Method::LayerOffload => "regions: layer, offloaded",
            Method::Block => "regions: block",
        }
    }

    /// The autodiff backend the method trains on: regions over Balanced, as the trainer runs them.
    pub fn tape(self) -> Tape {
        match self {
            Method::Plain => Tape::Plain,
            Method::Balanced => Tape::Balanced,
            _ => Tape::RegionsOverBalanced,
        }
    }

    /// The treatments the budget planner profiles this method's regions under: every one a
    /// region can be given whatever its code ([`Treatment::ALL`]), and the regions as written
    /// where their policy is none of those (`SaveReductions`), so that a plan can keep it.
    ///
    /// ```
    /// use burn_checkpoint::planner::Treatment;
    /// use densenet_bc::Method;
    ///
    /// assert_eq!(Method::Layer.treatments(), Treatment::ALL);
    /// assert!(Method::LayerReduce.treatments().contains(&Treatment::AsWritten));
    /// ```
    pub fn treatments(self) -> Vec<Treatment> {
        let mut treatments = Treatment::ALL.to_vec();
        if self.regions().1 == RegionPolicy::SaveReductions {
            treatments.push(Treatment::AsWritten);
        }
        treatments
    }

    /// Where this method's regions go and what they keep.
    fn regions(self) -> (Cut, RegionPolicy) {
        match self {
            Method::Plain | Method::Balanced => (Cut::None, RegionPolicy::RecomputeAll),
            Method::Bottleneck => (Cut::Bottleneck, RegionPolicy::RecomputeAll),
            Method::Layer | Method::LayerOffload => (Cut::Layer, RegionPolicy::RecomputeAll),
            Method::LayerSave => (Cut::Layer, RegionPolicy::SaveComputeBound),
            Method::BottleneckReduce => (Cut::Bottleneck, RegionPolicy::SaveReductions),
            Method::LayerReduce => (Cut::Layer, RegionPolicy::SaveReductions),
            Method::Block => (Cut::Block, RegionPolicy::RecomputeAll),
        }
    }

    /// `config` with this method's regions: its cut, policy and offload.
    pub fn configure(self, config: DenseNetConfig) -> DenseNetConfig {
        let (cut, policy) = self.regions();
        config
            .with_cut(cut)
            .with_policy(policy)
            .with_offload(self == Method::LayerOffload)
    }
}

#[cfg(test)]
mod tests {
    use clap::ValueEnum;

    use super::*;

    #[test]
    fn names_are_the_command_lines() {
        for method in Method::ALL {
            assert_eq!(Method::from_str(method.name(), false), Ok(method));
            let json = serde_json::to_string(&method).unwrap();
            assert_eq!(json, format!("\"{}\"", method.name()));
        }
        assert_eq!(Method::value_variants(), Method::ALL);
        // The trainer's names before the one vocabulary still parse.
        assert_eq!(Method::from_str("none", false), Ok(Method::Plain));
        assert_eq!(Method::from_str("regions", false), Ok(Method::Layer));
        assert_eq!(
            Method::from_str("regions-save-compute", false),
            Ok(Method::LayerSave)
        );
        // The Burn 0.22 trainer's words for the same cuts.
        assert_eq!(
            Method::from_str("regions-save", false),
            Ok(Method::LayerSave)
        );
        let json: Method = serde_json::from_str("\"regions-save\"").unwrap();
        assert_eq!(json, Method::LayerSave);
    }
}
