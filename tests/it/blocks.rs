//! Whole blocks inside regions against plain `Autodiff<NdArray>`, with Burn's own modules and the
//! same weights: every parameter gradient bitwise equal, BatchNorm running statistics updated once
//! and equal, dropout identical, and no op falling back to a stored output.

use crate::common;

use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::transformer::{
    TransformerEncoder, TransformerEncoderConfig, TransformerEncoderInput,
};
use burn::nn::{BatchNorm, BatchNormConfig, Linear, LinearConfig, PaddingConfig2d, Relu};
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Tensor, TensorData};
use burn_checkpoint::counters::Counters;
use burn_checkpoint::{Decision, OpKind, Policy, Region};
use common::{Ckpt, Plain, assert_values_bitwise, data, values};

/// Two models with the same weights, one per backend, through Burn's records. (Parameters are
/// initialised lazily: a clone of a fresh module would draw other weights.)
fn same_weights<MP: Module<Plain>, MC: Module<Ckpt>>(plain: impl Fn() -> MP, ckpt: MC) -> (MP, MC) {
    let recorder = BinBytesRecorder::<FullPrecisionSettings>::default();
    let bytes = recorder.record(plain().into_record(), ()).unwrap();
    let device = Default::default();
    (
        plain().load_record(recorder.load(bytes.clone(), &device).unwrap()),
        ckpt.load_record(recorder.load(bytes, &device).unwrap()),
    )
}

/// Every float parameter of a module, in visiting order.
fn parameters<B: Backend, M: Module<B>>(module: &M) -> Vec<Tensor<B, 1>> {
    struct Collect<B: Backend>(Vec<Tensor<B, 1>>);
    impl<B: Backend> burn::module::ModuleVisitor<B> for Collect<B> {
        fn visit_float<const D: usize>(&mut self, param: &burn::module::Param<Tensor<B, D>>) {
            self.0.push(param.val().flatten(0, D - 1));
        }
    }
    let mut collect = Collect(Vec::new());
    module.visit(&mut collect);
    collect.0
}

/// Gradients of every parameter of `module`, by position.
fn parameter_grads<B: AutodiffBackend, M: Module<B>>(
    module: &M,
    grads: &B::Gradients,
) -> Vec<Vec<f32>> {
    struct Collect<'a, B: AutodiffBackend>(&'a B::Gradients, Vec<Vec<f32>>);
    impl<B: AutodiffBackend> burn::module::ModuleVisitor<B> for Collect<'_, B> {
        fn visit_float<const D: usize>(&mut self, param: &burn::module::Param<Tensor<B, D>>) {
            if let Some(grad) = param.val().grad(self.0) {
                self.1.push(values(grad));
            }
        }
    }
    let mut collect = Collect::<B>(grads, Vec::new());
    module.visit(&mut collect);
    collect.1
}

fn assert_all_bitwise(what: &str, plain: &[Vec<f32>], ckpt: &[Vec<f32>]) {
    assert_eq!(plain.len(), ckpt.len(), "{what}: counts differ");
    assert!(!plain.is_empty(), "{what}: nothing to compare");
    for (i, (a, b)) in plain.iter().zip(ckpt).enumerate() {
        assert_values_bitwise(&format!("{what} {i}"), a, b);
    }
}

/// A DenseNet-BC layer: concatenation of the features so far, BatchNorm, ReLU, 1×1 convolution
/// to 4k channels, BatchNorm, ReLU, 3×3 convolution to k channels.
#[derive(Module, Debug)]
struct DenseLayer<B: Backend> {
    norm1: BatchNorm<B>,
    conv1: Conv2d<B>,
    norm2: BatchNorm<B>,
    conv2: Conv2d<B>,
    relu: Relu,
}

