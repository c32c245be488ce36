//! The DenseNet-BC network and its checkpoint cuts.

use burn::config::Config;
use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::pool::{AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig, AvgPool2d, AvgPool2dConfig};
use burn::nn::{
    BatchNorm, BatchNormConfig, Dropout, DropoutConfig, Linear, LinearConfig, PaddingConfig2d, Relu,
};
use burn::tensor::Tensor;
use burn::tensor::backend::Backend;
use burn_checkpoint::{Decision, OpKind, Policy, Region};

/// Where a DenseNet-BC puts its checkpoint regions.
#[derive(Config, Debug, Copy, PartialEq, Eq)]
pub enum Cut {
    /// No region: every activation is held as the backend holds it.
    None,
    /// The reference's cut: each layer's concatenation, first BatchNorm, ReLU and 1×1
    /// convolution form a region; the 4k-channel bottleneck output is stored.
    Bottleneck,
    /// Each whole dense layer is a region; only its k-channel output (kept anyway: it is a
    /// feature of every later layer) is stored.
    Layer,
    /// Each whole dense block is a region; only the block's concatenated output is stored.
    Block,
}

/// What a region keeps, for the config (a serialisable mirror of [`Policy`]'s presets).
#[derive(Config, Debug, Copy, PartialEq, Eq)]
pub enum RegionPolicy {
    /// [`Policy::RecomputeAll`].
    RecomputeAll,
    /// [`Policy::SaveComputeBound`]: convolution and pooling outputs are kept.
    SaveComputeBound,
    /// Reductions' outputs are kept (BatchNorm's per-channel means and variances: a few bytes
    /// per channel), so that recomputing a BatchNorm skips the two passes over its input that
    /// computed them.
    SaveReductions,
}

impl RegionPolicy {
    /// A region named `name` that runs with this policy.
    pub fn region(self, name: &'static str) -> Region {
        let region = Region::named(name);
        match self {
            RegionPolicy::RecomputeAll => region,
            RegionPolicy::SaveComputeBound => region.policy(Policy::SaveComputeBound),
            RegionPolicy::SaveReductions => region.policy(Policy::custom(|op| match op.kind() {
                OpKind::Reduce => Decision::Save,
                _ => Decision::Recompute,
            })),
        }
    }
}

/// The name of the regions of [`Cut::Layer`] (one instance per dense layer), as memory reports
/// and budget plans name them.
pub const LAYER_REGION: &str = "densenet::layer";
/// The name of the regions of [`Cut::Bottleneck`].
pub const BOTTLENECK_REGION: &str = "densenet::bottleneck";
/// The name of the regions of [`Cut::Block`].
pub const BLOCK_REGION: &str = "densenet::block";

/// Where a network's regions go and how they run: its config's `cut`, `policy` and `offload`,
/// handed down its forward.
#[derive(Clone, Copy)]
struct Regions {
    cut: Cut,
    policy: RegionPolicy,
    offload: bool,
}

impl Regions {
    /// Runs `f` as a region named `name`.
    fn run<R>(self, name: &'static str, f: impl FnOnce() -> R) -> R {
        let region = self.policy.region(name);
        let region = if self.offload {
            region.offloaded()
        } else {
            region
        };
        region.run(f)
    }
}

/// DenseNet-BC's hyper-parameters (defaults: the reference's DenseNet-BC on CIFAR-10).
#[derive(Config, Debug)]
pub struct DenseNetConfig {
    /// Total depth: 3 dense blocks of (depth − 4) / 6 bottleneck layers each (100 → 16/16/16).
    pub depth: usize,
    /// Channels each dense layer adds (k).
    #[config(default = 12)]
    pub growth_rate: usize,
    /// Layers per dense block; overrides `depth` when set.
    #[config(default = "None")]
    pub block_config: Option<Vec<usize>>,
    /// Channel compression of each transition (θ).
    #[config(default = 0.5)]
    pub compression: f64,
    /// Bottleneck width: the 1×1 convolution outputs `bottleneck_width × growth_rate` channels.
    #[config(default = 4)]
    pub bottleneck_width: usize,
    /// Dropout after each dense layer's 3×3 convolution.
    #[config(default = 0.0)]
    pub dropout: f64,
    /// Channels of the input images.
    #[config(default = 3)]
    pub input_channels: usize,
    /// Classes of the classifier.
    #[config(default = 10)]
    pub classes: usize,
    /// Where checkpoint regions go.
    #[config(default = "Cut::None")]
    pub cut: Cut,
    /// What the regions keep.
    #[config(default = "RegionPolicy::RecomputeAll")]
    pub policy: RegionPolicy,
    /// Whether what the regions store waits in host memory ([`Region::offloaded`]), whatever
    /// they keep.
    #[config(default = false)]
    pub offload: bool,
}

