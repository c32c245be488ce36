//! The budget planner on DenseNet-BC: a sweep of budgets from the peak with every region kept
//! down to the smallest the planner reaches, each plan measured beside the hand-made cuts
//! (no region, Burn's Balanced, the reference's bottleneck cut, layer regions with each policy,
//! block regions: each on the backend the trainer runs it on, regions over Balanced), every
//! method one step per round, interleaved.
//!
//! The planner chooses the base (plain autodiff or Burn's Balanced, profiled on both) and, for
//! each of the dense layers' regions (`densenet::layer#0..`, written as `layer-reduce`'s: batch
//! norm's statistics kept), keep, save-compute-bound, recompute-all or as written. Writes
//! `<out>.md`, `.json`, `.svg`, `.png`.
//!
//! ```text
//! cargo bench -p densenet-bc --bench budget                     # BC-100, batch 16, 10 budgets
//! cargo bench -p densenet-bc --bench budget -- --depth 40 --batch 8 --budgets 8 --steps 3
//! ```

use std::cell::RefCell;

use bench_kit::densenet::DenseNetShape;
use bench_kit::tape::Tape;
use burn::backend::autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn::backend::{Autodiff, Flex};
use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{GradientsParams, Optimizer, SgdConfig};
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Distribution, Int, Tensor, TensorData};
use burn_checkpoint::Checkpointed;
use burn_checkpoint::memory::{CountingAllocator, Meter};
use burn_checkpoint::planner::Base;
use densenet_bc::{DenseNet, DenseNetConfig, Method};

use bench_kit::sweep;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

type Bal = Autodiff<Flex, BalancedCheckpointing>;

/// DenseNet-BC under the budget planner, against the hand-made cuts.
#[derive(clap::Parser)]
struct Args {
    /// The network.
    #[command(flatten)]
    shape: DenseNetShape,
    /// Images per step (3×32×32).
    #[arg(long, default_value_t = 16)]
    batch: usize,
    #[command(flatten)]
    sweep: sweep::Options,
}

/// A model and its optimizer, stepping on one fixed batch.
struct Trainer<B: AutodiffBackend> {
    model: Option<DenseNet<B>>,
    optimizer:
        burn::optim::adaptor::OptimizerAdaptor<burn::optim::Sgd<B::InnerBackend>, DenseNet<B>, B>,
    images: TensorData,
    labels: TensorData,
}

/// `config` trained on `B` from `weights`, boxed beside the other methods' backends.
fn trainer<B: AutodiffBackend>(
    config: &DenseNetConfig,
    weights: &[u8],
    images: &TensorData,
    labels: &TensorData,
) -> RefCell<Box<dyn sweep::Trainer>> {
    let device = Default::default();
    let recorder = BinBytesRecorder::<FullPrecisionSettings>::default();
    let model = config
        .init::<B>(&device)
        .load_record(recorder.load(weights.to_vec(), &device).unwrap());
    RefCell::new(Box::new(Trainer::<B> {
        model: Some(model),
        optimizer: SgdConfig::new()
            .with_momentum(Some(MomentumConfig::new()))
            .init(),
        images: images.clone(),
        labels: labels.clone(),
    }))
}

impl<B: AutodiffBackend> sweep::Trainer for Trainer<B> {
    fn step(&mut self) {
        let device = Default::default();
        let model = self.model.take().expect("a model");
        let x = Tensor::<B, 4>::from_data(self.images.clone(), &device);
        let y = Tensor::<B, 1, Int>::from_data(self.labels.clone(), &device);
        let loss = CrossEntropyLossConfig::new()
            .init(&device)
            .forward(model.forward(x), y);
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        self.model = Some(self.optimizer.step(0.05, model, grads));
    }
}

fn main() {
    let args: Args = clap::Parser::parse();
    let out = args.sweep.out("densenet-budget");
    if args.sweep.replotted(&out) {
        return;
    }
    let device = Default::default();
    Flex::seed(&device, 1);
    let config = DenseNetConfig::new(args.shape.depth).with_growth_rate(args.shape.growth);
    let weights = BinBytesRecorder::<FullPrecisionSettings>::default()
        .record(config.init::<Autodiff<Flex>>(&device).into_record(), ())
        .unwrap();
    let images = Tensor::<Flex, 4>::random([args.batch, 3, 32, 32], Distribution::Default, &device)
        .into_data();
    let labels =
        Tensor::<Flex, 1, Int>::random([args.batch], Distribution::Uniform(0.0, 10.0), &device)
            .into_data();
    // Each method on the backend the trainer runs it on.
    let hand = |method: Method| {
        let config = method.configure(config.clone());
        let trainer = match method.tape() {
            Tape::Plain => trainer::<Autodiff<Flex>>,
            Tape::Balanced => trainer::<Bal>,
            Tape::Regions => trainer::<Checkpointed<Autodiff<Flex>>>,
            Tape::RegionsOverBalanced => trainer::<Checkpointed<Bal>>,
        };
        trainer(&config, &weights, &images, &labels)
    };
    // The planner's model: a region per dense layer keeping batch norm's statistics, each of
    // which a plan may keep, recompute (all, or keeping compute-bound outputs) or leave as
    // written, on either base.
    let planned_method = Method::LayerReduce;
    let layers = planned_method.configure(config.clone());
    let planned = [
        (
            Base::Plain,
            trainer::<Checkpointed<Autodiff<Flex>>>(&layers, &weights, &images, &labels),
        ),
        (
            Base::Balanced,
            trainer::<Checkpointed<Bal>>(&layers, &weights, &images, &labels),
        ),
    ];
    let hands = [
        Method::Plain,
        Method::Balanced,
        Method::Bottleneck,
        Method::LayerSave,
        Method::LayerReduce,
        Method::Layer,
        Method::LayerOffload,
        Method::Block,
    ]
    .map(|method| (method.name(), hand(method)));
    let title = format!(
        "{}, batch {} of 3×32×32, SGD step, flex backend: the budget planner over the dense \
         layers' regions against hand-made cuts",
        args.shape.describe(),
        args.batch
    );
    args.sweep.run(
        sweep::Measured {
            meter: Meter::Host,
            treatments: &planned_method.treatments(),
        },
        &out,
        &title,
        planned
            .iter()
            .map(|(base, trainer)| sweep::Planned::of(*base, trainer))
            .collect(),
        hands
            .iter()
            .map(|(name, trainer)| sweep::Hand::of(name, trainer))
            .collect(),
    );
}