impl<B: Backend> DenseLayer<B> {
    fn new(channels: usize, growth: usize, device: &B::Device) -> Self {
        DenseLayer {
            norm1: BatchNormConfig::new(channels).init(device),
            conv1: Conv2dConfig::new([channels, 4 * growth], [1, 1])
                .with_bias(false)
                .init(device),
            norm2: BatchNormConfig::new(4 * growth).init(device),
            conv2: Conv2dConfig::new([4 * growth, growth], [3, 3])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .with_bias(false)
                .init(device),
            relu: Relu::new(),
        }
    }

    #[burn_checkpoint::checkpoint]
    fn forward(&self, features: Vec<Tensor<B, 4>>) -> Tensor<B, 4> {
        self.body(features)
    }

    fn body(&self, features: Vec<Tensor<B, 4>>) -> Tensor<B, 4> {
        let x = Tensor::cat(features, 1);
        let x = self.conv1.forward(self.relu.forward(self.norm1.forward(x)));
        self.conv2.forward(self.relu.forward(self.norm2.forward(x)))
    }
}

#[derive(Module, Debug)]
struct DenseBlock<B: Backend> {
    layers: Vec<DenseLayer<B>>,
}

impl<B: Backend> DenseBlock<B> {
    fn new(channels: usize, growth: usize, count: usize, device: &B::Device) -> Self {
        DenseBlock {
            layers: (0..count)
                .map(|i| DenseLayer::new(channels + i * growth, growth, device))
                .collect(),
        }
    }

    /// With a policy, each layer is a `Region::new().policy(p)` region; without, an attribute
    /// region.
    fn forward(&self, x: Tensor<B, 4>, policy: Option<&Policy>) -> Tensor<B, 4> {
        let mut features = vec![x];
        for layer in &self.layers {
            let new = match policy {
                None => layer.forward(features.clone()),
                Some(policy) => Region::new()
                    .policy(policy.clone())
                    .run(|| layer.body(features.clone())),
            };
            features.push(new);
        }
        Tensor::cat(features, 1)
    }
}

/// Every BatchNorm running mean and variance of a block.
fn running_statistics<B: Backend>(block: &DenseBlock<B>) -> Vec<Vec<f32>> {
    block
        .layers
        .iter()
        .flat_map(|layer| [&layer.norm1, &layer.norm2])
        .flat_map(|norm| {
            [
                values(norm.running_mean.value()),
                values(norm.running_var.value()),
            ]
        })
        .collect()
}

/// The policies every block is checked under: the two presets, and a predicate that keeps what
/// they recompute (large cheap outputs: concatenations, normalisation arithmetic, activations).
fn policies() -> Vec<Option<Policy>> {
    let odd = Policy::custom(|op| match op.kind() {
        OpKind::Elementwise | OpKind::Concat | OpKind::Reduce if op.bytes() > 256 => Decision::Save,
        _ => Decision::Recompute,
    });
    vec![None, Some(Policy::SaveComputeBound), Some(odd)]
}

#[test]
fn densenet_bc_block_with_batchnorm() {
    // NdArray's random generator is one per process (weight initialisation, dropout).
    let _random = common::alone();
    for policy in policies() {
        println!("policy {policy:?}");
        densenet_bc_block(policy.as_ref());
    }
}