impl DenseNetConfig {
    /// Layers per dense block.
    ///
    /// # Panics
    ///
    /// If `depth` is not 4 more than a multiple of 6 and no `block_config` is set.
    pub fn blocks(&self) -> Vec<usize> {
        if let Some(blocks) = &self.block_config {
            return blocks.clone();
        }
        assert!(
            self.depth >= 10 && (self.depth - 4).is_multiple_of(6),
            "DenseNet-BC depth must be 6n + 4 (40, 100, 250, ...), not {}",
            self.depth
        );
        vec![(self.depth - 4) / 6; 3]
    }

    /// The elements of every tensor the network holds (parameters and BatchNorm statistics) for
    /// `input_channels` and `classes`, computed from the settings without building it; `∞` past
    /// 2^60, so that absurd settings are refused before anything is allocated.
    pub fn tensor_elements(&self) -> f64 {
        const LIMIT: f64 = (1u64 << 60) as f64;
        let (growth, width) = (
            self.growth_rate as f64,
            (self.bottleneck_width * self.growth_rate) as f64,
        );
        let batch_norm = |channels: f64| 4.0 * channels;
        let blocks = match &self.block_config {
            Some(blocks) => blocks.clone(),
            None if self.depth >= 10 => vec![(self.depth - 4) / 6; 3],
            None => return f64::INFINITY,
        };
        let mut channels = 2.0 * growth;
        let mut total = self.input_channels as f64 * channels * 9.0;
        for (i, &layers) in blocks.iter().enumerate() {
            for _ in 0..layers {
                total += batch_norm(channels)
                    + channels * width
                    + batch_norm(width)
                    + width * growth * 9.0;
                channels += growth;
                if total > LIMIT {
                    return f64::INFINITY;
                }
            }
            if i + 1 < blocks.len() {
                let out = (channels * self.compression).floor();
                total += batch_norm(channels) + channels * out;
                channels = out;
            }
        }
        total += batch_norm(channels) + channels * self.classes as f64 + self.classes as f64;
        if total > LIMIT { f64::INFINITY } else { total }
    }

    /// A freshly initialised network.
    pub fn init<B: Backend>(&self, device: &B::Device) -> DenseNet<B> {
        let growth = self.growth_rate;
        let mut channels = 2 * growth;
        let stem = Conv2dConfig::new([self.input_channels, channels], [3, 3])
            .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
            .with_bias(false)
            .init(device);
        let blocks = self.blocks();
        let mut stages = Vec::with_capacity(blocks.len());
        for (i, &layers) in blocks.iter().enumerate() {
            let block = DenseBlock {
                layers: (0..layers)
                    .map(|j| DenseLayer::new(channels + j * growth, self, device))
                    .collect(),
            };
            channels += layers * growth;
            let transition = (i + 1 < blocks.len()).then(|| {
                let out = (channels as f64 * self.compression).floor() as usize;
                let t = Transition::new(channels, out, device);
                channels = out;
                t
            });
            stages.push(Stage { block, transition });
        }
        DenseNet {
            stem,
            stages,
            norm: BatchNormConfig::new(channels).init(device),
            pool: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
            classifier: LinearConfig::new(channels, self.classes).init(device),
            relu: Relu::new(),
            cut: self.cut,
            policy: self.policy,
            offload: self.offload,
        }
    }
}

/// One bottleneck layer: BN, ReLU, 1×1 conv to 4k channels, BN, ReLU, 3×3 conv to k channels.
#[derive(Module, Debug)]
pub struct DenseLayer<B: Backend> {
    norm1: BatchNorm<B>,
    conv1: Conv2d<B>,
    norm2: BatchNorm<B>,
    conv2: Conv2d<B>,
    dropout: Dropout,
    relu: Relu,
}

impl<B: Backend> DenseLayer<B> {
    fn new(channels: usize, config: &DenseNetConfig, device: &B::Device) -> Self {
        let width = config.bottleneck_width * config.growth_rate;
        DenseLayer {
            norm1: BatchNormConfig::new(channels).init(device),
            conv1: Conv2dConfig::new([channels, width], [1, 1])
                .with_bias(false)
                .init(device),
            norm2: BatchNormConfig::new(width).init(device),
            conv2: Conv2dConfig::new([width, config.growth_rate], [3, 3])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .with_bias(false)
                .init(device),
            dropout: DropoutConfig::new(config.dropout).init(),
            relu: Relu::new(),
        }
    }

    /// Concatenation of the features so far, BN, ReLU, 1×1 conv: the reference's cut.
    fn bottleneck(&self, features: Vec<Tensor<B, 4>>) -> Tensor<B, 4> {
        let x = Tensor::cat(features, 1);
        self.conv1.forward(self.relu.forward(self.norm1.forward(x)))
    }

