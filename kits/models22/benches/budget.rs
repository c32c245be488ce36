//! The budget planner on Burn 0.22 (Flex): a sweep of budgets from the peak with every region
//! kept down to the smallest the planner reaches, each plan measured beside hand-made cuts (no
//! region, Burn's own `gradient_checkpointing()`, every unit a region, the same over Balanced,
//! the same offloaded, every second unit, every unit keeping its compute-bound outputs), every
//! method one step per round, interleaved. The sweep is `app-kit`'s, the one the Burn 0.21
//! applications' `budget` benchmarks run.
//!
//! A step: forward, loss, backward (the gradients dropped; no optimizer). The planner chooses the
//! base (plain autodiff or `gradient_checkpointing()`, profiled on both) and, for each DenseNet
//! layer's region (`DenseLayer#i`) or each GPT block's (`Block#i`), keep, keep its compute-bound
//! outputs, or recompute (`--two-treatments`: keep or recompute; the host meter profiles no
//! offload: on the CPU it saves nothing). Writes `<out>.md`, `.json`, `.svg`, `.png`.
//!
//! ```text
//! cargo bench --manifest-path kits/models22/Cargo.toml --bench budget -- --model densenet
//! cargo bench --manifest-path kits/models22/Cargo.toml --bench budget -- --model gpt --budgets 8
//! ```

// The tests' helpers: `initialised`, so that every method's copy holds the same weights.

use app_kit::densenet::DenseNetShape;
use app_kit::gpt::GptShape;
use app_kit::sweep::{self, Hand, Planned, StepFn};
use burn::tensor::{Device, Int, Tensor, TensorData};
use burn_checkpoint_22::memory::{CountingAllocator, Meter};
use burn_checkpoint_22::planner::{Base, Treatment, autodiff_on};
use burn_checkpoint_22_models::initialised;
use burn_checkpoint_22_models::{Cut, densenet, gpt};
use clap::{Parser, ValueEnum};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

#[derive(Parser)]
#[command(
    about = "The budget planner on Burn 0.22 against hand-made cuts",
    // Not the flattened DenseNetShape's doc, which clap would take for it.
    long_about = None
)]
struct Args {
    /// Which model.
    #[arg(long, value_enum, default_value = "densenet")]
    model: Which,
    /// The DenseNet-BC.
    #[command(flatten)]
    densenet: DenseNetShape,
    /// DenseNet batch size (32×32 images).
    #[arg(long, default_value_t = 16)]
    batch: usize,
    /// GPT: blocks, width, heads, vocabulary, sequence length, batch.
    #[arg(long, value_parser = GptShape::from_list, default_value = "8,128,4,512,128,16")]
    gpt: GptShape,
    /// The planner chooses between keep and recompute only (as before Burn 0.22 regions could
    /// keep their compute-bound outputs), to compare with its three treatments.
    #[arg(long)]
    two_treatments: bool,
    #[command(flatten)]
    sweep: sweep::Options,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Which {
    Densenet,
    Gpt,
}

/// A hand cut or the planner's model: the cut, and whether the device is Burn's own
/// gradient checkpointing (Balanced).
#[derive(Clone, Copy)]
struct Method {
    name: &'static str,
    cut: Cut,
    balanced: bool,
}

impl Method {
    /// The planner's model: a region wherever one may go, on plain autodiff and on Balanced
    /// (the planner profiles both and plans each budget on the faster).
    const PLANNED: [Method; 2] = [
        Method::of("", Cut::Regions),
        Method {
            name: "",
            cut: Cut::Regions,
            balanced: true,
        },
    ];
    /// DenseNet's: also its layers with the concatenation, first batch norm and ReLU a region
    /// of their own nested in each (the "memory-efficient DenseNet" placement, which the
    /// `SaveComputeBound` cut runs), on both bases: another placement the planner chooses from.
    const PLANNED_DENSENET: [Method; 4] = [
        Method::PLANNED[0],
        Method::PLANNED[1],
        Method::of("the concatenation's region nested", Cut::RegionsSave),
        Method {
            name: "the concatenation's region nested",
            cut: Cut::RegionsSave,
            balanced: true,
        },
    ];
    const HANDS: [Method; 7] = [
        Method::of("no region", Cut::None),
        Method {
            name: "Burn's gradient_checkpointing() (Balanced)",
            cut: Cut::None,
            balanced: true,
        },
        Method::of("every unit", Cut::Regions),
        Method {
            name: "every unit, over Balanced",
            cut: Cut::Regions,
            balanced: true,
        },
        Method::of("every unit, offloaded", Cut::RegionsOffload),
        Method::of("every second unit", Cut::EverySecond),
        Method::of("every unit, Policy::SaveComputeBound", Cut::RegionsSave),
    ];