fn densenet_bc_block(policy: Option<&Policy>) {
    let device = Default::default();
    let (plain, ckpt) = same_weights(
        || DenseBlock::<Plain>::new(8, 4, 3, &device),
        DenseBlock::<Ckpt>::new(8, 4, 3, &device),
    );
    let x = data([2, 8, 6, 6], 3);
    let weights = data([2, 8 + 3 * 4, 6, 6], 4);

    fn run<B: AutodiffBackend>(
        block: &DenseBlock<B>,
        x: &TensorData,
        w: &TensorData,
        policy: Option<&Policy>,
    ) -> (Vec<Vec<f32>>, Vec<f32>) {
        let device = Default::default();
        let x = Tensor::<B, 4>::from_data(x.clone(), &device).require_grad();
        let out = block.forward(x.clone(), policy);
        let loss = (out * Tensor::from_data(w.clone(), &device)).sum();
        let grads = loss.backward();
        let mut all = parameter_grads(block, &grads);
        all.push(values(x.grad(&grads).unwrap()));
        (all, values(loss))
    }
    // BatchNorm's running statistics live in the module: run each once.
    let (plain_grads, plain_loss) = run(&plain, &x, &weights, None);
    Counters::reset();
    let (ckpt_grads, ckpt_loss) = run(&ckpt, &x, &weights, policy);
    assert_values_bitwise("loss", &plain_loss, &ckpt_loss);
    assert_all_bitwise("gradient", &plain_grads, &ckpt_grads);
    assert_eq!(
        Counters::now().fallbacks,
        Default::default(),
        "ops fell back"
    );
    let conv_recomputes = Counters::now()
        .recomputes
        .get("conv2d")
        .copied()
        .unwrap_or(0);
    match policy {
        None => assert!(
            conv_recomputes >= 3,
            "{conv_recomputes} convolutions recomputed"
        ),
        Some(Policy::SaveComputeBound) => assert_eq!(conv_recomputes, 0, "convolutions recomputed"),
        // Keeps the normalised outputs that the convolutions feed: nothing needs those again.
        Some(_) => {}
    }

    // Running mean and variance: updated once per forward, to the same values.
    let plain_stats = running_statistics(&plain);
    let ckpt_stats = running_statistics(&ckpt);
    assert_all_bitwise("running statistic", &plain_stats, &ckpt_stats);
    // Updated once: a second update would move the mean further from its initial zeros.
    let (fresh, _) = same_weights(
        || DenseBlock::<Plain>::new(8, 4, 3, &device),
        DenseBlock::<Ckpt>::new(8, 4, 3, &device),
    );
    let once = {
        let x = Tensor::<Plain, 4>::from_data(x.clone(), &device);
        let _ = fresh.forward(x, None);
        values(fresh.layers[0].norm1.running_mean.value())
    };
    assert_values_bitwise("running mean after one step", &once, &plain_stats[0]);
}

#[test]
fn transformer_block_with_dropout() {
    // NdArray's random generator is one per process (weight initialisation, dropout).
    let _random = common::alone();
    for policy in policies() {
        println!("policy {policy:?}");
        transformer_block(policy.unwrap_or_default());
    }
}

fn transformer_block(policy: Policy) {
    let device = Default::default();
    let config = TransformerEncoderConfig::new(16, 32, 2, 2).with_dropout(0.1);
    let (plain, ckpt) = same_weights(
        || config.init::<Plain>(&device),
        config.init::<Ckpt>(&device),
    );
    let x = data([2, 5, 16], 5);
    let w = data([2, 5, 16], 6);

    fn run<B: AutodiffBackend>(
        encoder: &TransformerEncoder<B>,
        x: &TensorData,
        w: &TensorData,
        region: Option<&Policy>,
    ) -> (Vec<Vec<f32>>, Vec<f32>) {
        let device = Default::default();
        // The same dropout masks in both runs.
        B::seed(&device, 42);
        let x = Tensor::<B, 3>::from_data(x.clone(), &device).require_grad();
        let forward = || encoder.forward(TransformerEncoderInput::new(x.clone()));
        let out = match region {
            Some(policy) => Region::new().policy(policy.clone()).run(forward),
            None => forward(),
        };
        let loss = (out * Tensor::from_data(w.clone(), &device)).sum();
        let grads = loss.backward();
        let mut all = parameter_grads(encoder, &grads);
        all.push(values(x.grad(&grads).unwrap()));
        (all, values(loss))
    }
    let (plain_grads, plain_loss) = run(&plain, &x, &w, None);
    Counters::reset();
    let (ckpt_grads, ckpt_loss) = run(&ckpt, &x, &w, Some(&policy));
    assert_values_bitwise("loss", &plain_loss, &ckpt_loss);
    assert_all_bitwise("gradient", &plain_grads, &ckpt_grads);
    assert_eq!(
        Counters::now().fallbacks,
        Default::default(),
        "ops fell back"
    );
    let recomputed = Counters::now().recomputes;
    let expected: &[&str] = match policy {
        Policy::RecomputeAll => &["linear", "matmul", "mean_dim"],
        Policy::SaveComputeBound => &["mean_dim"],
        Policy::Custom(_) => &["linear", "matmul"],
        other => panic!("no expectation for {other:?}"),
    };
    for op in expected {
        assert!(
            recomputed.get(op).copied().unwrap_or(0) > 0,
            "{op} not recomputed: {recomputed:?}"
        );
    }
    if let Policy::SaveComputeBound = policy {
        for op in ["linear", "matmul"] {
            assert_eq!(recomputed.get(op), None, "{op} recomputed: {recomputed:?}");
        }
    }

    // Dropout really is on: another seed gives another loss.
    let plain_other = {
        <Plain as Backend>::seed(&device, 7);
        let x = Tensor::<Plain, 3>::from_data(x.clone(), &device);
        let out = plain.forward(TransformerEncoderInput::new(x));
        values((out * Tensor::from_data(w.clone(), &device)).sum())
    };
    let plain_again = {
        <Plain as Backend>::seed(&device, 42);
        let x = Tensor::<Plain, 3>::from_data(x.clone(), &device);
        let out = plain.forward(TransformerEncoderInput::new(x));
        values((out * Tensor::from_data(w.clone(), &device)).sum())
    };
    assert_values_bitwise("loss with the same seed", &plain_loss, &plain_again);
    assert_ne!(plain_other, plain_again);
}