    fn forward(&self, features: Vec<Tensor<B, 4>>, regions: Regions) -> Tensor<B, 4> {
        let rest = |x: Tensor<B, 4>| {
            let x = self.conv2.forward(self.relu.forward(self.norm2.forward(x)));
            self.dropout.forward(x)
        };
        match regions.cut {
            Cut::Bottleneck => rest(regions.run(BOTTLENECK_REGION, || self.bottleneck(features))),
            Cut::Layer => regions.run(LAYER_REGION, || rest(self.bottleneck(features))),
            Cut::None | Cut::Block => rest(self.bottleneck(features)),
        }
    }
}

/// Dense layers, each fed the concatenation of the block's input and every earlier output.
#[derive(Module, Debug)]
pub struct DenseBlock<B: Backend> {
    layers: Vec<DenseLayer<B>>,
}

impl<B: Backend> DenseBlock<B> {
    fn forward(&self, x: Tensor<B, 4>, regions: Regions) -> Tensor<B, 4> {
        let run = || {
            let mut features = vec![x];
            for layer in &self.layers {
                let new = layer.forward(features.clone(), regions);
                features.push(new);
            }
            Tensor::cat(features, 1)
        };
        match regions.cut {
            Cut::Block => regions.run(BLOCK_REGION, run),
            _ => run(),
        }
    }
}

/// Between blocks: BN, ReLU, 1×1 conv (compression), 2×2 average pooling.
#[derive(Module, Debug)]
pub struct Transition<B: Backend> {
    norm: BatchNorm<B>,
    conv: Conv2d<B>,
    pool: AvgPool2d,
    relu: Relu,
}

impl<B: Backend> Transition<B> {
    fn new(channels: usize, out: usize, device: &B::Device) -> Self {
        Transition {
            norm: BatchNormConfig::new(channels).init(device),
            conv: Conv2dConfig::new([channels, out], [1, 1])
                .with_bias(false)
                .init(device),
            pool: AvgPool2dConfig::new([2, 2]).init(),
            relu: Relu::new(),
        }
    }

    fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        self.pool
            .forward(self.conv.forward(self.relu.forward(self.norm.forward(x))))
    }
}

/// A dense block and the transition after it (none after the last block).
#[derive(Module, Debug)]
pub struct Stage<B: Backend> {
    block: DenseBlock<B>,
    transition: Option<Transition<B>>,
}

/// DenseNet-BC: a 3×3 stem convolution to 2k channels, dense blocks with transitions, BN, ReLU,
/// global average pooling and a linear classifier.
#[derive(Module, Debug)]
pub struct DenseNet<B: Backend> {
    stem: Conv2d<B>,
    stages: Vec<Stage<B>>,
    norm: BatchNorm<B>,
    pool: AdaptiveAvgPool2d,
    classifier: Linear<B>,
    relu: Relu,
    cut: Cut,
    policy: RegionPolicy,
    offload: bool,
}

impl<B: Backend> DenseNet<B> {
    /// Class logits `[batch, classes]` for images `[batch, channels, height, width]`.
    pub fn forward(&self, images: Tensor<B, 4>) -> Tensor<B, 2> {
        let regions = Regions {
            cut: self.cut,
            policy: self.policy,
            offload: self.offload,
        };
        let mut x = self.stem.forward(images);
        for stage in &self.stages {
            x = stage.block.forward(x, regions);
            if let Some(transition) = &stage.transition {
                x = transition.forward(x);
            }
        }
        let x = self.pool.forward(self.relu.forward(self.norm.forward(x)));
        self.classifier.forward(x.flatten(1, 3))
    }
}

#[cfg(test)]
mod tests {
    use burn::backend::NdArray;
    use burn::module::{Module, ModuleVisitor, Param};
    use burn::tensor::Tensor;

    use super::DenseNetConfig;

    /// Elements of every float tensor a built network holds.
    fn counted(config: &DenseNetConfig) -> usize {
        struct Count(usize);
        impl ModuleVisitor<NdArray> for Count {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<NdArray, D>>) {
                self.0 += param.lazy_shape().num_elements();
            }
        }
        let mut count = Count(0);
        config
            .init::<NdArray>(&Default::default())
            .visit(&mut count);
        count.0
    }

    #[test]
    fn tensor_elements_are_those_of_the_built_network() {
        for config in [
            DenseNetConfig::new(10).with_growth_rate(4),
            DenseNetConfig::new(40)
                .with_input_channels(1)
                .with_classes(7),
            DenseNetConfig::new(16).with_block_config(Some(vec![1, 3])),
        ] {
            assert_eq!(
                config.tensor_elements(),
                counted(&config) as f64,
                "{config:?}"
            );
        }
    }

    #[test]
    fn absurd_sizes_have_no_finite_size() {
        assert!(
            DenseNetConfig::new(1_000_000_000)
                .tensor_elements()
                .is_infinite()
        );
        let wide = DenseNetConfig::new(100).with_growth_rate(1 << 30);
        assert!(wide.tensor_elements().is_infinite());
        assert!(DenseNetConfig::new(100).tensor_elements() < 1e6);
    }
}
