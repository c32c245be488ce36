//! DenseNet-BC (Huang et al.) on Burn 0.22; the layer cut makes each dense layer a region
//! (`DenseLayer#i`).

use app_kit::densenet::DenseNetShape;
use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::pool::{AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig, AvgPool2d, AvgPool2dConfig};
use burn::nn::{BatchNorm, BatchNormConfig, Linear, LinearConfig, PaddingConfig2d, Relu};
use burn::tensor::{Device, Distribution, Tensor};
use burn_checkpoint_22::{Policy, Region};

use crate::{Cut, Unit};

/// One bottleneck layer: BN, ReLU, 1×1 conv to 4k channels, BN, ReLU, 3×3 conv to k channels.
#[derive(Module, Debug)]
pub struct DenseLayer {
    norm1: BatchNorm,
    conv1: Conv2d,
    norm2: BatchNorm,
    conv2: Conv2d,
    relu: Relu,
}

impl DenseLayer {
    fn new(channels: usize, growth: usize, device: &Device) -> Self {
        let width = 4 * growth;
        Self {
            norm1: BatchNormConfig::new(channels).init(device),
            conv1: Conv2dConfig::new([channels, width], [1, 1])
                .with_bias(false)
                .init(device),
            norm2: BatchNormConfig::new(width).init(device),
            conv2: Conv2dConfig::new([width, growth], [3, 3])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .with_bias(false)
                .init(device),
            relu: Relu::new(),
        }
    }

    fn forward(&self, features: Vec<Tensor<4>>) -> Tensor<4> {
        let x = Tensor::cat(features, 1);
        let x = self.conv1.forward(self.relu.forward(self.norm1.forward(x)));
        self.conv2.forward(self.relu.forward(self.norm2.forward(x)))
    }

    /// [`forward`](Self::forward) with the concatenation, first batch norm and ReLU as one
    /// region: in a `SaveComputeBound` layer, a memory-bound op whose output backward
    /// recomputes, so that what grows with depth (the concatenation and its normalisation) is
    /// not kept: the "memory-efficient DenseNet" trade (Pleiss et al., 2017). The second batch
    /// norm's output, 4k channels, is kept as Balanced keeps it.
    fn forward_norm_recomputed(&self, features: Vec<Tensor<4>>) -> Tensor<4> {
        let x = Region::named("DenseLayer.norm1").run(&self.norm1, features, |norm, f| {
            Relu::new().forward(norm.forward(Tensor::cat(f, 1)))
        });
        let x = self.conv1.forward(x);
        self.conv2.forward(self.relu.forward(self.norm2.forward(x)))
    }
}

/// Between blocks: BN, ReLU, 1×1 conv (compression ½), 2×2 average pooling.
#[derive(Module, Debug)]
pub struct Transition {
    norm: BatchNorm,
    conv: Conv2d,
    pool: AvgPool2d,
    relu: Relu,
}

/// DenseNet-BC for 32×32 images: stem, three dense blocks with transitions, head.
#[derive(Module, Debug)]
pub struct DenseNet {
    stem: Conv2d,
    blocks: Vec<Vec<DenseLayer>>,
    transitions: Vec<Transition>,
    norm: BatchNorm,
    pool: AdaptiveAvgPool2d,
    classifier: Linear,
    relu: Relu,
}

impl DenseNet {
    /// DenseNet-BC-`depth` (6n + 4: three dense blocks of n layers) with growth rate `growth`,
    /// for images of `input_channels` channels and `classes` classes.
    pub fn new(
        depth: usize,
        growth: usize,
        input_channels: usize,
        classes: usize,
        device: &Device,
    ) -> Self {
        let layers = (depth - 4) / 6;
        let mut channels = 2 * growth;
        let stem = Conv2dConfig::new([input_channels, channels], [3, 3])
            .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
            .with_bias(false)
            .init(device);
        let (mut blocks, mut transitions) = (Vec::new(), Vec::new());
        for block in 0..3 {
            blocks.push(
                (0..layers)
                    .map(|j| DenseLayer::new(channels + j * growth, growth, device))
                    .collect(),
            );
            channels += layers * growth;
            if block < 2 {
                let out = channels / 2;
                transitions.push(Transition {
                    norm: BatchNormConfig::new(channels).init(device),
                    conv: Conv2dConfig::new([channels, out], [1, 1])
                        .with_bias(false)
                        .init(device),
                    pool: AvgPool2dConfig::new([2, 2]).init(),
                    relu: Relu::new(),
                });
                channels = out;
            }
        }
        Self {
            stem,
            blocks,
            transitions,
            norm: BatchNormConfig::new(channels).init(device),
            pool: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
            classifier: LinearConfig::new(channels, classes).init(device),
            relu: Relu::new(),
        }
    }

    /// The benchmarks' loss (no labels): the mean squared logit of `images`; the dense layers
    /// `cut` names are regions.
    pub fn loss(&self, images: Tensor<4>, cut: Cut) -> Tensor<1> {
        self.forward(images, cut).powf_scalar(2.0).mean()
    }

    /// Class logits `[batch, classes]`; the dense layers `cut` names are regions.
    pub fn forward(&self, images: Tensor<4>, cut: Cut) -> Tensor<2> {
        let mut x = self.stem.forward(images);
        let mut layers = 0..;
        for (index, block) in self.blocks.iter().enumerate() {
            let mut features = vec![x];
            for (layer, at) in block.iter().zip(&mut layers) {
                let region = Region::named("DenseLayer");
                let new = match cut.unit(at) {
                    Unit::Plain => layer.forward(features.clone()),
                    Unit::Region { offloaded } => {
                        let region = if offloaded {
                            region.offloaded()
                        } else {
                            region
                        };
                        region.run(layer, features.clone(), |layer, f| layer.forward(f))
                    }
                    // No attention in a dense layer: nothing nested is kept.
                    Unit::KeepingAttention | Unit::KeepingProjections => region
                        .policy(Policy::recompute_all_but(["attention"]))
                        .run(layer, features.clone(), |layer, f| layer.forward(f)),
                    Unit::SavingComputeBound => region.policy(Policy::SaveComputeBound).run(
                        layer,
                        features.clone(),
                        |layer, f| layer.forward_norm_recomputed(f),
                    ),
                };
                features.push(new);
            }
            x = Tensor::cat(features, 1);
            if let Some(t) = self.transitions.get(index) {
                x = t
                    .pool
                    .forward(t.conv.forward(t.relu.forward(t.norm.forward(x))));
            }
        }
        let x = self.pool.forward(self.relu.forward(self.norm.forward(x)));
        self.classifier.forward(x.flatten(1, 3))
    }
}

/// A model of `shape` for 3-channel images and 10 classes (CIFAR-10's, as [`images`]) on
/// `device`.
pub fn model(shape: &DenseNetShape, device: &Device) -> DenseNet {
    DenseNet::new(shape.depth, shape.growth, 3, 10, device)
}

/// A batch of `batch` random 3×32×32 images.
pub fn images(batch: usize, device: &Device) -> Tensor<4> {
    Tensor::random([batch, 3, 32, 32], Distribution::Default, device)
}