/// An MLP of 8 `Linear` layers with ReLU, as two regions of 4 through the attribute.
#[derive(Module, Debug)]
struct Mlp<B: Backend> {
    layers: Vec<Linear<B>>,
    relu: Relu,
}

impl<B: Backend> Mlp<B> {
    fn new(device: &B::Device) -> Self {
        Mlp {
            layers: (0..8)
                .map(|_| LinearConfig::new(12, 12).init(device))
                .collect(),
            relu: Relu::new(),
        }
    }

    #[burn_checkpoint::checkpoint]
    fn half(&self, mut x: Tensor<B, 2>, layers: &[Linear<B>]) -> Tensor<B, 2> {
        for layer in layers {
            x = self.relu.forward(layer.forward(x));
        }
        x
    }

    fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let x = self.half(x, &self.layers[..4]);
        self.half(x, &self.layers[4..])
    }
}

#[test]
fn mlp_of_eight_layers_in_two_regions() {
    // NdArray's random generator is one per process (weight initialisation, dropout).
    let _random = common::alone();
    let device = Default::default();
    let (plain, ckpt) = same_weights(|| Mlp::<Plain>::new(&device), Mlp::<Ckpt>::new(&device));
    let x = data([6, 12], 9);

    fn run<B: AutodiffBackend>(mlp: &Mlp<B>, x: &TensorData) -> Vec<Vec<f32>> {
        let x = Tensor::<B, 2>::from_data(x.clone(), &Default::default());
        let grads = mlp.forward(x).powi_scalar(2).mean().backward();
        parameter_grads(mlp, &grads)
    }
    let plain_grads = run(&plain, &x);
    Counters::reset();
    let ckpt_grads = run(&ckpt, &x);
    assert_eq!(plain_grads.len(), 16);
    assert_all_bitwise("gradient", &plain_grads, &ckpt_grads);
    assert_eq!(
        Counters::now().fallbacks,
        Default::default(),
        "ops fell back"
    );
    assert_eq!(Counters::now().recomputes.get("linear"), Some(&8));
    // Same parameters in both (sanity of the weight transfer).
    let a: Vec<Vec<f32>> = parameters(&plain).into_iter().map(values).collect();
    let b: Vec<Vec<f32>> = parameters(&ckpt).into_iter().map(values).collect();
    assert_all_bitwise("parameter", &a, &b);
}
