//! The budget planner on the GPT-style model: a sweep of budgets from the peak with every block
//! region kept down to the smallest the planner reaches, each plan measured beside the hand-made
//! cuts (no region, Burn's Balanced, a region per block with each policy and over Balanced,
//! `checkpoint_sequential`, the whole stack: each on its method's backend), every method one step
//! per round, interleaved.
//!
//! The planner chooses the base (plain autodiff or Burn's Balanced, profiled on both), the
//! placement (a region per block, or `checkpoint_sequential`'s two or √n segments) and, for each
//! region (`gpt::model::Block::forward_checkpointed#i`, or each segment), keep,
//! save-compute-bound or recompute-all. Writes `<out>.md`, `.json`, `.svg`, `.png`.
//!
//! ```text
//! cargo bench -p gpt --bench budget                                 # 8 blocks, d 128, 10 budgets
//! cargo bench -p gpt --bench budget -- --blocks 4 --d-model 64 --seq 64 --batch 4 --budgets 8
//! ```

mod common;

use std::cell::RefCell;

use bench_kit::tape::Tape;
use burn::backend::autodiff::checkpoint::strategy::BalancedCheckpointing;
use burn::backend::{Autodiff, Flex};
use burn::module::Module;
use burn::optim::{AdamWConfig, GradientsParams, Optimizer};
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Int, Tensor, TensorData};
use burn_checkpoint::Checkpointed;
use burn_checkpoint::memory::{CountingAllocator, Meter};
use burn_checkpoint::planner::{Base, Treatment};
use gpt::{Cut, Gpt, Method};

use bench_kit::gpt::GptShape;
use bench_kit::sweep;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

type Bal = Autodiff<Flex, BalancedCheckpointing>;

/// The GPT-style model under the budget planner, against the hand-made cuts.
#[derive(clap::Parser)]
struct Args {
    #[command(flatten)]
    shape: GptShape,
    #[command(flatten)]
    sweep: sweep::Options,
}

/// A model and its optimizer, stepping on one fixed batch of tokens.
struct Trainer<B: AutodiffBackend, O> {
    model: Option<Gpt<B>>,
    optimizer: O,
    tokens: TensorData,
}

/// The GPT cut at `cut`, trained on `B` from `weights`, boxed beside the other methods'
/// backends.
fn trainer<B: AutodiffBackend>(
    config: &gpt::GptConfig,
    weights: &[u8],
    tokens: &TensorData,
    cut: Cut,
) -> RefCell<Box<dyn sweep::Trainer>> {
    let device = Default::default();
    let record = BinBytesRecorder::<FullPrecisionSettings>::default()
        .load(weights.to_vec(), &device)
        .unwrap();
    RefCell::new(Box::new(Trainer {
        model: Some(config.init::<B>(&device).load_record(record).with_cut(cut)),
        optimizer: AdamWConfig::new().init::<B, Gpt<B>>(),
        tokens: tokens.clone(),
    }))
}

impl<B: AutodiffBackend, O: Optimizer<Gpt<B>, B>> sweep::Trainer for Trainer<B, O> {
    fn step(&mut self) {
        let device = Default::default();
        let model = self.model.take().expect("a model");
        let tokens = Tensor::<B, 2, Int>::from_data(self.tokens.clone(), &device);
        let [batch, seq] = tokens.dims();
        let inputs = tokens.clone().slice([0..batch, 0..seq - 1]);
        let targets = tokens.slice([0..batch, 1..seq]);
        let loss = model.loss(inputs, targets);
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        self.model = Some(self.optimizer.step(1e-3, model, grads));
    }
}

fn main() {
    let args: Args = clap::Parser::parse();
    let out = args.sweep.out("gpt-budget");
    if args.sweep.replotted(&out) {
        return;
    }
    let device = Default::default();
    Flex::seed(&device, 1);
    let shape = &args.shape;
    let config = common::config(shape);
    let weights = BinBytesRecorder::<FullPrecisionSettings>::default()
        .record(config.init::<Autodiff<Flex>>(&device).into_record(), ())
        .unwrap();
    let tokens = common::tokens::<Flex>(shape, &device).into_data();
    // Each method on its backend.
    let hand = |method: Method| {
        let trainer = match method.tape() {
            Tape::Plain => trainer::<Autodiff<Flex>>,
            Tape::Balanced => trainer::<Bal>,
            Tape::Regions => trainer::<Checkpointed<Autodiff<Flex>>>,
            Tape::RegionsOverBalanced => trainer::<Checkpointed<Bal>>,
        };
        trainer(&config, &weights, &tokens, method.cut())
    };
    // The planner's models, each on either base: a region per block, each of which a plan may
    // keep; and the blocks in `checkpoint_sequential`'s segments (two, and √8), other placements
    // it may choose among (`Candidates`), as a user profiling both would.
    let placements = [
        (Cut::Block, ""),
        (Cut::SeqTwo, "two segments"),
        (Cut::SeqSqrt, "√n segments"),
    ];
    let planned: Vec<(Base, &str, _)> = placements
        .iter()
        .flat_map(|&(cut, name)| {
            [
                (
                    Base::Plain,
                    name,
                    trainer::<Checkpointed<Autodiff<Flex>>>(&config, &weights, &tokens, cut),
                ),
                (
                    Base::Balanced,
                    name,
                    trainer::<Checkpointed<Bal>>(&config, &weights, &tokens, cut),
                ),
            ]
        })
        .collect();
    let hands = [
        Method::Plain,
        Method::Balanced,
        Method::BlockSave,
        Method::Block,
        Method::BlockBalanced,
        Method::BlockOffload,
        Method::SeqSqrt,
        Method::SeqTwo,
        Method::Whole,
    ]
    .map(|method| (method.name(), hand(method)));
    let title = format!(
        "{}, AdamW step, flex backend: the budget planner over the blocks' regions against \
         hand-made cuts",
        shape.describe()
    );
    args.sweep.run(
        sweep::Measured {
            meter: Meter::Host,
            treatments: &Treatment::ALL,
        },
        &out,
        &title,
        planned
            .iter()
            .map(|(base, name, trainer)| sweep::Planned {
                name: name.to_string(),
                ..sweep::Planned::of(*base, trainer)
            })
            .collect(),
        hands
            .iter()
            .map(|(name, trainer)| sweep::Hand::of(name, trainer))
            .collect(),
    );
}
