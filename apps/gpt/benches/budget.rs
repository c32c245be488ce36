//! The budget planner on the GPT-style model: a sweep of budgets from the peak with every block
//! region kept down to the smallest the planner reaches, each plan measured beside the hand-made
//! cuts (no region, a region per block with each policy, `checkpoint_sequential`, the whole
//! stack), every method one step per round, interleaved.
//!
//! The planner chooses, for each block's region (`gpt::model::Block::forward_checkpointed#i`),
//! keep, save-compute-bound or recompute-all. Writes `<out>.md`, `.json`, `.svg`, `.png`.
//!
//! ```text
//! cargo bench -p gpt --bench budget                                 # 8 blocks, d 128, 10 budgets
//! cargo bench -p gpt --bench budget -- --blocks 4 --d-model 64 --seq 64 --batch 4 --budgets 8
//! ```

mod common;

use std::cell::RefCell;

use burn::backend::{Autodiff, Flex};
use burn::module::Module;
use burn::optim::{AdamWConfig, GradientsParams, Optimizer};
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};
use burn_checkpoint::Checkpointed;
use burn_checkpoint::memory::{CountingAllocator, Meter};
use burn_checkpoint::planner::Treatment;
use gpt::{Cut, Gpt, Method};

use bench_kit::gpt::GptShape;
use bench_kit::sweep;

use sweep::Trainer as _;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

type B = Checkpointed<Autodiff<Flex>>;

/// The GPT-style model under the budget planner, against the hand-made cuts.
#[derive(clap::Parser)]
struct Args {
    #[command(flatten)]
    shape: GptShape,
    #[command(flatten)]
    sweep: sweep::Options,
}

/// A model and its optimizer, stepping on one fixed batch of tokens.
struct Trainer<O> {
    model: Option<Gpt<B>>,
    optimizer: O,
    tokens: TensorData,
}

impl<O: Optimizer<Gpt<B>, B>> sweep::Trainer for Trainer<O> {
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
        .record(config.init::<B>(&device).into_record(), ())
        .unwrap();
    let tokens = common::tokens::<Flex>(shape, &device).into_data();
    let trainer = |cut: Cut| {
        let record = BinBytesRecorder::<FullPrecisionSettings>::default()
            .load(weights.clone(), &device)
            .unwrap();
        RefCell::new(Trainer {
            model: Some(config.init::<B>(&device).load_record(record).with_cut(cut)),
            optimizer: AdamWConfig::new().init::<B, Gpt<B>>(),
            tokens: tokens.clone(),
        })
    };
    // The planner's model: a region per block, each of which a plan may keep.
    let planned = trainer(Cut::Block);
    // Every method of the model's backend (`Checkpointed<Autodiff<Flex>>`), by name.
    let hands = [
        Method::Plain,
        Method::BlockSave,
        Method::Block,
        Method::BlockOffload,
        Method::SeqSqrt,
        Method::SeqTwo,
        Method::Whole,
    ]
    .map(|method| (method.name(), trainer(method.cut())));
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
        Box::new(|| planned.borrow_mut().step()),
        hands
            .iter()
            .map(|(name, trainer)| sweep::Hand::of(name, trainer))
            .collect(),
    );
}