    const fn of(name: &'static str, cut: Cut) -> Method {
        Method {
            name,
            cut,
            balanced: false,
        }
    }

    /// What the method's regions sit on.
    fn base(self) -> Base {
        if self.balanced {
            Base::Balanced
        } else {
            Base::Plain
        }
    }

    fn device(self) -> Device {
        autodiff_on(self.base(), Device::flex())
    }

    /// The method's name with the model's word for a unit.
    fn named(self, unit: &str) -> String {
        self.name.replace("unit", unit)
    }
}

/// The steps of DenseNet-BC under `method`, on a fixed batch of images.
fn densenet_step(args: &Args, method: Method, images: &TensorData) -> StepFn<'static> {
    let device = method.device();
    device.seed(1);
    let model = initialised(densenet::model(&args.densenet, &device));
    let images = images.clone();
    Box::new(move || {
        let images = Tensor::<4>::from_data(images.clone(), &device);
        drop(model.loss(images, method.cut).backward());
    })
}

/// The steps of the GPT under `method`, on a fixed batch of token sequences.
fn gpt_step(args: &Args, method: Method, tokens: &TensorData) -> StepFn<'static> {
    let device = method.device();
    device.seed(1);
    let model = initialised(gpt::model(&args.gpt, &device));
    let tokens = tokens.clone();
    Box::new(move || {
        let tokens = Tensor::<2, Int>::from_data(tokens.clone(), &device);
        drop(model.loss(tokens, method.cut).backward());
    })
}

/// What the sweep runs: a model's title, its word for a unit, its batch and its steps.
struct Task {
    /// The models the planner plans: the same regions on each base, or other placements.
    planned: &'static [Method],
    title: String,
    unit: &'static str,
    batch: TensorData,
    step: fn(&Args, Method, &TensorData) -> StepFn<'static>,
}

impl Task {
    fn of(args: &Args) -> Task {
        let device = Device::flex();
        device.seed(2);
        match args.model {
            Which::Densenet => Task {
                title: format!(
                    "{}, batch {} of 32×32 images, forward and backward, Burn 0.22 on Flex: \
                     the budget planner over the dense layers' regions against hand-made cuts",
                    args.densenet.describe(),
                    args.batch
                ),
                planned: &Method::PLANNED_DENSENET,
                unit: "layer",
                batch: densenet::images(args.batch, &device).into_data(),
                step: densenet_step,
            },
            Which::Gpt => {
                let shape = &args.gpt;
                Task {
                    title: format!(
                        "{}, forward and backward, Burn 0.22 on Flex: the budget planner over \
                         the blocks' regions against hand-made cuts",
                        shape.describe()
                    ),
                    planned: &Method::PLANNED,
                    unit: "block",
                    batch: gpt::tokens(shape, &device).into_data(),
                    step: gpt_step,
                }
            }
        }
    }
}

fn main() {
    let args = Args::parse();
    let out = args.sweep.out(match args.model {
        Which::Densenet => "densenet-22-budget",
        Which::Gpt => "gpt-22-budget",
    });
    if args.sweep.replotted(&out) {
        return;
    }
    let task = Task::of(&args);
    let planned = task
        .planned
        .iter()
        .map(|&method| Planned {
            name: method.name.to_string(),
            base: method.base(),
            step: (task.step)(&args, method, &task.batch),
        })
        .collect();
    let hands = Method::HANDS
        .into_iter()
        .map(|method| Hand {
            name: method.named(task.unit),
            step: (task.step)(&args, method, &task.batch),
        })
        .collect();
    args.sweep.run(
        sweep::Measured {
            meter: Meter::Host,
            treatments: if args.two_treatments {
                &[Treatment::Keep, Treatment::RecomputeAll]
            } else {
                &Treatment::ALL
            },
        },
        &out,
        &task.title,
        planned,
        hands,
    );
}
