//! `Region::scan` and `checkpoint_scan` against the loop they stand for, written out with plain
//! autodiff: the loss, the sequence's and the initial carry's gradients bit for bit under every
//! schedule; the cell's parameters as the docs say (bit for bit where plain autodiff adds each
//! step's term last step first); burn-nn's LSTM state as the carry; how often the cell runs, and
//! when it runs as a recompute.

use std::sync::atomic::{AtomicUsize, Ordering};

use burn::module::Module;
use burn::nn::{Linear, LinearConfig, Lstm, LstmConfig, LstmState};
use burn::tensor::{Device, Distribution, Tensor};
use burn_checkpoint_22::{Region, Schedule, checkpoint_scan};

use crate::common::device;

/// An Elman cell: `h' = tanh(W_x x + W_h h)`, its output `h'`.
#[derive(Module, Debug)]
struct Elman {
    input: Linear,
    hidden: Linear,
}

impl Elman {
    fn new(features: usize, width: usize, device: &Device) -> Self {
        Elman {
            input: LinearConfig::new(features, width).init(device),
            hidden: LinearConfig::new(width, width).init(device),
        }
    }

    fn step(&self, hidden: Tensor<2>, x: Tensor<2>) -> (Tensor<2>, Tensor<2>) {
        let hidden = (self.input.forward(x) + self.hidden.forward(hidden)).tanh();
        (hidden.clone(), hidden)
    }
}

/// How the loop runs.
#[derive(Clone, Copy, Debug)]
enum How {
    /// Written out, plain autodiff.
    Plain,
    Scan(Schedule),
}

/// What a run gave, as bits: the loss, the sequence's and the initial carry's gradients, then
/// each parameter's (named).
#[derive(Debug, PartialEq)]
struct Outcome {
    loss: Vec<u32>,
    inputs: Vec<u32>,
    initial: Vec<u32>,
    params: Vec<(&'static str, Vec<u32>)>,
}

fn bits<const D: usize>(tensor: Tensor<D>) -> Vec<u32> {
    tensor.into_data().iter::<f32>().map(f32::to_bits).collect()
}

fn elman_run(cell: &Elman, xs: &Tensor<3>, h0: &Tensor<2>, how: How) -> Outcome {
    let (xs, h0) = (xs.clone().require_grad(), h0.clone().require_grad());
    let (ys, last) = match how {
        How::Plain => {
            let mut hidden = h0.clone();
            let mut ys = Vec::new();
            for t in 0..xs.dims()[1] {
                let x = xs.clone().narrow(1, t, 1).squeeze_dim::<2>(1);
                let (y, next) = cell.step(hidden, x);
                ys.push(y);
                hidden = next;
            }
            (Tensor::stack(ys, 1), hidden)
        }
        How::Scan(schedule) => Region::named("elman").schedule(schedule).scan(
            cell,
            h0.clone(),
            xs.clone(),
            1,
            |cell: &Elman, hidden, x| cell.step(hidden, x),
        ),
    };
    let loss = ys.powf_scalar(2.0).sum() + last.sum();
    let grads = loss.backward();
    Outcome {
        loss: bits(loss),
        inputs: bits(xs.grad(&grads).expect("the sequence's gradient")),
        initial: bits(h0.grad(&grads).expect("the initial carry's gradient")),
        params: vec![
            (
                "input.weight",
                bits(cell.input.weight.grad(&grads).unwrap()),
            ),
            (
                "input.bias",
                bits(cell.input.bias.as_ref().unwrap().grad(&grads).unwrap()),
            ),
            (
                "hidden.weight",
                bits(cell.hidden.weight.grad(&grads).unwrap()),
            ),
            (
                "hidden.bias",
                bits(cell.hidden.bias.as_ref().unwrap().grad(&grads).unwrap()),
            ),
        ],
    }
}

/// The largest difference between two gradients' values, relative to the larger of each value's
/// size and 1.
fn largest_difference(left: &[u32], right: &[u32]) -> f32 {
    left.iter()
        .zip(right)
        .map(|(&l, &r)| {
            let (l, r) = (f32::from_bits(l), f32::from_bits(r));
            (l - r).abs() / l.abs().max(r.abs()).max(1.0)
        })
        .fold(0.0, f32::max)
}

const SCHEDULES: [Schedule; 5] = [
    Schedule::EveryStep,
    Schedule::Snapshots(0),
    Schedule::Snapshots(1),
    Schedule::Snapshots(3),
    Schedule::Budget(2 * 3 * 16 * 4),
];

#[test]
fn a_scan_gives_the_loops_loss_and_gradients_under_every_schedule() {
    let device = device();
    device.seed(11);
    let cell = Elman::new(5, 16, &device);
    let xs = Tensor::<3>::random([3, 17, 5], burn::tensor::Distribution::Default, &device);
    let h0 = Tensor::<2>::random([3, 16], burn::tensor::Distribution::Default, &device);
    let plain = elman_run(&cell, &xs, &h0, How::Plain);
    for schedule in SCHEDULES {
        let scan = elman_run(&cell, &xs, &h0, How::Scan(schedule));
        // The same run again: nothing depends on the last.
        assert_eq!(elman_run(&cell, &xs, &h0, How::Scan(schedule)), scan);
        assert_eq!(scan.loss, plain.loss, "{schedule:?}: the loss");
        assert_eq!(
            scan.inputs, plain.inputs,
            "{schedule:?}: the sequence's gradient"
        );
        assert_eq!(
            scan.initial, plain.initial,
            "{schedule:?}: the initial carry's gradient"
        );
        for ((name, scan), (_, plain)) in scan.params.iter().zip(&plain.params) {
            if name.starts_with("hidden") {
                // Its use reads the carry: its op is one step deeper each step, and plain
                // autodiff adds its terms last step first, as the scan does.
                assert_eq!(scan, plain, "{schedule:?}: {name}'s gradient");
            } else {
                // Its use reads the step's input only: every step's op at one depth, which plain
                // autodiff adds first step first; the scan adds last step first.
                let difference = largest_difference(scan, plain);
                println!("{schedule:?}: {name}: largest relative difference {difference:e}");
                assert!(difference <= 1e-5, "{schedule:?}: {name}: {difference:e}");
            }
        }
    }
}

#[test]
fn burn_nns_lstm_state_is_a_carry() {
    let device = device();
    device.seed(12);
    let lstm: Lstm = LstmConfig::new(4, 8, true).init(&device);
    let xs = Tensor::<3>::random([2, 9, 4], burn::tensor::Distribution::Default, &device);
    let run = |scan: bool| {
        let xs = xs.clone().require_grad();
        let state = LstmState::new(
            Tensor::zeros([2, 8], &device),
            Tensor::zeros([2, 8], &device),
        );
        let step = |lstm: &Lstm, state: LstmState<2>, x: Tensor<2>| {
            let (_, state) = lstm.forward(x.unsqueeze_dim(1), Some(state));
            (state.hidden.clone(), state)
        };
        let (hidden, last) = if scan {
            checkpoint_scan(&lstm, state, xs.clone(), 1, step)
        } else {
            let mut state = state;
            let mut hidden = Vec::new();
            for t in 0..9 {
                let (h, next) = step(&lstm, state, xs.clone().narrow(1, t, 1).squeeze_dim(1));
                hidden.push(h);
                state = next;
            }
            (Tensor::stack(hidden, 1), state)
        };
        let loss = hidden.powf_scalar(2.0).sum() + last.cell.sum();
        let grads = loss.backward();
        (bits(loss), bits(xs.grad(&grads).unwrap()))
    };
    assert_eq!(run(true), run(false));
}

static FORWARD: AtomicUsize = AtomicUsize::new(0);
static RECOMPUTED: AtomicUsize = AtomicUsize::new(0);

#[test]
fn backward_runs_each_step_as_the_plan_says_and_as_a_recompute() {
    let device = device();
    device.seed(13);
    let cell: Linear = LinearConfig::new(4, 4).init(&device);
    for (schedule, backward_runs) in [
        (Schedule::EveryStep, 10),
        // The last step from the carry the forward ended with, each other from the start: 10
        // differentiations and 0 + 1 + ... + 8 advances.
        (Schedule::Snapshots(0), 10 + 36),
    ] {
        FORWARD.store(0, Ordering::SeqCst);
        RECOMPUTED.store(0, Ordering::SeqCst);
        let xs = Tensor::<3>::ones([1, 10, 4], &device).require_grad();
        let (ys, _) = Region::named("counted").schedule(schedule).scan(
            &cell,
            Tensor::<2>::zeros([1, 4], &device),
            xs.clone(),
            1,
            |cell: &Linear, hidden, x| {
                let counter = if Region::is_recomputing() {
                    &RECOMPUTED
                } else {
                    &FORWARD
                };
                counter.fetch_add(1, Ordering::SeqCst);
                let hidden = (cell.forward(hidden) + x).tanh();
                (hidden.clone(), hidden)
            },
        );
        // The first scan named "counted" on this thread runs its step 0 again in forward, as
        // backward will (the first instance's check); the second does not.
        let checked = usize::from(schedule == Schedule::EveryStep);
        assert_eq!(FORWARD.load(Ordering::SeqCst), 10, "{schedule:?}: forward");
        assert_eq!(
            RECOMPUTED.load(Ordering::SeqCst),
            checked,
            "{schedule:?}: before backward"
        );
        let grads = ys.sum().backward();
        assert!(xs.grad(&grads).is_some());
        assert_eq!(FORWARD.load(Ordering::SeqCst), 10, "{schedule:?}: forward");
        assert_eq!(
            RECOMPUTED.load(Ordering::SeqCst),
            checked + backward_runs,
            "{schedule:?}: backward"
        );
    }
}

#[test]
fn a_scan_inside_a_region_gives_the_loops_loss_and_gradients() {
    let device = device();
    device.seed(14);
    let cell = Elman::new(5, 16, &device);
    let xs = Tensor::<3>::random([3, 9, 5], burn::tensor::Distribution::Default, &device);
    let h0 = Tensor::<2>::random([3, 16], burn::tensor::Distribution::Default, &device);
    let plain = elman_run(&cell, &xs, &h0, How::Plain);
    let run = || {
        let (xs, h0) = (xs.clone().require_grad(), h0.clone().require_grad());
        // The outer region's recompute runs the scan's forward again, and its node's backward.
        let (ys, last) = Region::named("outer").run(
            &cell,
            (h0.clone(), xs.clone()),
            |cell: &Elman, (h0, xs)| {
                Region::named("elman")
                    .schedule(Schedule::Snapshots(2))
                    .scan(cell, h0, xs, 1, |cell: &Elman, hidden, x| {
                        cell.step(hidden, x)
                    })
            },
        );
        let loss = ys.powf_scalar(2.0).sum() + last.sum();
        let grads = loss.backward();
        (
            bits(loss),
            bits(xs.grad(&grads).unwrap()),
            bits(h0.grad(&grads).unwrap()),
            bits(cell.hidden.weight.grad(&grads).unwrap()),
        )
    };
    let (loss, inputs, initial, hidden_weight) = run();
    assert_eq!(loss, plain.loss);
    assert_eq!(inputs, plain.inputs);
    assert_eq!(initial, plain.initial);
    assert_eq!(hidden_weight, plain.params[2].1);
}

/// A `Vec` of the steps' inputs is a sequence too: the same loss, outputs and gradients as the
/// loop written out over the `Vec`, bit for bit where the stacked sequence's are (the inputs',
/// the initial carry's, `W_h`), under every schedule; a step whose input is arranged otherwise than
/// the first's is stopped with a message.
#[test]
fn a_vec_of_the_steps_inputs_is_a_sequence() {
    let device = device();
    device.seed(8);
    let cell = Elman::new(3, 5, &device);
    let h0 = Tensor::<2>::random([2, 5], Distribution::Default, &device).require_grad();
    let xs: Vec<Tensor<2>> = (0..9)
        .map(|_| Tensor::<2>::random([2, 3], Distribution::Default, &device).require_grad())
        .collect();
    let outcome = |ys: Tensor<3>, last: Tensor<2>| {
        let loss = ys.powf_scalar(2.0).sum() + last.sum();
        let grads = loss.clone().backward();
        let mut all = vec![bits(loss)];
        all.extend(
            xs.iter()
                .map(|x| bits(x.grad(&grads).expect("a step's gradient"))),
        );
        all.push(bits(h0.grad(&grads).expect("the carry's gradient")));
        all.push(bits(
            cell.hidden
                .weight
                .val()
                .grad(&grads)
                .expect("W_h's gradient"),
        ));
        all
    };
    let written = {
        let (mut hidden, mut ys) = (h0.clone(), Vec::new());
        for x in &xs {
            let (y, next) = cell.step(hidden, x.clone());
            ys.push(y);
            hidden = next;
        }
        outcome(Tensor::stack(ys, 1), hidden)
    };
    for schedule in [Schedule::EveryStep, Schedule::Snapshots(2)] {
        let (ys, last) = Region::named("elman").schedule(schedule).scan(
            &cell,
            h0.clone(),
            xs.clone(),
            1,
            |cell: &Elman, hidden, x: Tensor<2>| cell.step(hidden, x),
        );
        assert_eq!(outcome(ys, last), written, "{schedule:?}");
    }

    let ragged = vec![vec![xs[0].clone()], vec![xs[1].clone(), xs[2].clone()]];
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        checkpoint_scan(
            &cell,
            h0.clone(),
            ragged,
            1,
            |cell: &Elman, h, x: Vec<Tensor<2>>| cell.step(h, x[0].clone()),
        )
    }));
    let message = caught.expect_err("a ragged Vec is stopped");
    let message = message
        .downcast_ref::<String>()
        .expect("a formatted message");
    assert!(
        message.contains("must be arranged as the first's"),
        "{message}"
    );
}
